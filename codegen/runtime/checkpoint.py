"""Checkpoints of a generated trainer: saved whole (atomically), resumed into the model and optimizer with the random
state dropout draws from."""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn as nn

from .contract import FEATURES_FILE
from .errors import DataError


def resume(path: Path, model: nn.Module, optimizer, features: dict, device: torch.device,
           sharded: bool = False) -> dict:
    """Load a checkpoint of this script (pass_<k>.pt or checkpoint_<iter>.pt) into the model and optimizer. Its
    tables are whole; with sharded tables each rank maps the file and copies its own slots."""
    try:
        state = torch.load(path, map_location="cpu" if sharded else device, weights_only=False, mmap=sharded)
    except (OSError, RuntimeError, ValueError) as exc:
        raise DataError(f"{path}: cannot load the checkpoint ({exc}) (fix: pass --resume, or train the earlier "
                        "passes first)") from None
    if not isinstance(state, dict) or not {"model", "optimizer", "iteration"} <= set(state):
        raise DataError(f"{path}: not a checkpoint of this script (model, optimizer, iteration)")
    if state.get("features", features)["sparse"] != features["sparse"]:
        raise DataError(f"{path}: saved with other features (slots or cardinalities differ from {FEATURES_FILE})")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    # Dropout continues as in one uninterrupted run: the CPU's random state, and the GPU's when both runs use one.
    if state.get("rng") is not None:
        torch.set_rng_state(state["rng"].cpu())
    if state.get("cuda_rng") is not None and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda_rng"].cpu(), device)
    return state


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
