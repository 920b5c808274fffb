"""The precision a run trains in (fp32, tf32, bf16 autocast, fp16 with loss scaling)."""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist

from .distributed import all_reduce, settle
from .errors import DataError

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


def resolve_precision(asked: str | None, tf32_flag: str | None, device: torch.device, spec: str) -> str:
    """The precision to train in: --precision, else --tf32, else ``spec``, the spec's (mixed for use_mixed_precision: bf16 where the device
    has it, fp16 with a loss scaler otherwise; enable_tf32_compute: tf32)."""
    if asked is None:
        asked = spec
        if tf32_flag is not None and asked in ("fp32", "tf32"):
            asked = "tf32" if tf32_flag == "on" else "fp32"
        if asked == "mixed":
            asked = "bf16" if device.type == "cpu" or torch.cuda.is_bf16_supported() else "fp16"
    if asked == "fp16" and device.type != "cuda":
        raise DataError(f"--precision fp16 needs a CUDA GPU (float16 autocast with a loss scaler); on {device.type} "
                        "(fix: --precision bf16 or --precision fp32)")
    if asked == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise DataError(f"--precision bf16: {torch.cuda.get_device_name(device)} has no bfloat16 "
                        "(fix: --precision fp16 or --precision fp32)")
    if asked == "tf32" and device.type != "cuda":
        asked = "fp32"   # TF32 is a tensor-core mode of NVIDIA GPUs; the CPU computes float32
    return asked


def autocast(device: torch.device, precision: str):
    """The forward's autocast context (no weight cache: a captured CUDA graph must not hold stale casts)."""
    if precision in ("bf16", "fp16"):
        return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16,
                              cache_enabled=False)
    return contextlib.nullcontext()


class LossScaler:
    """fp16 loss scaling as torch's GradScaler does it (skip the step and halve the scale on inf/nan, double it after
    2000 clean steps), starting from the solver's `scaler`, over every gradient: the dense parameters' and the
    embedding rows' of this step."""

    def __init__(self, scale: float, device: torch.device):
        self.scale = torch.full((), float(scale), device=device)
        self.growth = torch.zeros((), dtype=torch.int32, device=device)
        self.found_inf = torch.zeros((), device=device)
        self.reduce = False

    def step(self, loss: torch.Tensor, grads, optimizer, sync=None) -> None:
        (loss * self.scale).backward()
        if sync is not None:      # the ranks' dense gradients averaged (distributed.GradientSync)
            sync()
        settle()                  # (and the exchanged rows' gradients, read below)
        found = self.found_inf.zero_()
        torch._amp_foreach_non_finite_check_and_unscale_([g for g in grads() if g is not None], found,
                                                          self.scale.double().reciprocal().float())
        if self.reduce:
            all_reduce(found, dist.ReduceOp.MAX)
        if not found.item():
            optimizer.step()
        torch._amp_update_scale_(self.scale, self.growth, found, 2.0, 0.5, 2000)

