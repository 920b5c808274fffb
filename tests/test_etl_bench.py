"""bench/etl.py keeps working: a tiny run (its numbers mean nothing here; docs/benchmarks.md has the measured ones).
What is asserted is what it measures and its verdict: ctrgen etl reports one process, then one Dask worker, and the
two write byte-identical outputs.

The bench's ``main()`` runs in the test's process and each ``ctrgen etl`` it starts runs in-process too (click's
main, as ``python -m codegen`` calls it); the one Dask worker is still a real local cluster
of one worker process. A fresh interpreter per run cost this test about 5 s of CPU (NVTabular imported three times)."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import subprocess
import sys
from multiprocessing import resource_tracker

import pytest

from click.testing import CliRunner

from codegen.cli import main
from conftest import REPO

pytestmark = pytest.mark.slow


def _in_process(cmd: list[str], **_) -> subprocess.CompletedProcess:
    """``subprocess.run([python, -m, codegen, ARGS...])`` of bench/etl.py as an in-process ``ctrgen ARGS``. Dask's
    local cluster sets variables of the process that starts its workers (DASK_PARENT, the workers' thread counts):
    put back as they were, as a process of its own would leave them."""
    assert cmd[:3] == [sys.executable, "-m", "codegen"], cmd
    env = dict(os.environ)
    try:
        res = CliRunner(mix_stderr=False).invoke(main, cmd[3:])
    finally:
        os.environ.clear()
        os.environ.update(env)
    return subprocess.CompletedProcess(cmd, res.exit_code, res.stdout, res.stderr)


@pytest.fixture
def etl_bench(monkeypatch):
    """bench/etl.py as a module whose ``ctrgen etl`` runs are in-process; the resource tracker of multiprocessing
    that the Dask cluster's worker start needs is stopped afterwards if this test started it (it would otherwise live
    as long as the test process)."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    sys.modules.pop("etl", None)
    module = importlib.import_module("etl")
    monkeypatch.setattr(module, "subprocess", type("Runner", (), {"run": staticmethod(_in_process)}))
    tracker = resource_tracker._resource_tracker
    had_tracker = tracker._pid is not None
    yield module
    sys.modules.pop("etl", None)
    if not had_tracker and tracker._pid is not None:
        tracker._stop()


def test_etl_bench_runs_and_outputs_agree(etl_bench, monkeypatch):
    """Seconds: bench/etl.py runs the real NVTabular ETL twice, once on a local Dask cluster (a worker process
    importing NVTabular); the fewest rows and columns that make an ETL."""
    monkeypatch.setattr(sys, "argv", ["etl.py", "--rows", "100", "--categorical", "2", "--continuous", "1",
                                      "--workers", "1"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        etl_bench.main()        # SystemExit (its refusal: a failed run, a run labelled otherwise) fails the test
    stdout = out.getvalue()
    assert "100 Criteo-shaped rows (2 categorical, 1 continuous columns)" in stdout
    assert "cpu, 1 process:" in stdout and "cpu, 1 Dask worker(s):" in stdout
    assert "outputs byte-identical across runs: yes" in stdout
