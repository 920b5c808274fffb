"""The ``ctrgen`` console entry point (and ``python -m codegen``).

Ctrl-C is one line, ``ctrgen: interrupted``, and exit 130 from the moment this module runs: while the command
modules are still being imported (pydantic, Jinja, protobuf: a few tenths of a second) a KeyboardInterrupt would
end in a traceback, so a handler that exits at once is installed first, before any heavy import. Nothing has been
read or written yet at that point. Once the CLI is imported, Python's own handler is back and the CLI turns the
KeyboardInterrupt into the same line after its staged writes are cleaned up.
"""

import os
import signal


def _interrupted_while_starting(signum, frame) -> None:   # noqa: ARG001 (signal handler signature)
    os.write(2, b"ctrgen: interrupted\n")
    os._exit(130)


# Only where Python's own handler is in place: a SIGINT ignored by the parent (a background job, nohup) stays ignored.
_CATCHING = signal.getsignal(signal.SIGINT) is signal.default_int_handler
if _CATCHING:
    signal.signal(signal.SIGINT, _interrupted_while_starting)


def main() -> None:
    from .cli import main as cli

    if _CATCHING:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    cli(prog_name="ctrgen")
