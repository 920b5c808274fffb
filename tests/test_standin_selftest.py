"""The stand-in is strict the way the real module is: each wrong call raises with a clear message naming the
argument and the release (and where the thing exists), and it records calls in the documented format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hugectr_run import STANDIN, calls_named, run_with_standin

PRELUDE = """\
import hugectr
solver = hugectr.CreateSolver(batchsize=1024, vvgpu=[[0]], repeat_dataset={repeat})
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam)
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Parquet, source=["train/_file_list.txt"],
                                  eval_source="valid/_file_list.txt", check_type=hugectr.Check_t.Non)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=13, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 1, True, 26)]))
model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                  workspace_size_per_gpu_in_mb=10, embedding_vec_size=16, combiner="sum",
                                  sparse_embedding_name="emb", bottom_name="data1"))
L = hugectr.Layer_t
def dense(t, bottoms, tops, **kw):
    model.add(hugectr.DenseLayer(layer_type=t, bottom_names=bottoms, top_names=tops, **kw))
"""
# the rest of a small valid graph (emb -> reshape -> concat with dense -> fc -> loss)
GRAPH = """\
dense(L.Reshape, ["emb"], ["r1"], leading_dim=416)
dense(L.Concat, ["r1", "dense"], ["c1"])
dense(L.InnerProduct, ["c1"], ["fc1"], num_output=1)
dense(L.BinaryCrossEntropyLoss, ["fc1", "label"], ["loss"])
"""


def run(tmp_path: Path, version: str, code: str, *, prelude: bool = True, repeat: bool = True):
    script = tmp_path / "snippet.py"
    script.write_text((PRELUDE.format(repeat=repeat) if prelude else "") + code, encoding="utf-8")
    result = run_with_standin(script, version, cwd=tmp_path, env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert not result.real
    return result


REJECTED = [
    # signatures: unknown keyword, keyword of another release, missing required, wrong type, too many positionals
    ("23.06", "hugectr.CreateSolver(batch_size=1024)",
     "CreateSolver() got an unexpected keyword argument 'batch_size' in HugeCTR 23.06; arguments: model_name"),
    ("3.2", 'hugectr.CreateSolver(model_name="m")',
     "CreateSolver() got an unexpected keyword argument 'model_name': HugeCTR 3.2 does not have it (it exists in "
     "HugeCTR 3.3 and later)"),
    ("4.3", "hugectr.CreateSolver(training_callbacks=[])", "(it exists in HugeCTR 23.06 and later)"),
    ("23.06", "hugectr.CreateSolver(is_dlrm=True)",
     "(it exists in HugeCTR 3.2 up to (not including) 3.8)"),
    ("23.06", "hugectr.CreateOptimizer(hugectr.Optimizer_t.Adam, beta=0.5)", None),  # v23.04+ has beta: accepted
    ("4.3", "hugectr.CreateOptimizer(beta=0.5)", "(it exists in HugeCTR 23.04 and later)"),
    ("3.3", 'hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash, '
            'embedding_vec_size=16, combiner="sum", sparse_embedding_name="e2", bottom_name="data1")',
     "SparseEmbedding() missing required argument 'workspace_size_per_gpu_in_mb' (HugeCTR 3.3)"),
    ("23.06", 'hugectr.DataReaderSparseParam("d", 1, True)',
     "DataReaderSparseParam() missing required argument 'slot_num'"),
    ("23.06", 'dense("InnerProduct", ["emb"], ["x"])',
     "DenseLayer(): argument 'layer_type' must be a hugectr.Layer_t member, got str 'InnerProduct'"),
    ("23.06", 'dense(L.InnerProduct, ["emb"], ["x"], num_output=1.5)',
     "DenseLayer(): argument 'num_output' must be int, got float 1.5"),
    ("23.06", 'dense(L.Reshape, "emb", ["x"], leading_dim=16)',
     "argument 'bottom_names' must be list[str]"),
    ("23.06", "hugectr.Model(solver, reader, optimizer, None, 1)",
     "Model() takes at most 4 positional arguments in HugeCTR 23.06 (5 given)"),
    ("23.06", "hugectr.Model(solver, reader, optimizer, mos_params=None)",
     "Model() got an unexpected keyword argument 'mos_params': HugeCTR 23.06 does not have it (it exists in "
     "HugeCTR 3.2 up to (not including) 3.3)"),
    ("4.3", 'dense(L.InnerProduct, ["emb"], ["x"], dense_layer_switches=None, compute_config=None)',
     "'compute_config': HugeCTR 4.3 does not have it (it exists in HugeCTR 23.04 and later)"),
    # enum members and functions by release
    ("3.3", "hugectr.Layer_t.MLP", "hugectr.Layer_t.MLP does not exist in HugeCTR 3.3 (it exists in HugeCTR 4.2 and "
                                   "later)"),
    ("4.3", "hugectr.Layer_t.DotProduct", "(it exists in HugeCTR 3.2 up to (not including) 3.5)"),
    ("3.3", "hugectr.Optimizer_t.Ftrl", "hugectr.Optimizer_t.Ftrl does not exist in HugeCTR 3.3"),
    ("4.3", "hugectr.Layer_t.Select", "(it exists in HugeCTR 23.08 and later)"),
    ("23.06", "hugectr.Layer_t.Dense", "hugectr.Layer_t has no member 'Dense' in HugeCTR 23.06; members: BatchNorm"),
    ("3.2", "hugectr.CreateETC", "hugectr.CreateETC does not exist in HugeCTR 3.2 (it exists in HugeCTR 3.3 up to"),
    ("3.2", "hugectr.TrainPSType_t", "hugectr.TrainPSType_t does not exist in HugeCTR 3.2"),
    ("23.06", "hugectr.CreateMOS", "hugectr.CreateMOS does not exist in HugeCTR 23.06"),
    ("23.06", "hugectr.InferenceSessionX", "module 'hugectr' has no attribute 'InferenceSessionX'"),
    # low-level API signatures by release (hugectr.md §1.9)
    ("23.06", GRAPH + "model.compile()\nmodel.train(is_first_batch=True)",
     "train() got an unexpected keyword argument 'is_first_batch': HugeCTR 23.06 does not have it"),
    ("3.2", GRAPH + "model.compile()\nmodel.train(True)", "train() takes at most 0 positional arguments"),
    ("4.3", GRAPH + "model.compile()\nmodel.start_data_reading()\nmodel.train(is_first_batch=True)\n"
                    "model.eval(is_first_batch=False)", None),
    ("3.2", GRAPH + "model.compile()\nmodel.start_data_reading()\nmodel.eval(eval_batch=5)", None),
    ("23.06", GRAPH + "model.compile()\nmodel.train()", "Start the data reader first before calling Model::train()"),
    ("3.3", GRAPH + "model.compile(['loss'], [1.0])", "Model.compile() takes at most 0 positional arguments"),
    ("23.06", GRAPH + "model.compile(['loss'], [1.0])", None),
    ("3.3", "model.get_model_oversubscriber()",
     "hugectr.Model.get_model_oversubscriber does not exist in HugeCTR 3.3 (it exists in HugeCTR 3.2 up to (not "
     "including) 3.3)"),
    ("3.2", "model.get_embedding_training_cache()", "(it exists in HugeCTR 3.3 up to (not including) 23.12)"),
    ("3.2", "model.dump_incremental_model_2kafka()", "does not exist in HugeCTR 3.2"),
    ("23.06", 'model.add(dense_layer=hugectr.DenseLayer(layer_type=L.ReLU, bottom_names=["dense"], top_names=["r"]))',
     None),
    ("23.06", 'model.add(layer=hugectr.DenseLayer(layer_type=L.ReLU, bottom_names=["dense"], top_names=["r"]))',
     "Model.add(): incompatible arguments for every overload in HugeCTR 23.06"),
    ("23.06", "model.no_such_method()", "'hugectr.Model' object has no attribute 'no_such_method'"),
    ("3.2", GRAPH + "model.compile()\nmodel.load_sparse_weights({'emb': 'x'})",
     "argument 'sparse_embedding_files' must be list[str]"),
    ("23.06", GRAPH + "model.compile()\nt = model.check_out_tensor('fc1', hugectr.Tensor_t.Evaluate)\n"
                      "assert len(t) == 1024 and t[0] == [0.0]", None),
    # HugeCTR's own checks (hugectr.md §4)
    ("23.06", GRAPH + "model.fit()", "Cannot start the training process before calling Model.compile()"),
    ("23.06", GRAPH + "model.compile()\nmodel.fit(max_iter=0)", "Require max_iter>0 under non-epoch mode"),
    ("23.06", 'hugectr.CreateSolver(use_mixed_precision=True, enable_tf32_compute=True)',
     "use_mixed_precision and enable_tf32_compute cannot be true at the same time"),
    ("3.3", 'hugectr.CreateSolver(use_mixed_precision=True, scaler=100)',
     "Scaler of mixed precision training should be either 128/256/512/1024"),
    ("4.3", 'hugectr.CreateSolver(use_mixed_precision=True, scaler=2048)',
     "Scaler of mixed precision training should be either 128/256/512/1024"),
    ("23.06", 'hugectr.CreateSolver(use_mixed_precision=True, scaler=2048)', None),
    ("23.06", 'hugectr.Model(hugectr.CreateSolver(batchsize=1000, vvgpu=[[0, 1, 2]]), reader, optimizer)',
     "0 != batch_size%total_gpu_count"),
    ("23.06", 'hugectr.Model(solver, hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Parquet, '
              'source=[], eval_source="v", check_type=hugectr.Check_t.Non), optimizer)',
     " The data source for training and evaluation should be specified"),
    ("3.3", 'hugectr.Model(solver, reader, optimizer, hugectr.CreateETC(ps_types=[hugectr.TrainPSType_t.Staged]))',
     "The embedding training cache can only be used under epoch mode, i.e., repeat_dataset is set False"),
    ("3.2", 'hugectr.Model(solver, reader, optimizer, hugectr.CreateMOS(train_from_scratch=True))',
     "The model oversubscriber can only be used under epoch mode, i.e., repeat_dataset is set False"),
    ("23.06", GRAPH + "model.compile()\nmodel.set_source('a', 'e')",
     "The set source method can only be used under the epoch mode"),
    ("23.06", GRAPH + "model.load_dense_weights('d.model')",
     "Cannot load the dense weights before calling Model.compile()"),
    ("23.06", 'dense(L.ReLU, ["nope"], ["x"])', "nope, bottom tensor name does not exists"),
    ("23.06", 'dense(L.ReLU, ["emb"], ["dense"])', "dense, top tensor name already exists"),
    ("23.06", 'dense(L.ReLU, ["emb"], ["emb"])', "bottom and top include a same layer name"),
    ("23.06", 'dense(L.Reshape, ["emb"], ["x"], leading_dim=7)', "n_in_elems % leading_dim != 0"),
    ("23.06", 'dense(L.Reshape, ["emb"], ["x"], leading_dim=16)\ndense(L.Concat, ["x", "dense"], ["y"])',
     "All the input tensors must have the same height"),
    ("23.06", 'dense(L.Slice, ["dense"], ["a", "b"], ranges=[(0, 5), (3, 4)])',
     "A range cannot be out-order nor included in another"),
    ("23.06", 'dense(L.Slice, ["dense"], ["a"], ranges=[(0, 14)])', "Ranges cannot be bigger than the input width"),
    ("23.06", 'dense(L.FusedInnerProduct, ["dense"], ["x"], num_output=4)',
     "Single precision not supported for: FusedInnerProduct"),
    ("23.06", 'dense(L.WeightMultiply, ["dense"], ["x"], weight_dims=[12, 4])',
     "weight_dims[0] must be equal to in_dims[1]"),
    ("23.06", 'dense(L.Interaction, ["dense", "emb"], ["x"])', "the input tensors' widths must be the same"),
    ("23.06", 'dense(L.InnerProduct, ["dense"], ["fc"], num_output=1)\n'
              'dense(L.BinaryCrossEntropyLoss, ["fc", "dense"], ["loss"])',
     "predition tensor and label tensor should have the same shape, got: [1024, 1] and [1024, 13]"),
    ("23.06", "".join(f'dense(L.ReLU, ["dense"], ["r{i}"])\n' for i in range(6)) + "model.compile()",
     "The graph should not include more than 5-way branches"),
    ("23.06", 'hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash, '
              'embedding_vec_size=16, combiner="max", sparse_embedding_name="e2", bottom_name="data1")',
     "No such combiner type: max"),
    ("23.06", 'model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,'
              ' embedding_vec_size=16, combiner="sum", sparse_embedding_name="e2", bottom_name="data1"))',
     "need workspace_size_per_gpu_in_mb or slot_size_array"),
    ("23.06", 'hugectr.DataReaderSparseParam("d", [1, 2], True, 3)', "slot num != nnz_per_slot.size()."),
    ("23.06", GRAPH + "model.compile()\nmodel.set_source(source=['a'], keyset=['k'], eval_source='e')",
     "The set source method can only be used under the embedding training cache mode"),
    ("23.06", GRAPH + "model.compile()\nmodel.get_incremental_model()", "Get incremental is only supported in ETC"),
    ("23.06", GRAPH + "model.graph_to_json('missing/dir/g.json')", "Cannot open missing/dir/g.json for writing"),
    # one HMemCacheConfig per table of ps_types is refused when some table is staged; one for all is fine
    ("23.06", "hc = hugectr.CreateHMemCache(2, 0.5, 0)\nT = hugectr.TrainPSType_t\n"
              "hugectr.CreateETC(ps_types=[T.Staged, T.Cached], sparse_models=['a', 'b'], hmem_cache_configs=[hc, hc])",
     "Wrong hcache_configs"),
    ("23.06", "hc = hugectr.CreateHMemCache(2, 0.5, 0)\nT = hugectr.TrainPSType_t\n"
              "hugectr.CreateETC(ps_types=[T.Staged, T.Cached], sparse_models=['a', 'b'], hmem_cache_configs=[hc])",
     None),
]


@pytest.mark.parametrize("version,code,message", REJECTED, ids=[f"{i:02d}" for i in range(len(REJECTED))])
def test_wrong_calls_are_rejected(tmp_path: Path, version: str, code: str, message: str | None):
    result = run(tmp_path, version, code)
    if message is None:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    kinds = ("TypeError:", "AttributeError:", "hugectr._api.HugeCTRError:", "ImportError:")
    assert any(line.startswith(kinds) for line in result.stderr.splitlines())


@pytest.mark.parametrize("version,has_axis", [("3.2", False), ("3.3", False), ("4.3", True), ("23.06", True)])
def test_concat_axis_key_by_release(tmp_path: Path, version: str, has_axis: bool):
    result = run(tmp_path, version, GRAPH + "model.graph_to_json('g.json')")
    assert result.returncode == 0, result.stderr
    (concat,) = [la for la in json.loads((tmp_path / "g.json").read_text())["layers"] if la["type"] == "Concat"]
    assert ("axis" in concat) is has_axis


def test_vocabulary_formula_by_release(tmp_path: Path):
    """ws 10 MiB, vec 16, Adam: v3.2-v3.4 ws·2^20 // (4·vec) = 163840; v3.5+ divides by (1+2)·4·vec = 54613."""
    got = {}
    for version in ("3.3", "4.3"):
        assert run(tmp_path, version, GRAPH + "model.graph_to_json('g.json')").returncode == 0
        got[version] = json.loads((tmp_path / "g.json").read_text())["layers"][1]["sparse_embedding_hparam"]
    assert got["3.3"]["max_vocabulary_size_global"] == 163840
    assert got["4.3"]["max_vocabulary_size_global"] == 54613


