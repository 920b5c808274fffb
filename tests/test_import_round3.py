"""Import, third round (issue 44): iterator builtins, argparse read through sys.argv[1:], helpers that only print the
arguments, loops sized by argparse defaults, ... Every script here is written for these tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from codegen.errors import UserError
from codegen.importer import import_source
from codegen.importer.calls import Reader
from codegen.specfile.load import load_spec
from codegen.importer.write import write_import
from test_import import _roundtrip

ITERATORS = """
import os
L = ['1', '2', ' 3']
a = list(map(int, L))
b = list(map(lambda x: x * 2, a))
c = list(filter(None, [0, 1, 2])), list(filter(lambda x: x > 1, a))
e = sorted(['bb', 'a', 'ccc'], key=len, reverse=True), sorted([(1, 'b'), (0, 'a'), (1, 'a')], key=lambda p: p[0])
f = max([3, -5, 2], key=abs), min([], key=abs, default=7), min(4, -1, 2, key=lambda x: x * x)
h = dict(zip('ab', [1, 2])), [(k, v) for k, v in enumerate('xy', 1)], list(reversed([1, 2, 3]))
m = map(int, L)
L.append('4')
k = list(m), list(m)
n = sum(map(int, L)), any(x > 3 for x in a), all(map(bool, a))
o = list(map(str.strip, L)), list(map(os.path.basename, ['/a/b', 'c/d'])), 'abc'.removeprefix('a').index('c')
def sq(x):
    return x * x
p = list(map(sq, a)), [g for g in range(2) for n in range(3)]
gpus = list(map(int, '0,1,3'.split(',')))
r = (a, b, c, e, f, h, k, n, o, p, gpus)
"""


def _read(src: str) -> dict:
    return Reader("<test>", src).ev.run_module(ast.parse(src)).globals


def test_iterator_builtins_give_python_values():
    expected: dict = {}
    exec(compile(ITERATORS, "<test>", "exec"), expected)
    assert _read(ITERATORS)["r"] == expected["r"]


@pytest.mark.parametrize("expr", ["str(zip([1], [2]))", "len(map(int, '12'))", "map(int, '12')[0]",
                                  "list(zip(iter_, [1]))", "2 in map(int, '123')",
                                  "any(map(lambda x: 10 // x, [1, 0]))"])
def test_iterators_are_not_lists(expr: str):
    """zip/map/... give one-shot iterators: their text, len() and indexing are not a list's (Python raises or prints
    an address); zip of iterators of different lengths, ``in`` and any() read an unknown part of one (any() stops
    before the value that raises)."""
    g = _read(f"iter_ = map(int, '123')\nr = {expr}\n")
    assert type(g["r"]).__name__ == "Unknown"


def test_map_of_a_script_function_read_value_by_value_is_refused():
    """The calls of the script's own function interleave with a loop's body: not followed, the loop is unknown."""
    g = _read("out = []\ndef f(x):\n    out.append(x)\n    return x\nseen = []\n"
              "for v in map(f, [1, 2]):\n    seen.append(len(out))\nr = seen\n")
    assert type(g["r"]).__name__ == "Unknown"
    g = _read("out = []\ndef f(x):\n    out.append(x)\n    return x\nr = (list(map(f, [1, 2])), out)\n")
    assert g["r"] == ([1, 2], [1, 2])


SCRIPT = """\
import sys
import argparse
from datetime import datetime
import hugectr

parser = argparse.ArgumentParser()
parser.add_argument("--gpus", default="0")
parser.add_argument("--hidden_units_num", type=int, default=3)
parser.add_argument("--gpu_num_per_node", type=int, default=1)
parser.add_argument("--num_nodes", type=int, default=1)
parser.add_argument("--batch", type=int, default=2048)
args = PARSE


def show(a):
    print(vars(a))
    for k, v in vars(a).items():
        print(f"{k}: {getattr(a, k)}")
    print("started", datetime.now())


show(args)
gpus = list(map(int, args.gpus.split(',')))
vvgpu = [[g for g in range(args.gpu_num_per_node)] for n in range(args.num_nodes)]
solver = hugectr.CreateSolver(max_eval_batches=100, batchsize_eval=args.batch, batchsize=args.batch, lr=0.001,
                              vvgpu=vvgpu if gpus == [0] else [gpus], repeat_dataset=True)
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm,
                                  source=["./data/file_list.txt"], eval_source="./data/file_list_test.txt",
                                  check_type=hugectr.Check_t.Sum)
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=13, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 2, False, 26)]))
model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                  workspace_size_per_gpu_in_mb=300, embedding_vec_size=16, combiner="sum",
                                  sparse_embedding_name="sparse_embedding1", bottom_name="data1", optimizer=optimizer))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["sparse_embedding1"],
                             top_names=["reshape1"], leading_dim=416))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["reshape1", "dense"],
                             top_names=["h0"]))
