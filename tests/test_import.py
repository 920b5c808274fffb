"""ctrgen import: scripts, notebooks and the seeds come in as specs, and generate reproduces their hugectr calls.

Every source here is written for these tests (upstream scripts are not copied); the seeds are cut out of
the upstream seed documents at test time (the reference tier), as tests/test_standin_seeds.py does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codegen.errors import UserError
from codegen.importer import import_source
from codegen.importer.calls import extract
from codegen.importer.compare import compare_texts
from codegen.importer.write import write_import
from codegen.output import write
from codegen.pipeline import open_spec, render_spec
from codegen.specfile.load import load_spec
from codegen.specfile.model import Spec
from codegen.specfile.write import write_spec

REPO = Path(__file__).resolve().parents[1]

HEAD = """\
import hugectr
from mpi4py import MPI
"""

NORM_DCN = HEAD + """
BATCH = 1024
solver = hugectr.CreateSolver(max_eval_batches=1280, batchsize_eval=BATCH, batchsize=BATCH, lr=0.001,
                              vvgpu=[[0]], repeat_dataset=True)
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm,
                                  source=["./data/file_list.txt"], eval_source="./data/file_list_test.txt",
                                  check_type=hugectr.Check_t.Norm if False else hugectr.Check_t.Sum)
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam, update_type=hugectr.Update_t.Global,
                                    beta1=0.9, beta2=0.999, epsilon=0.0001)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=13, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 2, False, 26)]))
model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                  workspace_size_per_gpu_in_mb=300, embedding_vec_size=16, combiner="sum",
                                  sparse_embedding_name="sparse_embedding1", bottom_name="data1", optimizer=optimizer))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["sparse_embedding1"],
                             top_names=["reshape1"], leading_dim=416))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["reshape1", "dense"],
                             top_names=["concat1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.MultiCross, bottom_names=["concat1"],
                             top_names=["multicross1"], num_layers=6))
for i, w in enumerate([1024, 1024]):
    bottom = "concat1" if i == 0 else f"dropout{i}"
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=[bottom],
                                 top_names=[f"fc{i + 1}"], num_output=w))
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=[f"fc{i + 1}"],
                                 top_names=[f"relu{i + 1}"]))
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Dropout, bottom_names=[f"relu{i + 1}"],
                                 top_names=[f"dropout{i + 1}"], dropout_rate=0.5))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["dropout2", "multicross1"],
                             top_names=["concat2"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["concat2"], top_names=["fc3"],
                             num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc3", "label"],
                             top_names=["loss"]))
model.compile()
model.summary()
model.graph_to_json(graph_config_file="dcn.json")
model.fit(max_iter=2000, display=200, eval_interval=1000, snapshot=1000000, snapshot_prefix="dcn")
"""

# Parquet, two sparse inputs (wide + deep), an alias import, argparse defaults, a function, a metrics map, layers
# built first and added by name, and the notebooks' statement order.
PARQUET_WDL = """\
import argparse
import hugectr as hc

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=4096)
parser.add_argument("--lr", type=float, default=0.0005)
parser.add_argument("--data", default="/data/criteo")
args = parser.parse_args()
SLOTS = [1000, 2000] + [10] * 3


