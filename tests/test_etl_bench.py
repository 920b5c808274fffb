"""bench/etl.py keeps working: a tiny run (its numbers mean nothing here; docs/benchmarks.md has the measured ones).
What is asserted is its verdict: one process and a Dask worker write byte-identical outputs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow


def test_etl_bench_runs_and_outputs_agree():
    """Seconds: bench/etl.py runs the real NVTabular ETL on one and two local Dask workers (worker processes
    importing NVTabular)."""
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "etl.py"), "--rows", "3000", "--workers", "1"],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 process:" in proc.stdout and "1 Dask worker(s):" in proc.stdout
    assert "outputs byte-identical across runs: yes" in proc.stdout
