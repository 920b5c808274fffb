"""The stand-in accepts NVIDIA's own HugeCTR code and reproduces NVIDIA's printed output.

The seed scripts are cut, unchanged, out of the seed documents at test time and run at the release each was
written for (the reference tier: they need the upstream reference folder, CTRGEN_REFERENCE); summaries are compared
with the model.summary() tables NVIDIA's notebooks printed (tests/facts/summaries.json), and graph JSON with the
graph HugeCTR 23.06 writes for NVIDIA's DCN sample (tests/facts/graph_json.json; docs/hugectr_facts.md). None of
this goes through ctrgen, so it checks the stand-in itself.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hugectr_run import calls_named, run_with_standin, summary_block
from upstream import printed_summary, reference_dcn_json, reference_dir
from upstream import summary_as_printed_without_log as fixture_block

REPO = Path(__file__).resolve().parents[1]


def seeds_dir() -> Path:
    """The seed documents as delivered (reference tier only)."""
    return reference_dir() / "seeds"


def writefile_cell(text: str, name: str) -> str:
    """The body of a `%%writefile NAME` notebook cell in a plain-text seed rendering."""
    m = re.search(rf"^%%writefile {re.escape(name)}\n(.*?)^\nOverwriting {re.escape(name)}$", text, re.M | re.S)
    assert m, f"no %%writefile {name} cell"
    return m.group(1)


def seed000_model_py() -> str:
    md = (seeds_dir() / "000_9f50e44cd6b11148.txt.md").read_text(encoding="utf-8")
    m = re.search(r"```python\n%%writefile './model.py'\n(.*?)```", md, re.S)
    return m.group(1)


def seed002_model_py() -> str:
    """Seed 002's training cell (whitespace flattened by the rendering; valid Python as all of it is bracketed), with
    the notebook's own INPUT_DATA_DIR / MODEL_DIR definitions from earlier cells."""
    text = (seeds_dir() / "002_be9c0ebb18f0a0d8.txt").read_text(encoding="utf-8")
    data_dir = re.search(r"^INPUT_DATA_DIR = os\.environ\.get\(\n.*?\n\)\n", text, re.M | re.S).group(0)
    model_dir = re.search(r"^MODEL_DIR = .*\n", text, re.M).group(0)
    body = re.search(r"^import hugectr\nfrom mpi4py import MPI.*?^model\.graph_to_json\(.*?\)\n", text,
                     re.M | re.S).group(0)
    return "import os\n" + data_dir + model_dir + body


def _json_written(result, root: Path, cwd: Path) -> bytes:
    (call,) = calls_named(result, "Model.graph_to_json")
    p = Path(call["kwargs"].get("graph_config_file") or call["args"][0])
    return (root / p.relative_to(p.anchor) if p.is_absolute() else cwd / p).read_bytes()


def _run(tmp_path: Path, code: str, version: str, name: str = "model.py", *, data: bool = False, env=None):
    script = tmp_path / name
    script.write_text(code, encoding="utf-8")
    full = {"CTRGEN_STANDIN_ROOT": str(tmp_path / "root"), **(env or {})}
    if not data:
        full["CTRGEN_STANDIN_SKIP_DATA"] = "1"
    result = run_with_standin(script, version, cwd=tmp_path, env=full)
    assert not result.real
    return result


@pytest.mark.reference
def test_seed000_movielens_notebook(tmp_path: Path):
    """NVTabular's MovieLens notebook (HugeCTR 3.1 printed it; 3.2 is the oldest release ctrgen targets)."""
    result = _run(tmp_path, seed000_model_py(), "3.2")
    assert result.returncode == 0, result.stderr
    assert result.stdout == fixture_block("seed000_movielens_summary.txt", "cell 56")
    # ctrgen's movielens spec reproduces this notebook: the same JSON bytes (3.2 and 3.3 write MovieLens alike).
    assert _json_written(result, tmp_path / "root", tmp_path) == \
        (REPO / "generated" / "movielens" / "movielens.json").read_bytes()


