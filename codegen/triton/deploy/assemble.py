"""``ctrgen assemble``: a deployable Triton repository = the generated one + the saved workflow + the trained files.

The generated repository (``generated/<name>/triton/``, or ``triton_torch/`` for the PyTorch model, with the files
it shares with the model's folder: codegen.triton.layout) must be up to date with the spec (the same check as
``ctrgen check``). The planner names what each model still needs in its version
folder (``ModelPlan.required_files``): the preprocessing model its ``workflow/``, the HugeCTR model the dense file and
one sparse folder per table, exactly as ps.json and config.pbtxt name them, the PyTorch model ``model.pt`` and
``features.json`` of train_torch.py's output folder. Everything is copied into a temporary folder beside ``--out`` and moved into
place at the end, so a failed run leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ...atomic import clean_stale, stage as new_stage, swap_in
from ...errors import Problems, UserError
from ...inputs import read_json
from ...output import check_out_root
from ..plan.repository import ENSEMBLE_SUFFIX, NVT_SUFFIX, TORCH_SCRIPT, RepositoryPlan, TorchStep
from ..layout import HUGECTR_FOLDER, TORCH_FOLDER, folder_of, rendered_repository, repository_sources
from .copying import check_state_dict, check_workflow_loads, copy_file, copy_tree
from .runtime_copy import RESERVED, write_runtime

WORKFLOW_PICKLE = "workflow.pkl"
SPARSE_PARTS = ("key", "emb_vector")
CARD = "README.md"     # the model card at the repository's root (Triton loads only the models it is told to)
KEEP = ".gitkeep"   # keeps an ensemble's empty version folder in git; the folder is made, the file not copied


@dataclass(frozen=True)
class Assembled:
    out: Path
    copied: list[str]            # paths added to the generated files, relative to out
    command: str                 # the tritonserver command line
    counts: list[str] = field(default_factory=list)   # "<model>: N instance(s)" chosen for the machine


def check_generated(model_dir: Path, files: dict[PurePosixPath, str], step: str, spec_display: str) -> None:
    """``model_dir`` (generated/<name>/) holds the repository of ``step`` as ``files`` (the rendered model folder)
    has it."""
    folder = folder_of(step)
    if not (model_dir / folder).is_dir():
        hint = (" (--generated names the model's generated folder, the one holding triton/)"
                if model_dir.name in (HUGECTR_FOLDER, TORCH_FOLDER) else "")
        raise UserError.one(model_dir / folder, f"generated Triton repository not found{hint}", field="--generated",
                            fix=f"run 'ctrgen generate {spec_display}' first, or pass --generated generated/<name>")
    have = repository_sources(model_dir, folder)
    for rel, text in rendered_repository(files, folder).items():
        path = have.get(rel)
        if path is None or path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n") != text:
            raise UserError.one(model_dir / folder, "the generated Triton repository is out of date with the spec "
                                f"({rel} {'differs' if path else 'is missing'})", field="--generated",
                                fix=f"run 'ctrgen generate {spec_display}'")


def _check_workflow(workflow: Path) -> None:
    if not (workflow / WORKFLOW_PICKLE).is_file():
        what = "not found" if not workflow.exists() else f"has no {WORKFLOW_PICKLE}"
        raise UserError.one(workflow / WORKFLOW_PICKLE if workflow.is_dir() else workflow,
                            f"saved NVTabular workflow {what}", field="--workflow",
                            fix="pass the folder Workflow.save wrote (workflow.pkl, metadata.json, categories/)")
    from ...inputs import check_regular
    from ...workflow import MAX_PICKLE_BYTES, check_categories

    check_regular(workflow / WORKFLOW_PICKLE, WORKFLOW_PICKLE, MAX_PICKLE_BYTES)
    copy_tree(workflow, None, "--workflow", MAX_PICKLE_BYTES)    # what the copy will refuse, refused first
    check_categories(workflow)


def _check_weights(weights: Path, names: tuple[str, ...], plan: RepositoryPlan, model: str,
                   problems: Problems) -> None:
    """Every trained file ps.json names must be in ``weights``; each missing one is added to ``problems``."""
    if not weights.is_dir():
        raise UserError.one(weights, "folder of trained model files not found", field="--weights",
                            fix="pass the folder where training wrote its snapshot files")
    for name in names:
        path = weights / name
        served = plan.served_path(model, name)
        if "_sparse_" in name:
            if not path.is_dir():
                problems.add(path, f"sparse model folder not found (ps.json sparse_files names {served})",
                             field="--weights", fix="copy the <prefix><i>_sparse_<iter>.model folders of training "
                             "here, or set triton.hugectr.snapshot_iteration / snapshot_prefix")
                continue
            for part in SPARSE_PARTS:
                if not (path / part).is_file():
                    problems.add(path / part, f"sparse model file not found (in {served})", field="--weights",
                                 fix="copy the whole sparse model folder from training")
        elif not path.is_file():
            problems.add(path, f"dense model file not found (ps.json dense_file names {served})",
                         field="--weights", fix="copy <prefix>_dense_<iter>.model of training here, or set "
                         "triton.hugectr.snapshot_iteration / snapshot_prefix")


def _check_checkpoint(checkpoint: Path, features_json: str) -> None:
    """model.pt and features.json of train_torch.py's --output-dir; features.json must be the one generated with the
    served train_torch.py (same columns, slot order and cardinalities), else the ids would index other rows."""
    if not checkpoint.is_dir():
        raise UserError.one(checkpoint, "checkpoint folder not found", field="--checkpoint",
                            fix="pass the --output-dir of train_torch.py (model.pt, features.json)")
    weights = checkpoint / "model.pt"
    if not weights.is_file():
        raise UserError.one(weights, "trained model not found", field="--checkpoint",
                            fix="train_torch.py writes model.pt at the end of training into its --output-dir")
    if not zipfile.is_zipfile(weights):
        raise UserError.one(weights, "not a PyTorch state_dict file (torch.save writes a zip archive)",
                            field="--checkpoint", fix="pass the model.pt train_torch.py wrote")
    path = checkpoint / "features.json"
    if not os.path.lexists(path):
        raise UserError.one(path, "features file not found", field="--checkpoint",
                            fix="train_torch.py writes features.json beside model.pt")
    trained = read_json(path, "features.json")      # a regular file of bounded size and depth
    if trained != json.loads(features_json):
        raise UserError.one(path, "the model was trained on other features than the spec's (columns, slot order or "
                            "cardinalities differ from the generated features.json)", field="--checkpoint",
                            fix="retrain with the generated train_torch.py, or regenerate from the workflow the "
                            "model was trained with ('ctrgen lock', then 'ctrgen generate')")
    check_state_dict(weights, "--checkpoint")


def assemble(plan: RepositoryPlan, model_dir: Path, *, workflow: Path, weights: Path, out: Path,
             force: bool = False, features_json: str = "", train_torch: str = "", check_workflow=None,
             cores: int | None = None, manifest: dict | None = None, card: str = "",
             onnx: bytes | None = None) -> Assembled:
    """``model_dir``: the model's generated folder (generated/<name>/), whose repository of ``plan.step`` is
    composed with the files it shares (codegen.triton.layout). ``weights``: the HugeCTR snapshot folder, or for the PyTorch repository (``plan.step == "torch"``) the
    checkpoint folder, whose features.json must equal ``features_json`` (the rendered one), and ``train_torch`` (the
    rendered train_torch.py, whose Model the PyTorch model serves) goes into the model's version folder. Every
    repository gets one copy of ctrgen's runtime at its root (runtime_copy), recorded in MANIFEST.json. ``check_workflow``:
    called with the workflow folder after the files are found, before anything is written. ``count: auto``
    instances get the count for this machine, or for one of ``cores`` cores (deploy/instances.py). ``manifest``:
    more keys for MANIFEST.json (the weights --checkpoint chose). ``card``: the model card written as README.md at the
    repository's root (none when empty). ``onnx``: the model step as this onnxruntime model (deploy/onnx_step.py)
    in place of the python-backend one, its config checked before the repository is moved into place."""
    from .instances import this_machine, write_counts

    generated = model_dir / folder_of(plan.step)
    nvt_name = plan.name + NVT_SUFFIX
    taken = [m.name for m in plan.models if m.name in RESERVED]
    if taken:
        raise UserError.one(generated, f"model {taken[0]!r}: the repository's root holds ctrgen's runtime under that "
                            "name", field="name", fix="rename the model in the spec")
    _check_workflow(workflow)
    if plan.step == TorchStep.kind:
        if not train_torch:
            raise ValueError("assemble: the PyTorch repository needs the rendered train_torch.py (train_torch=)")
        _check_checkpoint(weights, features_json)
    else:
        problems = Problems()      # every missing file at once
        for model in plan.models:
            if model.name != nvt_name and model.required_files:
                _check_weights(weights, model.required_files, plan, model.name, problems)
        problems.raise_if_any()
    if check_workflow is not None:
        check_workflow(workflow)
    check_workflow_loads(workflow)
    from ...workflow import MAX_PICKLE_BYTES as max_pickle   # each file of the workflow folder at most this

    out = Path(out)
    if out.exists() and not force:
        raise UserError.one(out, "output folder exists", field="--out", fix="pass --force to replace it")
    if out.resolve() == model_dir.resolve() or model_dir.resolve() in out.resolve().parents:
        raise UserError.one(out, "the output must not be inside the generated folder", field="--out")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise UserError.one(out, "is a symbolic link or a file, not a repository folder", field="--out",
                            fix="remove it, or name another folder")
    check_out_root(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(out.parent)
    # The repository is staged beside --out and swapped in whole (codegen.atomic).
    stage = new_stage(out.parent, out.name)
    copied: list[str] = []
    try:
        for rel, source in repository_sources(model_dir, folder_of(plan.step)).items():
            dest = stage.joinpath(*rel.parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if rel.name != KEEP:
                copy_file(source, dest, "--generated")
        for model in plan.models:
            version = stage / model.name / str(plan.version)
            version.mkdir(parents=True, exist_ok=True)
            for name in model.required_files:
                src = workflow if model.name == nvt_name else weights / name
                dest = version / name
                field, limit = ("--workflow", max_pickle) if model.name == nvt_name else ("--weights", None)
                if src.is_dir() and not src.is_symlink():
                    copy_tree(src, dest, field, limit)
                else:
                    copy_file(src, dest, field, limit)
                copied.append(f"{model.name}/{plan.version}/{name}")
                ntp = Path(str(src) + ".ntp.json")  # non-trainable parameters beside the dense file (hugectr.md §5)
                if src.is_file() and ntp.is_file():
                    copy_file(ntp, Path(str(dest) + ".ntp.json"), "--weights")
                    copied.append(f"{model.name}/{plan.version}/{ntp.name}")
        if plan.step == TorchStep.kind:
            (stage / plan.name / str(plan.version) / TORCH_SCRIPT).write_text(train_torch, encoding="utf-8")
            copied.append(f"{plan.name}/{plan.version}/{TORCH_SCRIPT}")
        if card:
            (stage / CARD).write_text(card, encoding="utf-8")
            copied.append(CARD)
        copied += write_runtime(stage, manifest)
        counts = write_counts(stage, plan, this_machine(cores))
        if onnx is not None:
            from .onnx_step import ONNX_FILE, check_step, replace_step

            config = stage / plan.name / "config.pbtxt"
            replace_step(stage / plan.name / str(plan.version), config, onnx)
            check_step(config.read_text(encoding="utf-8"),
                       (stage / f"{plan.name}{ENSEMBLE_SUFFIX}" / "config.pbtxt").read_text(encoding="utf-8"), onnx, out)
            step = f"{plan.name}/{plan.version}/"
            copied = [c for c in copied if not c.startswith(step)] + [step + ONNX_FILE]
        swap_in(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return Assembled(out=out, copied=copied, command=server_command(plan), counts=counts)


def server_command(plan: RepositoryPlan) -> str:
    root = plan.model_root.rstrip("/") or "/"
    parts = [f"tritonserver --model-repository={root}"]
    if plan.ps is not None:
        parts.append(f"--backend-config=hugectr,ps={root.rstrip('/')}/ps.json")
    parts += ["--model-control-mode=explicit", f"--load-model={plan.name}_ens"]
    return " ".join(parts)
