"""The typed model (codegen.model): build_model holds every target's settings, and render_model makes the committed
generated/ folder from the model alone (issue 23 item 2)."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import pytest

from codegen.errors import UserError
from codegen.lock import load_features
from codegen.model.build import build_model
from codegen.model.types import ClusterLaunch, StudyParameter
from codegen.render.targets import render_model
from codegen.specfile.context import open_spec

REPO = Path(__file__).resolve().parents[1]


def _model(name: str):
    ctx = open_spec(REPO / "specs" / f"{name}.yaml")
    return build_model(ctx, *load_features(ctx, check_stale=False))


def _committed(name: str) -> dict[PurePosixPath, str]:
    folder = REPO / "generated" / name
    return {PurePosixPath(p.relative_to(folder).as_posix()): p.read_text(encoding="utf-8")
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}   # tests' bytecode


def test_the_model_holds_the_launch_settings_plans_and_provenance():
    model = _model("deepfm_multinode")
    assert model.targets == {"hugectr", "task", "cluster", "torch"}
    assert model.cluster == ClusterLaunch(nodes=2, gpus_per_node=8, python="python3", hosts=("node0", "node1"),
                                          sbatch=(("partition", "gpu"), ("time", "04:00:00")), rdzv_backend="c10d",
                                          rdzv_endpoint="node0:29500")
    assert model.vertex is None and model.etl is None
    assert model.triton is not None and model.triton.step == "hugectr"
    assert model.triton_torch is not None and model.triton_torch.step == "torch"
    assert model.job.nodes == 2 and model.job.gpu_count == 16
    prov = model.provenance
    assert (prov.spec, prov.lock) == ("specs/deepfm_multinode.yaml", "specs/criteo.features.lock.json")
    manifest = json.loads((REPO / "generated" / "deepfm_multinode" / "MANIFEST.json").read_text())
    assert prov.digest == manifest["inputs_sha256"] and prov.features == manifest["features"]


def test_the_vertex_settings_are_typed_and_checked():
    model = _model("deepfm_vertex")
    v = model.vertex
    assert v is not None and model.cluster is None
    assert (v.display_name, v.machine_type, v.eval_batches) == ("hugectr-deepfm-v01", "a2-highgpu-4g", 2500)
    assert v.train_data == ("/gcs/{bucket}/criteo/train/_file_list.txt",)
    assert v.study is not None and v.study.parameters == (
        StudyParameter(name="lr", type="double", min=0.001, max=0.01, values=None, scale="log"),
        StudyParameter(name="dropout_rate", type="discrete", min=None, max=None, values=(0.4, 0.5, 0.6),
                       scale=None))
    assert model.task_eval_batches == 2500


@pytest.mark.parametrize("name", ["deepfm_multinode", "deepfm_vertex", "wdl_continuous"])
def test_render_model_makes_the_committed_folder(name):
    """Every file of generated/<name>/, byte for byte, from the model (the renderers never see the spec)."""
    assert render_model(_model(name)) == _committed(name)


def test_a_rule_between_sections_is_refused_by_the_builder_with_its_line(tmp_path):
    spec = tmp_path / "specs" / "m.yaml"
    spec.parent.mkdir()
    text = (REPO / "specs" / "deepfm_multinode.yaml").read_text().replace("hosts: [node0, node1]", "hosts: [node0]")
    spec.write_text(text)
    (spec.parent / "criteo.features.lock.json").write_text((REPO / "specs" / "criteo.features.lock.json").read_text())
    ctx = open_spec(spec)
    with pytest.raises(UserError) as info:
        build_model(ctx, *load_features(ctx, check_stale=False))
    (problem,) = info.value.problems
    assert problem.field == "cluster.hosts" and problem.line == text.splitlines().index("  hosts: [node0]") + 1


@pytest.mark.parametrize("name", ["deepfm_vertex", "deepfm_multinode", "movielens_genres"])
def test_the_model_holds_no_spec_object(name):
    """Renderers get plain values: nothing in the model (walked through dataclasses, tuples, lists and dicts) is one of
    the spec's pydantic classes (movielens_genres: the ETL plan with a join; deepfm_vertex: a study)."""
    import dataclasses

    from pydantic import BaseModel

    seen: list[str] = []

    def walk(value: object, where: str) -> None:
        if isinstance(value, BaseModel):
            seen.append(f"{where}: {type(value).__module__}.{type(value).__name__}")
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                walk(getattr(value, f.name), f"{where}.{f.name}")
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{where}[{k!r}]")

    model = _model(name)
    assert (model.etl is not None) == (name == "movielens_genres")
    walk(model, "model")
    assert seen == []



def test_model_card_names_the_label_column():
    """The card's label is the data's column (movielens: rating), not the graph's label tensor (input.label_name)."""
    from codegen.pipeline import render_spec

    repo = Path(__file__).resolve().parents[1]
    card = render_spec(open_spec(repo / "specs" / "movielens.yaml")).files[PurePosixPath("README.md")]
    assert "Label: `rating`." in card
