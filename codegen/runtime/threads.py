"""How many intra-op threads a trainer process takes on the CPU: the cores it may use, shared by the ranks of its
machine, never more threads than cores in all.

torch's own default is the machine's core count, which in a container limited by a CPU quota (cgroup ``cpu.max``)
or beside other ranks of the same job is many times the cores this process gets: every thread then waits for the
others at each operator (10x slower CPU training was measured that way). OMP_NUM_THREADS, when set, is the user's
choice and is kept; ``--threads N`` overrides both."""

from __future__ import annotations

import math
import os
from pathlib import Path

from .errors import DataError


def cgroup_cores(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The CPU quota of this process's cgroup in whole cores (rounded up), or None without one."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]            # cgroup v2: "max 100000" or "200000 100000"
        if quota != "max":
            return max(1, math.ceil(int(quota) / int(period)))
        return None
    except (OSError, ValueError):
        pass
    try:                                                                         # cgroup v1
        us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return max(1, math.ceil(us / period_us)) if us > 0 and period_us > 0 else None
    except (OSError, ValueError):
        return None


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by its cgroup's quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = cgroup_cores()
    return max(1, min(cores, quota) if quota is not None else cores)


def choose_threads(asked: int | None, local_ranks: int, environ=os.environ) -> tuple[int, str]:
    """(threads, why): --threads when given, else OMP_NUM_THREADS when set, else the usable cores shared by the
    ranks on this machine."""
    if asked is not None:
        if not 1 <= asked <= 1024:
            raise DataError(f"--threads {asked}: between 1 and 1024 (fix: --threads {max(1, usable_cores() // local_ranks)}, "
                            "this machine's cores shared by its ranks)")
        return asked, "--threads"
    env = environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) >= 1:
        return int(env), "OMP_NUM_THREADS"
    cores = usable_cores()
    threads = max(1, cores // max(1, local_ranks))
    return threads, f"{cores} usable core(s) / {local_ranks} rank(s) on this machine"
