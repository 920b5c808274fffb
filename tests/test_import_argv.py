"""`ctrgen import --args`: the command line a script runs with, applied by the real argparse to the parser the static
reader recorded; a notebook's own run of a %%writefile script; models built in a class the module instantiates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codegen.errors import UserError
from codegen.importer import import_source
from codegen.importer.argv import command_lines, notebook_command_lines, split
from codegen.importer.calls import extract
from codegen.importer.compare import compare_texts
from codegen.specfile.load import load_spec
from test_import import NORM_DCN, _roundtrip

ARGPARSE = """import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--batchsize", type=int)
parser.add_argument("--cross_layers", type=int, choices=[2, 4, 6], default=6)
parser.add_argument("--gpus", type=int, nargs="+", default=[0])
parser.add_argument("--mixed", action="store_true")
parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
args = parser.parse_args()
"""

# NORM_DCN whose batch size, cross layers and GPUs come from the command line.
SCRIPT = NORM_DCN.replace("from mpi4py import MPI\n", "from mpi4py import MPI\n" + ARGPARSE) \
    .replace("BATCH = 1024", "BATCH = args.batchsize") \
    .replace("vvgpu=[[0]]", "vvgpu=[args.gpus]") \
    .replace("num_layers=6", "num_layers=args.cross_layers")
# The same model with the values written in: what the script does when run with ARGS.
ARGS = "--batchsize 2048 --cross_layers=4 --gpus 0 1 --mixed"
LITERAL = NORM_DCN.replace("BATCH = 1024", "BATCH = 2048").replace("vvgpu=[[0]]", "vvgpu=[[0, 1]]") \
    .replace("num_layers=6", "num_layers=4")


def test_args_are_applied_as_argparse_would(tmp_path: Path):
    src = tmp_path / "dcn_args.py"
    src.write_text(SCRIPT, encoding="utf-8")
    result = import_source(src, "23.06", None, split(ARGS))
    assert any("command line: --batchsize 2048 --cross_layers=4 --gpus 0 1 --mixed" in n for n in result.assumptions)
    spec = tmp_path / "dcn_args.yaml"
    spec.write_text(result.spec_text, encoding="utf-8")
    loaded = load_spec(spec).spec
    assert loaded.solver.batchsize == 2048 and loaded.solver.vvgpu == [[0, 1]]
    # the generated script is the one the source is when run with ARGS
    lit = tmp_path / "dcn_lit.py"
    lit.write_text(LITERAL, encoding="utf-8")
    _, diffs = _roundtrip(tmp_path, lit, "23.06", "dcn_args")
    assert diffs == []
    # (written with the torch target, which the import adds to a Norm reader's spec as to a Parquet one)
    assert (tmp_path / "specs" / "dcn_args.yaml").read_text(encoding="utf-8").split("\n", 3)[3] == \
        result.torch_text.split("\n", 3)[3]
    generated = (tmp_path / "generated" / "dcn_args" / "model.py").read_text(encoding="utf-8")
    assert compare_texts(SCRIPT, generated, "dcn_args.py", "23.06", split(ARGS)) == []
    assert compare_texts(SCRIPT, generated, "dcn_args.py", "23.06", ["--batchsize", "64"]) != []


def test_without_args_a_required_value_is_unknown(tmp_path: Path):
    src = tmp_path / "dcn_args.py"
    src.write_text(SCRIPT, encoding="utf-8")
    with pytest.raises(UserError, match="batchsize"):
        import_source(src, "23.06")


@pytest.mark.parametrize("args,message", [
    ("--batchsize 64 --epochs 3", "unrecognized arguments: --epochs 3"),
    ("--batchsize 64 --cross_layers 5", "invalid choice: 5"),
    ("--batchsize sixty", "invalid int value: 'sixty'"),
    ("--batchsize 64 --gpus", "expected at least one argument"),
])
def test_arguments_the_script_does_not_take_are_one_line(tmp_path: Path, args: str, message: str):
    src = tmp_path / "dcn_args.py"
    src.write_text(SCRIPT, encoding="utf-8")
    with pytest.raises(UserError) as exc:
        import_source(src, "23.06", None, split(args))
    text = str(exc.value)
    assert message in text and "dcn_args.py" in text and "\n" not in text.strip()


def test_abbreviations_and_sys_argv():
    script = extract(ARGPARSE + "import sys\nfirst = sys.argv[1]\nopt = args.optimizer\nbs = args.batchsize\n"
                     "import hugectr\nhugectr.CreateSolver(batchsize=bs, lr=float(len(first)))\n",
                     "t.py", ["--batch", "32", "--opt", "sgd"])
    call = next(c for c in script.all_calls if c.func == "CreateSolver")
    assert call.arg("batchsize") == 32 and call.arg("lr") == 7.0      # "--batch" is sys.argv[1]
    assert script.argv_read


def test_args_for_a_script_that_reads_none_are_refused(tmp_path: Path):
    src = tmp_path / "dcn.py"
    src.write_text(NORM_DCN, encoding="utf-8")
    with pytest.raises(UserError, match="reads no command line"):
        import_source(src, "23.06", None, ["--batchsize", "8"])


def test_cli_args_option(tmp_path: Path):
    from conftest import run_ctrgen

    src = tmp_path / "dcn_args.py"
    src.write_text(SCRIPT, encoding="utf-8")
    out = tmp_path / "out"
    bad = run_ctrgen("import", str(src), "--hugectr-version", "23.06", "--out", str(out), "--args", "--nope 1")
    assert bad.returncode == 2 and "unrecognized arguments: --nope 1" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not out.exists()
    unclosed = run_ctrgen("import", str(src), "--hugectr-version", "23.06", "--out", str(out), "--args", "--x 'a")
    assert unclosed.returncode == 2 and "--args" in unclosed.stderr and not out.exists()
    ok = run_ctrgen("import", str(src), "--hugectr-version", "23.06", "--out", str(out), "--args", ARGS)
    assert ok.returncode == 0, ok.stderr
    assert "assumed: line 10: command line: --batchsize 2048" in ok.stdout
    assert load_spec(out / "dcn_args.yaml").spec.solver.batchsize == 2048


def test_command_lines_are_found_where_scripts_are_run():
    text = "\n".join([
        "!python3 train.py --a 1 && echo done",
        "!mpirun -np 1 --allow-run-as-root python3 train.py --a 2 > log.txt",
        "%run train.py --a 3",
        '    python3 /workdir/test/x/train.py --a 4"',            # inside a quoted CI command
        "$ python other.py --a 5",
        "python train.py --a {value}",                             # IPython expansion: not knowable
        "python train.py \\\n  --a 6",
    ])
    assert command_lines(text, "train.py") == [["--a", "1"], ["--a", "2"], ["--a", "3"], ["--a", "4"],
                                               ["--a", "6"]]
    assert command_lines(text, "test/x/train.py") == [["--a", "4"]]


def _notebook(tmp_path: Path, runs: list[str]) -> Path:
    cells = [{"cell_type": "code", "source": "%%writefile dcn_args.py\n" + SCRIPT}]
    cells += [{"cell_type": "code", "source": [r]} for r in runs]
    nb = tmp_path / "nb.ipynb"
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    return nb


def _batchsize(tmp_path: Path, spec_text: str) -> int:
    spec = tmp_path / "dcn_nb.yaml"
    spec.write_text(spec_text, encoding="utf-8")
    return load_spec(spec).spec.solver.batchsize


def test_notebook_runs_its_script_with_the_first_command_line(tmp_path: Path):
    nb = _notebook(tmp_path, [f"!python3 dcn_args.py {ARGS}", "!python3 dcn_args.py --batchsize 16"])
    assert notebook_command_lines(nb.read_text(encoding="utf-8"), "dcn_args.py") == [
        (2, split(ARGS)), (3, ["--batchsize", "16"])]
    result = import_source(nb, "23.06", "dcn_nb")
    assert _batchsize(tmp_path, result.spec_text) == 2048
    note = result.assumptions[0]
    assert "from the notebook's cell 2" in note and "first of its 2 different runs" in note
    given = import_source(nb, "23.06", "dcn_nb", ["--batchsize", "16"])
    assert _batchsize(tmp_path, given.spec_text) == 16


CLASS_MODEL = """import hugectr


