"""The PyTorch target's rules run in the model builder (issue 23 item 2: every spec rule in ``build_model``, with its
spec line): what train_torch.py cannot translate is refused by ``build_model`` called directly, all problems at once,
before any renderer is imported; render/torch_model.py refuses nothing and translates exactly the types the rules
admit (``codegen.torch_target``, the one table both read)."""

from __future__ import annotations

import ast
import copy
import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codegen.errors import UserError
from codegen.lock import load_features
from codegen.model.build import build_model
from codegen.model.torch_rules import LOSS_NAMES, torch_problems
from codegen.specfile.context import open_spec
from codegen.torch_target import LAYER_TYPES, LOSS, LOSSES, OPTIMIZERS, SPARSE_OPTIMIZERS
from conftest import REPO
from test_boundaries import CRITEO_LOCK, LOCK, example, project, spec_with

NO_TRITON = {"triton.enabled": False}


def _build(folder: Path, spec: dict, lock: dict | None = None):
    ctx = open_spec(project(folder, spec_with(NO_TRITON, spec), lock))
    return build_model(ctx, *load_features(ctx, check_stale=False))


def _refusal(folder: Path, spec: dict, lock: dict | None = None) -> UserError:
    with pytest.raises(UserError) as info:
        _build(folder, spec, lock)
    return info.value


def _two_labels() -> dict:
    two = copy.deepcopy(LOCK)
    two["labels"] = [{"name": "rating", "dtype": "float32"}, {"name": "liked", "dtype": "float32"}]
    return two


def _ending_with(loss: str, target_weights: list | None = None) -> dict:
    """A layers model whose loss is ``loss`` (MultiCrossEntropyLoss: with ``target_weights``, if given)."""
    weights = {"target_weight_vec": target_weights} if target_weights is not None else {}
    return {"model": {"preset": "layers", "layers": [
        {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32},
        {"type": "InnerProduct", "bottom": "r", "top": "fc", "num_output": 1},
        {"type": loss, "bottom": ["fc", "label"], "top": "loss", **weights}]}, "hugectr_version": "23.06"}


