"""generated/<name>/triton_torch/ without a server: configs through Triton's ModelConfig, the ensemble wiring and
dtypes, the files of each version folder, spec errors, determinism, and ``ctrgen assemble --checkpoint``'s checks."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path, PurePosixPath

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from codegen import __version__
from codegen.pipeline import open_spec, render_spec
from codegen.triton.layout import repository_sources
from codegen.triton.lint.modelconfig import load_config
from tests.conftest import REPO, run_ctrgen, scratch_lock, shared_scratch
from tests.schema_files import MOVIELENS, write_output_schema
from tests.specfactory import MOVIELENS_LOCK, write_spec

GENERATED = REPO / "generated"
TORCH_SPECS = sorted(p.stem for p in (REPO / "specs").glob("*.yaml") if "torch" in open_spec(p).spec.targets)
MULTI_LABEL = {"mmoe": ("50k_label", "married_label"), "shared_bottom": ("50k_label", "married_label")}


def configs(name: str) -> dict[str, mc.ModelConfig]:
    """The PyTorch repository's configs as `ctrgen assemble` composes it (triton_torch/ + what it shares)."""
    return {rel.parent.name: load_config(p).config for rel, p in repository_sources(GENERATED / name, "triton_torch").items()
            if rel.name == "config.pbtxt"}


def dtypes(tensors) -> dict[str, str]:
    return {t.name: mc.DataType.Name(t.data_type) for t in tensors}


def test_every_torch_spec_has_a_torch_repository():
    # Every example trains with torch but the HugeCTR 3.2 continuous-training one (CreateMOS, HugeCTR only).
    hugectr_only = {"wdl_continuous"}
    assert TORCH_SPECS == sorted(p.stem for p in (REPO / "specs").glob("*.yaml") if p.stem not in hugectr_only)
    for name in TORCH_SPECS:
        assert sorted(configs(name)) == [name, f"{name}_ens", f"{name}_nvt"]
        assert not (GENERATED / name / "triton_torch" / "ps.json").exists()
        # generated/ holds only the model step: the preprocessing model and the ensemble are triton/'s, but for
        # several labels, whose ensemble names one output per label (the HugeCTR model has one).
        own = GENERATED / name / "triton_torch"
        several = name in MULTI_LABEL
        assert {p.relative_to(own).parts[0] for p in own.rglob("*") if p.is_file()} == \
            ({name, f"{name}_ens"} if several else {name})


@pytest.mark.parametrize("name", TORCH_SPECS)
def test_ensemble_wiring_and_dtypes_agree(name):
    cfgs = configs(name)
    nvt, model, ens = cfgs[f"{name}_nvt"], cfgs[name], cfgs[f"{name}_ens"]
    assert model.backend == "python" and nvt.backend == "python" and ens.platform == "ensemble"
    assert nvt.parameters["output_model"].string_value == "hugectr"      # the format: the HugeCTR backend's inputs
    assert model.max_batch_size == nvt.max_batch_size == ens.max_batch_size
    # The model consumes exactly what the preprocessing model produces, with the same data types.
    assert dtypes(model.input) == dtypes(nvt.output)
    assert set(dtypes(model.input)) == {"DES", "CATCOLUMN", "ROWINDEX"}
    outputs = MULTI_LABEL.get(name, ("OUTPUT0",))         # several labels: one output per label column
    assert dtypes(model.output) == dict.fromkeys(outputs, "TYPE_FP32") == dtypes(ens.output)
    assert [list(t.dims) for t in [*model.output, *ens.output]] == [[-1]] * (2 * len(outputs))
    assert dtypes(ens.input) == dtypes(nvt.input)
    first, second = ens.ensemble_scheduling.step
    assert (first.model_name, second.model_name) == (nvt.name, model.name)
    assert dict(first.input_map) == {i.name: i.name for i in nvt.input}
    assert dict(second.input_map) == {k: v for k, v in first.output_map.items()}       # X -> X_nvt -> X
    assert dict(second.output_map) == {o: o for o in outputs}
    # The HugeCTR repository's preprocessing model and (one label) ensemble are the same files.
    sources = repository_sources(GENERATED / name, "triton_torch")
    shared = (f"{name}_nvt/config.pbtxt", f"{name}_nvt/1/model.py")
    for rel in shared if name in MULTI_LABEL else (*shared, f"{name}_ens/config.pbtxt"):
        assert sources[PurePosixPath(rel)] == GENERATED / name / "triton" / rel


