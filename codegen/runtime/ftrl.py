"""HugeCTR's Ftrl (Optimizer_t.Ftrl, 4.3+): its per-element step (ftrl_), and LookedUpRows, the step of an embedding
collection's tables on the rows a batch looks up only, as HugeCTR updates them.

The step, per weight element w with accumulators n and z (zero at the start), gradient g and learning rate lr
(HugeCTR/src/optimizers/ftrl_optimizer.cu, ftrl_update_kernel, called with lambda2 + beta / lr; the embedding
collection's FtrlOptimizer in embedding_storage/ragged_static_embedding.cu and ftrl_update_grad_kernel in
embedding_storage/optimizers.cuh compute the same)::

    n' = n + g^2
    z' = z + g - (sqrt(n' + eps) - sqrt(n + eps)) * w / lr
    w' = ((1 - 2 signbit(z')) * lambda1 - z') / (sqrt(n' + eps) / lr + lambda2 + beta / lr)   where |z'| > lambda1
    w' = 0                                                                                      elsewhere

eps is FLT_EPSILON from 23.04 and 0 before (the kernels take sqrt(n) then). The new weight is computed from z and n
alone: an element whose |z| stays within lambda1 is zero after its first step, whatever it started from."""

from __future__ import annotations

import torch

from .distributed import all_reduce, settle
from .errors import DataError


def ftrl_(w: torch.Tensor, n: torch.Tensor, z: torch.Tensor, g: torch.Tensor, lr, hyper: dict) -> None:
    """HugeCTR's Ftrl step, in place, on weights ``w`` and their accumulators ``n``, ``z`` (float32, w's shape) with
    gradient ``g`` (unscaled) and learning rate ``lr``; ``hyper``: beta, lambda1, lambda2, eps."""
    eps, lambda1 = hyper["eps"], hyper["lambda1"]
    g = g.float()
    before = (n + eps).sqrt_()
    n.addcmul_(g, g)
    after = (n + eps).sqrt_()
    z.add_(g).sub_((after - before).div_(lr).mul_(w))
    p = (1.0 - 2.0 * torch.signbit(z).float()) * lambda1 - z
    q = after.div_(lr).add_(hyper["lambda2"] + hyper["beta"] / lr)
    # HugeCTR multiplies by signbit(lambda1 - |z|) rather than selecting: a 0/0 stays NaN, as there
    w.copy_(p.div_(q).mul_(torch.signbit(lambda1 - z.abs()).float()))


class LookedUpRows:
    """Ftrl on the tables of an embedding collection (runtime/collection.py's CollectionTable): each step updates the
    rows the batch looked up (over every rank), and only those, with their summed gradient, as HugeCTR's embedding
    collection updates its unique keys; rows no key reached, and their n and z, stay as they are. The tables' dense
    gradient (zero outside the looked-up rows; averaged over the ranks by GradientSync) gives each row's sum."""

    def __init__(self, tables: list, lr, hyper: dict):
        self.tables, self.hyper = tables, hyper
        self.param_groups = [{"lr": lr, "params": [t.weight for t in tables]}]
        self.state = [{"n": torch.zeros_like(t.weight, dtype=torch.float32),
                       "z": torch.zeros_like(t.weight, dtype=torch.float32)} for t in tables]

    def _rows(self, table) -> torch.Tensor:
        """The rows of ``table`` any rank looked up in this step (not its padding row)."""
        hit = torch.zeros(table.rows + 1, device=table.weight.device)
        if table.looked_up is not None:
            hit[table.looked_up.reshape(-1)] = 1.0
        all_reduce(hit)
        hit[table.rows] = 0.0
        return hit.nonzero().reshape(-1)

    @torch.no_grad()
    def step(self) -> None:
        settle("dense")     # the tables' gradients are averaged with the dense layers' (GradientSync)
        lr = self.param_groups[0]["lr"]
        for table, state in zip(self.tables, self.state):
            rows = self._rows(table)
            if table.weight.grad is None or not rows.numel():
                continue
            w = table.weight.index_select(0, rows)
            n, z = state["n"].index_select(0, rows), state["z"].index_select(0, rows)
            ftrl_(w, n, z, table.weight.grad.index_select(0, rows), lr, self.hyper)
            table.weight.index_copy_(0, rows, w.to(table.weight.dtype))
            state["n"].index_copy_(0, rows, n)
            state["z"].index_copy_(0, rows, z)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for table in self.tables:
            table.looked_up = None
            if table.weight.grad is not None:
                if set_to_none:
                    table.weight.grad = None
                else:
                    table.weight.grad.zero_()

    def state_dict(self) -> dict:
        return {"kind": "Ftrl rows", "state": self.state}

    def load_state_dict(self, saved: dict) -> None:
        if not isinstance(saved, dict) or saved.get("kind") != "Ftrl rows" or \
                len(saved.get("state", ())) != len(self.state):
            raise DataError("the checkpoint's embedding collection state is not Ftrl over these tables")
        for mine, theirs in zip(self.state, saved["state"]):
            for key, value in mine.items():
                value.copy_(theirs[key])
