"""Checkpoints of a generated trainer: saved whole (atomically), resumed into the model and optimizer with the random
state dropout draws from."""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path

import torch
import torch.nn as nn

from .contract import FEATURES_FILE
from .checks import regular_file
from .errors import DataError


def resume(path: Path, model: nn.Module, optimizer, features: dict, device: torch.device,
           sharded: bool = False) -> dict:
    """Load a checkpoint of this script (pass_<k>.pt or checkpoint_<iter>.pt) into the model and optimizer. Its
    tables are whole; with sharded tables each rank maps the file and copies its own slots.

    A checkpoint is data, never code: it is unpickled with ``weights_only=True`` (tensors, numbers, strings and
    containers only; a pickle that names any other callable, such as ``os.system``, is refused before it runs), and
    each field is checked against this model before anything is loaded into it."""
    regular_file(path, "checkpoint", "pass --resume a checkpoint_<iter>.pt this trainer wrote, or train the earlier "
                 "passes first", verb="load")
    try:
        with warnings.catch_warnings():     # torch warns of a pickle protocol it did not write; refused below anyway
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu" if sharded else device, weights_only=True, mmap=sharded)
    except pickle.UnpicklingError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: refused: the checkpoint holds more than tensors and plain values ({reason}) "
                        "(fix: resume only from checkpoints this trainer wrote)") from None
    except Exception as exc:    # noqa: BLE001  (any bytes may come: the safe unpickler fails in many ways on them)
        raise DataError(f"{path}: cannot load the checkpoint ({type(exc).__name__}: {_first_line(exc)}) (fix: pass "
                        "a checkpoint_<iter>.pt or pass_<k>.pt this trainer wrote)") from None
    check_fields(path, state, features)
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"{path}: its weights do not fit this model ({_first_line(exc)}) (fix: resume from a "
                        "checkpoint of this spec)") from None
    if state["optimizer"] != {}:     # {}: weights imported from HugeCTR's files (ctrgen weights), a fresh optimizer
        _load_optimizer(path, optimizer, state["optimizer"])
    # Dropout continues as in one uninterrupted run: the CPU's random state, and the GPU's when both runs use one.
    if state.get("rng") is not None:
        torch.set_rng_state(state["rng"].cpu())
    if state.get("cuda_rng") is not None and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda_rng"].cpu(), device)
    return state


def _load_optimizer(path: Path, optimizer, saved) -> None:
    try:
        optimizer.load_state_dict(saved)
    except (RuntimeError, KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise DataError(f"{path}: its optimizer state does not fit this optimizer ({_first_line(exc)}) (fix: resume "
                        "from a checkpoint of this spec and solver)") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def check_fields(path: Path, state, features: dict) -> None:
    """The checkpoint's fields and their types, as this trainer writes them, before any is used."""
    if not isinstance(state, dict) or not {"model", "optimizer", "iteration"} <= set(state):
        raise DataError(f"{path}: not a checkpoint of this script (model, optimizer, iteration)")
    problems = []
    if not isinstance(state["model"], dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                       for k, v in state["model"].items()):
        problems.append("'model' is not a map of parameter names to tensors")
    if not isinstance(state["optimizer"], (dict, list)):
        problems.append("'optimizer' is not an optimizer state")
    for key in ("iteration", "pass"):
        value = state.get(key, 0)
        if type(value) is not int or not 0 <= value < 2**62:
            problems.append(f"'{key}' is not a count ({value!r:.40})")
    for key in ("rng", "cuda_rng"):
        value = state.get(key)
        if value is not None and not (isinstance(value, torch.Tensor) and value.dtype == torch.uint8):
            problems.append(f"'{key}' is not a random-generator state")
    saved = state.get("features", features)
    if not isinstance(saved, dict) or "sparse" not in saved:
        problems.append("'features' is not a features.json map")
    if problems:
        raise DataError(f"{path}: not a checkpoint of this script: {'; '.join(problems)}")
    if saved["sparse"] != features["sparse"]:
        raise DataError(f"{path}: saved with other features (slots or cardinalities differ from {FEATURES_FILE})")


def rng_state(device: torch.device) -> dict:
    """The random state dropout draws from, for a checkpoint: the CPU's, and the GPU's when training there."""
    state = {"rng": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda_rng"] = torch.cuda.get_rng_state(device)
    return state


def save(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)
