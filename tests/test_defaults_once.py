"""Each HugeCTR default is written once (issue 42): in the release's API table (codegen/hugectr/api_table.json, read
through codegen.hugectr.api). The model builder resolves a layer's arguments against it (graph.ir.dense_values);
the shape rules, the renderers and the model's rules read those values and keep no literal default of their own."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from codegen.graph.ir import Enum, dense_values
from codegen.graph.shapes import Shape, Target, infer
from codegen.hugectr import api as A

REPO = Path(__file__).resolve().parents[1]
# The folders that read a built model (the builder's graph and rules, the renderers, the weights' and Triton's plans)
# and the importer, which reads HugeCTR scripts and graph JSON into a spec.
READERS = ("codegen/graph", "codegen/render", "codegen/model", "codegen/weights", "codegen/triton/plan",
           "codegen/importer")
# Every parameter of any HugeCTR function that has a plain default in some release.
API_PARAMS = frozenset(p.name for f in A.functions_ever() for r in A.RELEASES if A.has(f, r)
                       for p in A.signature(f, r) if p.default is not A.NO_DEFAULT and not isinstance(p.default, A.Unparsed))


def _literal(node: ast.AST) -> bool:
    try:
        return ast.literal_eval(node) is not None
    except ValueError:
        return False


def default_literals(source: str) -> list[str]:
    """``x.get("<API parameter>", <literal>)`` and ``x.get("<API parameter>") or <literal>``: a default of its own."""
    found = []
    for node in ast.walk(ast.parse(source)):
        get, value = None, None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and len(node.args) == 2:
            get, value = node, node.args[1]
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            first = node.values[0]
            if isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute) and first.func.attr == "get" \
                    and len(first.args) == 1:
                get, value = first, node.values[-1]
        if get is not None and isinstance(get.args[0], ast.Constant) and get.args[0].value in API_PARAMS \
                and _literal(value):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_reader_of_the_model_writes_a_hugectr_default():
    """A renderer or shape rule that wrote ``p.get("eps", 1e-5)`` would hold a second copy of a HugeCTR default
    (and disagree with the table when a release changes it: leading_dim is 1 up to 23.06 and 0 from 23.08)."""
    found = [f"{path.relative_to(REPO)}:{hit}" for folder in READERS for path in sorted((REPO / folder).rglob("*.py"))
             for hit in default_literals(path.read_text(encoding="utf-8"))]
    assert found == [], "read the value the builder resolved (layer.values) or codegen.hugectr.api:\n" + "\n".join(found)


def test_the_default_finder_sees_both_forms():
    assert default_literals('p.get("eps", 1e-5)\nq.get("ranges") or []\n') == \
        ["1: p.get('eps', 1e-05)", "2: q.get('ranges') or []"]
    assert default_literals('p.get("eps")\np.get("eps", A.default("DenseLayer", "eps", r))\n'
                            'p.get("not_an_api_parameter", 1)\np.get("axis", None)\n') == []


def test_dense_values_are_the_table_s_defaults_under_the_given_arguments():
    v = dense_values((("eps", 0.25),), "23.06")
    assert v["eps"] == 0.25 and v["factor"] == A.default("DenseLayer", "factor", "23.06") == 1.0
    assert v["act_type"] == Enum("Activation_t", "Relu")
    assert dense_values((), "23.06")["leading_dim"] == 1 and dense_values((), "23.08")["leading_dim"] == 0
    assert "max_sequence_len_from" not in dense_values((), "23.06")    # an argument the release lacks: absent
    assert "dense_layer_switches" not in dense_values((), "23.06")     # a C++ expression, no plain default


def test_a_reshape_without_leading_dim_or_shape_is_hugectr_s_refusal_from_23_08():
    """From 23.08 leading_dim defaults to 0, which builds ReshapeLayerV2 from ``shape`` (add_dense_layer_helpers.cpp,
    23.08.00): an empty shape has no placeholder, and HugeCTR refuses it. Up to 23.06 leading_dim defaults to 1."""
    x = [Shape((4, 3))]
    assert infer("Reshape", dense_values((), "23.06"), x, 1, Target("23.06")) == [Shape((1,), 12)]
    with pytest.raises(Exception, match="The placeholder in reshape layer should equal to 1"):
        infer("Reshape", dense_values((), "23.08"), x, 1, Target("23.08"))


def _lines(type_: str, params: dict, shapes: list[Shape], release: str = "23.06") -> list[str]:
    """The __init__ and forward lines the PyTorch renderer writes for one layer, its arguments resolved as the builder does."""
    from codegen.graph.ir import Layer
    from codegen.hugectr import versions as V
    from codegen.render.torch_model import _layer, _Model, _Names

    values = dense_values(params, release)
    outs = infer(type_, values, shapes, 1, Target(release))
    m = _Model(V.profile(release))
    _layer(m, _Names(), Layer(type_, ("x",), ("y",), tuple(params.items()), tuple(outs), tuple(shapes), values=values))
    return m.init + m.forward


def test_prelu_dice_left_without_arguments_takes_hugectr_s_defaults():
    """HugeCTR builds PReLU_Dice from the DenseLayer's elu_alpha and eps (add_dense_layer.cpp, 23.06.01), whose
    defaults are 1.0 and 1e-5; train_torch.py wrote 0.0 and 0.0 of its own where a spec left them out."""
    assert _lines("PReLU_Dice", {}, [Shape((4,))]) == ["y = prelu_dice(x, alpha=1.0, eps=1e-05)  # (B, 4)"]
    assert _lines("PReLU_Dice", {"elu_alpha": 0.2, "eps": 1e-8}, [Shape((4,))]) == \
        ["y = prelu_dice(x, alpha=0.2, eps=1e-08)  # (B, 4)"]


def test_a_norm_and_elu_left_without_arguments_take_hugectr_s_defaults():
    """LayerNorm's eps and ELU's elu_alpha where a spec leaves them out: the table's 1e-5 and 1.0 (all releases)."""
    assert _lines("LayerNorm", {}, [Shape((4,))])[0] == "self.y = nn.LayerNorm(4, eps=1e-05)"
    assert _lines("ELU", {}, [Shape((4,))]) == ["y = F.elu(x, alpha=1.0)"]