def test_calls_are_recorded_as_documented(tmp_path: Path):
    result = run(tmp_path, "23.06", GRAPH + "model.compile()\nmodel.fit(max_iter=10, snapshot=0)")
    assert result.returncode == 0, result.stderr
    assert result.calls[0] == {"call": "hugectr.CreateSolver", "args": [],
                               "kwargs": {"batchsize": 1024, "vvgpu": [[0]], "repeat_dataset": True}}
    assert result.calls[1] == {"call": "hugectr.CreateOptimizer", "args": [],
                               "kwargs": {"optimizer_type": "Optimizer_t.Adam"}}
    assert calls_named(result, "hugectr.Model")[0]["args"] == ["<Solver#1>", "<DataReaderParams#1>",
                                                                "<OptParams#1>"]
    assert calls_named(result, "hugectr.DenseLayer")[0]["kwargs"] == {
        "layer_type": "Layer_t.Reshape", "bottom_names": ["emb"], "top_names": ["r1"], "leading_dim": 416}
    assert calls_named(result, "Model.add")[0]["args"] == ["<Input#1>"]
    assert calls_named(result, "Model.fit") == [{"call": "Model.fit", "args": [],
                                                 "kwargs": {"max_iter": 10, "snapshot": 0}}]


def test_import_needs_a_release(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTRGEN_")}
    env["PYTHONPATH"] = str(STANDIN)
    for value in (None, "3.4"):
        e = dict(env) if value is None else {**env, "CTRGEN_HUGECTR_VERSION": value}
        r = subprocess.run([sys.executable, "-c", "import hugectr"], env=e, capture_output=True, text=True)
        assert r.returncode != 0
        assert "set CTRGEN_HUGECTR_VERSION to the HugeCTR release to imitate, one of 3.2, 3.3, 4.3, 23.06" in r.stderr


def test_standin_does_not_use_ctrgen():
    """The stand-in must be an independent implementation: no import of codegen anywhere in it."""
    for py in (STANDIN / "hugectr").rglob("*.py"):
        text = py.read_text(encoding="utf-8")
        assert "codegen" not in text.replace("never imports ctrgen's `codegen`", "").replace(
            "must never import ctrgen's ``codegen``", ""), py


def test_epoch_mode_without_cache(tmp_path: Path):
    """Epoch mode without MOS/ETC: fit needs num_epochs > 0; set_source(source, eval_source) switches files."""
    bad = run(tmp_path, "23.06", GRAPH + "model.compile()\nmodel.fit(num_epochs=0)", repeat=False)
    assert "Require num_epochs>0 under epoch mode" in bad.stderr
    ok = run(tmp_path, "23.06", GRAPH + "model.compile()\nmodel.fit(num_epochs=1)\n"
                                        "model.set_source('t2/_file_list.txt', 'v2/_file_list.txt')\n"
                                        "model.fit(num_epochs=1)", repeat=False)
    assert ok.returncode == 0, ok.stderr
    assert calls_named(ok, "Model.set_source")[0]["args"] == ["t2/_file_list.txt", "v2/_file_list.txt"]


INFERENCE = GRAPH + """\
model.compile()
model.save_params_to_files("m")
model.graph_to_json("m.json")
from hugectr.inference import CreateInferenceSession, InferenceParams
params = InferenceParams(model_name="m", max_batchsize=1024, hit_rate_threshold=0.6, dense_model_file="m_dense_0.model",
                         sparse_model_files=["m0_sparse_0.model"], device_id=0, use_gpu_embedding_cache=True,
                         cache_size_percentage=0.6{more})
session = CreateInferenceSession(model_config_path="m.json", inference_params=params)
print(session.evaluate(num_batches=10, source="valid/_file_list.txt", data_reader_type=hugectr.DataReaderType_t.Parquet,
                       check_type=hugectr.Check_t.Non))
"""


def test_inference_session_of_3x(tmp_path: Path):
    """hugectr.inference as seed 004's trainer uses it: evaluate() after the model files exist."""
    ok = run(tmp_path, "3.2", INFERENCE.format(more=", i64_input_key=False"))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "0.0"
    assert calls_named(ok, "InferenceSession.evaluate")[0]["kwargs"]["data_reader_type"] == "DataReaderType_t.Parquet"
    missing = run(tmp_path, "3.3", INFERENCE.format(more=""))
    assert "InferenceParams() missing required argument 'i64_input_key'" in missing.stderr
    later = run(tmp_path, "23.06", INFERENCE.format(more=", i64_input_key=False, thread_pool_size=8"))
    assert later.returncode == 0, later.stderr
    older = run(tmp_path, "3.3", INFERENCE.format(more=", i64_input_key=False, thread_pool_size=8"))
    assert "'thread_pool_size': HugeCTR 3.3 does not have it" in older.stderr


def test_oversubscriber_needs_sparse_model_paths(tmp_path: Path):
    code = ("model = hugectr.Model(solver, hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm, "
            "source=['t.txt'], keyset=['t.keyset'], eval_source='v.txt', check_type=hugectr.Check_t.Sum), optimizer, "
            "hugectr.CreateMOS(train_from_scratch={scratch}, {paths}))\n"
            + PRELUDE.split("model = hugectr.Model(solver, reader, optimizer)\n")[1] + GRAPH + "model.compile()\n")
    empty = run(tmp_path, "3.2", code.format(scratch=True, paths="dest_sparse_models=[]"), repeat=False)
    assert "must provide sparse_model_file. if train from scratch, please specify a name" in empty.stderr
    absent = run(tmp_path, "3.2", code.format(scratch=False, paths="trained_sparse_models=['old0']"), repeat=False)
    assert "'old0' does not exist" in absent.stderr


def test_numpy_values_are_accepted_like_pybind11(tmp_path: Path):
    """pybind11 converts numpy integers, floats and arrays; the JSON and the record get plain numbers."""
    code = ("import numpy as np\n" + PRELUDE.format(repeat=True).replace(
        "embedding_vec_size=16", "embedding_vec_size=np.int64(16)").replace(
        "workspace_size_per_gpu_in_mb=10", "workspace_size_per_gpu_in_mb=np.int32(10), "
        "slot_size_array=np.array([5] * 26)") + GRAPH.replace("num_output=1", "num_output=np.int64(1)")
        + "model.graph_to_json('g.json')\n")
    result = run(tmp_path, "23.06", code, prelude=False)
    assert result.returncode == 0, result.stderr
    emb = json.loads((tmp_path / "g.json").read_text())["layers"][1]["sparse_embedding_hparam"]
    assert emb["embedding_vec_size"] == 16 and emb["slot_size_array"] == [5] * 26
    assert calls_named(result, "hugectr.SparseEmbedding")[0]["kwargs"]["slot_size_array"] == [5] * 26
    bad = run(tmp_path, "23.06", "import numpy as np\n" + 'dense(L.InnerProduct, ["emb"], ["x"], num_output=np.float64(2))')
    assert "argument 'num_output' must be int, got float64" in bad.stderr


def test_fit_leaves_the_readers_started(tmp_path: Path):
    """After fit() (which calls start_data_reading), the low-level eval() reads on, as in HugeCTR."""
    ok = run(tmp_path, "3.2", GRAPH + "model.compile()\nmodel.fit(max_iter=10, snapshot=0)\n"
                                      "assert model.eval() and model.get_eval_metrics() == [('AUC', 0.0)]")
    assert ok.returncode == 0, ok.stderr
