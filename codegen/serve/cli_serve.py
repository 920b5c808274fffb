"""``ctrgen serve``: validate a Triton repository, then run the venv's Triton server on it in the foreground.

Exit status: 0 after SIGTERM or Ctrl-C (the server and its python stubs are gone by then), 2 when the repository
fails validation, a port is taken, the server binary is missing, a model fails to load or the server dies.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import click

from ..errors import UserError

EPILOG = """\b
Examples:
  ctrgen serve deploy/movielens                      # HTTP :8000, gRPC :8001, metrics :8002 on 127.0.0.1
  ctrgen serve deploy/movielens --http-port 9000 --grpc-port 9001 --metrics-port 9002
  ctrgen serve deploy/movielens --host 0.0.0.0       # reachable from other machines
  ctrgen serve deploy/movielens --log server.log     # keep the server's log
  ctrgen query http://127.0.0.1:8000 --data valid.parquet --rows 100   # from another terminal

\b
REPO is a repository `ctrgen assemble` wrote. The server is the Triton 2.51 binary of the nvidia-pytriton wheel
the venv installs; its python models run in this venv (nvtabular, torch). Only python-backend models and ensembles
can load here: a HugeCTR model needs the Merlin HugeCTR image.
"""


class _Stopped(Exception):
    """SIGTERM or SIGINT arrived."""


def _raise_stopped(signum, frame):
    raise _Stopped()


def _timeout(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """NaN, 0 or a negative number would give the server no time at all (it was started, then reported 'not ready
    after nans'); Infinity would wait for a model that never loads until a signal."""
    if not math.isfinite(value) or value <= 0:
        raise UserError.one(repr(value), "must be a finite number of seconds > 0", field="--timeout",
                            fix="e.g. --timeout 300")
    return value


@contextlib.contextmanager
def stop_on_signals():
    """SIGTERM and SIGINT raise :class:`_Stopped` in the main thread; the previous handlers come back after."""
    old = {s: signal.signal(s, _raise_stopped) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@click.command("serve", epilog=EPILOG, short_help="Run the Triton server on an assembled repository.",
               context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.argument("repo", type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind HTTP, gRPC and metrics to")
@click.option("--http-port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--grpc-port", type=click.IntRange(1, 65535), default=8001, show_default=True)
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=8002, show_default=True,
              help="Prometheus metrics (0: off)")
@click.option("--log", "log_path", type=click.Path(path_type=Path),
              help="copy the server's log here when it stops (default: only its error is printed)")
@click.option("--timeout", type=float, default=300.0, show_default=True, callback=_timeout,
              help="seconds to wait for the models")
def serve_command(repo: Path, host: str, http_port: int, grpc_port: int, metrics_port: int, log_path: Path | None,
                  timeout: float) -> None:
    """Validate the Triton repository REPO (the rules of ctrgen validate), then serve every model in it with the
    venv's Triton server, in the foreground, until SIGTERM or Ctrl-C.

    One line is printed when every model is ready: the URLs and the model names.
    """
    from .repository import check_ports, check_repository, server_for
    from .server import ServerError, pytriton_dir, server_binary

    if log_path is not None:
        check_log_path(log_path)
    models = check_repository(repo)
    ports = {"--http-port": http_port, "--grpc-port": grpc_port, "--metrics-port": metrics_port or None}
    taken = [p for p in ports.values() if p is not None]
    if len(set(taken)) != len(taken):
        raise UserError.one(repo, f"the ports must differ (got {taken})",
                            field="--http-port/--grpc-port/--metrics-port")
    check_ports(host, ports)
    try:
        pytriton_dir(), server_binary()
    except ServerError as exc:
        raise UserError.one(repo, exc.cause, field="tritonserver") from None

    scratch = Path(tempfile.mkdtemp(prefix="ctrgen-serve-"))
    server = server_for(repo, scratch, host=host, http_port=http_port, grpc_port=grpc_port,
                        metrics_port=metrics_port or None)
    failure, log_error = None, None
    try:
        with stop_on_signals():
            try:
                server.start(load=models, timeout=timeout)
                urls = f"http://{server.http_url}  grpc {server.grpc_url}"
                if server.metrics_url:
                    urls += f"  metrics http://{server.metrics_url}/metrics"
                click.echo(f"Serving {repo}: {urls}  models: {', '.join(models)} (Ctrl-C stops)")
                sys.stdout.flush()
                while server.proc.poll() is None:
                    time.sleep(0.2)
                failure = f"tritonserver stopped with exit status {server.proc.returncode}"
            except ServerError as exc:
                failure = exc.cause
            except _Stopped:
                pass
            finally:
                server.stop()
    finally:
        if log_path is not None and server.log is not None and server.log.exists():
            try:
                shutil.copyfile(server.log, log_path)
            except OSError as exc:       # checked before the start; the disk may still fill or the folder go
                log_error = UserError.one(log_path, f"the server's log could not be written: {exc.strerror}",
                                          field="--log", fix="name a file in a folder you can write")
        shutil.rmtree(scratch, ignore_errors=True)
    if failure:
        fix = ("a HugeCTR model loads only in the Merlin HugeCTR inference image; serve the PyTorch repository "
               "('ctrgen assemble --checkpoint') here" if "backend 'hugectr'" in failure
               else "fix what the server names; --log FILE keeps its whole log")
        problems = UserError.one(repo, failure, field="tritonserver", fix=fix).problems
        raise UserError(problems + (log_error.problems if log_error else []))
    if log_error is not None:
        raise log_error
    click.echo("Server stopped." + (f" Its log is in {log_path}." if log_path is not None else ""), err=True)


def check_log_path(path: Path) -> None:
    """--log names a file that can be written when the server stops: not a folder, a FIFO or a device, in an existing
    folder; checked before the server starts so that the log is not lost after a long run."""
    from ..cli_paths import check_writable_path

    check_writable_path(path, "--log")
    if path.is_dir():
        raise UserError.one(path, "is a folder; --log names the file to write", field="--log",
                            fix=f"e.g. --log {path / 'tritonserver.log'}")
    if os.path.lexists(path) and not path.is_file():
        raise UserError.one(path, "exists and is not a regular file", field="--log", fix="name a regular file")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UserError.one(path, f"the folder {parent} does not exist", field="--log", fix="create it first")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UserError.one(path, "cannot be written (permissions)", field="--log", fix="name a file you can write")
