"""Row counts from the data: a HugeCTR script whose tables are sized by workspace_size_per_gpu_in_mb (no
slot_size_array) imports with the torch target, generates features.json slots "rows_from": "data", and
`ctrgen train` sizes them from one scan of the data (largest id + 1), or refuses ids beyond HugeCTR's capacity.
The script and data are written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codegen.runtime.contract import FEATURES_FILE
from codegen.runtime.errors import DataError
from conftest import REPO, run_ctrgen

SCRIPT = """\
import hugectr
solver = hugectr.CreateSolver(vvgpu=[[0]], batchsize=64, batchsize_eval=64, max_eval_batches=2, lr=0.001,
                              repeat_dataset=True, i64_input_key=True)
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Parquet,
                                  source=["./data/train/_file_list.txt"], eval_source="./data/valid/_file_list.txt",
                                  check_type=hugectr.Check_t.Non)
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam, update_type=hugectr.Update_t.Global)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=2, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 1, True, 3)]))
model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                  workspace_size_per_gpu_in_mb=1, embedding_vec_size=4, combiner="sum",
                                  sparse_embedding_name="sparse_embedding1", bottom_name="data1", optimizer=optimizer))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["sparse_embedding1"],
                             top_names=["reshape1"], leading_dim=12))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["reshape1", "dense"],
                             top_names=["concat1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["concat1"], top_names=["fc1"],
                             num_output=8))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["fc1"], top_names=["relu1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["relu1"], top_names=["fc2"],
                             num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc2", "label"],
                             top_names=["loss"]))
