"""The Criteo example specs (issue 3): their shared lock is what the demo's real NVTabular workflow records, and
changing the embedding size or the number of categorical columns regenerates a consistent model with no other edit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import REPO, run_ctrgen
from demo_data import built_demo

SPECS = ("wdl", "dcn", "dlrm", "deepfm")
LOCK = REPO / "specs" / "criteo.features.lock.json"


def _shapes(summary: str) -> dict[str, tuple[int, ...]]:
    """Output name -> shape without the batch dimension, from a model.summary() table."""
    out = {}
    for m in re.finditer(r"^\S+\s+\S+\s+(\w+)\s+\(\d+((?:,\d+)+)\)", summary, re.M):
        out[m.group(1)] = tuple(int(x) for x in m.group(2).strip(",").split(","))
    for m in re.finditer(r"^\s+(\w+)\s+\(\d+((?:,\d+)+)\)", summary, re.M):   # second top of a Slice
        out[m.group(1)] = tuple(int(x) for x in m.group(2).strip(",").split(","))
    return out


def _variant(tmp_path: Path, name: str, *, vec: int | None = None, drop_last: int = 0) -> dict[str, tuple[int, ...]]:
    """Generate specs/<name>.yaml with another vec size and/or the lock's last `drop_last` columns removed."""
    yaml = YAML()
    spec = yaml.load((REPO / "specs" / f"{name}.yaml").read_text())
    spec.pop("workflow")
    lock = json.loads(LOCK.read_text())
    if drop_last:
        lock["categorical"] = lock["categorical"][:-drop_last]
    if vec is not None:
        deep = spec["embeddings"][-1]
        deep["embedding_vec_size"] = vec
        if name == "dlrm":
            spec["model"]["bottom_units"][-1] = vec   # the rule DLRM states: bottom width == vec size
    folder = tmp_path / name
    (folder / "specs").mkdir(parents=True)
    (folder / "specs" / "criteo.features.lock.json").write_text(json.dumps(lock))
    with (folder / "specs" / f"{name}.yaml").open("w") as f:
        yaml.dump(spec, f)
    result = run_ctrgen("generate", str(folder / "specs" / f"{name}.yaml"))
    assert result.returncode == 0, result.stderr
    return _shapes((folder / "generated" / name / "summary.txt").read_text())


@pytest.mark.slow
def test_committed_lock_is_what_the_demo_workflow_records():
    demo = built_demo()
    for name in SPECS:
        result = run_ctrgen("lock", "--check", f"specs/{name}.yaml", "--workflow", str(demo.paths["criteo"]["workflow"]))
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith("ok: ")


def test_lock_has_the_crossed_wide_column_first():
    lock = json.loads(LOCK.read_text())
    names = [c["name"] for c in lock["categorical"]]
    assert names == ["C1_C2", *(f"C{i}" for i in range(1, 27))]
    assert [c["name"] for c in lock["continuous"]] == [f"I{i}" for i in range(1, 14)]


