"""What a run shows and records while it trains (rank 0 only): a progress bar on a terminal (iterations,
samples/s, loss, ETA; evaluation passes get their own short bar), and every scalar point in metrics.jsonl and, when
the ``tensorboard`` package is importable, as TensorBoard scalars under <output-dir>/tensorboard.

Without a terminal nothing here writes to the output: the trainer's plain log lines are all there is (CI logs stay
readable). The runtime needs neither TensorBoard nor a terminal."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path
from typing import IO, Any

from .run_folder import kept_points

METRICS_JSONL = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
BAR_WIDTH = 24
REDRAW_S = 0.1      # the bar is redrawn at most this often (a step can take microseconds)


def tensorboard_available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def clock(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class Bar:
    """One line redrawn in place on a terminal; ``log`` prints a line above it. Inactive (every call a no-op but
    ``log``, which prints) when the stream is not a terminal."""

    def __init__(self, stream: IO[str] | None = None, active: bool | None = None):
        self.stream = stream or sys.stdout
        self.active = self.stream.isatty() if active is None else active
        self.shown, self.drawn_at = "", 0.0

    def draw(self, text: str, force: bool = False) -> None:
        now = time.perf_counter()
        if not self.active or (not force and now - self.drawn_at < REDRAW_S):
            return
        width = shutil.get_terminal_size((100, 20)).columns - 1
        self.shown = text[:width]
        self.stream.write("\r\x1b[K" + self.shown)
        self.stream.flush()
        self.drawn_at = now

    def clear(self) -> None:
        if self.active and self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = ""

    def log(self, *parts: Any, flush: bool = False) -> None:
        """print(), keeping the bar below the printed line."""
        shown = self.shown
        self.clear()
        print(*parts, file=self.stream, flush=flush or self.active)
        if shown:
            self.draw(shown, force=True)


def bar_text(label: str, done: int, total: int, seconds: float, extra: str = "") -> str:
    """``label [#####.....] done/total extra, elapsed<ETA``."""
    fraction = min(done / total, 1.0) if total else 1.0
    filled = int(BAR_WIDTH * fraction)
    eta = seconds / done * (total - done) if done else 0.0
    return (f"{label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}{extra}, "
            f"{clock(seconds)}<{clock(eta)} ETA")


class TrainBar:
    """The training bar of one pass: iterations from ``first`` to ``total``, samples/s over the pass, the loss of
    the last display interval."""

    def __init__(self, bar: Bar, first: int, total: int, samples_per_step: int):
        self.bar, self.first, self.total, self.samples = bar, first, total, samples_per_step
        self.started = time.perf_counter()
        self.loss: float | None = None

    def update(self, it: int, force: bool = False) -> None:
        if not self.bar.active:
            return
        seconds = time.perf_counter() - self.started
        done = it - self.first
        rate = done * self.samples / seconds if seconds > 0 else 0.0
        loss = f", loss {self.loss:.4f}" if self.loss is not None else ""
        self.bar.draw(bar_text("train", done, self.total - self.first, seconds,
                               f", {rate:,.0f} samples/s{loss}"), force)

    def evaluating(self, total_batches: int):
        """A callback for evaluate(): the short bar of an evaluation pass (batches done of ``total_batches``)."""
        started = time.perf_counter()

        def step(done: int) -> None:
            self.bar.draw(bar_text("eval ", done, total_batches, time.perf_counter() - started),
                          force=done == total_batches)
        return step if self.bar.active else None


class Recorder:
    """Scalar points: one JSON line each in metrics.jsonl ({"step", "tag", "value"}) and, with ``tensorboard``, the
    same point as a TensorBoard scalar. A new run starts both afresh; one resumed at iteration ``resumed`` keeps
    the points up to it and drops those after (recorded before the run stopped, to be recorded again)."""

    def __init__(self, folder: Path, tensorboard: bool, resumed: int | None):
        self.path = folder / METRICS_JSONL
        kept = kept_points(self.path, resumed) if resumed is not None else ""
        self.handle = self.path.open("w", encoding="utf-8")
        self.handle.write(kept)
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter    # needs the tensorboard package

            board = folder / TENSORBOARD_DIR
            if resumed is None and board.is_dir():
                shutil.rmtree(board)
            # purge_step: TensorBoard hides the points at and after it written by earlier event files
            self.writer = SummaryWriter(str(board), purge_step=None if resumed is None else resumed + 1)

    def scalar(self, tag: str, step: int, value: float) -> None:
        self.handle.write(json.dumps({"step": step, "tag": tag, "value": value}) + "\n")
        if self.writer is not None:
            self.writer.add_scalar(tag, value, step)

    def flush(self) -> None:
        self.handle.flush()
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        self.handle.close()
        if self.writer is not None:
            self.writer.close()


class Silent:
    """The Recorder of ranks other than 0."""

    def scalar(self, tag: str, step: int, value: float) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
