"""The sample families (tests/test_presets_families.py: NCF, GMF, NeuMF, the DGX A100 MLP DLRM, DIN, BST, MMoE,
shared-bottom) train: each committed generated train_torch.py runs a few steps on small synthetic data of its columns
in this process (tests/synthetic_runs.py), with a finite loss and an AUC per label. (BST's forward() once named a
tensor like the runtime's sequence_mask and called it: an UnboundLocalError that only a run shows.)"""

from __future__ import annotations

import ast
import json
import math

import pytest

from conftest import REPO
from synthetic_runs import trained
from test_presets_families import SPANS

FAMILIES = tuple(SPANS)                  # every sample family, with the releases that build it


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_trains_from_its_generated_script(tmp_path, name):
    run = trained(tmp_path, name)["run"]
    points = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    losses = [p["value"] for p in points if p["tag"] == "train/loss"]
    assert losses and all(math.isfinite(v) for v in losses), points
    labels = [c["name"] for c in json.loads((REPO / "generated" / name / "features.json").read_text())["labels"]]
    aucs = {p["tag"] for p in points if p["tag"].startswith("eval/auc")}
    assert aucs == {"eval/auc", *(f"eval/auc/{label}" for label in labels if len(labels) > 1)}, (aucs, labels)
    assert (run / "model.pt").is_file()


def _forward_locals_and_calls(source: str) -> tuple[set[str], set[str]]:
    forward = next(f for c in ast.parse(source).body if isinstance(c, ast.ClassDef) and c.name == "Model"
                   for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    assigned = {t.id for node in ast.walk(forward) if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)}
    called = {node.func.id for node in ast.walk(forward) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    return assigned, called


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in (REPO / "generated").glob("*/train_torch.py")))
def test_no_forward_local_shadows_a_function_it_calls(folder):
    assigned, called = _forward_locals_and_calls((REPO / "generated" / folder / "train_torch.py").read_text())
    assert not assigned & called, assigned & called
