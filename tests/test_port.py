"""ctrgen port: retarget a spec to another release (only hugectr_version changes) or say what cannot move."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import run_ctrgen

REPO = Path(__file__).resolve().parents[1]


def _copy(tmp_path: Path, stem: str) -> Path:
    for p in (REPO / "specs").glob("*"):
        if p.is_file():
            shutil.copy(p, tmp_path / p.name)
    return tmp_path / f"{stem}.yaml"


def test_port_changes_only_the_release(tmp_path: Path):
    spec = _copy(tmp_path, "dcn")
    before = spec.read_text(encoding="utf-8")
    proc = run_ctrgen("port", str(spec), "--to", "4.3")
    assert proc.returncode == 0, proc.stderr
    after = spec.read_text(encoding="utf-8")
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert changed == [('hugectr_version: "23.06"', 'hugectr_version: "4.3"')]
    out = tmp_path / "gen"
    assert run_ctrgen("generate", str(spec), "--out", str(out)).returncode == 0
    assert "HugeCTR 4.3" in (out / "dcn" / "model.py").read_text(encoding="utf-8")


def test_port_says_what_cannot_move_and_writes_nothing(tmp_path: Path):
    spec = _copy(tmp_path, "wdl_continuous_etc")       # CreateETC (3.3 up to 23.12)
    before = spec.read_text(encoding="utf-8")
    proc = run_ctrgen("port", str(spec), "--to", "3.2")
    assert proc.returncode == 2
    assert "cannot move to HugeCTR 3.2" in proc.stderr and "CreateMOS" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert spec.read_text(encoding="utf-8") == before
    assert not list(tmp_path.glob(".ctrgen-port-*"))


def test_port_to_an_unknown_release(tmp_path: Path):
    spec = _copy(tmp_path, "dcn")
    proc = run_ctrgen("port", str(spec), "--to", "2.0")
    assert proc.returncode == 2 and "unknown HugeCTR release '2.0'" in proc.stderr
