"""A real Triton 2.51 server (from the nvidia-pytriton wheel) on loopback, for the serving tests.

Follows the shared reference environment.md §8: a backend folder with the python backend and the stub of this
Python, LD_LIBRARY_PATH with this Python's libdir first, this venv's bin first on PATH, free ports, explicit model
control. ``stop`` sends SIGTERM (SIGKILL after a timeout) and removes the shared-memory regions and python_env
folders this server left, comparing with what existed before it started; it is called from a ``finally``.
"""

from __future__ import annotations

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
               "--exit-timeout-secs=10", *[f"--load-model={m}" for m in load]]
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

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")[-6000:] if self.log and self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        # Stubs exit within seconds of their parent; then remove what this run left behind.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and set(glob.glob(SHM_GLOB)) - self.shm_before:
            time.sleep(0.2)
        for path in set(glob.glob(SHM_GLOB)) - self.shm_before:
            try:
                os.unlink(path)
            except OSError:
                pass
        for path in set(glob.glob(ENV_GLOB)) - self.env_before:
            shutil.rmtree(path, ignore_errors=True)