@pytest.mark.parametrize("vec,drop", [(None, 0), (8, 0), (None, 5), (24, 3)])
def test_dimensions_follow_vec_size_and_column_count(tmp_path, vec, drop):
    dense = 13
    slots = 27 - drop                     # every categorical column, the crossed one included
    deep_slots = slots - 1                # WDL: the crossed column is the wide input
    wdl = _variant(tmp_path, "wdl", vec=vec, drop_last=drop)
    v = vec or 16
    assert wdl["sparse_embedding1"] == (deep_slots, v) and wdl["reshape1"] == (deep_slots * v,)
    assert wdl["concat1"] == (deep_slots * v + dense,) and wdl["reshape2"] == (1,)

    dcn = _variant(tmp_path, "dcn", vec=vec, drop_last=drop)
    width = slots * v + dense
    assert dcn["concat1"] == (width,) and dcn["multicross1"] == (width,)
    assert dcn["concat2"] == (width + 1024,)

    dlrm = _variant(tmp_path, "dlrm", vec=vec, drop_last=drop)
    dv = vec or 128
    n = slots + 1                         # Interaction: the bottom MLP output and one vector per slot
    assert dlrm["sparse_embedding1"] == (slots, dv) and dlrm["fc3"] == (dv,)
    assert dlrm["interaction1"] == (dv + n * (n - 1) // 2 + 1,)   # HugeCTR pads the pairs with one zero (§3)

    deepfm = _variant(tmp_path, "deepfm", vec=vec, drop_last=drop)
    k = (vec or 11) - 1                   # vec k+1 = k factors + the first-order weight
    assert deepfm["reshape2"] == (slots * k,) and deepfm["reshape3"] == (slots,)
    assert deepfm["weight_multiply1"] == (dense * k,) and deepfm["weight_multiply2"] == (dense,)
    assert deepfm["concat1"] == ((slots + dense) * k,) and deepfm["concat2"] == (slots + dense,)
    assert deepfm["fmorder2"] == (k,)


@pytest.mark.slow
def test_a_stale_demo_lock_names_the_drift(tmp_path):
    demo = built_demo()
    folder = tmp_path / "p"
    (folder / "specs").mkdir(parents=True)
    spec = (REPO / "specs" / "dcn.yaml").read_text().replace(
        "workflow: ../.demo/criteo/workflow", f"workflow: {json.dumps(str(demo.paths['criteo']['workflow']))}")
    (folder / "specs" / "dcn.yaml").write_text(spec)
    lock = json.loads(LOCK.read_text())
    lock["categorical"][3]["cardinality"] += 1
    (folder / "specs" / "criteo.features.lock.json").write_text(json.dumps(lock))
    result = run_ctrgen("generate", str(folder / "specs" / "dcn.yaml"))
    assert result.returncode == 2
    assert "stale features lock" in result.stderr and lock["categorical"][3]["name"] in result.stderr
    assert not (folder / "generated").exists()


def _subset_project(tmp_path: Path, change=None) -> Path:
    """deepfm_vertex (C1..C26 of the shared lock's 27 categorical columns) pointed at the demo's Criteo workflow."""
    demo = built_demo()
    specs = tmp_path / "p" / "specs"
    specs.mkdir(parents=True)
    spec = (REPO / "specs" / "deepfm_vertex.yaml").read_text().replace(
        "workflow: ../.demo/criteo/workflow", f"workflow: {json.dumps(str(demo.paths['criteo']['workflow']))}")
    (specs / "deepfm_vertex.yaml").write_text(spec)
    lock = json.loads(LOCK.read_text())
    if change:
        change(lock)
    (specs / "criteo.features.lock.json").write_text(json.dumps(lock))
    return specs / "deepfm_vertex.yaml"


@pytest.mark.slow
def test_a_shared_lock_is_not_stale_for_a_spec_using_a_subset(tmp_path):
    """The lock holds C1_C2, which deepfm_vertex does not train on: generate and lock --check compare only the
    spec's own columns (with the demo built, `make test` after `make demo` ran into this)."""
    spec = _subset_project(tmp_path)
    assert "C1_C2" in LOCK.read_text() and "C1_C2" not in spec.read_text()
    checked = run_ctrgen("lock", "--check", str(spec))
    assert checked.returncode == 0 and checked.stdout.startswith("ok: "), checked.stdout + checked.stderr
    result = run_ctrgen("generate", str(spec))
    assert result.returncode == 0, result.stderr
    assert (spec.parent.parent / "generated" / "deepfm_vertex" / "model.py").is_file()


@pytest.mark.slow
def test_drift_in_a_column_the_subset_uses_is_still_stale(tmp_path):
    def bump(lock):
        next(c for c in lock["categorical"] if c["name"] == "C4")["cardinality"] += 1
        next(c for c in lock["categorical"] if c["name"] == "C1_C2")["cardinality"] += 1   # not used: not reported

    spec = _subset_project(tmp_path, bump)
    result = run_ctrgen("generate", str(spec))
    assert result.returncode == 2
    assert "stale features lock" in result.stderr and "categorical.C4:" in result.stderr
    assert "C1_C2" not in result.stderr
    assert not (spec.parent.parent / "generated").exists()
    checked = run_ctrgen("lock", "--check", str(spec))
    assert checked.returncode == 1 and "categorical.C4:" in checked.stdout and "C1_C2" not in checked.stdout