def build(a):
    solver = hc.CreateSolver(vvgpu=[[0, 1]], batchsize=a.batch, lr=a.lr, i64_input_key=True,
                             metrics_spec={hc.MetricsType.AUC: 1.0}, use_cuda_graph=False, seed=42)
    optimizer = hc.CreateOptimizer(optimizer_type=hc.Optimizer_t.SGD, update_type=hc.Update_t.Local,
                                   atomic_update=True)
    reader = hc.DataReaderParams(data_reader_type=hc.DataReaderType_t.Parquet,
                                 source=[a.data + "/train/_file_list.txt"], eval_source=a.data + "/val/_file_list.txt",
                                 check_type=hc.Check_t.Non, slot_size_array=SLOTS)
    model = hc.Model(solver, reader, optimizer)
    model.add(hc.Input(label_dim=1, label_name="clicked", dense_dim=3, dense_name="numeric",
                       data_reader_sparse_param_array=[
                           hc.DataReaderSparseParam("wide", 1, True, 2),
                           hc.DataReaderSparseParam(top_name="deep", nnz_per_slot=[1, 1, 1], is_fixed_length=True,
                                                    slot_num=3)]))
    model.add(hc.SparseEmbedding(embedding_type=hc.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                 workspace_size_per_gpu_in_mb=8, embedding_vec_size=1, combiner="sum",
                                 sparse_embedding_name="wide_emb", bottom_name="wide", optimizer=optimizer))
    model.add(hc.SparseEmbedding(embedding_type=hc.Embedding_t.LocalizedSlotSparseEmbeddingHash,
                                 workspace_size_per_gpu_in_mb=16, embedding_vec_size=8, combiner="mean",
                                 sparse_embedding_name="deep_emb", bottom_name="deep", slot_size_array=SLOTS[2:]))
    layers = [
        hc.DenseLayer(layer_type=hc.Layer_t.Reshape, bottom_names=["deep_emb"], top_names=["r1"], leading_dim=24),
        hc.DenseLayer(layer_type=hc.Layer_t.Reshape, bottom_names=["wide_emb"], top_names=["r2"], leading_dim=2),
        hc.DenseLayer(layer_type=hc.Layer_t.ReduceSum, bottom_names=["r2"], top_names=["wide_sum"], axis=1),
        hc.DenseLayer(layer_type=hc.Layer_t.Concat, bottom_names=["r1", "numeric"], top_names=["c1"]),
        hc.DenseLayer(layer_type=hc.Layer_t.InnerProduct, bottom_names=["c1"], top_names=["fc1"], num_output=64,
                      weight_init_type=hc.Initializer_t.XavierUniform),
        hc.DenseLayer(layer_type=hc.Layer_t.ReLU, bottom_names=["fc1"], top_names=["relu1"]),
        hc.DenseLayer(layer_type=hc.Layer_t.InnerProduct, bottom_names=["relu1"], top_names=["fc2"], num_output=1),
        hc.DenseLayer(layer_type=hc.Layer_t.Add, bottom_names=["fc2", "wide_sum"], top_names=["add1"]),
        hc.DenseLayer(layer_type=hc.Layer_t.BinaryCrossEntropyLoss, bottom_names=["add1", "clicked"],
                      top_names=["loss"]),
    ]
    for layer in layers:
        model.add(layer)
    model.compile()
    model.summary()
    model.fit(max_iter=400, display=100, eval_interval=200)
    model.graph_to_json("wdl.json")


if __name__ == "__main__":
    build(args)
