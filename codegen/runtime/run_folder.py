"""A run folder (--output-dir) belongs to one run (issue 43): a new run into a folder an earlier run wrote is refused
unless --force (which removes what that run wrote) or --resume; while a run writes into it, it holds an exclusive
lock (fcntl.flock on run.lock, released by the kernel when the process ends, kill -9 included), so a second run into
the same folder is refused in one line naming the first. ``check`` runs before anything is built; ``claim`` makes
the folder once every check has passed, so a refused run writes nothing."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import IO

from .checks import agree, read_text, regular_file
from .errors import DataError

LOCK_FILE = "run.lock"
# What a run writes into its folder (trainer, progress.Recorder, ctrgen train and report): an earlier run's files.
RUN_FILES = ("model.pt", "metrics.json", "metrics.jsonl", "features.json", "run.json", "report.html")
RUN_GLOBS = ("checkpoint_*.pt", "pass_*.pt", "*.pt.tmp", "*.onnx")     # *.onnx: ctrgen export's default
RUN_DIRS = ("tensorboard",)
MAX_METRICS_BYTES = 256 << 20       # as ctrgen report reads it: millions of points
_held: dict[str, IO[str]] = {}      # the lock files this process holds, open until it ends


def earlier_run(folder: Path) -> list[str]:
    """The names of an earlier run's files in ``folder`` (the lock file alone is no run)."""
    if not folder.is_dir():
        return []
    found = [n for n in (*RUN_FILES, *RUN_DIRS) if (folder / n).exists()]
    return found + sorted(p.name for g in RUN_GLOBS for p in folder.glob(g))


def _holder(folder: Path) -> str | None:
    """Who holds ``folder``'s lock (its pid and command line), or None when no process does."""
    path = folder / LOCK_FILE
    if not path.is_file() or str(path) in _held:
        return None
    try:
        with open(path, "r+", encoding="utf-8", errors="replace") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return fh.read(300).strip() or "another process"
    except OSError:
        return None
    return None


def _busy(folder: Path, holder: str) -> DataError:
    return DataError(f"--output-dir {folder}: another run is writing into it ({holder}) (fix: wait for it to end, "
                     "or pass another --output-dir)")


def check(folder: Path, resume: bool, force: bool) -> None:
    """Before the run: ``folder`` is not being written by another run, nor holds an earlier run (unless resumed or
    forced)."""
    holder = _holder(folder)
    if holder is not None:
        raise _busy(folder, holder)
    found = earlier_run(folder)
    if found and not (resume or force):
        raise DataError(f"--output-dir {folder}: holds an earlier run ({', '.join(found[:4])}"
                        f"{', ...' if len(found) > 4 else ''}) (fix: --resume CHECKPOINT to continue it, --force to "
                        "start afresh (its files are removed), or another --output-dir)")


def claim(folder: Path, force: bool, resume: bool) -> None:
    """Make ``folder`` and take its lock for the rest of this process (refused where another run took it since
    ``check``); with ``force`` and no ``resume``, remove the earlier run's files."""
    folder.mkdir(parents=True, exist_ok=True)
    unlock(folder)          # a run before this one in the same process (tests, notebooks)
    path = folder / LOCK_FILE
    fh = open(path, "a+", encoding="utf-8")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read(300).strip() or "another process"
        fh.close()
        raise _busy(folder, holder) from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()}: {' '.join(_command())[:200]}\n")
    fh.flush()
    _held[str(path)] = fh
    if force and not resume:
        for name in earlier_run(folder):
            target = folder / name
            shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()


def _command() -> list[str]:
    try:
        return Path("/proc/self/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return ["python"]


def kept_points(path: Path, resumed: int) -> str:
    """The lines of metrics.jsonl up to iteration ``resumed``, for a resumed run. The record ends at its first line
    that is not a whole point: a line cut by kill -9 mid-write, or anything else that is not one."""
    if not path.exists():
        return ""
    fix = "--force starts the run afresh"
    regular_file(path, "metrics file", fix)
    kept = []
    for line in read_text(path, "metrics file", fix, MAX_METRICS_BYTES).splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            point = json.loads(line)
        except (ValueError, RecursionError):
            break
        if not (isinstance(point, dict) and type(point.get("step")) is int and isinstance(point.get("tag"), str)):
            break
        if point["step"] <= resumed:
            kept.append(line)
    return "".join(kept)


def unlock(folder: Path) -> None:
    """Give up ``folder``'s lock (at the end of a run; the process's end gives it up anyway)."""
    fh = _held.pop(str(folder / LOCK_FILE), None)
    if fh is not None:
        fh.close()


def claim_for_run(args, rank: int, device) -> None:
    """Rank 0 makes the run folder and takes its lock; refused on every rank where another run took it."""
    problem = ""
    if rank == 0:
        try:
            claim(args.output_dir, getattr(args, "force", False), args.resume is not None)
        except DataError as exc:
            problem = str(exc)
    problem = agree(problem, device)
    if problem:
        raise DataError(problem)
