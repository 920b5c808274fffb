"""torchrun for ``ctrgen train --ranks N`` / ``--gpus N``: torch.distributed.run itself, without its report of a failed
rank. A rank that refuses its input has printed its one line (exit status 2); torchrun would follow it with its
ChildFailedError traceback and log records, and Ctrl-C with a traceback of its own. Here a failed run exits with
the rank's status (130 on Ctrl-C), and torchrun's elastic agent logs only what is critical."""

from __future__ import annotations

import logging
import sys


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    # Every record of this launcher process up to ERROR is dropped: the elastic agent's loggers set their own levels
    # (get_logger: LOGLEVEL or WARNING), so a parent logger's level does not reach them ("Received 2 death signal,
    # shutting down workers" came through on a loaded machine). The ranks print what the user needs.
    logging.disable(logging.ERROR)
    try:
        torchrun(argv)
    except ChildFailedError as exc:
        codes = [f.exitcode for f in exc.failures.values()]
        return next((c for c in codes if c in (2, 130)), codes[0] if codes and codes[0] > 0 else 1)
    except (KeyboardInterrupt, SignalException):
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
