"""Instance counts chosen for the machine: the spec's ``count: auto`` (the default of the preprocessing model and of
the PyTorch model step), filled in by ``ctrgen assemble``.

The generated ``config.pbtxt`` stays machine-independent (an ``instance_group`` without ``count``), so
``generated/`` is the same on every machine and ``ctrgen check`` stays exact. ``assemble`` writes the count into the
assembled repository for the machine it runs on, or for ``--cores N`` (a repository assembled on one machine and
served on another). A count written in the spec is kept as it is.

The rule, measured with ``bench/serve.py`` on a 2-core CPU box (docs/benchmarks.md): both steps of the ensemble
share the cores. One preprocessing instance per core (its stub mostly waits on the server: with one, MovieLens'
ensemble at batch 64 x 8 clients ran at 0.51 of the model alone, with two at 0.60-0.71; the dynamic batcher cannot
join requests of max_batch_size samples). One PyTorch instance per 2 x ``threads`` cores (a forward keeps its
``threads`` busy; on 2 cores the ensemble served as much or more with one instance as with two: Wide & Deep 1,171
against 991-1,161 requests/s at batch 1 x 8 clients, MovieLens 151 k against 118-129 k samples/s at batch 64 x 8).
Both are capped (each instance is a process holding the lookups or the model). An instance on a GPU (KIND_GPU, or
KIND_AUTO on a machine with a GPU) counts per GPU: one.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, replace
from pathlib import Path

from ..plan.repository import NVT_SUFFIX, Instance, ModelPlan, RepositoryPlan

MAX_PREPROCESSING = 8        # stub processes each holding the workflow's lookups
MAX_MODEL = 16               # stub processes each holding the model


@dataclass(frozen=True)
class Machine:
    cores: int
    gpus: int

    def describe(self) -> str:
        return f"{self.cores} core(s)" + (f", {self.gpus} GPU(s)" if self.gpus else "")


def this_machine(cores: int | None = None) -> Machine:
    """The cores this process may run on (the CPU affinity, as a container's limit shows) and the NVIDIA GPUs the
    driver lists; ``cores`` overrides the first."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:          # not Linux
            cores = os.cpu_count() or 1
    gpus = len(glob.glob("/proc/driver/nvidia/gpus/*"))
    return Machine(cores=max(1, cores), gpus=gpus)


def auto_count(model: ModelPlan, instance: Instance, machine: Machine, preprocessing: bool) -> int:
    if instance.kind == "KIND_GPU" or (instance.kind == "KIND_AUTO" and machine.gpus):
        return 1
    if preprocessing:
        return max(1, min(MAX_PREPROCESSING, machine.cores))
    threads = next((int(v) for k, v in model.parameters if k == "torch_num_threads"), 1)
    return max(1, min(MAX_MODEL, machine.cores // (2 * max(1, threads))))


def for_machine(plan: RepositoryPlan, machine: Machine) -> list[ModelPlan]:
    """The models whose ``count: auto`` instances get a count on ``machine`` (with it), in plan order."""
    changed = []
    for model in plan.models:
        if not any(i.count is None for i in model.instances) or model.backend != "python":
            continue
        nvt = model.name == plan.name + NVT_SUFFIX
        instances = tuple(replace(i, count=auto_count(model, i, machine, nvt)) if i.count is None else i
                          for i in model.instances)
        changed.append(replace(model, instances=instances))
    return changed


def write_counts(repo: Path, plan: RepositoryPlan, machine: Machine) -> list[str]:
    """Rewrite the config.pbtxt of each ``count: auto`` model in ``repo`` for ``machine``; one line per model."""
    from ..plan.configs import config_text

    notes = []
    for model in for_machine(plan, machine):
        path = repo / model.name / "config.pbtxt"
        header = "".join(line for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
                         if line.startswith("#"))
        counts = ", ".join(str(i.count) for i in model.instances)
        header += f"# instance_group count: {counts}, chosen by ctrgen assemble for {machine.describe()}.\n"
        path.write_text(config_text(model, header), encoding="utf-8")
        notes.append(f"{model.name}: {counts} instance(s)")
    return notes