"""


def _roundtrip(tmp_path: Path, source: Path, version: str, name: str | None = None) -> tuple[Path, list[str]]:
    result = import_source(source, version, name)
    specs = tmp_path / "specs"
    write_import(result, specs)
    spec = specs / f"{result.name}.yaml"
    rendered = render_spec(open_spec(spec))
    write(tmp_path / "generated" / rendered.name, rendered.files)
    generated = (tmp_path / "generated" / rendered.name / "model.py").read_text(encoding="utf-8")
    return spec, compare_texts(source.read_text(encoding="utf-8"), generated, str(source), version)


@pytest.mark.parametrize("text,version,name", [(NORM_DCN, "23.06", "dcn_norm"), (PARQUET_WDL, "4.3", "wdl_parquet"),
                                               (PARQUET_WDL, "23.06", "wdl_parquet")],
                         ids=["norm-23.06", "parquet-4.3", "parquet-23.06"])
def test_script_round_trip_reproduces_every_call(tmp_path: Path, text: str, version: str, name: str):
    src = tmp_path / f"{name}.py"
    src.write_text(text, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, version)
    assert diffs == []
    loaded = load_spec(spec).spec
    assert loaded.hugectr_version == version and loaded.name == name


def test_what_the_spec_records(tmp_path: Path):
    """The values a script passes land in the spec fields that make generate write them again."""
    src = tmp_path / "wdl_parquet.py"
    src.write_text(PARQUET_WDL, encoding="utf-8")
    result = import_source(src, "23.06")
    spec = Spec.model_validate(__import__("ruamel.yaml", fromlist=["YAML"]).YAML(typ="safe").load(result.spec_text))
    assert spec.solver.batchsize == 4096 and spec.solver.lr == 0.0005            # argparse defaults
    assert spec.solver.args == {"metrics_spec": {"MetricsType.AUC": 1.0}}
    assert spec.script.setup == ["solver", "optimizer", "reader"]
    assert spec.script.after_compile == ["summary", "fit", "graph_to_json"]
    assert spec.data.check_type == "Non" and spec.data.train == ["/data/criteo/train/_file_list.txt"]
    assert [s.columns for s in spec.input.sparse] == [["C1", "C2"], ["C3", "C4", "C5"]]
    assert spec.input.label_name == "clicked" and spec.input.dense_name == "numeric"
    assert spec.embeddings[0].optimizer == "model" and spec.embeddings[1].optimizer == "default"
    f = result.features
    assert [c.cardinality for c in f.categorical] == [1000, 2000, 10, 10, 10]
    assert {c.dtype for c in f.categorical} == {"int64"}                             # i64_input_key=True
    assert [c.name for c in f.continuous] == ["I1", "I2", "I3"] and [c.name for c in f.labels] == ["clicked"]
    assert f.source_kind == "imported" and "wdl_parquet.py" in f.provenance
    assert any("argparse" in n for n in result.assumptions)


def test_check_type_is_kept(tmp_path: Path):
    """A Norm reader without checksums stays Non (ctrgen used to write Sum for every Norm reader)."""
    src = tmp_path / "m.py"
    src.write_text(NORM_DCN.replace("hugectr.Check_t.Sum)", "hugectr.Check_t.Non)"), encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    assert load_spec(spec).spec.data.check_type == "Non"


def test_compile_with_loss_weights_round_trips(tmp_path: Path):
    text = NORM_DCN.replace("model.compile()", 'model.compile(loss_names=["loss"], loss_weights=[1.0])')
    src = tmp_path / "mt.py"
    src.write_text(text, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    assert load_spec(spec).spec.training.compile == {"loss_names": ["loss"], "loss_weights": [1.0]}


def test_compare_notices_a_dropped_argument():
    gen = NORM_DCN.replace("model.compile()", 'model.compile(loss_names=["loss"], loss_weights=[1.0])')
    assert compare_texts(gen, NORM_DCN)
    assert compare_texts(NORM_DCN, NORM_DCN.replace("epsilon=0.0001", "epsilon=0.001"))
    assert compare_texts(NORM_DCN, NORM_DCN.replace("model.summary()\n", ""))


def test_notebook_writefile_cell(tmp_path: Path):
    nb = {"cells": [
        {"cell_type": "markdown", "source": ["# title"]},
        {"cell_type": "code", "source": ["!pip install something\n", "import os\n"]},
        {"cell_type": "code", "source": "%%writefile dcn_train.py\n" + NORM_DCN},
        {"cell_type": "code", "source": ["!python3 dcn_train.py"]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    src = tmp_path / "dcn.ipynb"
    src.write_text(json.dumps(nb), encoding="utf-8")
    result = import_source(src, "23.06", "dcn_nb")
    assert "%%writefile dcn_train.py" in result.unit
    write_import(result, tmp_path / "specs")
    rendered = render_spec(open_spec(tmp_path / "specs" / "dcn_nb.yaml"))
    assert compare_texts(NORM_DCN, rendered.files[Path("model.py")] if Path("model.py") in rendered.files
                         else rendered.files[next(k for k in rendered.files if str(k) == "model.py")]) == []


def test_notebook_code_cells_are_joined(tmp_path: Path):
    cells = [c + "\n" for c in NORM_DCN.split("\n\n")]
    nb = {"cells": [{"cell_type": "code", "source": c} for c in cells] + [
        {"cell_type": "code", "source": "%time model.fit(max_iter=1)\n"}], "metadata": {}}
    src = tmp_path / "cells.ipynb"
    src.write_text(json.dumps(nb), encoding="utf-8")
    result = import_source(src, "23.06")
    assert result.unit.endswith("code cells")


# ---- the seeds ------------------------------------------------------------------------------------------------------

@pytest.mark.reference
def test_seed000_notebook_imports_and_reproduces(tmp_path: Path):
    """Seed 000 is a notebook (JSON, .txt suffix as delivered): its %%writefile './model.py' cell is the model."""
    from test_standin_seeds import seed000_model_py, seeds_dir

    result = import_source(seeds_dir() / "000_9f50e44cd6b11148.txt", "3.3", "movielens")
    specs = tmp_path / "specs"
    write_import(result, specs)
    rendered = render_spec(open_spec(specs / "movielens.yaml"))
    model_py = next(v for k, v in rendered.files.items() if str(k) == "model.py")
    assert compare_texts(seed000_model_py(), model_py) == []
    assert [c.cardinality for c in result.features.categorical] == [162542, 56586]


@pytest.mark.reference
def test_seed002_script_imports_and_reproduces(tmp_path: Path):
    from test_standin_seeds import seed002_model_py

    src = tmp_path / "movielens_genres.py"
    published = seed002_model_py()
    src.write_text(published, encoding="utf-8")
    # As published, the data folder is the environment variable INPUT_DATA_DIR, by default
    # os.path.expanduser("~/...") (NVTabular's notebooks): values of the machine the script runs on. Both are kept as
    # those expressions: the spec's paths read ${INPUT_DATA_DIR-~/...} and model.py reads the variable and expands
    # the default again where it runs (HugeCTR itself would not expand "~"); MODEL_DIR's os.path.join is kept as one.
    home = 'os.path.expanduser("~/nvt-examples/movielens/data/")'
    assert home in published and 'os.environ.get(\n"INPUT_DATA_DIR", ' + home in published
    spec_text = import_source(src, "3.3").spec_text
    data = "${INPUT_DATA_DIR-~/nvt-examples/movielens/data/}"
    assert f'train: ["{data}train/_file_list.txt"]' in spec_text
    assert f'graph_json: "{data}/model/movielens_hugectr/1/movielens.json"' in spec_text
    _, diffs = _roundtrip(tmp_path, src, "3.3")
    assert diffs == []
    generated = (tmp_path / "generated/movielens_genres/model.py").read_text(encoding="utf-8")
    assert f'source=[os.environ.get("INPUT_DATA_DIR", {home}) + "train/_file_list.txt"]' in generated
    # An inexact use of it (a slice, which depends on the value's length) is refused with its line, naming it.
    src.write_text(published.replace('INPUT_DATA_DIR + "train/', 'INPUT_DATA_DIR[:-1] + "/train/'), encoding="utf-8")
    with pytest.raises(UserError) as err:
        import_source(src, "3.3")
    message = err.value.format()
    assert "source=" in message and "environment variable 'INPUT_DATA_DIR' is only known where the script runs" \
        in message, message


# ---- the spec writer is the inverse of the loader -------------------------------------------------------------------

@pytest.mark.parametrize("spec", sorted((REPO / "specs").glob("*.yaml")), ids=lambda p: p.stem)
def test_spec_model_spec_is_identity(spec: Path, tmp_path: Path):
    loaded = load_spec(spec).spec
    again = tmp_path / spec.name
    again.write_text(write_spec(loaded), encoding="utf-8")
    assert load_spec(again).spec == loaded


# ---- bad input: one line, exit 2, nothing written -------------------------------------------------------------------

BAD = {
    "not_python.py": ("def f(:\n", "not valid Python"),
    "no_model.py": ("import hugectr\nsolver = hugectr.CreateSolver()\n", "no hugectr.Model"),
    "two.py": (NORM_DCN + "\nmodel2 = hugectr.Model(solver, reader, optimizer)\n", "2 models are built"),
    "runtime.py": (NORM_DCN.replace("BATCH = 1024", "import random\nBATCH = random.choice([1024])"),
                   "cannot be known without running the script"),
    # Both calls with no spec field are named, not only the first.
    "unknown_call.py": (NORM_DCN.replace("model.summary()", "model.get_data_reader_train()\nmodel.summary()\n"
                                                            "model.get_data_reader_eval()"),
                        "(...) has no spec field"),
    "loop.py": (NORM_DCN.replace("model.fit(", "for i in range(int(input())):\n    model.train()\nmodel.fit("),
                "inside a loop"),
    "nul.py": ("import hugectr\x00\n", "not valid Python"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_sources_are_one_line_exit_2_nothing_written(name: str, tmp_path: Path):
    text, expected = BAD[name]
    src = tmp_path / name
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    proc = _ctrgen("import", str(src), "--hugectr-version", "23.06", "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    # One line per problem, every problem of the file at once, sorted (BATCH feeds batchsize_eval and batchsize).
    assert len(lines) == (2 if name in ("runtime.py", "unknown_call.py") else 1) and "Traceback" not in proc.stderr
    assert lines == sorted(lines, key=lambda ln: [int(x) if x.isdigit() else x for x in ln.split(":")[1:3]])
    assert all(expected in ln and ln.startswith(str(src)) for ln in lines)
    assert not out.exists() or not any(out.iterdir())


def test_bad_notebook_and_name(tmp_path: Path):
    nb = tmp_path / "empty.ipynb"
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "print(1)"}]}), encoding="utf-8")
    with pytest.raises(UserError, match="no hugectr.Model"):
        import_source(nb, "23.06")
    src = tmp_path / "ok.py"
    src.write_text(NORM_DCN, encoding="utf-8")
    with pytest.raises(UserError, match="not a valid identifier"):
        import_source(src, "23.06", "bad-name")
    with pytest.raises(UserError, match="--hugectr-version"):
        import_source(src, None)
    garbage = tmp_path / "x.json"
    garbage.write_text('{"not": "a graph"}', encoding="utf-8")
    with pytest.raises(UserError):
        import_source(garbage, None)


def test_hostile_names_stay_strings(tmp_path: Path):
    """A label named like code is a string literal in model.py, never code."""
    evil = 'x"); import os; os.system("echo pwned"); ("'
    text = NORM_DCN.replace('label_name="label"', f"label_name={evil!r}").replace(
        'bottom_names=["fc3", "label"]', f'bottom_names=["fc3", {evil!r}]')
    src = tmp_path / "evil.py"
    src.write_text(text, encoding="utf-8")
    with pytest.raises(UserError):
        import_source(src, "23.06")


def test_existing_files_are_not_overwritten(tmp_path: Path):
    src = tmp_path / "dcn.py"
    src.write_text(NORM_DCN, encoding="utf-8")
    out = tmp_path / "specs"
    out.mkdir()
    (out / "dcn.yaml").write_text("mine\n", encoding="utf-8")
    proc = _ctrgen("import", str(src), "--hugectr-version", "23.06", "--out", str(out))
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert (out / "dcn.yaml").read_text() == "mine\n"
    proc = _ctrgen("import", str(src), "--hugectr-version", "23.06", "--out", str(out), "--force")
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout


def test_import_is_fast_and_imports_nothing_heavy(tmp_path: Path):
    """A 300-line script imports in well under a second of CPU, without nvtabular or torch on the path."""
    body = NORM_DCN.split("model.compile()")[0]
    extra = "".join(
        f'model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["r{i}"], top_names=["r{i + 1}"]))\n'
        for i in range(280))
    text = body.replace("top_names=[\"loss\"]))", "top_names=[\"loss\"]))\n") + extra
    src = tmp_path / "long.py"
    src.write_text(text, encoding="utf-8")
    assert len(text.splitlines()) >= 300
    code = textwrap.dedent(f"""
        import resource, sys, time
        from codegen.importer.calls import extract
        from codegen.importer.to_spec import run
        t = time.process_time()
        extract(open({str(src)!r}).read(), "long.py")
        spent = time.process_time() - t
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("nvtabular", "torch", "merlin", "dask", "pandas"))
        print(spent, heavy)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    spent, heavy = proc.stdout.split(" ", 1)
    assert float(spent) < 1.0
    assert heavy.strip() == "[]"


