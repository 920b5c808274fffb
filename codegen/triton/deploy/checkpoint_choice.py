"""Which trained weights ``ctrgen assemble --checkpoint PATH`` deploys, and how MANIFEST.json records the choice.

PATH may be:
- a run folder (train_torch.py's --output-dir): its ``best/`` when the run kept one (the best evaluation's weights,
  runtime.early_stop), else the folder's own model.pt (the last weights, as before ``best/`` existed);
- ``RUN_DIR/best`` or ``RUN_DIR/last``: the best weights or the last ones (``last`` names no folder: the run folder's
  own model.pt and features.json);
- a ``checkpoint_<iter>.pt`` or ``pass_<k>.pt`` the trainer saved: its model weights and features are written to
  a temporary folder shaped like a run folder, then checked and copied like one.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ...errors import UserError
from ...inputs import read_json
from ...runtime.contract import BEST_DIR, FEATURES_FILE

LAST = "last"
FIELD = "--checkpoint"


@dataclass(frozen=True)
class Choice:
    folder: Path          # holds model.pt and features.json
    manifest: dict        # MANIFEST.json's "checkpoint": what was asked, which weights, their iteration
    run_dir: Path | None = None   # the run folder whose metrics.json tells of the weights (the model card's run)


def _iteration(run_dir: Path, which: str) -> int | None:
    """The iteration of the best or last weights, as the run's metrics.json tells it (None without one)."""
    path = run_dir / "metrics.json"
    if not path.is_file():
        return None
    try:
        metrics = read_json(path, "metrics.json")
    except UserError:
        return None
    value = (metrics.get("best") or {}).get("iteration") if which == BEST_DIR else metrics.get("iterations")
    return value if type(value) is int else None


def _record(asked: Path, which: str, path: Path, iteration: int | None) -> dict:
    return {"asked": str(asked), "weights": which, "path": str(path.resolve()), "iteration": iteration}


@contextmanager
def chosen_checkpoint(path: Path, field: str = FIELD) -> Iterator[Choice]:
    """The folder to deploy from for ``--checkpoint path`` (module docstring); a temporary one for a .pt file,
    removed on exit. ``field``: the option or argument that gave ``path``, as refusals name it."""
    if path.suffix == ".pt" and path.is_file():
        with tempfile.TemporaryDirectory(prefix="ctrgen-checkpoint-") as tmp:
            iteration = _extract(path, Path(tmp), field)
            yield Choice(Path(tmp), _record(path, path.name, path, iteration), path.parent)
        return
    if path.name == LAST and not path.exists() and (path.parent / "model.pt").is_file():
        yield Choice(path.parent, _record(path, LAST, path.parent, _iteration(path.parent, LAST)), path.parent)
        return
    if path.is_dir() and (path / BEST_DIR / "model.pt").is_file():
        yield Choice(path / BEST_DIR, _record(path, BEST_DIR, path / BEST_DIR, _iteration(path, BEST_DIR)), path)
        return
    if path.is_dir() and path.name == BEST_DIR:
        yield Choice(path, _record(path, BEST_DIR, path, _iteration(path.parent, BEST_DIR)), path.parent)
        return
    if path.suffix == ".pt" and not path.exists():
        raise UserError.one(path, "checkpoint file not found", field=field,
                            fix="pass a checkpoint_<iter>.pt or pass_<k>.pt of the run folder, or the folder")
    yield Choice(path, _record(path, LAST, path, _iteration(path, LAST)), path)


def _extract(path: Path, dest: Path, field: str = FIELD) -> int | None:
    """model.pt (the checkpoint's model weights) and features.json of a checkpoint_<iter>.pt into ``dest``; returns
    its iteration. Loaded as data only (weights_only: no code in the pickle runs)."""
    import torch

    if not zipfile.is_zipfile(path):
        raise UserError.one(path, "not a checkpoint train_torch.py saved (torch.save writes a zip archive)",
                            field=field, fix="pass a checkpoint_<iter>.pt or pass_<k>.pt of the run folder")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:     # noqa: BLE001  (a damaged or hostile file fails in many ways)
        raise UserError.one(path, f"does not open as a checkpoint ({type(exc).__name__}: "
                            f"{str(exc).strip().splitlines()[0][:200] if str(exc).strip() else 'damaged'})",
                            field=field, fix="pass a checkpoint_<iter>.pt or pass_<k>.pt train_torch.py saved") from None
    model = state.get("model") if isinstance(state, dict) else None
    if not isinstance(model, dict) or not model or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in model.items()):
        raise UserError.one(path, "holds no model weights (a checkpoint of train_torch.py has 'model', a map of "
                            "parameter names to tensors)", field=field, fix="pass a checkpoint_<iter>.pt or "
                            "pass_<k>.pt train_torch.py saved")
    torch.save(model, dest / "model.pt")
    features = state.get("features")
    if isinstance(features, dict):
        (dest / FEATURES_FILE).write_text(json.dumps(features, indent=2) + "\n", encoding="utf-8")
    elif (path.parent / FEATURES_FILE).is_file():      # a checkpoint without them: the run folder's
        shutil.copyfile(path.parent / FEATURES_FILE, dest / FEATURES_FILE)
    iteration = state.get("iteration")
    return iteration if type(iteration) is int else None
