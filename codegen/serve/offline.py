"""Offline scores of raw rows, the way training saw them: the saved NVTabular workflow (in this process), then
the runtime's ``read_split`` (train_torch.py's reader) and the script's ``Model`` with the checkpoint's weights, then a sigmoid. ``ctrgen query
--compare`` and ``make demo`` hold the served scores against these.

Everything is read from the assembled repository (``<name>_nvt/<v>/workflow/``, ``<name>/<v>/train_torch.py``) and
the checkpoint folder train_torch.py wrote (``model.pt``, ``features.json``).
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import warnings
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..inputs import MAX_META_BYTES, check_regular, read_json

ENSEMBLE_SUFFIX, NVT_SUFFIX = "_ens", "_nvt"


def _version_dir(model_dir: Path) -> Path:
    versions = sorted((p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    if not versions:
        raise UserError.one(model_dir, "no version folder", field="--compare",
                            fix="pass the repository 'ctrgen assemble --checkpoint' wrote")
    return versions[-1]


def load_script(path: Path):
    """A generated train_torch.py imported as a module (its Model, RUNTIME and LAYOUT); its main() does not run."""
    spec = importlib.util.spec_from_file_location("ctrgen_offline_train_torch", path)
    assert spec is not None and spec.loader is not None     # a .py path always has a loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAX_CHECKPOINT_BYTES = 1 << 40        # weights of any size a machine holds; what matters is a regular file


def read_checkpoint(checkpoint: Path, field: str = "--compare") -> tuple[dict, object]:
    """(features.json, state_dict) of train_torch.py's output folder; a file that is no checkpoint is one line naming
    ``field``, the option that gave it."""
    import torch

    weights, features_path = checkpoint / "model.pt", checkpoint / "features.json"
    if not checkpoint.is_dir():
        raise UserError.one(checkpoint, "checkpoint folder not found", field=field,
                            fix="pass the --output-dir of train_torch.py (model.pt, features.json)")
    for path in (weights, features_path):
        if not os.path.lexists(path):
            raise UserError.one(path, "not found", field=field,
                                fix="train_torch.py writes model.pt and features.json into its --output-dir")
    try:    # a FIFO, a link to a device, a huge or deeply nested file: one line, nothing read whole
        features = read_json(features_path, "features.json", MAX_META_BYTES)
        check_regular(weights, "model.pt", MAX_CHECKPOINT_BYTES)
    except UserError as exc:
        raise UserError([replace(p, field=field) for p in exc.problems]) from None
    if not zipfile.is_zipfile(weights):
        raise UserError.one(weights, "not a PyTorch checkpoint (torch.save writes a zip archive)", field=field,
                            fix="pass the model.pt train_torch.py wrote")
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as exc:     # noqa: BLE001  (a damaged or hostile file fails in many ways)
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else "damaged"
        raise UserError.one(weights, f"cannot read the checkpoint ({type(exc).__name__}: {first})",
                            field=field, fix="pass the model.pt train_torch.py wrote") from None
    return features, state


def offline_scores(repo: Path, ensemble: str, checkpoint: Path, frame) -> np.ndarray:
    """Scores of the raw rows ``frame`` (request columns only) by the workflow and the checkpoint's Model: (rows,
    columns of Model.forward's output), a column per label in features.json's order (the served outputs' order)."""
    import torch

    name = ensemble[:-len(ENSEMBLE_SUFFIX)] if ensemble.endswith(ENSEMBLE_SUFFIX) else ensemble
    workflow_dir = _version_dir(repo / (name + NVT_SUFFIX)) / "workflow"
    script_path = _version_dir(repo / name) / "train_torch.py"
    for path in (workflow_dir, script_path):
        if not path.exists():
            raise UserError.one(path, "not found: --compare scores with the repository's workflow and "
                                "train_torch.py", field="--compare",
                                fix="pass the repository 'ctrgen assemble --checkpoint' wrote")
    features, state = read_checkpoint(checkpoint)
    script = load_script(script_path)
    from ..runtime import RuntimeMismatch, require
    from ..runtime.data import read_split

    try:
        require(getattr(script, "RUNTIME", "?"), str(script_path))
    except RuntimeMismatch as exc:
        raise UserError.one(script_path, str(exc), field="--compare",
                            fix="assemble the repository again with this ctrgen") from None
    labels = [label["name"] for label in features.get("labels", [])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import nvtabular as nvt

        workflow = nvt.Workflow.load(str(workflow_dir))
        present = [c for c in workflow.input_schema.column_names if c not in frame.columns]
        if present:
            workflow.remove_inputs(present)          # the label columns: raw rows do not carry them
        out = workflow.transform(nvt.Dataset(frame, cpu=True)).to_ddf().compute().reset_index(drop=True)
    for label in labels:
        out[label] = np.zeros(len(out), np.float32)  # read_split reads the labels too; unused here
    model = script.Model(features)
    try:
        model.load_state_dict(state)
    except (RuntimeError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise UserError.one(checkpoint / "model.pt", f"the weights do not fit the model ({first})",
                            field="--compare", fix="pass the checkpoint this repository's model was trained to") from None
    model.eval()
    with tempfile.TemporaryDirectory(prefix="ctrgen-offline-") as tmp:
        path = Path(tmp) / "transformed.parquet"
        out.to_parquet(path)
        arrays = read_split([path], features)
    with torch.no_grad():
        logits = model(torch.from_numpy(arrays["dense"]), *[torch.from_numpy(ids) for ids in arrays["sparse"]])
    return torch.sigmoid(logits).double().numpy().reshape(len(out), -1)
