"""Shared test helpers. Goldens are rewritten with `pytest --update-goldens` (or `make regen`), never by hand.

Speed (README "Tests and goldens"): `ctrgen` runs in-process through `run_ctrgen` unless a test needs a real process
(`process=True`, or an `env=` that only a new interpreter honours, such as PYTHONHASHSEED); the suite runs on
pytest-xdist workers (pyproject addopts); expensive read-only builds (the demo's NVTabular ETL) are made once per
session for all workers in a scratch folder the controller owns (`shared_scratch`). At the end of the session each
process checks that it left no child process running.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STANDIN = REPO / "tests" / "standin"
SCRATCH_ENV = "CTRGEN_TEST_SCRATCH"


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", help="rewrite golden files from the current output")


@pytest.fixture
def update_goldens(request) -> bool:
    return bool(request.config.getoption("--update-goldens"))


# ---- running the CLI ------------------------------------------------------------------------------------------------

@dataclass
class CliResult:
    """What ``subprocess.run(..., capture_output=True, text=True)`` returns, for an in-process run."""
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def run_ctrgen(*args: str, cwd: Path | None = None, env: dict | None = None,
               process: bool = False) -> subprocess.CompletedProcess | CliResult:
    """Run ``ctrgen ARGS`` and return its exit status, stdout and stderr (exit codes, stderr and no-traceback are
    part of the contract).

    In-process by default (click's ``main`` as ``python -m codegen`` calls it, with this process's streams, cwd and
    warning filters set as a fresh interpreter has them). A real subprocess with ``process=True`` (the entry point
    itself is under test) or when ``env`` is given (hash seed, locale and time zone are read at interpreter start).
    """
    if process or env is not None or os.environ.get("CTRGEN_TEST_SUBPROCESS", "") not in ("", "0"):
        return run_ctrgen_process(*args, cwd=cwd, env=env)
    return _run_in_process(list(args), cwd or REPO)


def refused_in_one_line(result, *needles: str) -> str:
    """A command's refusal as the project's standard asks: exit 2, one line on stderr holding each needle, no
    traceback, nothing on stdout. Returns the line."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr and not result.stdout, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def run_ctrgen_process(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real console entry point in a subprocess."""
    # The checkout under test comes first on the path (several checkouts may share one editable install).
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    full_env = {**os.environ, "PYTHONPATH": path, **(env or {})}
    return subprocess.run([sys.executable, "-m", "codegen", *args], cwd=cwd or REPO, env=full_env,
                          capture_output=True, text=True, timeout=300)


def _fresh_interpreter_warning_filters() -> None:
    """The default filters of `python` without -W/PYTHONWARNINGS (what a subprocess would print on stderr)."""
    warnings.resetwarnings()
    for category in (ResourceWarning, ImportWarning, PendingDeprecationWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")


def _universal_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")      # as subprocess.run(text=True) decodes


def _run_in_process(args: list[str], cwd: Path) -> CliResult:
    from codegen.cli import main

    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", newline="\n", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace", newline="\n", write_through=True)
    old_cwd = os.getcwd()
    env_before = dict(os.environ)
    # A piped subprocess has no terminal: click wraps help text at 80 columns unless COLUMNS says otherwise.
    columns_set = "COLUMNS" not in os.environ
    if columns_set:
        os.environ["COLUMNS"] = "80"
    code = 0
    try:
        os.chdir(cwd)
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            _fresh_interpreter_warning_filters()
            try:
                main.main(args=args, prog_name="ctrgen", standalone_mode=True)
            except SystemExit as exc:
                if exc.code is None:
                    code = 0
                elif isinstance(exc.code, int):
                    code = exc.code
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
            except BaseException:  # an uncaught exception: Python prints the traceback and exits with 1
                traceback.print_exc(file=sys.stderr)
                code = 1
    finally:
        os.chdir(old_cwd)
        if columns_set:
            os.environ.pop("COLUMNS", None)
    leaked = {k for k in set(os.environ) | set(env_before) if os.environ.get(k) != env_before.get(k)}
    assert not leaked, f"ctrgen {' '.join(args)} changed environment variables of the test process: {sorted(leaked)}"
    out.flush()
    err.flush()
    return CliResult(["ctrgen", *args], code, _universal_newlines(out_bytes.getvalue().decode("utf-8")),
                     _universal_newlines(err_bytes.getvalue().decode("utf-8", errors="replace")))


# ---- order: the longest work first ----------------------------------------------------------------------------------