def test_reader_never_executes_the_source(tmp_path: Path):
    marker = tmp_path / "ran"
    text = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n" + NORM_DCN
    script = extract(text, "s.py")
    assert not marker.exists()
    assert script.count("Model") == 1


def _ctrgen(*args: str) -> subprocess.CompletedProcess:
    from conftest import run_ctrgen
    return run_ctrgen(*args)


@pytest.mark.reference
def test_seed003_continuous_training_imports_and_reproduces(tmp_path: Path):
    """Seed 003's wdl_train.py (MOS, 3.2): the embedding cache, the passes and save_params_to_files come back."""
    from test_standin_seeds import seed003_text, writefile_cell

    src = tmp_path / "wdl_train.py"
    src.write_text(writefile_cell(seed003_text(), "wdl_train.py"), encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "3.2")
    assert diffs == []
    ct = load_spec(spec).spec.continuous_training
    assert ct.ps == "host_memory" and len(ct.passes) == 2 and ct.save_prefix == "wdl_mos"


EXAMPLES = [p for p in sorted((REPO / "specs").glob("*.yaml")) if "continuous" not in p.stem]


@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda p: p.stem)
def test_generated_scripts_import_back_to_their_preset(spec: Path, tmp_path: Path):
    """Importing what a preset generated gives the preset back (with its knobs), and regenerates the same calls."""
    original = load_spec(spec).spec
    model_py = REPO / "generated" / original.name / "model.py"
    result = import_source(model_py, original.hugectr_version, original.name)
    write_import(result, tmp_path)
    imported = load_spec(tmp_path / f"{original.name}.yaml").spec
    assert imported.model == original.model
    rendered = render_spec(open_spec(tmp_path / f"{original.name}.yaml"))
    again = next(v for k, v in rendered.files.items() if str(k) == "model.py")
    assert compare_texts(model_py.read_text(encoding="utf-8"), again, str(model_py), original.hugectr_version) == []


