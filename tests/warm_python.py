"""A warm Python for the many runs of generated train_torch.py scripts (and the bench scripts): each run is still its
own process running the real script as ``__main__``, but forked from a server process that imported torch, numpy,
pyarrow and what the script imports up to its first checkpoint (about 1 s of CPU per run otherwise, ~40 runs a
session). The server only imports (no thread pool of torch or pyarrow has run) and freezes its heap for the gc
before forking; pyarrow's import leaves two idle threads (jemalloc's background thread, the AWS SDK's event loop),
which a forked child does not have; the scripts read local files only.

``run_ranks(cmd, cwd=, envs=, timeout=)`` starts one run per environment together (the ranks of a job) and returns
their ``CompletedProcess`` list. ``run(cmd, cwd=, env=, timeout=)`` takes the arguments ``subprocess.run(cmd, capture_output=True, text=True)`` would
and returns the same ``CompletedProcess`` (exit status, stdout, stderr; an uncaught exception prints its traceback and
exits 1, ``sys.exit(n)`` exits n). It forks only for ``[sys.executable, script.py, *args]`` with an environment whose
interpreter-start variables (``PYTHON*``, ``OMP_*``, ...) equal the server's; anything else (``-m torch.distributed.run``,
another hash seed) runs as a real subprocess. One server per test process, started on first use and stopped by
conftest's session teardown (before the no-process-left check).

Run as a script, this file is the server: it reads one JSON request a line on its stdin, forks, answers the child's
pid and then its exit status, one JSON line each.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import types
from pathlib import Path

# Read when the interpreter (or a library it loads) starts: a forked run must see the server's values.
STARTUP_PREFIXES = ("PYTHON", "OMP_", "MKL_", "KMP_", "GOMP_", "LD_", "MALLOC_", "CUDA_", "TORCH", "OPENBLAS_")
# What train_torch.py imports, up to its first checkpoint (python -X importtime on a short run).
PRELOAD = ("numpy", "pyarrow", "pyarrow.parquet", "torch", "torch.distributed", "torch.nn", "torch.nn.functional",
           "torch.utils._device", "torch.utils.serialization")
# Where importable: ctrgen's runtime (where the server's path has it); tensorboard, which the trainer's Recorder
# imports when it is installed (0.3 s of CPU a run).
RUNTIME_PRELOAD = ("codegen.runtime.trainer", "torch.utils.tensorboard")
_STATE = sys.modules.setdefault("_ctrgen_warm_python", types.ModuleType("_ctrgen_warm_python"))  # one per process,
# also when this file is imported both as warm_python and as tests.warm_python


def _startup_env(env: dict) -> dict:
    return {k: v for k, v in env.items() if k.startswith(STARTUP_PREFIXES)}


class WarmPython:
    def __init__(self, env: dict):
        self.env = dict(env)
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=self.env, cwd=tempfile.gettempdir())
        self._read(timeout=120)                                      # {"ready": ...} once the imports are done

    def _read(self, timeout: float | None) -> dict:
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise TimeoutError
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the warm Python server exited ({self.proc.wait()})")
        return json.loads(line)

    def run(self, cmd: list[str], cwd: str, env: dict, timeout: float | None) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="ctrgen-warm-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            request = {"argv": cmd[1:], "cwd": cwd, "env": env, "stdout": str(out), "stderr": str(err)}
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            pid = self._read(timeout=60)["pid"]
            try:
                done = self._read(timeout=timeout)
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self._read(timeout=60)
                raise subprocess.TimeoutExpired(cmd, timeout, _bytes(out), _bytes(err)) from None   # bytes, as run()
            except BaseException:       # interrupted (pytest-timeout, Ctrl-C): neither the run nor the server stays
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self.proc.kill()
                self.proc.wait()
                raise
            self._count(done["cpu_s"])
            return subprocess.CompletedProcess(cmd, done["status"], _text(out), _text(err))

    def run_group(self, cmds: list[list[str]], cwd: str, envs: list[dict],
                  timeout: float | None) -> list[subprocess.CompletedProcess]:
        """Several runs started together (the ranks of one job: they meet at their rendezvous), each forked."""
        with tempfile.TemporaryDirectory(prefix="ctrgen-warm-") as tmp:
            streams = [(Path(tmp) / f"stdout{i}", Path(tmp) / f"stderr{i}") for i in range(len(cmds))]
            group = [{"argv": cmd[1:], "cwd": cwd, "env": env, "stdout": str(out), "stderr": str(err)}
                     for cmd, env, (out, err) in zip(cmds, envs, streams)]
            self.proc.stdin.write(json.dumps({"group": group}).encode() + b"\n")
            self.proc.stdin.flush()
            pids = self._read(timeout=60)["pids"]
            try:
                done = self._read(timeout=timeout)
            except BaseException:       # a timeout or an interruption: no rank and no server stays
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self.proc.kill()
                self.proc.wait()
                raise
            self._count(done["cpu_s"])
            return [subprocess.CompletedProcess(cmd, status, _text(out), _text(err))
                    for cmd, status, (out, err) in zip(cmds, done["statuses"], streams)]

    def _count(self, cpu_s: float) -> None:
        """CPU of the runs, for profiling (conftest's CTRGEN_TEST_CPU): the server reaps them, so this process sees
        them only once it reaps the server; until then they are counted here."""
        self.runs_cpu_s = getattr(self, "runs_cpu_s", 0.0) + cpu_s
        _STATE.cpu_s = getattr(_STATE, "cpu_s", 0.0) + cpu_s

    def stop(self) -> None:
        # once reaped, the server's children's CPU reaches this process's own count: no longer counted here
        _STATE.cpu_s = getattr(_STATE, "cpu_s", 0.0) - getattr(self, "runs_cpu_s", 0.0)
        self.runs_cpu_s = 0.0
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


def _bytes(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _text(path: Path) -> str:
    """As subprocess.run(text=True) decodes: the locale's encoding, universal newlines."""
    import locale

    return _bytes(path).decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


def _server_for(cmd: list[str], envs: list[dict]) -> WarmPython | None:
    """The warm server that can fork ``cmd`` in each of ``envs`` (started on first use), or None: not
    ``python SCRIPT.py ...``, interpreter-start variables that differ from each other, or CTRGEN_TEST_WARM=0."""
    warmable = len(cmd) >= 2 and cmd[0] == sys.executable and cmd[1].endswith(".py") and not cmd[1].startswith("-")
    keys = {json.dumps(sorted(_startup_env(env).items())) for env in envs}
    if not warmable or len(keys) != 1 or os.environ.get("CTRGEN_TEST_WARM", "1") == "0":
        return None
    servers = _STATE.__dict__.setdefault("servers", {})
    key = keys.pop()
    server = servers.get(key)
    if server is None or server.proc.poll() is not None:
        server = servers[key] = WarmPython(envs[0])
    return server


def run(cmd: list[str], *, cwd: Path | str, env: dict, timeout: float | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)``, forked from the
    warm server where it can be (see the module's docstring)."""
    server = _server_for(cmd, [env])
    if server is None:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return server.run(list(cmd), str(cwd), dict(env), timeout)


def rank_envs(env: dict, ranks: int) -> list[dict]:
    """The environments torchrun --standalone gives the ranks of one node (a free port for their rendezvous)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return [{**env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(ranks), "RANK": str(r),
             "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(ranks)} for r in range(ranks)]


def run_ranks(cmd: list[str], *, cwd: Path | str, envs: list[dict],
              timeout: float | None = None) -> list[subprocess.CompletedProcess]:
    """The processes of one job started together, one per environment (e.g. the ranks of a torchrun job, each with
    its RANK): forked from the warm server where ``run`` would fork, else real subprocesses; what each printed and
    its exit status, in order."""
    server = _server_for(cmd, envs)
    if server is None:
        procs = [subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for env in envs]
        outputs = [p.communicate(timeout=timeout) for p in procs]
        return [subprocess.CompletedProcess(cmd, p.returncode, out, err) for p, (out, err) in zip(procs, outputs)]
    return server.run_group([list(cmd)] * len(envs), str(cwd), [dict(env) for env in envs], timeout)


def run_job(cmd: list[str], *, cwd: Path | str, env: dict, ranks: int,
            timeout: float | None = None) -> subprocess.CompletedProcess:
    """``ranks`` ranks of ``cmd`` as torchrun --standalone starts them (its environment variables, without its
    launcher process) in one CompletedProcess: every rank's stdout and stderr in rank order, the worst exit status."""
    done = run_ranks(cmd, cwd=cwd, envs=rank_envs(env, ranks), timeout=timeout)
    return subprocess.CompletedProcess(cmd, max(abs(p.returncode) for p in done), "".join(p.stdout for p in done),
                                       "".join(p.stderr for p in done))


def stop_all() -> None:
    for server in _STATE.__dict__.pop("servers", {}).values():
        server.stop()


# ---- the server -----------------------------------------------------------------------------------------------------

def _serve() -> dict | None:
    """The request loop; returns the request in a forked child (which then runs the script), None at EOF."""
    import ctypes
    import gc
    import importlib

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)       # PR_SET_PDEATHSIG: gone with the test process
    proto_in, proto_out = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    for name in PRELOAD:
        importlib.import_module(name)
    for name in RUNTIME_PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()             # the preloaded objects stay out of the children's collections (no copy-on-write storm)

    def answer(obj: dict) -> None:
        proto_out.write(json.dumps(obj).encode() + b"\n")
        proto_out.flush()

    answer({"ready": True})
    for line in proto_in:
        request = json.loads(line)
        pids = []
        for one in request.get("group", [request]):
            pid = os.fork()
            if pid == 0:
                proto_in.close()
                proto_out.close()
                return one
            pids.append(pid)
        if "group" not in request:
            answer({"pid": pids[0]})
            _, status, usage = os.wait4(pids[0], 0)
            answer({"status": os.waitstatus_to_exitcode(status), "cpu_s": usage.ru_utime + usage.ru_stime})
            continue
        answer({"pids": pids})
        statuses, cpu_s = [], 0.0
        for pid in pids:
            _, status, usage = os.wait4(pid, 0)
            statuses.append(os.waitstatus_to_exitcode(status))
            cpu_s += usage.ru_utime + usage.ru_stime
        answer({"statuses": statuses, "cpu_s": cpu_s})
    return None


def _become(request: dict) -> None:
    """In the forked child: the streams, cwd, environment and argv of ``python SCRIPT ARGS``."""
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(handle, fd)
        os.close(handle)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    script = os.path.abspath(sys.argv[0])
    sys.path[0] = os.path.dirname(script)                            # as `python script.py` sets it


def _run_script() -> int:
    """Run ``sys.argv[0]`` as ``__main__`` and end as the interpreter does after ``python SCRIPT``: the exit status
    of SystemExit (its message on stderr when not an int), an uncaught exception's traceback and status 1, then
    non-daemon threads joined, atexit handlers run and the streams flushed. Module teardown is skipped (os._exit): in
    a child of a process holding torch it costs about 0.3 s and has nothing to observe."""
    import atexit
    import runpy
    import threading

    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()           # type: ignore[attr-defined]  (what Py_FinalizeEx does first)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


if __name__ == "__main__":
    request = _serve()
    if request is None:
        os._exit(0)                 # the test process is done with it: no module teardown (about a second with torch)
    _become(request)
    del request
    os._exit(_run_script())