# Modules in this order, before all others (pytest's order within each). With xdist's loadgroup scheduling and
# --no-loadscope-reorder (pyproject addopts), the first worker starts on a Triton server group (and builds the demo)
# while the other runs the bench scripts, which need no demo; then the other long tests (trainings, Dask, mypy), so
# that only the many short tests fill the end and the workers finish together.
FIRST = ("test_triton_torch_serving.py", "test_serving_errors.py", "test_bench_scripts.py", "test_triton_serving.py",
         "test_serve.py", "test_torch_shard.py", "test_train_command.py", "test_torch_continuous.py",
         "test_torch_target.py", "test_demo_serve.py", "test_torch_fast_paths.py", "test_etl_bench.py", "test_etl.py",
         "test_runtime.py", "test_lint.py", "test_hostile.py", "test_demo_cli.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))      # stable: keeps the order within a module
    _deselect_reference_tier(config, items)


# ---- the reference tier (tests/upstream.py) -------------------------------------------------------------------------

REFERENCE_NOT_RUN = "reference-tests-not-run"


def _deselect_reference_tier(config, items) -> None:
    """Without CTRGEN_REFERENCE the tests marked ``reference`` (they read upstream text) are deselected; their count
    goes to the session's scratch folder for the controller's summary line."""
    from upstream import REFERENCE_ENV

    if os.environ.get(REFERENCE_ENV):
        return
    reference = [item for item in items if item.get_closest_marker("reference")]
    if reference:
        items[:] = [item for item in items if not item.get_closest_marker("reference")]
        config.hook.pytest_deselected(items=reference)
    (shared_scratch() / REFERENCE_NOT_RUN).write_text(str(len(reference)))


def _check_reference_folder() -> None:
    from upstream import REFERENCE_ENV

    value = os.environ.get(REFERENCE_ENV)
    if value and not (Path(value) / "seeds").is_dir():
        raise pytest.UsageError(f"{REFERENCE_ENV}={value}: not the upstream reference folder (seeds/, fixtures/, "
                                "reference/); unset it to run without the reference tier")


def pytest_terminal_summary(terminalreporter, config):
    if getattr(config, "workerinput", None) is not None:
        return
    count = shared_scratch() / REFERENCE_NOT_RUN
    if count.is_file() and int(count.read_text() or 0):
        terminalreporter.write_line(
            f"{count.read_text()} reference tests did not run (they read upstream text): "
            "CTRGEN_REFERENCE=DIR make test, DIR the upstream reference folder (.ci/run: ../shared)", yellow=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per CPU this process may use. A third worker on two cores once filled the time tests
    wait on servers and trainers (133 s against 146 s); with the suite's CPU at ~330 s the cores are busy 96% of the
    run with two, and a third only adds its own imports and collection (two runs each, December 2026: 184 and 195 s
    with two workers, 190 to 203 s with three; docs/testing.md)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cpus


# ---- one scratch folder per session, shared by the xdist workers ----------------------------------------------------

def pytest_configure(config):
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:                      # an xdist worker: the controller made the folder
        os.environ[SCRATCH_ENV] = workerinput[SCRATCH_ENV]
        _isolate_user_cache(workerinput[SCRATCH_ENV])
        return
    _check_reference_folder()
    scratch = tempfile.mkdtemp(prefix="ctrgen-test-session-")
    config._ctrgen_scratch = scratch
    os.environ[SCRATCH_ENV] = scratch
    _isolate_user_cache(scratch)


def _isolate_user_cache(scratch: str) -> None:
    """The session's own user cache (codegen/user_cache.py: compiled templates, parsed schemas, the trainer's torch
    bytecode): what the user's runs left there (`make demo` first, as the README orders) never meets the tests, and
    the tests leave nothing in the user's. Tests of a cache point XDG_CACHE_HOME at a folder of their own."""
    os.environ["XDG_CACHE_HOME"] = str(Path(scratch) / "user-cache")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    node.workerinput[SCRATCH_ENV] = node.config._ctrgen_scratch


def pytest_unconfigure(config):
    scratch = getattr(config, "_ctrgen_scratch", None)
    if scratch is not None:                          # the controller (or a run without xdist) removes it last
        shutil.rmtree(scratch, ignore_errors=True)


def shared_scratch() -> Path:
    """This session's scratch folder (one for all xdist workers; removed when the session ends)."""
    value = os.environ.get(SCRATCH_ENV)
    if not value:                                    # imported outside pytest
        value = tempfile.mkdtemp(prefix="ctrgen-test-session-")
        os.environ[SCRATCH_ENV] = value
    return Path(value)


@contextlib.contextmanager
def scratch_lock(name: str):
    """An exclusive lock across the xdist workers of this session (fcntl on a file in the scratch folder)."""
    import fcntl

    with open(shared_scratch() / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---- servers shared by modules --------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def torch_served(no_process_left_behind):
    """One Triton server with the demo's PyTorch models (tests/test_triton_torch_serving.py deploys them), for the
    modules of its xdist group that only query it: (server, {name: deployment}). (It names the process check so that
    pytest stops this server before the check runs.)"""
    from tests.test_triton_torch_serving import serve_deployed

    with serve_deployed() as value:
        yield value


# ---- no process left behind -----------------------------------------------------------------------------------------

@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind():
    """Every server and script a test started must be gone when the session ends (checked after the module fixtures
    have stopped their servers; each xdist worker checks its own children). Anything left is killed and reported as
    an error of the session's last test."""
    yield
    import psutil

    from warm_python import stop_all           # the warm Python servers of tests/warm_python.py are expected; stop them

    stop_all()
    left = psutil.Process().children(recursive=True)
    _, alive = psutil.wait_procs(left, timeout=5)
    described = []
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            described.append(f"{proc.pid} {' '.join(proc.cmdline())[:300]}")
        with contextlib.suppress(psutil.Error):
            proc.kill()
    assert not alive, "processes left running by the tests (killed):\n  " + "\n  ".join(described)


# ---- where the CPU goes (profiling, off unless asked) ---------------------------------------------------------------

_CPU_LOG = os.environ.get("CTRGEN_TEST_CPU", "")


def _cpu_now() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    warm = getattr(sys.modules.get("_ctrgen_warm_python"), "cpu_s", 0.0)      # runs forked from the warm Python
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + warm


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """CTRGEN_TEST_CPU=FILE: each test's CPU seconds (this process, the children it reaped, the warm Python's runs;
    a fixture's setup and teardown count for the test that ran them) appended to FILE as `seconds<TAB>nodeid`
    (docs/testing.md, "Where the CPU goes")."""
    if not _CPU_LOG:
        yield
        return
    start = _cpu_now()
    yield
    with open(_CPU_LOG, "a", encoding="utf-8") as log:
        log.write(f"{_cpu_now() - start:.2f}\t{item.nodeid}\n")
