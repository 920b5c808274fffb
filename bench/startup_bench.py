"""CPU time of ctrgen's quick commands, each in a fresh interpreter (issue 16 item 7).

    PYTHONPATH=. python bench/startup_bench.py [--repeat 5]

Runs `ctrgen --help`, `ctrgen check` (every specs/*.yaml against generated/) and `ctrgen lock --check` on the
specs that name a workflow, from the repository root, and prints the best user+system CPU seconds of each over
--repeat runs, plus whether the demo's workflow exists (with it, check and lock --check compare the locks with it).
CPU time, not wall time: the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cpu_seconds(args: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Bytecode as a user has it (PYTHONDONTWRITEBYTECODE would recompile every module on every run).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "codegen", *args], cwd=REPO, env=env, capture_output=True,
                          text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"ctrgen {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    specs = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "specs").glob("*.yaml"))
    with_workflow = [s for s in specs if "\nworkflow:" in "\n" + (REPO / s).read_text()]
    demo = (REPO / ".demo" / "criteo" / "workflow" / "workflow.pkl").is_file()
    print(f"demo workflow built: {'yes' if demo else 'no'}; {len(specs)} specs, {len(with_workflow)} name a workflow")
    commands = {"ctrgen --help": ["--help"], f"ctrgen check ({len(specs)} specs)": ["check"]}
    if demo:
        commands[f"ctrgen lock --check ({len(with_workflow)} specs)"] = ["lock", "--check", *with_workflow]
    for label, argv in commands.items():
        best = min(cpu_seconds(argv) for _ in range(args.repeat))
        print(f"{label:<34} {best:6.3f} s CPU (best of {args.repeat})")


if __name__ == "__main__":
    main()
