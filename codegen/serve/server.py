"""The Triton 2.51 server of the ``nvidia-pytriton`` wheel, started on this machine (no container, no GPU).

One implementation for ``ctrgen serve``, ``ctrgen query REPO``, ``make demo``, the tests and the benchmarks. The
recipe: a backend folder holding the wheel's python backend and the stub of this Python, ``LD_LIBRARY_PATH`` with this
Python's libdir first (the stub embeds CPython), this venv's ``bin`` first on ``PATH`` (the models run in this venv),
explicit model control, no configuration auto-completion (the repositories ``ctrgen assemble`` writes carry complete
configurations, which ``ctrgen validate`` checks: the python backend would otherwise start a stub process per model
only to ask it for its configuration). ``stop`` sends SIGTERM (SIGKILL after a timeout), waits for the server and
its python backend stubs and removes the shared-memory regions and ``python_env_*`` folders this server left,
comparing with what existed before it started.

Shutdown waits for in-flight requests (``--exit-timeout-secs``, ``EXIT_TIMEOUT_S`` at most), then ends the server and
its stubs at once: the graceful rest would only unload ctrgen's python models, which keep nothing, in about two
seconds of waiting.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

SHM_GLOB = "/dev/shm/triton_python_backend_shm_region_*"
ENV_GLOB = os.path.join(tempfile.gettempdir(), "python_env_*")
EXIT_TIMEOUT_S = 2
# Triton 2.51's log line once a stopping server has no request in flight and begins unloading its models (server.cc).
UNLOADING = "All models are stopped, unloading models"
PYTRITON = "nvidia-pytriton==0.7.0"


class ServerError(RuntimeError):
    """The server did not come up; ``cause`` is one line (the server's own message where it gave one)."""

    def __init__(self, cause: str, log: str = ""):
        super().__init__(cause + (f"\n{log}" if log else ""))
        self.cause, self.log = cause, log


def pytriton_dir() -> Path:
    """The wheel's tritonserver folder, wherever the wheel is importable from (a venv, or a --target folder)."""
    found = importlib.util.find_spec("pytriton")
    if found is None or not found.submodule_search_locations:
        raise ServerError(f"the Triton server binary is not installed: the {PYTRITON} wheel is not importable "
                          f"(install it with: pip install --no-deps '{PYTRITON}', or run 'make venv')")
    return Path(list(found.submodule_search_locations)[0]) / "tritonserver"


def server_binary() -> Path:
    binary = pytriton_dir() / "bin" / "tritonserver"
    if not os.access(binary, os.X_OK):
        raise ServerError(f"the Triton server binary {binary} is missing or not executable "
                          f"(reinstall with: pip install --no-deps --force-reinstall '{PYTRITON}')")
    return binary


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def backend_dir(scratch: Path) -> Path:
    src = pytriton_dir()
    dest = scratch / "backends" / "python"
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        shutil.copy2(src / "backends" / "python" / name, dest / name)
    stub = src / "python_backend_stubs" / f"{sys.version_info[0]}.{sys.version_info[1]}" / "triton_python_backend_stub"
    if not stub.is_file():
        raise ServerError(f"the {PYTRITON} wheel has no python backend stub for Python "
                          f"{sys.version_info[0]}.{sys.version_info[1]} ({stub})")
    shutil.copy2(stub, dest / stub.name)
    return dest.parent


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (a killed ``ctrgen serve`` leaves no server)."""
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)     # PR_SET_PDEATHSIG


# Lines of the server log that explain a failed start, most specific first (after _message strips the prefix).
_CAUSES = (
    re.compile(r"failed to load '([^']+)' version \d+: (.*)$"),
    re.compile(r"load failed for model '([^']+)': (.*)$"),
    re.compile(r"creating server: (.*)$"),
    re.compile(r"(.*(?:failed to (?:start|bind)|Address already in use).*)$", re.IGNORECASE),
)
_PREFIX = re.compile(r"^[IWE]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ")


def _message(line: str) -> str:
    """A log line without its glog prefix and quotes, escapes undone, the Python traceback ("At:") left out, on
    one line."""
    text = _PREFIX.sub("", line.strip())
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].replace("\\n", "\n").replace("\\t", " ").replace('\\"', '"')
    text = text.split("\nAt:\n")[0]
    return " ".join(text.split())


def failure_cause(log: str, limit: int = 600) -> str:
    """One line from the server log: the model that failed and the server's message, or the server's error."""
    lines = [_message(line) for line in log.splitlines() if line.strip()]
    cause = None
    for pattern in _CAUSES:
        for line in lines:
            found = pattern.search(line)
            if found and pattern.groups == 2:
                cause = f"model {found.group(1)!r} failed to load: {found.group(2)}"
            elif found:
                cause = found.group(1)
            if cause:
                break
        if cause:
            break
    if cause is None:
        errors = [line for line in lines if "error" in line.lower()]
        cause = (errors or lines or ["the server wrote no log"])[-1]
    return cause if len(cause) <= limit else cause[:limit - 3] + "..."


@dataclass
class Server:
    repos: list[Path]
    scratch: Path
    http_port: int = field(default_factory=free_port)
    grpc_port: int = field(default_factory=free_port)
    metrics_port: int | None = None             # None: metrics off
    host: str = "127.0.0.1"
    log_verbose: int = 0
    extra_args: tuple[str, ...] = ()
    proc: subprocess.Popen | None = None
    log: Path | None = None
    shm_before: set[str] = field(default_factory=set)
    env_before: set[str] = field(default_factory=set)

    @property
    def http_url(self) -> str:
        return f"{_client_host(self.host)}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{_client_host(self.host)}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str | None:
        return None if self.metrics_port is None else f"{_client_host(self.host)}:{self.metrics_port}"

    def command(self, load: list[str]) -> list[str]:
        metrics = (["--allow-metrics=false"] if self.metrics_port is None else
                   ["--allow-metrics=true", "--allow-gpu-metrics=false", f"--metrics-address={self.host}",
                    f"--metrics-port={self.metrics_port}"])
        return [str(server_binary()), *[f"--model-repository={r}" for r in self.repos],
                f"--backend-directory={backend_dir(self.scratch)}",
                f"--http-address={self.host}", f"--http-port={self.http_port}",
                f"--grpc-address={self.host}", f"--grpc-port={self.grpc_port}", *metrics,
                "--model-control-mode=explicit", "--disable-auto-complete-config",
                f"--log-verbose={self.log_verbose}",
                f"--exit-timeout-secs={EXIT_TIMEOUT_S}", *self.extra_args, *[f"--load-model={m}" for m in load]]

    def start(self, load: list[str], timeout: float = 120.0) -> None:
        """Start the server loading ``load`` (an ensemble loads its members) and wait until it is ready; raise
        :class:`ServerError` with the cause if it exits or is not ready in time (the process is stopped then)."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.shm_before, self.env_before = set(glob.glob(SHM_GLOB)), set(glob.glob(ENV_GLOB))
        libs = pytriton_dir().parent.parent / "nvidia_pytriton.libs"
        env = {**os.environ,
               "LD_LIBRARY_PATH": f"{sysconfig.get_config_var('LIBDIR')}:{libs}",
               "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        cmd = self.command(load)
        self.log = self.scratch / "tritonserver.log"
        with open(self.log, "wb") as log_file:
            self.proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=self.scratch, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.log_text(tail=None)
                self.stop()
                raise ServerError(failure_cause(log), log[-6000:])
            if self.ready():
                return
            time.sleep(0.2)
        log = self.log_text(tail=None)
        self.stop()
        raise ServerError(f"not ready after {timeout:.0f}s: {failure_cause(log)}", log[-6000:])

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.http_url}/v2/health/ready", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    @contextlib.contextmanager
    def http(self):
        """A tritonclient HTTP client of this server, closed on exit."""
        import tritonclient.http as client

        conn = client.InferenceServerClient(self.http_url)
        try:
            yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def grpc(self):
        """A tritonclient gRPC client of this server, closed on exit."""
        import tritonclient.grpc as client

        conn = client.InferenceServerClient(self.grpc_url)
        try:
            yield conn
        finally:
            conn.close()

    def log_text(self, tail: int | None = 6000) -> str:
        text = self.log.read_text(errors="replace") if self.log and self.log.exists() else ""
        return text if tail is None else text[-tail:]

    def stop(self) -> None:
        try:
            import psutil          # in the venv (an NVTabular dependency); bench scripts may run where it is not
        except ImportError:
            psutil = None

        procs, regions, ended = [], set(), False
        if self.proc is not None and self.proc.poll() is None:
            if psutil is not None:
                with contextlib.suppress(psutil.Error):
                    server = psutil.Process(self.proc.pid)
                    procs = [server, *server.children(recursive=True)]
                regions = self._mapped_regions(procs)
            offset = self.log.stat().st_size if self.log is not None and self.log.exists() else 0
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            if procs:
                ended = self._end_once_unloading(procs, offset)
            try:
                self.proc.wait(timeout=EXIT_TIMEOUT_S + 20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        # The python backend stubs outlive an exit-timeout exit by seconds (they unload their models' Python: numba,
        # dask, torch); nothing needs them any more, so they are killed after a short grace. None may outlive us.
        if procs and not ended:
            _, alive = psutil.wait_procs(procs[1:], timeout=0.5)
            for proc in alive:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
        # Then remove what this server left behind: the regions it or its stubs had mapped (others' regions, e.g. of
        # another server started after this one, are not touched), and new python_env folders.
        if not regions:             # the server had died already (or no psutil): what appeared since it started
            regions = set(glob.glob(SHM_GLOB)) - self.shm_before
        deadline = time.monotonic() + (0 if ended else 10)      # an ended server and its stubs unlink nothing
        while time.monotonic() < deadline and any(os.path.exists(r) for r in regions):
            time.sleep(0.2)
        for path in regions:
            with contextlib.suppress(OSError):
                os.unlink(path)
        for path in set(glob.glob(ENV_GLOB)) - self.env_before:
            shutil.rmtree(path, ignore_errors=True)

    def _end_once_unloading(self, procs: list, offset: int) -> bool:
        """Once the stopping server has no request in flight (its log's UNLOADING line: in-flight requests complete
        first, for ``--exit-timeout-secs`` at most), end it and its python backend stubs. What is left of a graceful
        exit is the unloading of ctrgen's python models, which keep nothing to save (no ``finalize``) and take the
        server about two seconds of waiting: a stub's unload and the server's once-a-second check of its models."""
        import psutil

        deadline = time.monotonic() + EXIT_TIMEOUT_S + 1
        while time.monotonic() < deadline and self.proc is not None and self.proc.poll() is None:
            if UNLOADING in self._log_since(offset):
                for proc in procs:
                    with contextlib.suppress(psutil.Error):
                        proc.kill()
                return True
            time.sleep(0.05)
        return False

    def _log_since(self, offset: int) -> str:
        """The server's log written after ``offset`` bytes ('' where there is none)."""
        if self.log is None:
            return ""
        try:
            with open(self.log, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    @staticmethod
    def _mapped_regions(procs) -> set[str]:
        import psutil

        prefix = SHM_GLOB[:-1]
        found = set()
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                found |= {m.path for m in proc.memory_maps(grouped=True) if m.path.startswith(prefix)}
            with contextlib.suppress(psutil.Error):
                found |= {f.path for f in proc.open_files() if f.path.startswith(prefix)}
        return found


def _client_host(host: str) -> str:
    """Where a client on this machine reaches a server bound to ``host`` (0.0.0.0 / :: -> loopback)."""
    return {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(host, f"[{host}]" if ":" in host else host)


def repository_models(repo: Path) -> list[str]:
    """The model folders of a Triton repository (those with a config.pbtxt), sorted."""
    return sorted(p.parent.name for p in Path(repo).glob("*/config.pbtxt"))
