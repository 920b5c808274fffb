"""Slots of size 0 in a Parquet reader's slot_size_array (DIN's behaviour sequences): HugeCTR offsets each slot's ids
by the exclusive prefix sum of slot_size_array (add_input.cpp, v23.06.01), so a slot of size 0 has the offset of the
next slot and its ids are that slot's keys. The torch target gives it cardinality 0 and "shares" in features.json:
one table, the same rows; its ids are checked against the shared slot's rows; a run of them ending its input shares the
rows of its last slot, counted from the data (largest id of the run + 1)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from conftest import run_ctrgen
from test_rows_from_data import SCRIPT

SHARED = SCRIPT.replace("check_type=hugectr.Check_t.Non)", "check_type=hugectr.Check_t.Non, slot_size_array=SIZES)")


def _import(tmp_path: Path, sizes: str) -> tuple[Path, object]:
    (tmp_path / "shared.py").write_text(SHARED.replace("SIZES", sizes))
    proc = run_ctrgen("import", "shared.py", "--hugectr-version", "23.06", "--out", "specs", cwd=tmp_path)
    return tmp_path / "specs" / "shared.yaml", proc


def test_a_slot_of_size_0_shares_the_rows_of_the_next_slot(tmp_path: Path):
    from codegen.pipeline import open_spec, render_spec
    from codegen.runtime.contract import FEATURES_FILE

    spec, proc = _import(tmp_path, "[0, 7, 5]")
    assert proc.returncode == 0, proc.stderr
    assert "targets: [hugectr, torch]" in spec.read_text()
    files = render_spec(open_spec(spec)).files
    (sparse,) = json.loads(files[Path(FEATURES_FILE)])["sparse"]
    assert [(c["name"], c["cardinality"], c.get("shares")) for c in sparse["columns"]] == \
        [("C1", 0, "C2"), ("C2", 7, None), ("C3", 5, None)]
    assert "slot_size_array=[0, 7, 5]" in files[Path("model.py")].replace("\n", "").replace("  ", "")


def test_a_column_without_a_cardinality_shares_rows_only_in_an_imported_scripts_features(tmp_path: Path):
    """Only an imported script's features have slots of size 0 (its reader's slot_size_array says so); the same
    columns from any other source (a dataset schema: a lock or a workflow refuses them earlier) stay a refusal naming
    the column (most often one the workflow did not Categorify), not a slot silently sharing the next one's rows."""
    import dataclasses

    from codegen.errors import UserError
    from codegen.lock import load_features
    from codegen.model.build import build_model
    from codegen.specfile.context import open_spec

    spec, proc = _import(tmp_path, "[0, 7, 5]")
    assert proc.returncode == 0, proc.stderr
    ctx = open_spec(spec)
    features, lock_text = load_features(ctx, check_stale=False)
    assert features.source_kind == "imported"
    build_model(ctx, features, lock_text)                  # imported: C1 shares C2's rows
    with pytest.raises(UserError) as info:
        build_model(ctx, dataclasses.replace(features, source_kind="schema.json"), lock_text)
    assert "column 'C1' has no cardinality in the workflow schema" in info.value.format()


def test_the_table_offsets_are_hugectr_s_prefix_sums():
    import torch

    from codegen.runtime.layers import SparseEmbedding

    table = SparseEmbedding([0, 7, 5], 4, "sum")
    assert table.slot_offsets.tolist() == [0, 0, 7]
    ids = torch.tensor([[[3], [3], [3]]])                      # (batch, slots, nnz)
    out = table(ids)
    assert torch.equal(out[0, 0], out[0, 1]) and not torch.equal(out[0, 1], out[0, 2])


def test_its_ids_are_checked_against_the_shared_slot(tmp_path: Path):
    from codegen.runtime.data import table_arrays
    from codegen.runtime.errors import DataError

    features = {"labels": [{"name": "label"}], "continuous": [],
                "sparse": [{"input": "d", "nnz": 1, "columns": [
                    {"name": "C1", "cardinality": 0, "shares": "C2", "multi_hot": False, "nnz": 1},
                    {"name": "C2", "cardinality": 7, "multi_hot": False, "nnz": 1}]}]}
    ok = pa.table({"label": np.zeros(2, np.float32), "C1": [6, 0], "C2": [1, 2]})
    assert table_arrays(ok, features, tmp_path / "f.parquet")[2][:, :, 0].tolist() == [[6, 1], [0, 2]]
    bad = pa.table({"label": np.zeros(2, np.float32), "C1": [7, 0], "C2": [1, 2]})
    with pytest.raises(DataError, match=r"column 'C1': id 7 is outside \[0, 7\) \(the cardinality of column 'C2', "
                                        r"whose rows this slot of size 0 shares\)"):
        table_arrays(bad, features, tmp_path / "f.parquet")


def test_slots_of_size_0_ending_their_input_share_rows_counted_from_the_data(tmp_path: Path):
    """BST's behaviour sequences: no size counts the run's rows (HugeCTR hashes their keys into its workspace-sized
    table), so its last slot's rows come from the data, the largest id of every slot of the run + 1."""
    import pyarrow.parquet as pq

    from codegen.pipeline import open_spec, render_spec
    from codegen.runtime.contract import FEATURES_FILE
    from codegen.runtime.row_counts import size_from_data

    spec, proc = _import(tmp_path, "[7, 0, 0]")
    assert proc.returncode == 0, proc.stderr
    assert "targets: [hugectr, torch]" in spec.read_text()
    features = json.loads(render_spec(open_spec(spec)).files[Path(FEATURES_FILE)])
    assert features["ctrgen_torch_features"] == 2
    (sparse,) = features["sparse"]
    assert [(c["name"], c["cardinality"], c.get("shares"), c.get("rows_from"), c.get("shared_by"))
            for c in sparse["columns"]] == [("C1", 7, None, None, None), ("C2", 0, "C3", None, None),
                                            ("C3", None, None, "data", ["C2"])]
    file = tmp_path / "part.parquet"
    pq.write_table(pa.table({"C1": [1, 6], "C2": [9, 0], "C3": [4, 2]}), file)
    report = size_from_data(features, [file])
    assert [c["cardinality"] for c in sparse["columns"]] == [7, 0, 10]          # C2's largest id 9 counts
    assert report["C3"]["rows"] == 10 and report["C3"]["largest_id"] == 9 and report["C3"]["shared_by"] == ["C2"]