@pytest.mark.parametrize("name", TORCH_SPECS)
def test_version_folder_references_the_generated_script(name):
    """triton_torch/ carries no copy of train_torch.py (assemble puts generated/<name>/train_torch.py there)."""
    version = GENERATED / name / "triton_torch" / name / "1"
    assert sorted(p.name for p in version.iterdir()) == ["model.py"]
    text = (version / "model.py").read_text()
    compile(text, str(version / "model.py"), "exec")
    assert "nn.Linear" not in text and "class Model" not in text        # the layers live in train_torch.py only
    assert 'SCRIPT = "train_torch.py"' in text and "spec_from_file_location" in text
    assert "from codegen.runtime.torch_model import Serve" in text


def test_ctrgen_validate_accepts_the_torch_repository():
    for name in TORCH_SPECS:
        result = run_ctrgen("validate", str(GENERATED / name / "triton_torch"))
        assert result.returncode == 0, result.stdout + result.stderr


def test_instance_and_output_name_come_from_the_spec(tmp_path):
    spec = (REPO / "specs" / "movielens.yaml").read_text()
    spec += "triton:\n  torch:\n    instance: {kind: KIND_GPU, count: 2, gpus: [1]}\n    output_name: SCORE\n"
    rendered = render_spec(open_spec(write_spec(tmp_path, spec, MOVIELENS_LOCK, name="movielens")))
    model = rendered.triton_torch.model("")
    assert [(i.kind, i.count, i.gpus) for i in model.instances] == [("KIND_GPU", 2, (1,))]
    text = rendered.files[next(p for p in rendered.files if str(p) == "triton_torch/movielens_ens/config.pbtxt")]
    assert 'name: "SCORE"' in text
    default = render_spec(open_spec(write_spec(tmp_path, (REPO / "specs" / "movielens.yaml").read_text(),
                                               name="movielens")))
    assert [i.kind for i in default.triton_torch.model("").instances] == ["KIND_AUTO"]


def test_triton_torch_without_the_torch_target_is_a_spec_error(tmp_path):
    spec = (REPO / "specs" / "movielens.yaml").read_text().replace("targets: [hugectr, torch]", "targets: [hugectr]")
    path = write_spec(tmp_path, spec + "triton:\n  torch:\n    output_name: SCORE\n", MOVIELENS_LOCK, name="movielens")
    result = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert "movielens.yaml:" in line and "triton.torch" in line and "fix:" in line
    assert not (tmp_path / "out").exists()
    files = {str(p) for p in render_spec(open_spec(write_spec(tmp_path, spec, name="movielens"))).files}
    assert not any(p.startswith("triton_torch/") for p in files) and "triton/movielens/config.pbtxt" in files


# Determinism of the PyTorch repository across hash seeds (and its equality with the committed one): one process per
# seed for two specs, in tests/test_triton_repo.py's test_generation_is_deterministic_across_hash_seeds.


# ---- ctrgen assemble --checkpoint ----------------------------------------------------------------------------------

def locked_movielens_workflow() -> Path:
    """The demo's saved MovieLens workflow with its output schema given the committed lock's cardinalities (what
    assemble checks against the lock). One copy per session in its scratch folder, which no test changes: assemble
    proves that a workflow.pkl loads in a process of its own (NVTabular's import, ~2 s), once per process for one
    unchanged file (tests/test_triton_repo.py and tests/test_triton_instances.py assemble with it too)."""
    from demo_data import built_demo

    folder = shared_scratch() / "movielens-workflow-locked"
    with scratch_lock("movielens-workflow-locked"):
        if not folder.exists():
            staged = folder.with_name(folder.name + ".tmp")
            shutil.rmtree(staged, ignore_errors=True)
            shutil.copytree(built_demo().paths["movielens"]["workflow"], staged / "workflow")
            write_output_schema(staged / "workflow", MOVIELENS, label="rating")
            staged.rename(folder)
    return folder / "workflow"


@pytest.fixture
def inputs(tmp_path):
    """The session's saved workflow (above) and a checkpoint folder shaped like train_torch.py's output (model.pt a
    state dict of tensors, as torch.save writes it)."""
    import torch

    workflow = locked_movielens_workflow()
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    torch.save({"table.weight": torch.zeros(4, 2)}, checkpoint / "model.pt")
    features = json.loads((GENERATED / "movielens" / "features.json").read_text())
    (checkpoint / "features.json").write_text(json.dumps(features, indent=2) + "\n")
    return workflow, checkpoint


def assemble(*args):
    return run_ctrgen("assemble", str(REPO / "specs" / "movielens.yaml"), *args)