model.compile()
model.fit(max_iter=20, display=10, eval_interval=10)
"""
# Adam keeps two state copies from 23.06 (hugectr.md §2.8): 1 MiB // ((1 + 2) * 4 bytes * 4) rows on one GPU.
CAPACITY = 1024 * 1024 // (3 * 4 * 4)


def write_data(root: Path, big_id: int | None = None) -> None:
    """Train and valid splits as NVTabular writes them (a _file_list.txt of relative names): C1 < 50, C2 < 300 and
    C3 < 7 (its largest id 6 only in valid), ``big_id`` as one C2 id of train."""
    rng = np.random.default_rng(0)
    for split, n in (("train", 512), ("valid", 128)):
        folder = root / "data" / split
        folder.mkdir(parents=True, exist_ok=True)
        c1, c2, c3 = rng.integers(0, 50, n), rng.integers(0, 300, n), rng.integers(0, 6, n)
        c1[0], c2[0] = 49, 299
        if split == "valid":
            c3[0] = 6
        elif big_id is not None:
            c2[5] = big_id
        table = pa.table({"label": (c1 % 2).astype(np.float32), "I1": rng.random(n, dtype=np.float32),
                          "I2": rng.random(n, dtype=np.float32), "C1": c1, "C2": c2, "C3": c3})
        pq.write_table(table, folder / "part_0.parquet")
        (folder / "_file_list.txt").write_text("1\npart_0.parquet\n")


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    (tmp_path / "ws.py").write_text(SCRIPT)
    proc = run_ctrgen("import", "ws.py", "--hugectr-version", "23.06", "--out", "specs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "targets: torch added" in proc.stdout + proc.stderr
    return tmp_path / "specs" / "ws.yaml"


def test_the_rendered_features_json_sizes_workspace_tables_from_the_data(imported: Path):
    from codegen.pipeline import open_spec, render_spec

    files = render_spec(open_spec(imported)).files
    doc = json.loads(files[Path(FEATURES_FILE)])
    assert doc["ctrgen_torch_features"] == 2
    (sparse,) = doc["sparse"]
    assert [(c["name"], c["cardinality"], c["rows_from"]) for c in sparse["columns"]] == \
        [("C1", None, "data"), ("C2", None, "data"), ("C3", None, "data")]
    assert sparse["hugectr_tables"] == [{"name": "sparse_embedding1", "max_vocabulary_size": CAPACITY,
                                         "workspace_size_per_gpu_in_mb": 1, "gpus": 1}]


def test_locked_cardinalities_keep_format_1():
    features = json.loads((REPO / "generated" / "movielens" / FEATURES_FILE).read_text())
    assert features["ctrgen_torch_features"] == 1
    assert all("rows_from" not in c for s in features["sparse"] for c in s["columns"])


@pytest.mark.slow
def test_import_then_train_sizes_the_tables_from_the_data(imported: Path, capfd):
    """`ctrgen import` then `ctrgen train` (in this process; the trainer is its real child process, its stdout this
    process's fd 1), the trainer scanning the data."""
    root = imported.parents[1]
    write_data(root)
    out = root / "run"
    capfd.readouterr()
    proc = run_ctrgen("train", str(imported), "--device", "cpu", "--max-iter", "10", "--out", str(out),
                      "--", "--display", "5", "--eval-interval", "10", "--no-tensorboard", "--threads", "1", cwd=root)
    trainer_out = capfd.readouterr().out
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"generated {root / 'generated' / 'ws'}" in proc.stderr
    assert "rows from the data (largest id + 1): C1 50, C2 300, C3 7" in trainer_out + proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert {n: (r["rows"], r["largest_id"]) for n, r in metrics["rows_from_data"].items()} == \
        {"C1": (50, 49), "C2": (300, 299), "C3": (7, 6)}
    assert metrics["rows_from_data"]["C2"]["hugectr_max_vocabulary_size"] == {"sparse_embedding1": CAPACITY}
    trained = json.loads((out / FEATURES_FILE).read_text())
    assert [(c["cardinality"], c["rows_from"]) for c in trained["sparse"][0]["columns"]] == \
        [(50, "data"), (300, "data"), (7, "data")]


def test_an_id_beyond_hugectr_capacity_is_refused_not_wrapped(imported: Path, monkeypatch):
    """The trainer's refusal, run as `ctrgen train` plans it (forked from the warm Python; that `ctrgen train` passes a
    trainer's one line on is tests/test_train_command.py's)."""
    import os
    import sys

    import warm_python

    from codegen.pipeline import open_spec, render_spec
    from codegen.train.launch import plan_launch

    root = imported.parents[1]
    write_data(root, big_id=CAPACITY)
    out = root / "run"
    monkeypatch.chdir(root)                 # the spec's data paths are relative, as `ctrgen train` from root reads them
    ctx = open_spec(imported)
    folder = root / "generated" / "ws"
    assert run_ctrgen("generate", str(imported), cwd=root).returncode == 0
    argv = plan_launch(ctx, folder, out, ranks=1, device="cpu", max_iter=10, resume=False, extra=(),
                       continuous=render_spec(ctx).job.continuous is not None).argv
    assert argv[:2] == [sys.executable, str(folder / "train_torch.py")]
    proc = warm_python.run(argv, cwd=root, env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"},
                           timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: column 'C2': largest id {CAPACITY} needs {CAPACITY + 1} rows of table "
                      f"'sparse_embedding1' ({CAPACITY + 51} with the slots before it), more than HugeCTR's "
                      f"{CAPACITY} (max_vocabulary_size from workspace_size_per_gpu_in_mb 1 on 1 GPU(s)) (fix: a "
                      "larger workspace_size_per_gpu_in_mb, or slot_size_array with the cardinalities)"]
    assert not out.exists()


def _features(columns: list[dict], capacity: int) -> dict:
    return {"sparse": [{"input": "data1", "nnz": 2, "columns": columns,
                        "hugectr_tables": [{"name": "t", "max_vocabulary_size": capacity,
                                            "workspace_size_per_gpu_in_mb": 1, "gpus": 1}]}]}


def test_the_scan_reads_lists_and_checks_the_whole_table(tmp_path: Path):
    from codegen.runtime.row_counts import size_from_data

    file = tmp_path / "part.parquet"
    pq.write_table(pa.table({"A": pa.array([[0, 9], [3], []], pa.list_(pa.int64())), "B": [1, 2, 4]}), file)
    cols = [{"name": "A", "cardinality": None, "rows_from": "data", "multi_hot": True, "nnz": 2},
            {"name": "B", "cardinality": 8, "multi_hot": False, "nnz": 1}]
    features = _features([dict(c) for c in cols], capacity=18)
    report = size_from_data(features, [file])
    assert [c["cardinality"] for c in features["sparse"][0]["columns"]] == [10, 8]
    assert report == {"A": {"rows": 10, "largest_id": 9, "from": "largest id + 1 in the training and evaluation data",
                            "hugectr_max_vocabulary_size": {"t": 18}}}
    with pytest.raises(DataError, match=r"column 'B': cardinality 8 needs as many rows of table 't' \(18 with the slots "
                                        r"before it\), more than HugeCTR's 17"):
        size_from_data(_features([dict(c) for c in cols], capacity=17), [file])
