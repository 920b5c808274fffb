"""Multi-node launchers (cluster/): mpirun and Slurm for HugeCTR, torchrun for the PyTorch trainer.

HugeCTR runs one process per node, each driving the GPUs of its vvgpu row (the row is chosen by MPI rank), so both
HugeCTR launchers start exactly one task per node. The launcher runs task.py when the task target is on (its --gpus
default is the spec's vvgpu), else model.py. torchrun.sh is written when the PyTorch trainer (train_torch.py) is among
the rendered files. Every value from the spec reaches a script through shlex.quote; #SBATCH values are plain tokens
(the spec's patterns), since sbatch reads those lines without a shell.
"""

from __future__ import annotations

import shlex

from ..model.types import Model
from .env import render


def render_cluster(model: Model, header: str, *, has_task: bool, has_torch: bool) -> dict[str, str]:
    c = model.cluster
    assert c is not None, "the cluster target is on"
    script = "task.py" if has_task else "model.py"
    common = dict(header=header, name=model.name, nodes=c.nodes, gpus_per_node=c.gpus_per_node, script=script,
                  python=shlex.quote(c.python))
    hosts = shlex.quote(",".join(f"{h}:1" for h in c.hosts)) if c.hosts else ""
    files = {
        "mpirun.sh": render("cluster/mpirun.sh.j2", **common, hosts=hosts,
                            hosts_note=(f"{len(c.hosts)} listed in the spec, or HOSTFILE" if c.hosts
                                        else "HOSTFILE")),
        "slurm.sbatch": render("cluster/slurm.sbatch.j2", **common,
                               sbatch_extra=[f"--{k}={v}" for k, v in c.sbatch]),
    }
    if has_torch:
        files["torchrun.sh"] = render("cluster/torchrun.sh.j2", **common, rdzv_backend=shlex.quote(c.rdzv_backend),
                                      rdzv_endpoint=shlex.quote(c.rdzv_endpoint))
    return files
