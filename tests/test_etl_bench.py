"""bench/etl.py keeps working: a tiny run (its numbers mean nothing here; docs/benchmarks.md has the measured ones).
What is asserted is what it measures and its verdict: ctrgen etl reports one process, then one Dask worker, and the
two write byte-identical outputs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow


def test_etl_bench_runs_and_outputs_agree():
    """Seconds: bench/etl.py runs the real NVTabular ETL in two ctrgen processes, one of them with a local Dask
    worker (a third process importing NVTabular); the fewest rows and columns that make an ETL."""
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "etl.py"), "--rows", "100", "--categorical", "2",
                           "--continuous", "1", "--workers", "1"], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "100 Criteo-shaped rows (2 categorical, 1 continuous columns)" in proc.stdout
    assert "cpu, 1 process:" in proc.stdout and "cpu, 1 Dask worker(s):" in proc.stdout
    assert "outputs byte-identical across runs: yes" in proc.stdout