def _label_dim(width: int) -> dict:
    return {"model": {"preset": "layers", "layers": [
        {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32},
        {"type": "InnerProduct", "bottom": "r", "top": "fc", "num_output": width},
        {"type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}]}, "input.label_dim": width}


DROP = "drop 'torch' from targets"
# (id, accepted spec, refused spec, lock, field, message, fix): each rule's own message and fix, as before the move.
RULES = [
    ("optimizer", spec_with({"optimizer.type": "RMSProp", "hugectr_version": "23.06"}),
     spec_with({"optimizer.type": "Ftrl", "hugectr_version": "23.06"}), None, "optimizer.type",
     "HugeCTR's SparseEmbedding has no Ftrl update (sparse_optimizer.cu's update_params throws 'Invalid optimizer "
     "type'; only the embedding collection's tables train with Ftrl)",
     f"look the tables up through embedding_collection, use another optimizer, or {DROP}"),
    ("loss-target-weights", spec_with(_ending_with("MultiCrossEntropyLoss", [0.5])),
     spec_with(_ending_with("MultiCrossEntropyLoss")), None, "model.layers[2]",
     "layer 'loss': the torch target cannot translate this MultiCrossEntropyLoss (its target_weight_vec holds 0 "
     "weights for 1 input columns: HugeCTR throws 'target_weight.size() != input_tensor.get_dims()[0]')",
     f"give target_weight_vec one weight per input column, or {DROP}"),
    ("label-dim", spec_with(_label_dim(1)), spec_with(_label_dim(2)), None, "input.label_dim",
     "the torch target reads one Parquet label column per label, and HugeCTR's Parquet reader takes label_dim + "
     "dense_dim label and continuous columns, labels first: a label of dimension 2 needs as many label columns, "
     "which the features name as labels of dimension 1",
     f"list the label columns under features.label and remove input.label_dim, or {DROP}"),
    ("continuous", spec_with({"optimizer.type": "AdaGrad"}, example("wdl_continuous_etc")),
     spec_with({"optimizer.type": "MomentumSGD"}, example("wdl_continuous_etc")), CRITEO_LOCK, "optimizer.type",
     "continuous training with the torch target updates only the embedding rows of each pass, which needs a sparse "
     "MomentumSGD (torch has none)", f"use one of AdaGrad, Adam, SGD, or {DROP}"),
]


@pytest.mark.parametrize("ok, bad, lock, field, message, fix", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_build_model_refuses_what_the_torch_target_cannot_translate(tmp_path, ok, bad, lock, field, message, fix):
    """build_model alone (no renderer): the accepted side builds a model with the torch target, the refused side is
    one problem on the field's spec line with the rule's message and fix."""
    assert "torch" in _build(tmp_path / "ok", ok, lock).targets
    (problem,) = _refusal(tmp_path / "bad", bad, lock).problems
    assert (problem.field, problem.message, problem.fix) == (field, message, fix)
    assert problem.file.endswith("m.yaml") and problem.line is not None


def test_without_the_torch_target_the_rules_do_not_run(tmp_path):
    bad = spec_with({"optimizer.type": "Ftrl", "hugectr_version": "23.06", "targets": ["hugectr"]})
    assert _build(tmp_path, bad).targets == {"hugectr"}


def test_every_problem_of_a_spec_is_reported_at_once_on_its_line(tmp_path):
    bad = spec_with({**_label_dim(2), "optimizer.type": "Ftrl", "hugectr_version": "23.06"})
    bad["model"]["layers"][2]["type"] = "MultiCrossEntropyLoss"
    problems = _refusal(tmp_path, bad).problems
    assert sorted(p.field for p in problems) == ["input.label_dim", "model.layers[2]", "optimizer.type"]
    text = (tmp_path / "specs" / "m.yaml").read_text().splitlines()
    at = {p.field: text[p.line - 1].strip() for p in problems if p.line is not None}
    assert at == {"input.label_dim": "label_dim: 2", "model.layers[2]": "- type: MultiCrossEntropyLoss",
                  "optimizer.type": "type: Ftrl"}
    assert [p.line for p in problems] == sorted(p.line for p in problems)


def test_a_graph_without_the_loss_is_refused():
    """Not reachable from a spec today (HugeCTR's own checks want a loss, another loss is an untranslated type):
    the rule on the built job with its loss taken away."""
    ctx = open_spec(REPO / "specs" / "movielens.yaml")
    job = build_model(ctx, *load_features(ctx, check_stale=False)).job
    assert torch_problems(job) == []
    lossless = dataclasses.replace(job, graph=dataclasses.replace(
        job.graph, layers=tuple(x for x in job.graph.layers if x.type != LOSS)))
    assert torch_problems(lossless) == [(("model",), "the graph ends without a loss layer",
                                         f"end it with {LOSS_NAMES}, or {DROP}")]


def test_the_builder_refuses_before_any_renderer_is_imported(tmp_path):
    """In a fresh interpreter: build_model refuses an untranslatable spec, and no codegen.render module (nor
    anything of the renderer layer) was ever loaded."""
    path = project(tmp_path, spec_with({**NO_TRITON, "optimizer.type": "Ftrl", "hugectr_version": "23.06"}))
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from codegen.errors import UserError
        from codegen.lock import load_features
        from codegen.model.build import build_model
        from codegen.specfile.context import open_spec
        ctx = open_spec(Path({str(path)!r}))
        try:
            build_model(ctx, *load_features(ctx, check_stale=False))
        except UserError as exc:
            print(exc.format())
        print(sorted(m for m in sys.modules if m.startswith(("codegen.render", "codegen.etl.render",
                                                              "codegen.triton.plan.configs"))))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert "optimizer.type: HugeCTR's SparseEmbedding has no Ftrl update" in out
    assert out.splitlines()[-1] == "[]"


def _translated_types() -> set[str]:
    """The layer types render/torch_model.py's ``_layer`` has a branch for (``t == "X"``, ``t in ("X", "Y")``,
    ``t in LOSSES``)."""
    source = (REPO / "codegen" / "render" / "torch_model.py").read_text(encoding="utf-8")
    func = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "_layer")
    found: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) \
                and isinstance(node.test.left, ast.Name) and node.test.left.id == "t":
            (op,), (right,) = node.test.ops, node.test.comparators
            if isinstance(op, ast.Eq) and isinstance(right, ast.Constant):
                found.add(right.value)
            elif isinstance(op, ast.Eq) and isinstance(right, ast.Name) and right.id == "LOSS":
                found.add(LOSS)
            elif isinstance(op, ast.In) and isinstance(right, ast.Name) and right.id == "LOSSES":
                found.update(LOSSES)
            elif isinstance(op, ast.In) and isinstance(right, ast.Tuple):
                found.update(e.value for e in right.elts if isinstance(e, ast.Constant))
    return found


def test_the_renderer_translates_exactly_the_layer_types_the_rules_admit():
    assert _translated_types() == LAYER_TYPES


def test_the_renderer_reads_the_one_table_and_refuses_nothing():
    """The torch facts are written once (codegen/torch_target.py) and the renderer holds no user-facing refusal."""
    from codegen.render import torch_model

    assert torch_model.OPTIMIZERS is OPTIMIZERS and torch_model.SPARSE_OPTIMIZERS is SPARSE_OPTIMIZERS
    source = (REPO / "codegen" / "render" / "torch_model.py").read_text(encoding="utf-8")
    for gone in ("TorchTargetError", "check_torch_target", "Located", "UserError", "drop 'torch' from targets"):
        assert gone not in source, gone
    assert set(SPARSE_OPTIMIZERS) <= set(OPTIMIZERS)