for h in range(1, args.hidden_units_num + 1):
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=[f"h{h - 1}"],
                                 top_names=[f"h{h}"], num_output=64))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=[f"h{args.hidden_units_num}"],
                             top_names=["fc"], num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc", "label"],
                             top_names=["loss"]))
model.compile()
model.summary()
model.fit(max_iter=2300, display=200, eval_interval=1000, snapshot=1000000, snapshot_prefix="mlp")
"""


@pytest.mark.parametrize("parse", ["parser.parse_args(sys.argv[1:])", "parser.parse_args(None)",
                                   "parser.parse_known_args()[0]", "parser.parse_args(args=sys.argv[1:])"])
def test_argparse_defaults_through_every_parse_form(tmp_path: Path, parse: str):
    """parse_args(sys.argv[1:]) / (None) / parse_known_args() read the defaults as parse_args() does; a helper that
    only prints the arguments (vars, getattr, the clock) leaves them known; loops and comprehensions sized by the
    defaults are unrolled, each assumption printed."""
    src = tmp_path / "mlp.py"
    src.write_text(SCRIPT.replace("PARSE", parse), encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    loaded = load_spec(spec).spec
    assert loaded.solver.batchsize == 2048
    assert [x.num_output for x in loaded.model.layers if x.type == "InnerProduct"] == [64, 64, 64, 1]
    notes = import_source(src, "23.06").assumptions
    assert any("argparse defaults" in n for n in notes)
    assert any("print(...) only reads its arguments" in n for n in notes)


def test_command_line_through_sys_argv_slice(tmp_path: Path):
    src = tmp_path / "mlp.py"
    src.write_text(SCRIPT.replace("PARSE", "parser.parse_args(sys.argv[1:])"), encoding="utf-8")
    result = import_source(src, "23.06", argv=["--hidden_units_num", "1", "--gpus", "0,1"])
    write_import(result, tmp_path / "specs")
    loaded = load_spec(tmp_path / "specs" / "mlp.yaml").spec
    assert [x.num_output for x in loaded.model.layers if x.type == "InnerProduct"] == [64, 1]
    assert loaded.solver.vvgpu == [[0, 1]]


def test_a_helper_that_changes_its_argument_still_makes_it_unknown():
    """Only calls that read: vars(args)[...] = ... in a region of unknown effect changes args."""
    g = _read("import argparse\np = argparse.ArgumentParser()\np.add_argument('--n', type=int, default=2)\n"
              "a = p.parse_args()\nfor k in unknown_thing:\n    vars(a)['n'] = 5\n    print(a)\nr = a.n\n")
    assert type(g["r"]).__name__ == "Unknown"
    g = _read("import argparse\np = argparse.ArgumentParser()\np.add_argument('--n', type=int, default=2)\n"
              "a = p.parse_args()\nfor k in unknown_thing:\n    print(vars(a), getattr(a, 'n'))\nr = a.n\n")
    assert g["r"] == 2


EPOCHS = SCRIPT.replace("PARSE", "parser.parse_args()").replace("repeat_dataset=True", "repeat_dataset=False") \
    .replace("model.fit(max_iter=2300,", "model.fit(num_epochs=1, max_iter=2300,")


def test_epoch_mode_fit_keeps_max_iter_argument_for_argument(tmp_path: Path):
    """fit(num_epochs=1, max_iter=2300, ...) in epoch mode: HugeCTR ignores max_iter there, model.py passes it all
    the same (the same call as the source)."""
    src = tmp_path / "epochs.py"
    src.write_text(EPOCHS, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    model_py = (tmp_path / "generated" / "epochs" / "model.py").read_text(encoding="utf-8")
    assert "model.fit(num_epochs=1, max_iter=2300, display=200" in model_py
    training = load_spec(spec).spec.training
    assert (training.num_epochs, training.max_iter) == (1, 2300)


def test_every_import_compares_the_generated_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The import renders model.py and compares its calls with the source's: a difference is an error, nothing is
    written (here: a generator that drops an argument)."""
    from codegen.graph import build

    src = tmp_path / "epochs.py"
    src.write_text(EPOCHS, encoding="utf-8")
    result = import_source(src, "23.06")
    original = build._fit_args
    monkeypatch.setattr(build, "_fit_args", lambda ctx: tuple(a for a in original(ctx) if a[0] != "max_iter"))
    with pytest.raises(UserError, match=r"the generated model\.py would not make the source's calls: .*max_iter"):
        write_import(result, tmp_path / "specs")
    assert not (tmp_path / "specs").exists()


