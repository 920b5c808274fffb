"""Import of the constructs the published corpus needed beyond the first round: each is read into the spec, written
back by generate call for call, and refused (naming what is missing) where its release lacks it."""

from __future__ import annotations

from pathlib import Path

import pytest

from codegen.errors import UserError
from codegen.importer import import_source
from codegen.importer.write import write_import
from codegen.pipeline import open_spec, render_spec
from codegen.specfile.load import load_spec
from hugectr_run import run_with_standin
from test_import import NORM_DCN, REPO, _roundtrip

INFERENCE = """model.export_predictions("/out/pred_2000", "/out/label_2000")
emb_trained = model.check_out_tensor("sparse_embedding1", hugectr.Tensor_t.Evaluate)

from hugectr.inference import InferenceModel, InferenceParams

params = InferenceParams(model_name="dcn", max_batchsize=1024, hit_rate_threshold=1.0,
                         dense_model_file="/out/dcn_dense_2000.model", sparse_model_files=["/out/dcn0_sparse_2000.model"],
                         device_id=0, use_gpu_embedding_cache=False, cache_size_percentage=1.0, i64_input_key=False)
model_inf = InferenceModel("dcn.json", params)
pred = model_inf.predict(1, "./data/file_list_test.txt", hugectr.DataReaderType_t.Norm, hugectr.Check_t.Sum)
emb_inferred = model_inf.check_out_tensor("sparse_embedding1")
other = model_inf.check_out_tensor(tensor_name="fc3")
"""


