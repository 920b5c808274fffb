"""Multi-node launchers (cluster/): mpirun and Slurm for HugeCTR, torchrun for the PyTorch trainer.

HugeCTR runs one process per node, each driving the GPUs of its vvgpu row (the row is chosen by MPI rank), so both
HugeCTR launchers start exactly one task per node. The launcher runs task.py when the task target is on (its --gpus
default is the spec's vvgpu), else model.py. torchrun.sh is written when the PyTorch trainer (train_torch.py) is among
the rendered files. Every value from the spec reaches a script through shlex.quote; #SBATCH values are plain tokens
(the spec's patterns), since sbatch reads those lines without a shell.
"""

from __future__ import annotations

import shlex

from ..graph.ir import TrainingJob
from ..spec.load import LoadedSpec
from ..spec.model import ClusterSpec
from .env import render


def check_cluster(loaded: LoadedSpec) -> tuple[ClusterSpec, int, int]:
    """(cluster section, nodes, GPUs per node), or exit 2 naming the field."""
    s = loaded.spec
    c = s.cluster or ClusterSpec()
    rows = s.solver.vvgpu
    widths = sorted({len(r) for r in rows})
    if len(widths) != 1:
        raise loaded.error(("solver", "vvgpu"), f"rows of {widths} GPUs: the launchers start the same number of GPUs "
                                                "on every node", fix="give every node the same GPUs")
    per_node = widths[0]
    if c.gpus_per_node is not None and c.gpus_per_node != per_node:
        raise loaded.error(("cluster", "gpus_per_node"), f"{c.gpus_per_node}, but each solver.vvgpu row lists "
                                                         f"{per_node} GPU(s)",
                           fix=f"set it to {per_node} or remove it (it defaults to the vvgpu rows)")
    for i, row in enumerate(rows):
        if len(set(row)) != len(row):
            raise loaded.error(("solver", "vvgpu", i), f"GPU listed twice in {row}", fix="list each GPU once")
    if c.hosts is not None and len(c.hosts) != len(rows):
        raise loaded.error(("cluster", "hosts"), f"{len(c.hosts)} host(s) for {len(rows)} node(s) in solver.vvgpu "
                                                 "(one vvgpu row per node)",
                           fix="list one host per vvgpu row")
    return c, len(rows), per_node


def render_cluster(loaded: LoadedSpec, job: TrainingJob, header: str, *, has_task: bool,
                   has_torch: bool) -> dict[str, str]:
    c, nodes, per_node = check_cluster(loaded)
    script = "task.py" if has_task else "model.py"
    common = dict(header=header, name=job.name, nodes=nodes, gpus_per_node=per_node, script=script,
                  python=shlex.quote(c.python))
    hosts = shlex.quote(",".join(f"{h}:1" for h in c.hosts)) if c.hosts else ""
    files = {
        "mpirun.sh": render("cluster/mpirun.sh.j2", **common, hosts=hosts,
                            hosts_note=(f"{len(c.hosts)} listed in the spec, or HOSTFILE" if c.hosts
                                        else "HOSTFILE")),
        "slurm.sbatch": render("cluster/slurm.sbatch.j2", **common, sbatch_extra=[
            f"--{k}={v}" for k, v in (("partition", c.slurm.partition), ("account", c.slurm.account),
                                      ("time", c.slurm.time)) if v]),
    }
    if has_torch:
        files["torchrun.sh"] = render("cluster/torchrun.sh.j2", **common, rdzv_backend=shlex.quote(c.rdzv_backend),
                                      rdzv_endpoint=shlex.quote(c.rdzv_endpoint))
    return files