def test_raw_async_without_hybrid_is_refused_only_where_hugectr_refuses_it(tmp_path: Path):
    """HugeCTR's Model::add(SparseEmbedding) throws "Raw async reader and hybrid embedding must come together" from
    v3.3.1 to v23.12.00 (pybind/model.cpp); v24.04.00 has no HybridSparseEmbedding and no such check."""
    from test_boundaries import build_job, spec_with

    raw_async = {"data.format": "raw_async"}
    with pytest.raises(UserError, match="Raw async reader and hybrid embedding must come together"):
        build_job(tmp_path / "a", spec_with({**raw_async, "hugectr_version": "23.12"}))
    build_job(tmp_path / "b", spec_with({**raw_async, "hugectr_version": "24.04"}))


def test_a_layer_loop_of_unknown_length_is_named_as_such(tmp_path: Path):
    src = tmp_path / "layers.py"
    src.write_text(SCRIPT.replace("PARSE", "parser.parse_args()").replace(
        "range(1, args.hidden_units_num + 1)", "range(1, len(open('widths.txt').read()))"), encoding="utf-8")
    with pytest.raises(UserError) as exc:
        import_source(src, "23.06")
    text = exc.value.format()
    assert "layers are added in a loop whose length cannot be known statically" in text
    assert "training loop" not in text
    train = tmp_path / "train.py"
    train.write_text(SCRIPT.replace("PARSE", "parser.parse_args()").replace(
        "model.fit(max_iter=2300, display=200, eval_interval=1000, snapshot=1000000, snapshot_prefix=\"mlp\")",
        "for i in range(len(open('n.txt').read())):\n    model.train()"), encoding="utf-8")
    with pytest.raises(UserError, match="a low-level training loop"):
        import_source(train, "23.06")


def test_positional_argument_the_release_lacks_is_named(tmp_path: Path):
    """Nine positional SparseEmbedding arguments at 24.04: the cause is hybrid_embedding_param, which 24.04 lacks
    (as with keywords), not "pass the arguments by keyword"."""
    from test_import import NORM_DCN

    start = NORM_DCN.index("model.add(hugectr.SparseEmbedding(")
    end = NORM_DCN.index("model.add(hugectr.DenseLayer(")
    text = NORM_DCN[:start] + (
        "model.add(hugectr.SparseEmbedding(hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash, 300, 16, 'sum', "
        "'sparse_embedding1', 'data1', [], optimizer, hugectr.HybridEmbeddingParam()))\n") + NORM_DCN[end:]
    src = tmp_path / "pos.py"
    src.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as exc:
        import_source(src, "24.04")
    message = exc.value.format()
    assert "argument 'hybrid_embedding_param' is not in HugeCTR 24.04" in message
    assert "by keyword" not in message


def test_positional_arguments_of_another_releases_signature_name_the_parameter_it_lacks(tmp_path: Path):
    """HybridEmbeddingParam has 10 parameters in 3.3 to 3.9 (two precompute flags before communication_type) and 8
    in 3.2 and from 4.0: ten positional arguments at 3.2 (MLPerf v1.1's DLRM) or 4.1 (v2.1's) name the first flag
    as what the release lacks, not "pass the arguments by keyword"; at 3.3 they read."""
    from test_import import NORM_DCN

    start = NORM_DCN.index("model.add(hugectr.SparseEmbedding(")
    end = NORM_DCN.index("model.add(hugectr.DenseLayer(")
    hybrid = ("hugectr.HybridEmbeddingParam(2, -1, 0.03, 1.3e11, 1.9e11, 1.0, False, False, "
              "hugectr.CommunicationType.NVLink_SingleNode, hugectr.HybridEmbeddingType.Distributed)")
    text = NORM_DCN[:start] + (
        "model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.HybridSparseEmbedding, "
        "workspace_size_per_gpu_in_mb=300, embedding_vec_size=16, combiner='sum', sparse_embedding_name="
        f"'sparse_embedding1', bottom_name='data1', slot_size_array=[1000] * 26, optimizer=optimizer, "
        f"hybrid_embedding_param={hybrid}))\n") + NORM_DCN[end:]
    src = tmp_path / "hybrid.py"
    src.write_text(text, encoding="utf-8")
    for release in ("3.2", "4.1"):
        with pytest.raises(UserError) as exc:
            import_source(src, release)
        message = exc.value.format()
        assert f"argument 'use_train_precompute_indices' is not in HugeCTR {release}" in message, message
        assert "10 positional arguments" in message and "by keyword" not in message
    assert import_source(src, "3.3").spec_text.count("use_train_precompute_indices: false") == 1