@pytest.mark.reference
def test_seed002_movielens_multihot_notebook(tmp_path: Path):
    result = _run(tmp_path, seed002_model_py(), "3.3", env={"INPUT_DATA_DIR": "/nvt/data/"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == fixture_block("nvt_v1.0.0_movielens_summary.txt", "cell 27")
    flattened = fixture_block("seed002_movielens_genres_summary_flattened.txt", "seed 002 text lines 262-285")
    assert " ".join(result.stdout.split()) == " ".join(flattened.split())
    assert calls_named(result, "Model.graph_to_json")[0]["kwargs"] == {
        "graph_config_file": "/nvt/data/model/movielens_hugectr/1/movielens.json"}
    assert _json_written(result, tmp_path / "root", tmp_path) == \
        (REPO / "generated" / "movielens_genres" / "movielens_genres.json").read_bytes()


def _wdl_data(cwd: Path, files: range = range(6)) -> None:
    """The continuous-training notebook's wdl_data/: file lists (count, then paths) and keyset files."""
    d = cwd / "wdl_data"
    d.mkdir(exist_ok=True)
    for i in files:
        (d / f"part_{i}.data").write_bytes(b"")
        (d / f"file_list.{i}.txt").write_text(f"1\nwdl_data/part_{i}.data\n")
        (d / f"file_list.{i}.keyset").write_bytes(b"\0" * 8)


def seed003_text() -> str:
    return (seeds_dir() / "003_de98dc70060c05b1.txt").read_text(encoding="utf-8")


@pytest.mark.reference
def test_seed003_continuous_training_mos(tmp_path: Path):
    """HugeCTR 3.2's model oversubscriber, high-level (fit, set_source, incremental model) then low-level API."""
    text = seed003_text()
    _wdl_data(tmp_path)
    high = _run(tmp_path, writefile_cell(text, "wdl_train.py"), "3.2", "wdl_train.py", data=True)
    assert high.returncode == 0, high.stderr
    assert len(calls_named(high, "Model.fit")) == 2
    assert calls_named(high, "Model.set_source")[0]["kwargs"]["keyset"] == [
        "wdl_data/file_list.3.keyset", "wdl_data/file_list.4.keyset"]
    assert calls_named(high, "hugectr.CreateMOS")[0]["kwargs"]["train_from_scratch"] is True
    # save_params_to_files("wdl_mos"): hugectr.md §5 names; the dense file has 4 bytes per weight of the WDL MLP.
    dense = tmp_path / "wdl_mos_dense_0.model"
    assert dense.stat().st_size == 4 * (429 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 + 1)
    # with the MOS the sparse models are dumped to its dest_sparse_models, not to <prefix><i>_sparse_<iter>.model
    assert (tmp_path / "wdl_0_sparse_model" / "key").is_file() and (tmp_path / "wdl_1_sparse_model").is_dir()
    assert not (tmp_path / "wdl_mos0_sparse_0.model").exists()
    assert (tmp_path / "wdl.json").read_text().startswith("{\n  \"layers\": [")

    low = _run(tmp_path, writefile_cell(text, "wdl_mos.py"), "3.2", "wdl_mos.py", data=True)
    assert low.returncode == 0, low.stderr
    updates = calls_named(low, "ModelOversubscriber.update")
    assert [c["args"] for c in updates] == [[f"wdl_data/file_list.{i}.keyset"] for i in (0, 1, 3, 4)]
    # Each source yields CTRGEN_STANDIN_BATCHES (3) batches, then train() returns False once.
    assert len(calls_named(low, "Model.train")) == 4 * (3 + 1)
    assert "trained with data in wdl_data/file_list.4.txt" in low.stdout


@pytest.mark.reference
def test_seed003_missing_keyset_fails_where_hugectr_reads_it(tmp_path: Path):
    text = seed003_text()
    _wdl_data(tmp_path)
    (tmp_path / "wdl_data" / "file_list.1.keyset").unlink()
    result = _run(tmp_path, writefile_cell(text, "wdl_train.py"), "3.2", "wdl_train.py", data=True)
    assert result.returncode != 0
    assert "keyset file 'wdl_data/file_list.1.keyset' does not exist" in result.stderr
    assert calls_named(result, "Model.fit") and not calls_named(result, "Model.set_source")


@pytest.mark.reference
def test_seed003_on_a_release_without_the_oversubscriber(tmp_path: Path):
    """CreateMOS left with 3.2: at 3.3 the script fails with a message naming the releases that have it."""
    result = _run(tmp_path, writefile_cell(seed003_text(), "wdl_train.py"), "3.3")
    assert result.returncode != 0
    assert "hugectr.CreateMOS does not exist in HugeCTR 3.3" in result.stderr
    assert "HugeCTR 3.2 up to (not including) 3.3" in result.stderr


@pytest.mark.reference
def test_seed003_graph_with_etc_matches_the_4x_notebook_summary(tmp_path: Path):
    """The same WDL with the embedding training cache that replaced the MOS (as NVIDIA's later notebook does) prints,
    at 4.3, the summary NVIDIA's continuous-training notebook printed (HugeCTR 4.1)."""
    code = writefile_cell(seed003_text(), "wdl_train.py")
    code, n = re.subn(r"^mos = hugectr\.CreateMOS\(.*\)$",
                      'mos = hugectr.CreateETC(ps_types = [hugectr.TrainPSType_t.Staged, hugectr.TrainPSType_t.Staged],'
                      ' sparse_models = ["./wdl_0_sparse_model", "./wdl_1_sparse_model"])', code, flags=re.M)
    assert n == 1
    code = code[:code.index("model.summary()\n") + len("model.summary()\n")]
    result = _run(tmp_path, code, "4.3")
    assert result.returncode == 0, result.stderr
    assert result.stdout == fixture_block("hugectr_v23.08_continuous_training_summary.txt", "cell 7")


# ---- the DCN of NVIDIA's samples/dcn/dcn.py (graph JSON: tests/facts/graph_json.json) ------------------------------------------------
DCN = """\
import hugectr
solver = hugectr.CreateSolver(batchsize={batch}, vvgpu={vvgpu}, repeat_dataset=True{extra})
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam, update_type=hugectr.Update_t.Global,
                                    beta1=0.9, beta2=0.999, epsilon=0.0000001)
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm,
                                  source=["./dcn_data/file_list.txt"], eval_source="./dcn_data/file_list_test.txt",
                                  check_type=hugectr.Check_t.Sum)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=13, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 2, False, 26)]))
model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                  workspace_size_per_gpu_in_mb=69, embedding_vec_size=16, combiner="sum",
                                  sparse_embedding_name="sparse_embedding1", bottom_name="data1",
                                  optimizer=optimizer))
L = hugectr.Layer_t
def dense(t, bottoms, tops, **kw):
    model.add(hugectr.DenseLayer(layer_type=t, bottom_names=bottoms, top_names=tops, **kw))
dense(L.Reshape, ["sparse_embedding1"], ["reshape1"], leading_dim=416)
dense(L.Concat, ["reshape1", "dense"], ["concat1"])
dense(L.MultiCross, ["concat1"], ["multicross1"], num_layers=6)
dense(L.InnerProduct, ["concat1"], ["fc1"], num_output=1024)
dense(L.ReLU, ["fc1"], ["relu1"])
dense(L.Dropout, ["relu1"], ["dropout1"], dropout_rate=0.5)
dense(L.InnerProduct, ["dropout1"], ["fc2"], num_output=1024)
dense(L.ReLU, ["fc2"], ["relu2"])
dense(L.Dropout, ["relu2"], ["dropout2"], dropout_rate=0.5)
dense(L.Concat, ["dropout2", "multicross1"], ["concat2"])
dense(L.InnerProduct, ["concat2"], ["fc3"], num_output=1)
dense(L.BinaryCrossEntropyLoss, ["fc3", "label"], ["loss"])
model.compile()
model.summary()
model.graph_to_json(graph_config_file="dcn.json")
"""


def test_dcn_json_is_the_reference_example(tmp_path: Path):
    result = _run(tmp_path, DCN.format(batch=4096, vvgpu=[[0, 1, 2, 3]], extra=""), "23.06")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "dcn.json").read_text(encoding="utf-8") == reference_dcn_json()


@pytest.mark.parametrize("version", ["3.3", "4.3"])
def test_dcn_json_variants_of_the_reference(tmp_path: Path, version: str):
    """§2.11 variants: v3.3-v3.5 drop Concat "axis"; v3.2-v3.4 use the older vocabulary formula (4521984 on 4
    GPUs); model_name adds a top-level key (3.3+). 4.3 writes as 23.06."""
    result = _run(tmp_path, DCN.format(batch=4096, vvgpu=[[0, 1, 2, 3]], extra=', model_name="dcn"'), version)
    assert result.returncode == 0, result.stderr
    expected = json.loads(reference_dcn_json())
    if version == "3.3":
        for layer in expected["layers"]:
            layer.pop("axis", None) if layer["type"] == "Concat" else None
        expected["layers"][1]["sparse_embedding_hparam"]["max_vocabulary_size_global"] = 4521984
    expected["model_name"] = "dcn"
    assert (tmp_path / "dcn.json").read_text(encoding="utf-8") == json.dumps(expected, indent=2, sort_keys=True)


def test_dcn_summary_is_the_4x_notebook_summary(tmp_path: Path):
    """NVIDIA's hugectr_criteo notebook (HugeCTR 4.1, batch 4096 on one GPU), auto-Slice rows included."""
    result = _run(tmp_path, DCN.format(batch=4096, vvgpu=[[0]], extra=""), "4.3")
    assert result.returncode == 0, result.stderr
    assert result.stdout == fixture_block("hugectr_v4.3.1_criteo_dcn_wdl_summary.txt", "cell 8")


def test_dcn_on_32_needs_an_explicit_slice(tmp_path: Path):
    """3.2 has no graph_analysis(): concat1 feeding two layers is refused (hugectr.md §2.7)."""
    result = _run(tmp_path, DCN.format(batch=4096, vvgpu=[[0]], extra=""), "3.2")
    assert result.returncode != 0
    assert "concat1 feeds several dense layers" in result.stderr


@pytest.mark.reference
@pytest.mark.parametrize("version", ["3.3", "4.3", "23.06"])
def test_seed003_with_the_embedding_training_cache(tmp_path: Path, version: str):
    """Seed 003 on the releases of the embedding training cache: CreateMOS -> CreateETC (as NVIDIA's later notebook),
    get_model_oversubscriber -> get_embedding_training_cache; everything else unchanged, data files present."""
    text = seed003_text()
    etc = ('mos = hugectr.CreateETC(ps_types = [hugectr.TrainPSType_t.Staged, hugectr.TrainPSType_t.Cached], '
           'sparse_models = ["./wdl_0_sparse_model", "./wdl_1_sparse_model"], local_paths = ["./"], '
           'hmem_cache_configs = [hugectr.CreateHMemCache(num_blocks = 2, target_hit_rate = 0.5, max_num_evict = 0)])')
    _wdl_data(tmp_path)
    for name in ("wdl_train.py", "wdl_mos.py"):
        code = re.sub(r"^mos = hugectr\.CreateMOS\(.*\)$", etc, writefile_cell(text, name), flags=re.M)
        code = code.replace("model.get_model_oversubscriber()", "model.get_embedding_training_cache()")
        result = _run(tmp_path, code, version, name, data=True)
        assert result.returncode == 0, result.stderr
        assert calls_named(result, "hugectr.CreateHMemCache")[0]["kwargs"]["target_hit_rate"] == 0.5
    assert len(calls_named(result, "EmbeddingTrainingCache.update")) == 4
    assert len(calls_named(result, "Model.train")) == 16


def test_summary_block_reads_a_real_hugectr_log():
    """summary_block (used on a real HugeCTR's stdout) recovers the table from NVIDIA's printed output."""
    table = printed_summary("hugectr_v23.08_continuous_training_summary.txt", "cell 7")
    stdout = ("[HCTR][08:03:33.001][INFO][RK0][main]: Graph analysis to resolve tensor dependency\n" + table
              + "\n[HCTR][08:03:33.900][INFO][RK0][main]: Save the model graph to wdl.json successfully\n")
    assert summary_block(stdout) == fixture_block("hugectr_v23.08_continuous_training_summary.txt", "cell 7")
