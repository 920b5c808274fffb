"""DenseOptimizer: the spec's optimizer over whole tensors, as torch.optim computes it, without torch.optim."""

from __future__ import annotations

import torch

from .distributed import settle
from .errors import DataError
from .ftrl import ftrl_


class DenseOptimizer:
    """The spec's optimizer over whole tensors, as torch.optim computes it, without torch.optim: its first use
    imports torch._dynamo, seconds of start-up. SGD (momentum, Nesterov) and Adam call the fused kernels
    torch.optim's fused=True calls (torch._fused_sgd_, torch._fused_adam_; on the CPU too); AdaGrad and RMSprop are
    its foreach steps (tensors of one device); Ftrl is HugeCTR's (runtime/ftrl.py), which torch.optim has not. lr
    may be a tensor on the device (a captured CUDA graph reads it)."""

    def __init__(self, params, lr, kind: str, hyper: dict):
        self.params = [p for p in params if p.requires_grad]
        self.kind, self.hyper = kind, hyper
        self.param_groups = [{"lr": lr, "params": self.params}]
        fused_step = {"dtype": torch.float32}
        if kind == "Adam":
            self.state = {"step": [torch.zeros((), **fused_step, device=p.device) for p in self.params],
                          "exp_avg": [torch.zeros_like(p) for p in self.params],
                          "exp_avg_sq": [torch.zeros_like(p) for p in self.params]}
        elif kind == "Adagrad":
            self.state = {"step": [torch.zeros(()) for _ in self.params],
                          "sum": [torch.full_like(p, hyper.get("initial_accumulator_value", 0.0))
                                  for p in self.params]}
        elif kind == "RMSprop":
            self.state = {"step": [torch.zeros(()) for _ in self.params],
                          "square_avg": [torch.zeros_like(p) for p in self.params]}
        elif kind == "Ftrl":
            self.state = {"n": [torch.zeros_like(p) for p in self.params],
                          "z": [torch.zeros_like(p) for p in self.params]}
        else:   # SGD: torch.optim makes the momentum buffers at the first step
            self.state = {"momentum_buffer": [None] * len(self.params) if hyper.get("momentum") else []}

    @torch.no_grad()
    def step(self) -> None:
        settle("dense")     # the gradients' average over the ranks (GradientSync, launched with later=True)
        lr = self.param_groups[0]["lr"]
        have = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not have:
            return
        params = [self.params[i] for i in have]
        grads = [self.params[i].grad for i in have]
        h, s = self.hyper, self.state
        if self.kind == "SGD":
            buffers = s["momentum_buffer"]
            first = bool(buffers) and all(buffers[i] is None for i in have)
            if first:
                for i in have:
                    buffers[i] = torch.empty_like(self.params[i])
            torch._fused_sgd_(params, grads, [buffers[i] for i in have] if buffers else [], weight_decay=0.0,
                              momentum=h.get("momentum", 0.0), lr=lr, dampening=0.0,
                              nesterov=h.get("nesterov", False), maximize=False, is_first_step=first)
        elif self.kind == "Adam":
            steps = [s["step"][i] for i in have]
            torch._foreach_add_(steps, 1)
            beta1, beta2 = h["betas"]
            torch._fused_adam_(params, grads, [s["exp_avg"][i] for i in have], [s["exp_avg_sq"][i] for i in have],
                               [], steps, lr=lr, beta1=beta1, beta2=beta2, weight_decay=0.0, eps=h["eps"],
                               amsgrad=False, maximize=False)
        elif self.kind == "Adagrad":
            torch._foreach_add_([s["step"][i] for i in have], 1)
            sums = [s["sum"][i] for i in have]
            torch._foreach_addcmul_(sums, grads, grads, value=1)
            std = torch._foreach_sqrt(sums)
            torch._foreach_add_(std, h["eps"])
            torch._foreach_addcdiv_(params, torch._foreach_mul(grads, [-float(lr)] * len(grads)), std)
        elif self.kind == "Ftrl":
            for i, g in zip(have, grads):
                ftrl_(self.params[i], s["n"][i], s["z"][i], g, lr, h)
        else:   # RMSprop
            torch._foreach_add_([s["step"][i] for i in have], 1)
            squares = [s["square_avg"][i] for i in have]
            torch._foreach_mul_(squares, h["alpha"])
            torch._foreach_addcmul_(squares, grads, grads, value=1 - h["alpha"])
            avg = torch._foreach_sqrt(squares)
            torch._foreach_add_(avg, h["eps"])
            torch._foreach_addcdiv_(params, grads, avg, value=-float(lr))

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.zero_()

    def state_dict(self) -> dict:
        return {"kind": self.kind, "state": self.state}

    def load_state_dict(self, saved: dict) -> None:
        if not isinstance(saved, dict) or saved.get("kind") != self.kind or \
                any(len(saved["state"].get(k, ())) != len(v) for k, v in self.state.items()):
            raise DataError(f"the checkpoint's optimizer state is not {self.kind} over these parameters")
        for key, mine in self.state.items():
            for i, theirs in enumerate(saved["state"][key]):
                if theirs is None:
                    continue
                if mine[i] is None:
                    mine[i] = theirs.to(self.params[i].device).clone()
                else:
                    mine[i].copy_(theirs)
