"""Shared test helpers. Goldens are rewritten with `pytest --update-goldens` (or `make regen`), never by hand."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
STANDIN = REPO / "tests" / "standin"


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", help="rewrite golden files from the current output")


@pytest.fixture
def update_goldens(request) -> bool:
    return bool(request.config.getoption("--update-goldens"))


def run_ctrgen(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real console entry point in a subprocess (exit codes, stderr and no-traceback are part of the contract)."""
    # The checkout under test comes first on the path (several checkouts may share one editable install).
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    full_env = {**os.environ, "PYTHONPATH": path, **(env or {})}
    return subprocess.run([sys.executable, "-m", "codegen", *args], cwd=cwd or REPO, env=full_env,
                          capture_output=True, text=True, timeout=300)