def test_graph_to_json_before_compile_and_calls_after_fit(tmp_path: Path):
    text = NORM_DCN.replace("model.compile()\nmodel.summary()\nmodel.graph_to_json(graph_config_file=\"dcn.json\")\n",
                            "model.graph_to_json(graph_config_file=\"dcn.json\")\nmodel.compile()\nmodel.summary()\n")
    text += 'model.export_predictions("pred.txt", "label.txt")\nmodel.save_params_to_files("dcn_final")\n'
    src = tmp_path / "late.py"
    src.write_text(text, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    s = load_spec(spec).spec
    assert s.script.before_compile == ["graph_to_json"] and s.script.after_compile == ["summary", "fit"]
    assert [c.method for c in s.training.then] == ["export_predictions", "save_params_to_files"]
    assert s.training.then[0].args == {"output_prediction_file_name": "pred.txt", "output_label_file_name": "label.txt"}


GENERATED_DATA = """\
import hugectr
from hugectr.tools import DataGenerator, DataGeneratorParams

params = DataGeneratorParams(format=hugectr.DataReaderType_t.Norm, label_dim=1, dense_dim=4, num_slot=3,
                             i64_input_key=False, source="./gen/file_list.txt", eval_source="./gen/file_list_test.txt",
                             slot_size_array=[100, 200, 300], check_type=hugectr.Check_t.Sum, num_files=4)
generator = DataGenerator(params)
generator.generate()
solver = hugectr.CreateSolver(batchsize=512, batchsize_eval=512, vvgpu=[[0]], repeat_dataset=True)
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm, source=["./gen/file_list.txt"],
                                  eval_source="./gen/file_list_test.txt", check_type=hugectr.Check_t.Sum)
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.SGD)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=4, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 1, True, 3)]))
model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                  workspace_size_per_gpu_in_mb=2, embedding_vec_size=8, combiner="sum",
                                  sparse_embedding_name="emb", bottom_name="data1", optimizer=optimizer))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["emb"], top_names=["r"],
                             leading_dim=24))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["r", "dense"], top_names=["c"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["c"], top_names=["fc"],
                             num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc", "label"],
                             top_names=["loss"]))
model.compile()
model.summary()
model.fit(max_iter=100, display=10, eval_interval=50)
metrics = model.get_eval_metrics()
"""


def test_data_generator_and_metrics_round_trip(tmp_path: Path):
    src = tmp_path / "gen.py"
    src.write_text(GENERATED_DATA, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "4.3")
    assert diffs == []
    s = load_spec(spec).spec
    assert s.data.generate["num_slot"] == 3 and s.data.generate["format"] == "DataReaderType_t.Norm"
    assert [c.method for c in s.training.then] == ["get_eval_metrics"]


def test_an_unknown_argument_is_refused_not_dropped(tmp_path: Path):
    """args: maps are checked against the release: an argument HugeCTR never had is an error with its line."""
    src = tmp_path / "m.py"
    src.write_text(NORM_DCN.replace("repeat_dataset=True)", "repeat_dataset=True, no_such_flag=True)"),
                   encoding="utf-8")
    with pytest.raises(UserError, match="no_such_flag.*does not exist in any HugeCTR release"):
        import_source(src, "23.06").spec_text and write_import(import_source(src, "23.06"), tmp_path / "o")
    assert not (tmp_path / "o" / "m.yaml").exists()


def test_offline_inference_after_training_round_trips(tmp_path: Path):
    text = NORM_DCN + """model.export_predictions("/out/pred_2000", "/out/label_2000")

from hugectr.inference import InferenceModel, InferenceParams
import numpy as np

params = InferenceParams(model_name="dcn", max_batchsize=1024, hit_rate_threshold=1.0,
                         dense_model_file="/out/dcn_dense_2000.model", sparse_model_files=["/out/dcn0_sparse_2000.model"],
                         device_id=0, use_gpu_embedding_cache=False, cache_size_percentage=1.0, i64_input_key=False)
model_inf = InferenceModel("dcn.json", params)
pred = model_inf.predict(num_batches=1, source="./data/file_list_test.txt",
                         data_reader_type=hugectr.DataReaderType_t.Norm, check_type=hugectr.Check_t.Sum)
print(np.mean(pred.flatten()))
"""
    src = tmp_path / "with_inference.py"
    src.write_text(text, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    o = load_spec(spec).spec.offline_inference
    assert o.params["max_batchsize"] == 1024 and o.predict["num_batches"] == 1 and o.graph_json is None
    src.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match="is not in HugeCTR 23.12; it exists in HugeCTR 3.2 up to"):
        write_import(import_source(src, "23.12"), tmp_path / "o23")


def test_loading_before_fit_and_layer_objects_round_trip(tmp_path: Path):
    """Model methods between compile and fit (continuing from saved states) stay before fit; DenseLayer arguments that
    are hugectr objects (compute_config) are written {hugectr.X: {...}} and come back as the same call."""
    text = NORM_DCN.replace("model.fit(", 'model.load_dense_weights("dcn_dense_1000.model")\n'
                                          'model.load_dense_optimizer_states("dcn_opt_dense_1000.model")\nmodel.fit(')
    text = text.replace("top_names=[\"fc3\"],\n                             num_output=1)",
                        "top_names=[\"fc3\"],\n                             num_output=1, "
                        "compute_config=hugectr.DenseLayerComputeConfig(async_wgrad=True))")
    assert "DenseLayerComputeConfig" in text
    src = tmp_path / "cont.py"
    src.write_text(text, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    s = load_spec(spec).spec
    assert [c.method for c in s.training.before_fit] == ["load_dense_weights", "load_dense_optimizer_states"]
    fc3 = next(l for l in s.model.layers if l.top == "fc3")
    assert fc3.model_extra["compute_config"] == {"hugectr.DenseLayerComputeConfig": {"async_wgrad": True}}
    src.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match="compute_config.*is not in HugeCTR 4.3"):
        write_import(import_source(src, "4.3"), tmp_path / "o43")


MLP_DLRM = HEAD + """
solver = hugectr.CreateSolver(batchsize=1024, vvgpu=[[0]], use_mixed_precision=True, scaler=1024)
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm, source=["./d/l.txt"],
                                  eval_source="./d/t.txt", check_type=hugectr.Check_t.Sum)
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.SGD, update_type=hugectr.Update_t.Local)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=13, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 1, True, 26)]))
model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                  workspace_size_per_gpu_in_mb=100, embedding_vec_size=16, combiner="sum",
                                  sparse_embedding_name="sparse_embedding1", bottom_name="data1", optimizer=optimizer))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.MLP, bottom_names=["dense"], top_names=["mlp1"],
                             num_outputs=[64, 16], act_type=hugectr.Activation_t.Relu))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Interaction, bottom_names=["mlp1", "sparse_embedding1"],
                             top_names=["interaction1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.MLP, bottom_names=["interaction1"], top_names=["mlp2"],
                             num_outputs=[64, 1], activations=[hugectr.Activation_t.Relu, hugectr.Activation_t.Non]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["mlp2", "label"],
                             top_names=["loss"]))
model.compile()
model.summary()
model.fit(max_iter=1000, display=100, eval_interval=500)
"""


def test_mlp_layers_with_activation_lists_round_trip(tmp_path: Path):
    """activations=[Activation_t...] stay enum members (they once came back as strings); MLP's built width
    (num_outputs[-1]) is what Interaction checks."""
    src = tmp_path / "dlrm_mlp.py"
    src.write_text(MLP_DLRM, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    model_py = (tmp_path / "generated" / "dlrm_mlp" / "model.py").read_text(encoding="utf-8")
    assert "activations=[hugectr.Activation_t.Relu, hugectr.Activation_t.Non]" in model_py
    graph = json.loads((tmp_path / "generated" / "dlrm_mlp" / "dlrm_mlp.json").read_text(encoding="utf-8"))
    mlp2 = next(l for l in graph["layers"] if l.get("top") == "mlp2")
    assert mlp2["mlp_param"]["activations"] == ["Relu", "None"]


def test_group_dense_layer_round_trips(tmp_path: Path):
    """GroupDenseLayer stays one call in model.py; the graph holds HugeCTR's Head/Body/Tail FusedInnerProduct chain."""
    text = MLP_DLRM.replace(
        '''model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.MLP, bottom_names=["dense"], top_names=["mlp1"],
                             num_outputs=[64, 16], act_type=hugectr.Activation_t.Relu))''',
        '''model.add(hugectr.GroupDenseLayer(group_layer_type=hugectr.GroupLayer_t.GroupFusedInnerProduct,
                                  bottom_name_list=["dense"], top_name_list=["fc1", "fc2", "mlp1"],
                                  num_outputs=[128, 64, 16], last_act_type=hugectr.Activation_t.Relu))''')
    assert "GroupDenseLayer" in text
    src = tmp_path / "grouped.py"
    src.write_text(text, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "4.3")
    assert diffs == []
    graph = json.loads((tmp_path / "generated" / "grouped" / "grouped.json").read_text(encoding="utf-8"))
    fused = [l for l in graph["layers"] if l["type"] == "FusedInnerProduct"]
    assert [l["position"] for l in fused] == ["Head", "Body", "Tail"]
    assert fused[1]["bottom"] == ["fc1", "fc1_mask", "fc1_dRelu", "fc1_db"]
    src.write_text(text.replace("use_mixed_precision=True, scaler=1024", "use_mixed_precision=False"),
                   encoding="utf-8")
    with pytest.raises(UserError, match="can only be used when use_mixed_precision is set true"):
        write_import(import_source(src, "4.3"), tmp_path / "fp32")


def test_a_model_built_in_a_class_is_named_as_such(tmp_path: Path):
    body = NORM_DCN.split("\n", 2)[2]
    text = HEAD + "\n\nclass Trainer:\n    def __init__(self):\n" + "".join(
        f"        {line}\n" if line else "\n" for line in body.splitlines())
    src = tmp_path / "cls.py"
    src.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match="built inside class Trainer"):
        import_source(src, "23.06")
