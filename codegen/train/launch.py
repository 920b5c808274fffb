"""What ``ctrgen train`` runs: the spec's generated train_torch.py (fresh, or refused / regenerated), the data the
spec names, and the command line (python, or torchrun for several ranks) with the trainer's flags."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import UserError
from ..etl.plan import output_dir
from ..runtime.contract import local_path
from ..specfile.context import SpecContext

TRAINER = PurePosixPath("train_torch.py")
CHECKPOINT = re.compile(r"checkpoint_(\d+)\.pt")


@dataclass
class Launch:
    """One run: ``argv`` (printed first, then run from the current folder), the generated ``folder``, the run folder
    ``out`` and the data it reads (``data``: label -> path)."""

    argv: list[str]
    folder: Path
    out: Path
    data: dict[str, list[str]] = field(default_factory=dict)


def spec_data(ctx: SpecContext, given: tuple[list[str], str] | None = None) -> tuple[dict[str, list[str]], str]:
    """The data the spec names, by trainer flag, and the spec field it comes from: ``given`` (``ctrgen train --train
    PATH --eval PATH``: Parquet of the spec's columns) when passed, else ``etl.output.dir``'s train/ and valid/ when
    the spec has an etl: section (what ``ctrgen etl`` writes), else ``data.train`` / ``data.eval`` (a ``~/...`` path
    under this machine's home folder, where the trainer runs). A spec whose reader reads HugeCTR's Norm or Raw files
    names data the trainer cannot read: refused without ``given``."""
    spec = ctx.spec
    if given is not None:
        return {"--train": list(given[0]), "--eval": [given[1]]}, "--train"
    if spec.etl is not None:
        root = output_dir(ctx.loaded.path, spec.etl)
        return {"--train": [str(root / "train")], "--eval": [str(root / "valid")]}, "etl.output.dir"
    if spec.data.format != "parquet":
        raise ctx.loaded.error(("data", "format"), f"the PyTorch trainer reads Parquet, not the HugeCTR "
                               f"{spec.data.format.capitalize()} files data.train names",
                               fix="pass the same columns as Parquet: ctrgen train SPEC --train PATH --eval PATH")
    return {"--train": [local_path(p) for p in spec.data.train], "--eval": [local_path(spec.data.eval)]}, "data"


def check_data(ctx: SpecContext, data: dict[str, list[str]], source: str) -> None:
    """Every training and evaluation path exists, or one line naming the spec field and how to make the data."""
    for flag, paths in data.items():
        for path in paths:
            if not Path(path).exists():
                if source == "--train":
                    raise UserError.one(path, f"{flag.lstrip('-')} data not found", field=flag,
                                        fix="pass Parquet data: a folder, its _file_list.txt or .parquet files")
                fix = (f"run 'ctrgen etl {ctx.display}' first" if source == "etl.output.dir"
                       else "point the spec at the prepared data")
                where = ("etl", "output", "dir") if source == "etl.output.dir" else \
                    ("data", "train" if flag == "--train" else "eval")
                raise ctx.loaded.error(where, f"{flag.lstrip('-')} data {path!r} not found", fix=fix)


def check_files_per_rank(ctx: SpecContext, train: list[str], source: str, ranks: int) -> None:
    """Each rank reads whole training files: fewer files than ranks is refused here, in one line naming the spec field,
    before torchrun and every rank start (each would import torch only to refuse it). The ranks keep their own check
    (a job started without ctrgen); a file list they cannot read is theirs to report."""
    from ..runtime.checks import data_files
    from ..runtime.errors import DataError

    try:
        files = [f for path in train for f in data_files(path)]
    except DataError:
        return
    if len(files) < ranks:
        if source == "--train":
            raise UserError.one(train[0], f"{len(files)} training file(s) for {ranks} ranks; each rank reads whole "
                                "files", field="--train", fix=f"write at least {ranks} files, or start fewer ranks")
        where = ("etl", "output", "dir") if source == "etl.output.dir" else ("data", "train")
        raise ctx.loaded.error(where, f"{len(files)} training file(s) for {ranks} ranks; each rank reads whole files",
                               fix=f"write at least {ranks} files, e.g. NVTabular's out_files_per_proc, or start "
                                   "fewer ranks")


def latest_checkpoint(out: Path) -> tuple[int, Path] | None:
    """The run folder's checkpoint of the highest iteration: (iteration, path)."""
    found = [(int(m.group(1)), p) for p in out.glob("checkpoint_*.pt") if (m := CHECKPOINT.fullmatch(p.name))]
    return max(found) if found else None


def gpu_count() -> int:
    """GPUs this machine has (nvidia-smi; 0 without it), without importing torch in ctrgen's process."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    proc = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return sum(line.startswith("GPU ") for line in proc.stdout.splitlines()) if proc.returncode == 0 else 0


def launcher(ranks: int) -> list[str]:
    """python, or torchrun (torch.distributed.run, through codegen.train.torchrun: a failed rank's one line without
    torchrun's traceback) with ``ranks`` processes on this machine."""
    if ranks <= 1:
        return [sys.executable]
    return [sys.executable, "-m", "codegen.train.torchrun", "--standalone", f"--nproc_per_node={ranks}"]


def plan_launch(ctx: SpecContext, folder: Path, out: Path, *, ranks: int, device: str | None, max_iter: int | None,
                resume: bool, extra: tuple[str, ...], continuous: bool,
                given: tuple[list[str], str] | None = None) -> Launch:
    argv = [*launcher(ranks), str(folder / TRAINER)]
    data: dict[str, list[str]] = {}
    if continuous and given is not None:
        raise UserError.one(given[1], "continuous training reads the passes its spec lists", field="--train",
                            fix="list the data under continuous_training, or train without --train / --eval")
    if not continuous:          # continuous training reads the passes its spec lists (they are the trainer's defaults)
        data, source = spec_data(ctx, given)
        check_data(ctx, data, source)
        if ranks > 1:
            check_files_per_rank(ctx, data["--train"], source, ranks)
        for flag, paths in data.items():
            argv += [flag, *paths]
    argv += ["--output-dir", str(out)]
    if device is not None:
        argv += ["--device", device]
    checkpoint = None
    if resume:
        latest = latest_checkpoint(out)
        if latest is None:
            raise UserError.one(out, "no checkpoint_<iteration>.pt in the run folder", field="--resume",
                                fix="train without --resume first (checkpoints every training.snapshot iterations, or "
                                    "-- --snapshot N)")
        done, checkpoint = latest
        planned = ctx.spec.training.max_iter
        if max_iter is None and planned is not None and not continuous:
            # The trainer runs --max-iter more after the checkpoint: by default, what is left of the spec's run.
            if done >= planned:
                raise UserError.one(checkpoint, f"the run is at iteration {done}, the spec's "
                                                f"training.max_iter is {planned}", field="--resume",
                                    fix="pass --max-iter N to train N iterations more")
            max_iter = planned - done
    if max_iter is not None:
        argv += ["--max-iter", str(max_iter)]
    if checkpoint is not None:
        argv += ["--resume", str(checkpoint)]
    return Launch(argv=[*argv, *extra], folder=folder, out=out, data=data)