def test_the_import_comparison_knows_only_the_table_s_defaults():
    """Input's dense_dim and label_dim have no default in any release (dense_dim is required; label_dim only gives way
    to the label_dims overload from 3.5), nor SparseEmbedding's workspace up to 3.6: a side that leaves one out is a
    difference, never matched against a default of ctrgen's own."""
    from codegen.importer.compare import compare_call, defaults_of
    from codegen.importer.values import Call

    assert defaults_of("Input", "23.06") == {} and defaults_of("Input", "3.2") == {}
    assert "workspace_size_per_gpu_in_mb" not in defaults_of("SparseEmbedding", "3.6")
    assert defaults_of("SparseEmbedding", "3.7")["workspace_size_per_gpu_in_mb"] == 0
    assert defaults_of("DataReaderParams", "23.06")["keyset"] == A.default("DataReaderParams", "keyset", "23.06")
    given = Call("Input", [], [("label_dim", 1), ("label_name", "label"), ("dense_dim", 0), ("dense_name", "dense")], 1)
    left_out = Call("Input", [], [("label_name", "label"), ("dense_name", "dense")], 1)
    assert compare_call(left_out, given, "l.1") == [
        "l.1: Input: argument 'dense_dim' only in the generated (0.0)",
        "l.1: Input: argument 'label_dim' only in the generated (1.0)"]


def test_every_mutant_s_text_is_where_tools_mutate_py_looks():
    """A refactor that rewrites a line a mutant changes (as this one did BatchNorm's momentum) fails here, in the
    suite, instead of only at `make mutate`."""
    import sys

    sys.path.insert(0, str(REPO / "tools"))
    import mutate

    assert mutate.check_texts(mutate.MUTANTS) == []


# ---- renderers print resolved settings; they read no call's arguments by name (issue 42) ----------------------------

# The modules that turn the model into text (and the commands beside them that read a built model).
RENDERERS = ("codegen/render", "codegen/triton", "codegen/etl", "codegen/export")
# Resolving a HugeCTR default is the builder's work (graph/build.py, graph/sparse.py, graph/ir.py's call_values):
# these functions, and hugectr/api.py's default and defaults (as A.default, api.defaults).
RESOLVERS = frozenset({"given_or_default", "call_values", "dense_values"})


def _raw_argument_fields() -> frozenset[str]:
    """The model's fields that hold a call's arguments as given, ``(name, value)`` pairs (ir.Args): derived from the
    dataclasses of graph/ir.py and etl/plan.py, so a new such field is covered without editing this list."""
    import dataclasses

    from codegen.etl import plan
    from codegen.graph import ir

    return frozenset(f.name for module in (ir, plan) for c in vars(module).values()
                     if isinstance(c, type) and dataclasses.is_dataclass(c) for f in dataclasses.fields(c)
                     if "Args" in str(f.type) or "tuple[tuple[str, object], ...]" in str(f.type))


