"""Running the trainer for ``ctrgen train``: its stdout (progress bar, log) passes through; its stderr is passed on
line by line, each error line once (every rank prints the same refusal: one line is its report), and nothing after
Ctrl-C (the trainer processes and torchrun may still print while they stop). Ctrl-C is then the one line
``ctrgen: interrupted`` and exit status 130, as for every ctrgen command."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from typing import IO

INTERRUPTED = 130


def _forward(stream: IO[bytes], interrupted: threading.Event) -> None:
    seen: set[bytes] = set()
    for line in iter(stream.readline, b""):
        if interrupted.is_set():
            continue                   # read on, so that no process blocks on a full pipe
        if line.startswith(b"error: "):
            if line in seen:
                continue
            seen.add(line)
        sys.stderr.buffer.write(line)
        sys.stderr.flush()


def run_trainer(argv: list[str], env: dict[str, str]) -> int:
    """Run ``argv`` to its end; its exit status, or 130 after Ctrl-C (the terminal's SIGINT reaches every process
    of the foreground group: the trainer stops on its own and is waited for)."""
    interrupted = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.set())
    try:
        proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        reader = threading.Thread(target=_forward, args=(proc.stderr, interrupted), daemon=True)
        reader.start()
        code = proc.wait()
        reader.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    if interrupted.is_set() or code in (INTERRUPTED, -signal.SIGINT):
        print("ctrgen: interrupted", file=sys.stderr, flush=True)
        return INTERRUPTED
    return code
