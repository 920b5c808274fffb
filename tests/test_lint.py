"""Hygiene of what ctrgen renders: the Python files it writes (train_torch.py, task.py, etl.py, ...) pass the
project's lint rules, rendered fresh from the example specs. The project's own sources are linted by `make lint`
(ruff and mypy as configured in pyproject.toml), which `.ci/run` runs before the suite."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codegen.pipeline import open_spec, render_spec
from conftest import REPO

BIN = Path(sys.executable).parent
# The project's rules (pyproject [tool.ruff.lint]) minus B023: a closure called inside the loop that defines it
# (train_torch.py's numbers()) is what that rule cannot tell from a late-bound one.
RENDERED_RULES = ["--select", "E,F,W,B", "--ignore", "E501,B905,E741,B023"]


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: install the [test] extra (make venv)")
    return found


# movielens_genres: the etl.py with a join table (codegen/programs/etl.py's join_table part).
@pytest.mark.parametrize("spec", ["movielens", "dlrm", "wdl_continuous_etc", "deepfm_vertex", "movielens_genres"])
def test_rendered_python_is_lint_clean(tmp_path, spec):
    rendered = render_spec(open_spec(REPO / "specs" / f"{spec}.yaml"))
    written = []
    for rel, text in rendered.files.items():
        if rel.suffix == ".py" and not rel.parts[0].startswith("triton"):
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            compile(text, str(rel), "exec")
            written.append(str(path))
    if spec in ("movielens", "dlrm", "wdl_continuous_etc"):
        assert str(tmp_path / "train_torch.py") in written
    proc = subprocess.run([_tool("ruff"), "check", "--no-cache", "--isolated", "--target-version", "py311",
                           *RENDERED_RULES, *written], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_version_is_written_once():
    import tomllib
    from importlib.metadata import version

    import codegen

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "codegen.__version__"}
    assert version("ctrgen") == codegen.__version__
    assert f"## {codegen.__version__}" in (REPO / "CHANGELOG.md").read_text()


def test_pre_commit_hooks_run_ctrgen_check():
    import yaml

    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert hooks["ctrgen-check"]["entry"] == "ctrgen check" and hooks["ctrgen-check"]["pass_filenames"] is False
    assert hooks["ctrgen-lock-check"]["entry"] == "ctrgen lock --check"