def raw_argument_reads(source: str, fields: frozenset[str]) -> list[str]:
    """Where ``source`` reads a call's arguments by name instead of a typed field the builder resolved:

    - ``dict(x.F)`` (also ``dict[...](x.F)``, ``{k: v for k, v in x.F}``) for a raw-argument field F: a map to
      index by HugeCTR's names;
    - ``for k, v in x.F`` (a loop or comprehension) whose body compares ``k`` with a string: a lookup by name;
    - ``x.param(...)``: Layer.param, a given argument by name;
    - ``x.solver_values`` / ``reader_values`` / ``fit_values``: the maps of arguments in effect that the typed
      SolverSettings, ReaderPlan and FitPlan replaced;
    - a call of a resolver (``A.default``, ``given_or_default``, ``call_values``, ...): a default resolved here.

    Printing a call is not reading it: ``kwargs(x.F)``, ``[(k, bind(k, v)) for k, v in x.F]`` pass the pairs on as
    they are. Layer.values and Optimizer.values are not raw: the builder resolved them (graph/ir.py's dense_values),
    and their names and types are the API table's."""
    tree = ast.parse(source)
    found = []

    def raw(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in fields

    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Call):
            func = node.func.value if isinstance(node.func, ast.Subscript) else node.func   # dict[str, Any](...)
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            hit = (name == "dict" and len(node.args) == 1 and raw(node.args[0])) or \
                (isinstance(node.func, ast.Attribute) and name == "param") or name in RESOLVERS or \
                (name in ("default", "defaults") and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                 and func.value.id in ("A", "api"))
        elif isinstance(node, ast.Attribute):
            hit = node.attr in ("solver_values", "reader_values", "fit_values")
        elif isinstance(node, (ast.For, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
            loops = [node] if isinstance(node, ast.For) else node.generators
            keys = {loop.target.elts[0].id for loop in loops if raw(loop.iter) and isinstance(loop.target, ast.Tuple)
                    and isinstance(loop.target.elts[0], ast.Name)}
            compares = [[c.left, *c.comparators] for c in ast.walk(node) if isinstance(c, ast.Compare)]
            hit = (isinstance(node, ast.DictComp) and any(raw(loop.iter) for loop in loops)) or any(
                {x.id for x in sides if isinstance(x, ast.Name)} & keys
                and any(isinstance(x, ast.Constant) and isinstance(x.value, str) for x in sides) for sides in compares)
        if hit:
            found.append(f"{node.lineno}: {ast.unparse(node).splitlines()[0]}")
    return found


def test_no_renderer_reads_a_call_s_arguments_by_name():
    """The builder resolves what a renderer needs of a call once, into typed fields (TrainingJob.settings, fit_plan,
    reader_plan, Embedding.workspace_in_effect, CollectionTable.rows, OpStep.comparison, ...); a renderer that read
    ``dict(job.fit)["snapshot"]`` or ``job.solver_values["lr"]`` again would resolve a value a second time, and could
    disagree with the other targets (train_torch.py's warmup_steps 0 against the table's 1, issue 42)."""
    fields = _raw_argument_fields()
    assert {"solver", "reader", "fit", "params", "args"} <= fields
    found = [f"{path.relative_to(REPO)}:{hit}" for folder in RENDERERS for path in sorted((REPO / folder).rglob("*.py"))
             for hit in raw_argument_reads(path.read_text(encoding="utf-8"), fields)]
    assert found == [], "read a typed field the builder resolved (graph/ir.py, etl/plan.py):\n" + "\n".join(found)


def test_the_raw_argument_finder_sees_each_form():
    """Each form the renderers used before issue 42 (task.py, train_torch.py, model.py, graph JSON, the Triton plan,
    etl.py's label) is found; printing a call and reading a resolved field are not."""
    fields = _raw_argument_fields()
    old = ['solver = dict(job.solver)', 'reader = dict[str, Any](job.reader)', 'a = dict(op.args)',
           'args, label = dict(t.args), table_label(c, i)',
           'if any(k == "slot_size_array" for k, _ in job.reader):\n    pass',
           'for k, v in job.fit:\n    if k == "snapshot":\n        pass', 'fit = {k: v for k, v in job.fit}',
           'w = _init(layer.param("weight_init_type"))', 'prefix = job.fit_values["snapshot_prefix"]',
           'ws = A.default("SparseEmbedding", "workspace_size_per_gpu_in_mb", p.name)']
    for snippet in old:
        assert raw_argument_reads(snippet, fields), snippet
    printing = ['solver = kwargs([(k, bind.solver(k, v)) for k, v in job.solver])', 'x = _call(op.name, op.args)',
                'lr = job.settings.schedule.lr', 'eps = layer.values["eps"]', 'r = dict(job.graph.collection)',
                'out = [(k, v) for k, v in args if k != "dropout_rate"]', 'wanted = [spec.default(t) for t in tables]']
    for snippet in printing:
        assert raw_argument_reads(snippet, fields) == [], snippet


def test_a_workspace_left_out_is_the_table_s_default_in_every_output(tmp_path):
    """An embedding sized by slot_size_array alone: model.py passes no workspace (HugeCTR takes its default), and the
    graph JSON and task.py's --workspace_size_per_gpu write the value in effect, which the builder resolved once from
    the API table (graph/sparse.py; the graph JSON renderer resolved it itself before issue 42)."""
    from test_facts import movielens, render

    spec = movielens(hugectr_version="23.06", targets=["hugectr", "task"])
    del spec["embeddings"][0]["workspace_size_per_gpu_in_mb"]
    spec["embeddings"][0]["slot_size_array"] = True
    files = render(tmp_path, spec)
    default = A.default("SparseEmbedding", "workspace_size_per_gpu_in_mb", "23.06")
    emb = next(x for x in json.loads(files["m.json"])["layers"] if "sparse_embedding_hparam" in x)
    assert emb["sparse_embedding_hparam"]["workspace_size_per_gpu_in_mb"] == default
    assert "workspace_size_per_gpu_in_mb" not in files["model.py"]
    assert f'"--workspace_size_per_gpu", type=int, default={default},' in files["task.py"]