class Trainer:
    def __init__(self, batchsize, layers):
        self.batch = batchsize
        self.solver = hugectr.CreateSolver(max_eval_batches=1280, batchsize_eval=self.batch, batchsize=self.batch,
                                           lr=0.001, vvgpu=[[0]], repeat_dataset=True)
        self.reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm,
                                               source=["./data/file_list.txt"],
                                               eval_source="./data/file_list_test.txt",
                                               check_type=hugectr.Check_t.Sum)
        self.optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam,
                                                 update_type=hugectr.Update_t.Global, beta1=0.9, beta2=0.999,
                                                 epsilon=0.0001)
        self.model = hugectr.Model(self.solver, self.reader, self.optimizer)
        self.layers = layers

    def build(self):
        m = self.model
        m.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=13, dense_name="dense",
                            data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 2, False, 26)]))
        m.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                      workspace_size_per_gpu_in_mb=300, embedding_vec_size=16, combiner="sum",
                                      sparse_embedding_name="sparse_embedding1", bottom_name="data1",
                                      optimizer=self.optimizer))
        m.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["sparse_embedding1"],
                                 top_names=["reshape1"], leading_dim=416))
        m.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["reshape1", "dense"],
                                 top_names=["concat1"]))
        bottom = "concat1"
        for i in range(self.layers):
            m.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=[bottom],
                                     top_names=[f"fc{i}"], num_output=64))
            bottom = f"fc{i}"
        m.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=[bottom],
                                 top_names=["out"], num_output=1))
        m.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["out", "label"],
                                 top_names=["loss"]))
        return self

    def train(self):
        self.model.compile()
        self.model.summary()
        self.model.fit(max_iter=2000, display=200, eval_interval=1000, snapshot=1000000, snapshot_prefix="cls")
