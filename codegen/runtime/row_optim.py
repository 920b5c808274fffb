"""The embedding tables' optimizers that update only the rows a batch looks up: RowSparseOptimizer (the spec's SGD,
AdaGrad or Adam, exactly where HugeCTR updates only those rows) and PassOptimizer (continuous training: the step of the
optimizer's sparse form), and Optimizers (several stepped, zeroed and saved together)."""

from __future__ import annotations

import torch

from .distributed import settle
from .errors import DataError
from .kernels import RowKernels


def _rows_and_sums(rows: torch.Tensor, grads: torch.Tensor, filler: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(unique rows, summed gradient of each) in tensors as long as `rows`, so every shape is static (CUDA-graph
    capturable): the slots past the last unique row hold `filler` (the padding row) with a zero gradient."""
    order = torch.argsort(rows)
    ordered = rows.index_select(0, order)
    first = torch.ones_like(ordered, dtype=torch.bool)
    first[1:] = ordered[1:] != ordered[:-1]
    segment = torch.cumsum(first, 0) - 1
    unique = torch.full_like(rows, filler).scatter_(0, segment, ordered)   # duplicates write the same row id
    sums = torch.zeros_like(grads).index_add_(0, segment, grads.index_select(0, order))
    return unique, sums


class RowSparseOptimizer:
    """The spec's optimizer for the embedding tables, applied to the rows a batch looks up only: no dense gradient
    and no pass over the whole table. SGD adds -lr * gradient per lookup (index_add); AdaGrad and Adam sum each row's
    gradient first, then update that row and its state (kept per element, as HugeCTR keeps it). Exactly
    torch.optim's dense step for SGD and AdaGrad (a row without gradient does not move); for Adam it is lazy Adam,
    which is what HugeCTR's Local / LazyGlobal update types do."""

    def __init__(self, tables: list, lr, kind: str, hyper: dict):
        self.tables, self.kind, self.hyper = tables, kind, hyper
        self.param_groups = [{"lr": lr}]
        device = tables[0].weight.device if tables else torch.device("cpu")
        self.steps = torch.zeros((), device=device)
        self.state = []
        for table in tables:
            w = table.weight
            if kind == "AdaGrad":
                self.state.append({"sum": torch.full_like(w, hyper["initial_accumulator_value"])})
            elif kind == "Adam":
                self.state.append({"exp_avg": torch.zeros_like(w), "exp_avg_sq": torch.zeros_like(w)})
            else:
                self.state.append({})

    def grads(self):
        settle("rows")
        return [leaf[1].grad for t in self.tables for leaf in (t.lookup, t.replica_lookup) if leaf is not None]

    @torch.no_grad()
    def step(self) -> None:
        """Each table's looked-up rows, and its replica (sharded tables). Order, for several ranks: the replicas'
        gradient is summed and its all_reduce launched first, then the exchanged rows' gradients (launched in
        backward) are waited for and their rows updated, then the replicas, so the transfers overlap the work."""
        lr = self.param_groups[0]["lr"]
        self.steps += 1
        replicas = []
        for table, state in zip(self.tables, self.state):
            if table.replica_lookup is not None and table.replica_lookup[1].grad is not None:
                rows, vecs = table.replica_lookup      # every rank updates the replica with every rank's gradient
                replicas.append((table, state, table.shard.replica_gradient(rows, vecs.grad, table.kernels,
                                                                            counted=self.kind == "Adam")))
        settle("rows")      # the exchanged rows' gradients (launched in backward)
        for table, state in zip(self.tables, self.state):
            if table.lookup is not None and table.lookup[1].grad is not None and table.lookup[0].numel():
                rows, vecs = table.lookup      # (no rows: a sharded table of which this rank owns no slot)
                self._update(table, table.weight, state, rows, vecs.grad, table.padding_row, lr)
        settle("replicas")
        for table, state, gradient in replicas:
            looked_up, grads = gradient()
            shard = table.shard
            self._update_whole(shard.replica(table.weight), {k: shard.replica(v) for k, v in state.items()},
                               looked_up, grads, lr)
        for table in self.tables:
            table.weight[table.padding_row].zero_()

    def _update(self, table, weight: torch.Tensor, state: dict, rows: torch.Tensor, grads: torch.Tensor,
                padding_row: int, lr) -> None:
        """The optimizer's step on the looked-up `rows` of `weight` (and of `state`, shaped like it); `grads`: a row
        per looked-up row, (..., width), any strides."""
        if self.kind == "SGD" and table.kernels:
            RowKernels.sgd(weight, rows, grads, lr if isinstance(lr, torch.Tensor) else
                           torch.full((), lr, device=weight.device))
            return
        grads = grads.reshape(rows.numel(), -1)
        if self.kind == "SGD":
            weight.index_add_(0, rows, grads.float() * -lr)
        else:
            unique, g = _rows_and_sums(rows, grads.float(), padding_row)
            w = weight.index_select(0, unique)
            rows_state = {k: v.index_select(0, unique) for k, v in state.items()}
            self._rule(w, rows_state, g, lr)
            weight.index_copy_(0, unique, w)
            for k, v in rows_state.items():
                state[k].index_copy_(0, unique, v)

    def _rule(self, w: torch.Tensor, state: dict, g: torch.Tensor, lr) -> None:
        """AdaGrad's or Adam's step, in place, on rows `w` and their `state` with their summed gradient `g`."""
        if self.kind == "AdaGrad":
            s = state["sum"].addcmul_(g, g)
            w.addcdiv_(g * -lr, s.sqrt().add_(self.hyper["eps"]))
            return
        beta1, beta2 = self.hyper["betas"]
        m = state["exp_avg"].lerp_(g, 1 - beta1)
        v = state["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
        bias1 = 1 - torch.pow(beta1, self.steps)
        bias2 = 1 - torch.pow(beta2, self.steps)
        w.addcdiv_(m * (-lr / bias1), (v.sqrt() / bias2.sqrt()).add_(self.hyper["eps"]))

    def _update_whole(self, weight: torch.Tensor, state: dict, looked_up: torch.Tensor | None, grads: torch.Tensor,
                      lr) -> None:
        """The step on every row of a replica whose gradient of the global batch is `grads` (zero where no rank
        looked the row up; those rows and their state stay as they are, as in the row-by-row step: SGD and AdaGrad
        move no row by a zero gradient, Adam's `looked_up` says which rows move)."""
        if self.kind == "SGD":
            weight.add_(grads * -lr)
        elif self.kind == "AdaGrad":    # a zero gradient adds nothing to the sum and moves nothing
            self._rule(weight, state, grads, lr)
        else:                           # lazy Adam: rows no rank looked up keep their values and moments
            w, new = weight.clone(), {k: v.clone() for k, v in state.items()}
            self._rule(w, new, grads, lr)
            assert looked_up is not None, "lazy Adam: the rows looked up"
            keep = looked_up[:, None]
            for k, v in state.items():
                v.copy_(torch.where(keep, new[k], v))
            weight.copy_(torch.where(keep, w, weight))
        weight[-1].zero_()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for table in self.tables:    # the looked-up rows are a new leaf each eager step; drop the last one
            if set_to_none:
                table.lookup = table.replica_lookup = None

    def state_dict(self) -> dict:
        return {"kind": self.kind, "steps": self.steps, "state": self.state}

    def load_state_dict(self, saved: dict) -> None:
        if saved.get("kind") != self.kind or len(saved["state"]) != len(self.state):
            raise DataError(f"the checkpoint's embedding optimizer state is {saved.get('kind')}, not {self.kind}")
        self.steps.copy_(saved["steps"])
        for table, mine, theirs in zip(self.tables, self.state, saved["state"]):
            for key, value in mine.items():
                value.copy_(table.shard.own(theirs[key]) if table.shard is not None else theirs[key])


class Optimizers:
    """Optimizers stepped, zeroed and saved together (dense layers; embedding tables)."""

    def __init__(self, *optimizers):
        self.optimizers = optimizers
        self.param_groups = [g for o in optimizers for g in o.param_groups]

    def step(self) -> None:
        """The tables' row updates first: they overlap the dense gradients' all_reduce (GradientSync's, launched
        with later=True), which the dense step then waits for."""
        for o in sorted(self.optimizers, key=lambda o: not isinstance(o, RowSparseOptimizer)):
            o.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.optimizers:
            o.zero_grad(set_to_none=set_to_none)

    def grads(self):
        out = []
        for o in self.optimizers:
            out += o.grads() if isinstance(o, RowSparseOptimizer) else [p.grad for g in o.param_groups
                                                                       for p in g["params"]]
        return out

    def state_dict(self) -> list:
        return [o.state_dict() for o in self.optimizers]

    def load_state_dict(self, states: list) -> None:
        if not isinstance(states, list) or len(states) != len(self.optimizers):
            raise DataError("the checkpoint's optimizer state was saved with another --embedding-update "
                            "(fix: resume with the setting it was trained with)")
        for o, state in zip(self.optimizers, states, strict=True):
            o.load_state_dict(state)



class PassOptimizer(RowSparseOptimizer):
    """The step of the spec's optimizer on the rows a batch looks up, as torch.optim's sparse form takes it on the
    batch's sparse table gradient (SGD, Adagrad, SparseAdam). Rows a pass does not look up, and their state, are
    neither read nor written (HugeCTR's embedding cache holds only the pass's keyset). SGD and AdaGrad are
    RowSparseOptimizer's forms; Adam is SparseAdam's, whose epsilon is outside the bias correction:
    w -= lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps). No torch.optim: its first step imports
    torch._dynamo, about a second of start-up in every pass's process."""

    @torch.no_grad()
    def step(self) -> None:
        if self.kind != "Adam":
            super().step()
            return
        lr = self.param_groups[0]["lr"]
        lr = float(lr) if isinstance(lr, torch.Tensor) else lr
        beta1, beta2 = self.hyper["betas"]
        self.steps += 1
        t = int(self.steps.item())     # a Python number, as SparseAdam's (no CUDA graph in continuous training)
        step_size = lr * (1 - beta2 ** t) ** 0.5 / (1 - beta1 ** t)
        for table, state in zip(self.tables, self.state):
            if table.lookup is None or table.lookup[1].grad is None:
                continue
            rows, vecs = table.lookup
            unique, g = _rows_and_sums(rows, vecs.grad.reshape(rows.numel(), -1).float(), table.padding_row)
            m = state["exp_avg"].index_select(0, unique).lerp_(g, 1 - beta1)
            v = state["exp_avg_sq"].index_select(0, unique).mul_(beta2).addcmul_(g, g, value=1 - beta2)
            w = table.weight.index_select(0, unique).addcdiv_(m, v.sqrt().add_(self.hyper["eps"]), value=-step_size)
            state["exp_avg"].index_copy_(0, unique, m)
            state["exp_avg_sq"].index_copy_(0, unique, v)
            table.weight.index_copy_(0, unique, w)
            table.weight[table.padding_row].zero_()
