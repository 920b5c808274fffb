"""Run a command with CPU-bound processes beside it (`make test-busy`): the suite must pass on a busy machine.

    python tools/busy.py [--burners N] -- COMMAND...

Starts N processes (default 2) that spin on the CPU for as long as the command runs, then stops them, whatever
the command's outcome; prints the wall time, the load average at the end and the command's exit status, and exits
with that status. Each burner is bounded: it stops by itself after --limit seconds (default 3600) should this
process die without stopping it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BURN = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"
MARK = BURN.splitlines()[2].encode()      # a burner's command line holds it


def burners() -> int:
    """How many burners run on this machine now (any busy.py's)."""
    count = 0
    for proc in Path("/proc").iterdir():
        try:
            count += proc.name.isdigit() and MARK in (proc / "cmdline").read_bytes()
        except OSError:
            pass
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--burners", type=int, default=2, help="CPU-bound processes beside the command")
    ap.add_argument("--limit", type=float, default=3600.0, help="seconds after which a burner stops by itself")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.burners < 0 or args.limit <= 0:
        ap.error("give a command after --, a burner count of 0 or more and a positive --limit")
    burners = [subprocess.Popen([sys.executable, "-c", BURN.format(limit=args.limit)], stdin=subprocess.DEVNULL)
               for _ in range(args.burners)]
    print(f"busy: {len(burners)} CPU-bound process(es) beside: {' '.join(command)}", flush=True)
    start = time.monotonic()
    try:
        code = subprocess.call(command)
    except KeyboardInterrupt:
        code = 130
    finally:
        for proc in burners:
            proc.send_signal(signal.SIGKILL)
        for proc in burners:
            proc.wait()
    load = os.getloadavg()[0]
    print(f"busy: exit {code} after {time.monotonic() - start:.0f} s; load average {load:.1f} at the end "
          f"({len(burners)} burner(s) stopped)", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