"""


def test_model_built_in_a_class_the_module_uses(tmp_path: Path):
    src = tmp_path / "cls.py"
    src.write_text(CLASS_MODEL + "\nif __name__ == '__main__':\n    Trainer(1024, 2).build().train()\n",
                   encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    loaded = load_spec(spec).spec
    assert loaded.solver.batchsize == 1024
    text = spec.read_text(encoding="utf-8")
    assert "fc0" in text and "fc1" in text and "fc2" not in text      # the loop ran self.layers times


def test_model_class_never_instantiated_is_refused(tmp_path: Path):
    src = tmp_path / "cls.py"
    src.write_text(CLASS_MODEL, encoding="utf-8")
    with pytest.raises(UserError, match=r"built inside class Trainer.*never instantiates"):
        import_source(src, "23.06")


def test_a_required_argument_without_args_names_the_fix(tmp_path: Path):
    src = tmp_path / "req.py"
    src.write_text(SCRIPT.replace('"--batchsize", type=int', '"--batchsize", type=int, required=True'),
                   encoding="utf-8")
    with pytest.raises(UserError) as exc:
        import_source(src, "23.06")
    assert 'the script requires --batchsize on its command line: pass it with --args' in str(exc.value)
    assert import_source(src, "23.06", None, ["--batchsize", "8"]).name == "req"


def test_args_for_a_graph_json_are_refused(tmp_path: Path):
    from conftest import run_ctrgen

    src = Path(__file__).resolve().parents[1] / "generated" / "dcn" / "dcn.json"
    out = tmp_path / "out"
    r = run_ctrgen("import", str(src), "--out", str(out), "--args", "--x 1")
    assert r.returncode == 2 and "--args applies to a script or notebook" in r.stderr and not out.exists()
