"""A real Triton 2.51 server (from the nvidia-pytriton wheel) on loopback, for the serving tests.

Follows the shared reference environment.md §8: a backend folder with the python backend and the stub of this
Python, LD_LIBRARY_PATH with this Python's libdir first, this venv's bin first on PATH, free ports, explicit model
control. ``stop`` sends SIGTERM (SIGKILL after a timeout), waits for the server and its python backend stubs to exit
and removes the shared-memory regions and python_env folders this server left, comparing with what existed before it
started; it is called from a ``finally``.

Shutdown takes about ``EXIT_TIMEOUT_S``: the server waits that long (``--exit-timeout-secs``, 10 s before) for
in-flight requests and for its python models to unload, and the stubs still running after it exits are killed.
Clients are closed after use (``Server.http()`` / ``Server.grpc()`` are context managers that close theirs).
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
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


def pytriton_dir() -> Path:
    """The wheel's tritonserver folder, wherever the wheel is importable from (a venv, or a --target folder)."""
    found = importlib.util.find_spec("pytriton")
    if found is None or not found.submodule_search_locations:
        raise RuntimeError("the nvidia-pytriton wheel is not importable (environment.md §8.1)")
    return Path(list(found.submodule_search_locations)[0]) / "tritonserver"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend_dir(scratch: Path) -> Path:
    src = pytriton_dir()
    dest = scratch / "backends" / "python"
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        shutil.copy2(src / "backends" / "python" / name, dest / name)
    stub = src / "python_backend_stubs" / f"{sys.version_info[0]}.{sys.version_info[1]}" / "triton_python_backend_stub"
    shutil.copy2(stub, dest / stub.name)
    return dest.parent


@dataclass
class Server:
    repos: list[Path]
    scratch: Path
    http_port: int = field(default_factory=free_port)
    grpc_port: int = field(default_factory=free_port)
    log_verbose: int = 0
    proc: subprocess.Popen | None = None
    log: Path | None = None
    shm_before: set[str] = field(default_factory=set)
    env_before: set[str] = field(default_factory=set)

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self, load: list[str], timeout: float = 120.0) -> None:
        self.shm_before, self.env_before = set(glob.glob(SHM_GLOB)), set(glob.glob(ENV_GLOB))
        libs = pytriton_dir().parent.parent / "nvidia_pytriton.libs"
        env = {**os.environ,
               "LD_LIBRARY_PATH": f"{sysconfig.get_config_var('LIBDIR')}:{libs}",
               "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        self.log = self.scratch / "tritonserver.log"
        cmd = [str(pytriton_dir() / "bin" / "tritonserver"), *[f"--model-repository={r}" for r in self.repos],
               f"--backend-directory={backend_dir(self.scratch)}",
               "--http-address=127.0.0.1", f"--http-port={self.http_port}",
               "--grpc-address=127.0.0.1", f"--grpc-port={self.grpc_port}",
               "--allow-metrics=false", "--model-control-mode=explicit", f"--log-verbose={self.log_verbose}",
               f"--exit-timeout-secs={EXIT_TIMEOUT_S}", *[f"--load-model={m}" for m in load]]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.scratch)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritonserver exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with urllib.request.urlopen(f"http://{self.http_url}/v2/health/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"tritonserver not ready after {timeout}s:\n{self.log_text()}")

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

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")[-6000:] if self.log and self.log.exists() else ""

    def stop(self) -> None:
        try:
            import psutil          # in the test venv; bench/serve_torch.py may run where it is not installed
        except ImportError:
            psutil = None

        procs, regions = [], set()
        if self.proc is not None and self.proc.poll() is None:
            if psutil is not None:
                with contextlib.suppress(psutil.Error):
                    server = psutil.Process(self.proc.pid)
                    procs = [server, *server.children(recursive=True)]
                regions = self._mapped_regions(procs)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=EXIT_TIMEOUT_S + 20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        # The python backend stubs outlive an exit-timeout exit by seconds (they unload their models' Python: numba,
        # dask, torch); the tests are done with them, so they are killed after a short grace. None may outlive the
        # tests.
        if procs:
            _, alive = psutil.wait_procs(procs[1:], timeout=0.5)
            for proc in alive:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
        # Then remove what this server left behind: the regions it or its stubs had mapped (others' regions, e.g. of
        # a server of another xdist worker started after this one, are not touched), and new python_env folders.
        if not regions:             # the server had died already (or no psutil): what appeared since it started
            regions = set(glob.glob(SHM_GLOB)) - self.shm_before
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(os.path.exists(r) for r in regions):
            time.sleep(0.2)
        for path in regions:
            try:
                os.unlink(path)
            except OSError:
                pass
        for path in set(glob.glob(ENV_GLOB)) - self.env_before:
            shutil.rmtree(path, ignore_errors=True)

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
