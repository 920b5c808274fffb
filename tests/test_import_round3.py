"""Import, third round (issue 44): iterator builtins, argparse read through sys.argv[1:], helpers that only print the
arguments, loops sized by argparse defaults, ... Every script here is written for these tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from codegen.importer import import_source
from codegen.importer.calls import Reader
from codegen.spec.load import load_spec
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
    return Reader("<test>", src).run_module(ast.parse(src)).globals


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
