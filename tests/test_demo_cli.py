"""`ctrgen demo` (what `make demo` runs): lock, generate and check the example specs against the real NVTabular
workflows of the embedded demo, so the numbers in model.py come from the ETL and not from the committed locks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import REPO, run_ctrgen
from demo_data import private_demo, read_parts

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("demo_cli")]      # one after the other: `ctrgen demo` writes into one copy


def _demo(*extra: str):
    demo = private_demo("cli")  # the stamp makes `ctrgen demo` reuse this build instead of running the ETL again
    return demo, run_ctrgen("demo", "--root", str(demo.root), "--specs", str(REPO / "specs"), *extra)


def test_demo_generates_movielens_from_the_real_workflow() -> None:
    demo, proc = _demo("--only", "movielens", "--only", "movielens_genres")
    assert proc.returncode == 0, proc.stderr
    assert "up to date" in proc.stderr  # no second ETL
    for name, dataset in (("movielens", "movielens"), ("movielens_genres", "movielens_genres")):
        out = demo.root / "generated" / name
        lock = json.loads((demo.root / "specs" / f"{name}.features.lock.json").read_text())
        cards = [c["cardinality"] for c in lock["categorical"]]
        # The cardinalities are the workflow's (NVTabular reserves low ids, so they exceed the distinct raw values),
        # and they reach model.py's slot_size_array unchanged.
        train = read_parts(demo.paths[dataset]["train"])
        for col, card in zip((c["name"] for c in lock["categorical"]), cards):
            values = train[col].explode() if train[col].dtype == object else train[col]
            assert int(values.max()) < card
        model_py = (out / "model.py").read_text()
        assert f"slot_size_array={cards}," in model_py
        assert str(demo.paths[dataset]["train"] / "_file_list.txt") in model_py
        assert f"{name}: {out}/" in proc.stdout
    # The demo copies are ordinary specs: the user's own `ctrgen check` finds them up to date.
    check = run_ctrgen("check", str(demo.root / "specs" / "movielens.yaml"))
    assert check.returncode == 0, check.stdout + check.stderr


def test_demo_is_deterministic() -> None:
    demo, first = _demo("--only", "movielens")
    files = {p: p.read_bytes() for p in (demo.root / "generated" / "movielens").rglob("*") if p.is_file()}
    _, second = _demo("--only", "movielens")
    assert first.returncode == second.returncode == 0
    assert {p: p.read_bytes() for p in files} == files


def test_demo_without_specs_folder_is_a_clear_error(tmp_path) -> None:
    proc = run_ctrgen("demo", "--root", str(tmp_path / "d"), "--specs", str(tmp_path / "nope"), process=True)
    assert proc.returncode == 2
    assert "--specs" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "d").exists()


def test_demo_continuous_training_writes_its_keysets() -> None:
    demo, proc = _demo("--only", "wdl_continuous_etc")
    assert proc.returncode == 0, proc.stderr
    train = demo.paths["criteo"]["train"]
    keyset = train / "_file_list.keyset"
    assert f"keysets: wrote {keyset}:" in proc.stdout
    out = demo.root / "generated" / "wdl_continuous_etc"
    assert {"model.py", "model_low_level.py"} <= {p.name for p in out.iterdir()}
    assert str(keyset) in (out / "model.py").read_text()
    lock = json.loads((demo.root / "specs" / "wdl_continuous_etc.features.lock.json").read_text())
    frame, offset, keys = read_parts(train), 0, []
    for c in lock["categorical"]:
        keys.append(frame[c["name"]].to_numpy("int64") + offset)
        offset += c["cardinality"]
    np.testing.assert_array_equal(np.fromfile(keyset, dtype="<i8"), np.unique(np.concatenate(keys)))
