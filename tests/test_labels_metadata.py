"""Labels named by the data: an imported script whose Parquet reader has label_dim 2 names no label columns, and
HugeCTR takes them from the data's _metadata.json ("labels" ordered by index, each the Parquet column at that index).
features.json says so ("name": null, "name_from": "_metadata.json") and the trainer reads the names at start-up, or
refuses in one line. The script, the data and the metadata are written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codegen.runtime.contract import FEATURES_FILE
from conftest import run_ctrgen

SCRIPT = """\
import hugectr
solver = hugectr.CreateSolver(vvgpu=[[0]], batchsize=32, batchsize_eval=32, max_eval_batches=1, lr=0.001,
                              repeat_dataset=True, i64_input_key=True)
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Parquet,
                                  source=["./data/train/_file_list.txt"], eval_source="./data/valid/_file_list.txt",
                                  check_type=hugectr.Check_t.Non, slot_size_array=[10, 20])
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam, update_type=hugectr.Update_t.Global)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=2, label_name="label", dense_dim=2, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 1, True, 2)]))
model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.LocalizedSlotSparseEmbeddingHash,
                                  workspace_size_per_gpu_in_mb=1, embedding_vec_size=4, combiner="sum",
                                  sparse_embedding_name="sparse_embedding1", bottom_name="data1", optimizer=optimizer))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["sparse_embedding1"],
                             top_names=["reshape1"], leading_dim=8))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["reshape1", "dense"],
                             top_names=["concat1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["concat1"], top_names=["fc1"],
                             num_output=2))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.MultiCrossEntropyLoss, bottom_names=["fc1", "label"],
                             top_names=["loss"], target_weight_vec=[0.5, 0.5]))
model.compile()
model.fit(max_iter=20, display=10, eval_interval=10)
"""
ROWS = 64
# The Parquet columns in file order: the labels are not first, and "like" (index 0) comes before "click" (index 3).
ORDER = ["like", "I1", "I2", "click", "C1", "C2"]
LABELS = [{"col_name": "click", "index": 3}, {"col_name": "like", "index": 0}]


def write_data(root: Path, metadata: dict | None) -> None:
    """train/ and valid/ with a _file_list.txt; "like" is 1 in 3 rows of 4, "click" in 1 of 4 (their means tell the
    columns apart); ``metadata`` (None: no file) as each folder's _metadata.json."""
    rng = np.random.default_rng(0)
    for split in ("train", "valid"):
        folder = root / "data" / split
        folder.mkdir(parents=True)
        cols = {"like": (np.arange(ROWS) % 4 != 0).astype(np.float32), "I1": rng.random(ROWS, dtype=np.float32),
                "I2": rng.random(ROWS, dtype=np.float32), "click": (np.arange(ROWS) % 4 == 0).astype(np.float32),
                "C1": rng.integers(0, 10, ROWS), "C2": rng.integers(0, 20, ROWS)}
        pq.write_table(pa.table({n: cols[n] for n in ORDER}), folder / "part_0.parquet")
        (folder / "_file_list.txt").write_text("1\npart_0.parquet\n")
        if metadata is not None:
            (folder / "_metadata.json").write_text(json.dumps(metadata))


def metadata(labels: list[dict] = LABELS, conts: tuple[str, ...] = ("I1", "I2")) -> dict:
    return {"file_stats": [{"file_name": "part_0.parquet", "num_rows": ROWS}],
            "cats": [{"col_name": "C1", "index": 4}, {"col_name": "C2", "index": 5}],
            "conts": [{"col_name": n, "index": ORDER.index(n)} for n in conts], "labels": labels}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The script imported (the torch target added) and generated once."""
    root = tmp_path_factory.mktemp("labels_meta")
    (root / "two.py").write_text(SCRIPT)
    proc = run_ctrgen("import", "two.py", "--hugectr-version", "23.06", "--out", "specs", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "targets: torch added" in proc.stdout + proc.stderr
    assert run_ctrgen("generate", "specs/two.yaml", cwd=root).returncode == 0
    return root


def train(project: Path, tmp_path: Path, meta: dict | None) -> tuple[dict, Path]:
    """Two steps of the generated train_torch.py in this process (its main, as the corpus tool runs it) on data
    under ``tmp_path``: (the corpus tool's outcome, the run folder)."""
    from codegen.pipeline import open_spec
    from codegen.train.launch import plan_launch
    from tools.corpus_trains import TRAINER_FLAGS, _run_trainer

    write_data(tmp_path, meta)
    out = tmp_path / "run"
    launch = plan_launch(open_spec(project / "specs" / "two.yaml"), project / "generated" / "two", out, ranks=1,
                         device="cpu", max_iter=2, resume=False, extra=TRAINER_FLAGS, continuous=False,
                         given=([str(tmp_path / "data" / "train")], str(tmp_path / "data" / "valid")))
    return _run_trainer(project / "generated" / "two" / "train_torch.py", launch.argv[2:], str(tmp_path),
                        tmp_path.name), out


def test_features_json_leaves_the_label_names_to_the_data(project: Path):
    doc = json.loads((project / "generated" / "two" / FEATURES_FILE).read_text())
    assert doc["ctrgen_torch_features"] == 3
    assert doc["labels"] == [{"name": None, "dtype": "float32", "name_from": "_metadata.json"}] * 2
    assert [c["name"] for c in doc["continuous"]] == ["I1", "I2"]


def test_the_trainer_names_the_labels_from_metadata_by_index(project: Path, tmp_path: Path):
    result, out = train(project, tmp_path, metadata())
    assert result["status"] == "trained", result
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["labels_from_metadata"] == {"names": ["like", "click"], "from": "_metadata.json"}
    # the first label_dim column of the label tensor is the lowest index's: "like" (3 rows of 4), then "click"
    assert metrics["data"]["train_label_mean"] == {"like": 0.75, "click": 0.25}
    assert set(metrics["auc_per_label"]) == {"like", "click"}      # AUC per label, by the columns' names
    trained = json.loads((out / FEATURES_FILE).read_text())
    assert [c["name"] for c in trained["labels"]] == ["like", "click"]


@pytest.mark.parametrize("meta, needle", [
    (None, "_metadata.json: missing; the script's Parquet reader takes its 2 label columns (label_dim 2)"),
    (metadata(labels=LABELS[:1]), "_metadata.json: \"labels\" lists 1 column(s), the script's label_dim is 2"),
    (metadata(conts=("I1",)), "_metadata.json: \"conts\" by index are ['I1'], the script's 2 continuous columns "
                              "(dense_dim 2) are ['I1', 'I2']"),
    (metadata(labels=[{"col_name": "click", "index": 1}, LABELS[1]]),
     "_metadata.json: label column 'click' has index 1, but in "),
], ids=["absent", "label-dim", "dense-dim", "index"])
def test_missing_or_disagreeing_metadata_is_one_line(project: Path, tmp_path: Path, meta, needle):
    result, out = train(project, tmp_path, meta)
    assert result["status"] == "refused", result       # exit 2 with exactly one error: line
    assert needle in result["message"] and "(fix: " in result["message"], result["message"]
    assert not out.exists()


def test_the_corpus_tool_data_has_the_metadata_the_trainer_reads():
    """tools/corpus_trains.py writes each data folder's _metadata.json as HugeCTR's readers expect, so a unit whose
    labels the data names trains there."""
    from tools.corpus_trains import train_unit

    result = train_unit(SCRIPT, "23.06", None, name="two")
    assert result["status"] == "trained", result
