"""The wheel is complete: a non-editable install finds its templates (they live in templates/, outside codegen/)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile

import pytest

from conftest import REPO


def test_every_subpackage_is_listed_in_pyproject():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.relative_to(REPO).parent.parts) for p in (REPO / "codegen").rglob("__init__.py")}
    assert found | {"codegen.templates"} == listed


@pytest.mark.slow
def test_wheel_ships_templates_and_renders_from_them(tmp_path):
    """Seconds: builds the wheel with pip and renders from an install of it in a fresh virtual environment."""
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp_path.glob("ctrgen-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "templates").rglob("*.j2"))
    assert templates and all(f"codegen/{t}" in names for t in templates)
    assert "codegen/hugectr/api_table.json" in names  # HugeCTR's API by release (codegen/hugectr/api.py)
    # Install it into an isolated target and render with it (no editable path on sys.path): `ctrgen check` renders
    # every file of two specs from the install, templates and the programs' static parts (codegen/programs/, read as
    # package files) included, and finds them equal to the committed generated/, headers' inputs hash included.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=600)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import codegen.cli as c; "
            "assert c.__file__.startswith(sys.argv[1]), c.__file__; c.main(args=sys.argv[2:], prog_name='ctrgen')")
    assert {f"codegen/programs/{m}.py" for m in ("cardinality", "etl", "submit", "task")} <= names
    specs = [str(REPO / "specs" / f"{name}.yaml") for name in ("deepfm_vertex", "movielens_genres")]
    out = subprocess.run([sys.executable, "-I", "-c", code, str(target), "check", "--out", str(REPO / "generated"),
                          *specs], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert [line.split("/")[-1] for line in out.stdout.splitlines() if line.startswith("ok: ")] == \
        ["deepfm_vertex.yaml", "movielens_genres.yaml"], out.stdout