@pytest.mark.slow
def test_assemble_checkpoint_builds_the_repository(inputs, tmp_path):
    """Seconds when it is its process's first assemble: the session's locked workflow (and the demo, if no test built
    it yet) is made and proven to load in a process of its own."""
    workflow, checkpoint = inputs
    out = tmp_path / "repo"
    result = assemble("--workflow", str(workflow), "--checkpoint", str(checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (out / "movielens" / "1").iterdir()) == \
        ["features.json", "model.pt", "model.py", "train_torch.py"]
    assert (out / "movielens" / "1" / "train_torch.py").read_bytes() == \
        (GENERATED / "movielens" / "train_torch.py").read_bytes()
    assert (out / "movielens_nvt" / "1" / "workflow" / "workflow.pkl").is_file()
    # One copy of ctrgen's runtime at the root, its version in MANIFEST.json; none inside a model folder.
    runtime = out / "codegen" / "runtime"
    assert sorted(p.name for p in runtime.iterdir()) == sorted(p.name for p in (REPO / "codegen" / "runtime").glob("*.py"))
    assert [p for p in out.rglob("trainer.py")] == [runtime / "trainer.py"]
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert manifest["runtime"]["version"] == __version__ == manifest["ctrgen_version"]
    assert manifest["runtime"]["files"]["codegen/runtime/trainer.py"] == \
        hashlib.sha256((runtime / "trainer.py").read_bytes()).hexdigest()
    assert f"__version__ = {__version__!r}" in (out / "codegen" / "__init__.py").read_text()
    assert not (out / "ps.json").exists()
    assert "tritonserver --model-repository=/model --model-control-mode=explicit --load-model=movielens_ens" \
        in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("case,expected", [
    ("features", "trained on other features than the spec's"),
    ("missing", "trained model not found"),
    ("not-zip", "not a PyTorch state_dict file"),
    ("both", "pass exactly one of --weights (HugeCTR) and --checkpoint (PyTorch)"),
])
def test_assemble_checkpoint_refuses_bad_input(inputs, tmp_path, case, expected):
    workflow, checkpoint = inputs
    extra = []
    if case == "features":
        features = json.loads((checkpoint / "features.json").read_text())
        features["sparse"][0]["columns"][0]["cardinality"] += 1
        (checkpoint / "features.json").write_text(json.dumps(features))
    elif case == "missing":
        (checkpoint / "model.pt").unlink()
    elif case == "not-zip":
        (checkpoint / "model.pt").write_bytes(b"not a checkpoint")
    else:
        extra = ["--weights", str(checkpoint)]
    out = tmp_path / "repo"
    result = assemble("--workflow", str(workflow), "--checkpoint", str(checkpoint), "--out", str(out), *extra)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists() and not list(tmp_path.glob(".ctrgen-assemble-*"))


@pytest.mark.slow
def test_assemble_checkpoint_chooses_best_last_or_a_snapshot(inputs, tmp_path):
    """A run folder with best/ deploys best/; RUN_DIR/last the folder's own model.pt; checkpoint_200.pt its weights;
    MANIFEST.json says which."""
    import torch

    workflow, run = inputs
    (run / "best").mkdir()
    torch.save({"table.weight": torch.ones(4, 2)}, run / "best" / "model.pt")
    shutil.copy(run / "features.json", run / "best" / "features.json")
    (run / "metrics.json").write_text(json.dumps({
        "iterations": 300, "best": {"metric": "auc", "iteration": 100, "value": 0.71}, "auc": 0.7, "optimizer": "Adam",
        "lr": 0.001, "data": {"train_rows": 4774, "eval_rows": 1226, "steps_per_epoch": 18,
                              "eval_label_mean": {"rat|ing": 0.43}}}))
    features = json.loads((run / "features.json").read_text())
    torch.save({"model": {"table.weight": torch.full((4, 2), 2.0)}, "optimizer": {}, "iteration": 200,
                "features": features}, run / "checkpoint_200.pt")
    for asked, which, value, iteration in ((run, "best", 1.0, 100), (run / "last", "last", 0.0, 300),
                                           (run / "checkpoint_200.pt", "checkpoint_200.pt", 2.0, 200)):
        out = tmp_path / f"repo-{which}"
        result = assemble("--workflow", str(workflow), "--checkpoint", str(asked), "--out", str(out))
        assert result.returncode == 0, result.stderr
        weights = torch.load(out / "movielens" / "1" / "model.pt", weights_only=True)
        assert weights["table.weight"].flatten().tolist() == [value] * 8, which
        assert json.loads((out / "movielens" / "1" / "features.json").read_text()) == features
        chosen = json.loads((out / "MANIFEST.json").read_text())["checkpoint"]
        assert chosen["weights"] == which and chosen["iteration"] == iteration and chosen["asked"] == str(asked)
        assert f"weights: {which} (iteration {iteration})" in result.stderr
        # The model card at the root: the generated one, then the deployed run's metrics (a label name escaped).
        card = (out / "README.md").read_text()
        assert card.startswith((GENERATED / "movielens" / "README.md").read_text())
        assert f"Weights: `{which}` (iteration {iteration}), deployed by `ctrgen assemble --checkpoint {asked}`" in card
        for row in ("| training / evaluation rows | `4,774 / 1,226` |", "| label mean (CTR) | `rat\\|ing 0.43 (eval)` |",
                    "| best evaluation | `auc 0.71 at iteration 100 (best/)` |", "| eval AUC (last) | `0.7` |",
                    "| iterations | `300 (16.67 epochs of 18 iterations)` |", "| optimizer, learning rate | `Adam, 0.001` |"):
            assert row in card, row
    result = assemble("--workflow", str(workflow), "--checkpoint", str(run / "checkpoint_9.pt"), "--out",
                      str(tmp_path / "none"))
    assert result.returncode == 2 and "checkpoint_9.pt: --checkpoint: checkpoint file not found" in result.stderr, result.stderr


@pytest.mark.slow
def test_assemble_puts_the_onnx_step_in_place_of_the_python_one(tmp_path):
    """The repository assemble stages, with the step swapped in before it is moved into place: the python model's
    files out, model.onnx in, its config the onnxruntime one; the preprocessing model and the ensemble as generated.
    Here, beside the other assemble tests, the session's locked workflow is proven to load once for all of them."""
    import numpy as np
    import torch

    from codegen.export.vcsr import export_vcsr, tables_of
    from codegen.serve.offline import load_script
    from codegen.triton.deploy.assemble import assemble
    from codegen.triton.layout import rendered_repository

    rendered = render_spec(open_spec(REPO / "specs" / "dcn.yaml"))      # small tables, 13 continuous columns
    plan = rendered.triton_torch
    features_json = rendered.files[PurePosixPath("features.json")]
    features = json.loads(features_json)
    torch.manual_seed(0)
    model = load_script(REPO / "generated" / "dcn" / "train_torch.py").Model(features).eval()
    rng = np.random.default_rng(1)
    sparse = []
    for s in features["sparse"]:
        ids = np.full((6, len(s["columns"]), s["nnz"]), -1, dtype=np.int64)
        for j, c in enumerate(s["columns"]):
            ids[:, j, 0] = rng.integers(0, c["cardinality"], 6)
        sparse.append(ids)
    arrays = {"labels": np.zeros((6, 1), np.float32), "sparse": sparse,
              "dense": rng.normal(size=(6, len(features["continuous"]))).astype(np.float32)}
    outputs = [o.name for o in plan.model("").outputs]
    data = export_vcsr(model, features, tables_of(plan, features), outputs, arrays)
    checkpoint = tmp_path / "run"
    checkpoint.mkdir()
    torch.save(model.state_dict(), checkpoint / "model.pt")
    (checkpoint / "features.json").write_text(features_json)
    out = tmp_path / "repo"
    # The workflow is any saved one (the lock check is the command's): the session's MovieLens one, loaded once.
    result = assemble(plan, REPO / "generated" / "dcn", workflow=locked_movielens_workflow(), weights=checkpoint,
                      out=out, features_json=features_json,
                      train_torch=rendered.files[PurePosixPath("train_torch.py")], onnx=data)
    assert sorted(p.name for p in (out / "dcn" / "1").iterdir()) == ["model.onnx"]
    assert (out / "dcn" / "1" / "model.onnx").read_bytes() == data
    assert "dcn/1/model.onnx" in result.copied and "dcn/1/model.pt" not in result.copied
    config = (out / "dcn" / "config.pbtxt").read_text()
    assert 'backend: "onnxruntime"' in config and "count: " in config          # assemble's instance count kept
    ensemble = PurePosixPath("dcn_ens/config.pbtxt")
    assert (out / ensemble).read_text() == rendered_repository(rendered.files, "triton_torch")[ensemble]
    assert (out / "dcn_nvt" / "1" / "model.py").is_file()
    assert (out / "dcn_nvt" / "1" / "workflow" / "workflow.pkl").is_file()