def test_inference_model_methods_after_predict_round_trip(tmp_path: Path):
    src = tmp_path / "check_out.py"
    src.write_text(NORM_DCN + INFERENCE, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    o = load_spec(spec).spec.offline_inference
    assert [(c.method, c.args) for c in o.then] == [("check_out_tensor", {"tensor_name": "sparse_embedding1"}),
                                                    ("check_out_tensor", {"tensor_name": "fc3"})]
    model_py = (tmp_path / "generated" / "check_out" / "model.py").read_text(encoding="utf-8")
    assert 'inference_model.check_out_tensor(tensor_name="sparse_embedding1")' in model_py


def test_inference_model_method_of_a_later_release_is_refused(tmp_path: Path):
    src = tmp_path / "check_out.py"
    src.write_text(NORM_DCN + INFERENCE, encoding="utf-8")
    with pytest.raises(UserError, match=r"hugectr\.inference\.InferenceModel\.check_out_tensor is "
                                        r"not in HugeCTR 4\.0; it exists in HugeCTR 4\.1"):
        write_import(import_source(src, "4.0"), tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_inference_then_is_checked_against_the_release(tmp_path: Path):
    src = tmp_path / "check_out.py"
    src.write_text(NORM_DCN + INFERENCE, encoding="utf-8")
    spec, _ = _roundtrip(tmp_path, src, "23.06")
    spec.write_text(spec.read_text(encoding="utf-8").replace('hugectr_version: "23.06"', 'hugectr_version: "4.0"'),
                    encoding="utf-8")
    with pytest.raises(UserError) as exc:
        render_spec(open_spec(spec))
    text = exc.value.format()
    assert "offline_inference.then[0].method" in text and "it exists in HugeCTR 4.1" in text


GENERATOR_ATTRIBUTES = """\
import math
import hugectr
from hugectr.tools import DataGenerator, DataGeneratorParams

EVAL_SAMPLES = 100000
params = DataGeneratorParams(format=hugectr.DataReaderType_t.Norm, label_dim=1, dense_dim=13, num_slot=26,
                             i64_input_key=False, source="./gen/file_list.txt", eval_source="./gen/file_list_test.txt",
                             slot_size_array=[1000] * 26, nnz_array=[1] * 26)
generator = DataGenerator(params)
generator.generate()
solver = hugectr.CreateSolver(batchsize=1024, batchsize_eval=1024, vvgpu=[[0]], repeat_dataset=True,
                              max_eval_batches=math.ceil(EVAL_SAMPLES / 1024))
reader = hugectr.DataReaderParams(data_reader_type=params.format, source=[params.source],
                                  eval_source=params.eval_source, check_type=params.check_type)
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.SGD)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=params.label_dim, label_name="label", dense_dim=params.dense_dim, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 1, True, 26)]))
model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                  workspace_size_per_gpu_in_mb=8, embedding_vec_size=4, combiner="sum",
                                  sparse_embedding_name="emb", bottom_name="data1", optimizer=optimizer))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["emb"], top_names=["r"],
                             leading_dim=104))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["r", "dense"], top_names=["c"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["c"], top_names=["fc"],
                             num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc", "label"],
                             top_names=["loss"]))
model.summary()
model.compile()
model.fit(max_iter=100, display=10, eval_interval=50)
"""


def test_defaults_of_parameter_objects_math_and_summary_before_compile(tmp_path: Path):
    """params.check_type of a DataGeneratorParams built without it is HugeCTR's default (Check_t.Sum, from the API
    table); math.ceil of known numbers is evaluated; summary() may come before compile()."""
    src = tmp_path / "gen_attrs.py"
    src.write_text(GENERATOR_ATTRIBUTES, encoding="utf-8")
    result = import_source(src, "23.06")
    assert any("HugeCTR's default hugectr.Check_t.Sum used" in text for text in result.assumptions)
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    s = load_spec(spec).spec
    assert s.data.check_type == "Sum" and s.solver.max_eval_batches == 98
    assert s.script.before_compile == ["summary"] and s.script.after_compile == ["fit"]
    model_py = (tmp_path / "generated" / "gen_attrs" / "model.py").read_text(encoding="utf-8")
    assert model_py.index("model.summary()") < model_py.index("model.compile()")


def test_summary_twice_is_refused(tmp_path: Path):
    src = tmp_path / "twice.py"
    src.write_text(GENERATOR_ATTRIBUTES.replace("model.compile()\n", "model.compile()\nmodel.summary()\n"),
                   encoding="utf-8")
    with pytest.raises(UserError, match="model.summary is called twice"):
        import_source(src, "23.06")


def test_summary_before_compile_runs_on_the_standin(tmp_path: Path):
    src = tmp_path / "early_summary.py"
    src.write_text(NORM_DCN.replace("model.compile()\nmodel.summary()\n", "model.summary()\nmodel.compile()\n"),
                   encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == [] and load_spec(spec).spec.script.before_compile == ["summary"]
    run = tmp_path / "run"
    run.mkdir()
    ran = run_with_standin(tmp_path / "generated" / "early_summary" / "model.py", "23.06", cwd=run,
                           env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert ran.returncode == 0, ran.stderr
    order = [c["call"] for c in ran.calls if c["call"] in ("Model.summary", "Model.compile")]
    assert order == ["Model.summary", "Model.compile"]


def test_model_perf_ext_round_trips_and_is_checked_against_the_release(tmp_path: Path):
    src = tmp_path / "perf.py"
    src.write_text(NORM_DCN.replace("hugectr.Model(", "hugectr.ModelPerfExt("), encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "3.7")
    assert diffs == []
    assert load_spec(spec).spec.script.model_class == "ModelPerfExt"
    model_py = (tmp_path / "generated" / "perf" / "model.py").read_text(encoding="utf-8")
    assert "model = hugectr.ModelPerfExt(solver, reader, optimizer)" in model_py
    with pytest.raises(UserError, match=r"script\.model_class.*ModelPerfExt is not in HugeCTR 23\.06; it exists in "
                                        r"HugeCTR 3\.3 up to \(not including\) 3\.8"):
        write_import(import_source(src, "23.06"), tmp_path / "o")


def test_a_reader_without_check_type_is_refused_not_completed(tmp_path: Path):
    """HugeCTR requires check_type; a source without it fails there, so generating one with it would hide that."""
    src = tmp_path / "no_check.py"
    src.write_text(NORM_DCN.replace("check_type=hugectr.Check_t.Norm if False else hugectr.Check_t.Sum", ""),
                   encoding="utf-8")
    with pytest.raises(UserError, match=r"no_check\.py:7: hugectr\.DataReaderParams without check_type, which "
                                        r"HugeCTR 23\.12 requires"):
        import_source(src, "23.12")


def wdl_train_py() -> str:
    """ctrgen's reproduction of seed 003's wdl_train.py (HugeCTR 3.2 continuous training: CreateMOS, two fit passes,
    get_incremental_model, save_params_to_files; tests/test_continuous.py compares it with the seed)."""
    return (REPO / "generated" / "wdl_continuous" / "model.py").read_text(encoding="utf-8")


def test_a_source_set_last_without_fit_round_trips(tmp_path: Path):
    """A set_source after the last fit (the embedding cache loads the next keysets) is a pass with fit: false."""
    text = wdl_train_py()
    last = text.rindex("updated_model = model.get_incremental_model()")
    text = text[:last] + 'model.set_source(source=["late.txt"], keyset=["late.keyset"], eval_source="e.txt")\n' + \
        text[last:]
    src = tmp_path / "late_source.py"
    src.write_text(text, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "3.2")
    assert diffs == []
    passes = load_spec(spec).spec.continuous_training.passes
    assert [p.fit for p in passes] == [True, True, False] and passes[-1].source == ["late.txt"]
    model_py = (tmp_path / "generated" / "late_source" / "model.py").read_text(encoding="utf-8")
    tail = model_py[model_py.rindex("model.set_source("):]
    assert "model.fit(" not in tail and "model.get_incremental_model()" in tail
    run = tmp_path / "run"
    run.mkdir()
    ran = run_with_standin(tmp_path / "generated" / "late_source" / "model.py", "3.2", cwd=run,
                           env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert ran.returncode == 0, ran.stderr
    assert [c["call"] for c in ran.calls][-3:] == ["Model.set_source", "Model.get_incremental_model",
                                                   "Model.save_params_to_files"]


def test_a_pass_without_fit_needs_a_high_level_script(tmp_path: Path):
    text = wdl_train_py()
    last = text.rindex("updated_model = model.get_incremental_model()")
    src = tmp_path / "late_source.py"
    src.write_text(text[:last] + 'model.set_source(source=["l.txt"], keyset=["l.keyset"], eval_source="e.txt")\n' +
                   text[last:], encoding="utf-8")
    spec, _ = _roundtrip(tmp_path, src, "3.2")
    spec.write_text(spec.read_text(encoding="utf-8").replace("low_level: false", "low_level: true"), encoding="utf-8")
    with pytest.raises(UserError) as exc:
        render_spec(open_spec(spec))
    assert "continuous_training.passes[2].fit" in exc.value.format() and "no low-level form" in exc.value.format()


HDFS = """\
import hugectr
from hugectr.data import DataSource, DataSourceParams

dsp = DataSourceParams(use_hdfs=True, namenode="localhost", port=9000, hdfs_train_source="/data/train/",
                       hdfs_train_filelist="/data/file_list.txt", local_train_source="./data/train/",
                       local_train_filelist="./data/file_list.txt", local_eval_filelist="./data/file_list_test.txt")
source = DataSource(dsp)
source.move_to_local()
""" + NORM_DCN.replace("import hugectr\nfrom mpi4py import MPI\n", "").replace(
    'source=["./data/file_list.txt"], eval_source="./data/file_list_test.txt"',
    "source=[dsp.local_train_filelist], eval_source=dsp.local_eval_filelist")


def test_hdfs_data_source_round_trips(tmp_path: Path):
    src = tmp_path / "hdfs.py"
    src.write_text(HDFS, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "3.4")
    assert diffs == []
    d = load_spec(spec).spec.data
    assert d.data_source.move_to_local and d.data_source.params["namenode"] == "localhost"
    assert d.train == ["./data/file_list.txt"]
    with pytest.raises(UserError, match=r"hdfs\.py:7: hugectr\.data\.DataSource is not in HugeCTR 23\.06; it exists "
                                        r"in HugeCTR 3\.4 up to \(not including\) 3\.9"):
        write_import(import_source(src, "23.06"), tmp_path / "o")
    spec.write_text(spec.read_text(encoding="utf-8").replace('hugectr_version: "3.4"', 'hugectr_version: "3.9"'),
                    encoding="utf-8")
    with pytest.raises(UserError) as exc:
        render_spec(open_spec(spec))
    assert "data.data_source" in exc.value.format() and "up to (not including) 3.9" in exc.value.format()


def test_a_data_source_after_the_solver_is_refused(tmp_path: Path):
    text = HDFS.replace("source = DataSource(dsp)\nsource.move_to_local()\n", "")
    text = text.replace("optimizer = hugectr.CreateOptimizer(", "source = DataSource(dsp)\noptimizer = "
                                                                  "hugectr.CreateOptimizer(", 1)
    src = tmp_path / "late_hdfs.py"
    src.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match="hugectr.data.DataSource after the solver"):
        import_source(src, "3.4")


def test_imported_specs_with_the_new_fields_are_fixed_points_of_the_writer(tmp_path: Path):
    """spec -> model -> spec is the identity for specs that use every field added here."""
    from codegen.specfile.write import write_spec
    seed = wdl_train_py()
    last = seed.rindex("updated_model = model.get_incremental_model()")
    sources = {
        "inference": NORM_DCN + INFERENCE,
        "perf": NORM_DCN.replace("hugectr.Model(", "hugectr.ModelPerfExt("),
        "hdfs": HDFS,
        "early": NORM_DCN.replace("model.compile()\nmodel.summary()\n", "model.summary()\nmodel.compile()\n"),
        "late": seed[:last] + 'model.set_source(source=["l.txt"], keyset=["l.keyset"], eval_source="e.txt")\n' +
        seed[last:],
    }
    versions = {"perf": "3.7", "hdfs": "3.4", "late": "3.2"}
    for name, text in sources.items():
        src = tmp_path / f"{name}.py"
        src.write_text(text, encoding="utf-8")
        write_import(import_source(src, versions.get(name, "23.06")), tmp_path / "specs")
        path = tmp_path / "specs" / f"{name}.yaml"
        loaded = load_spec(path).spec
        again = tmp_path / f"again_{name}.yaml"
        again.write_text(write_spec(loaded), encoding="utf-8")
        assert load_spec(again).spec == loaded, name


@pytest.mark.parametrize("arg, call", [("nnz_per_slot", 'hugectr.DataReaderSparseParam("data1", is_fixed_length=False, '
                                                         'slot_num=26)'),
                                       ("is_fixed_length", 'hugectr.DataReaderSparseParam("data1", 2, slot_num=26)')])
def test_a_sparse_param_without_a_required_argument_is_refused_not_completed(tmp_path: Path, arg: str, call: str):
    """DataReaderSparseParam's nnz_per_slot and is_fixed_length have no default in any release (the API table): a
    source without one stops with a TypeError, so the import refuses it rather than fill in 1 or False."""
    src = tmp_path / "no_nnz.py"
    src.write_text(NORM_DCN.replace('hugectr.DataReaderSparseParam("data1", 2, False, 26)', call), encoding="utf-8")
    with pytest.raises(UserError, match=rf"hugectr\.DataReaderSparseParam without {arg}, which HugeCTR requires"):
        import_source(src, "23.06")
