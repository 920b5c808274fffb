"""``ctrgen train`` (run the spec's generated PyTorch trainer) and ``ctrgen report`` (one HTML page of a run)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import click

from ..cli_paths import check_out_file, out_path
from ..errors import UserError

EPILOG_TRAIN = """\b
Examples:
  ctrgen train specs/movielens.yaml                       # one GPU (the CPU where there is none)
  ctrgen train specs/movielens.yaml --gpus 4              # torchrun, one rank per GPU
  ctrgen train specs/movielens.yaml --device cpu --ranks 2 --max-iter 200
  ctrgen train specs/movielens.yaml --resume              # from the run folder's latest checkpoint_<iter>.pt
  ctrgen train specs/movielens.yaml -- --batch-size 512 --precision bf16   # any flag of train_torch.py
Then: ctrgen report runs/movielens, tensorboard --logdir runs/movielens/tensorboard
"""


@click.command(epilog=EPILOG_TRAIN, short_help="Train the spec's generated PyTorch model (progress, curves, report).")
@click.argument("spec", type=click.Path(path_type=Path))
@click.argument("extra", nargs=-1, type=click.UNPROCESSED, metavar="[-- TRAINER FLAGS]")
@click.option("--gpus", type=click.IntRange(min=1), help="ranks, one per GPU, started through torchrun")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), help="default: cuda when available, else cpu")
@click.option("--ranks", type=click.IntRange(min=1), help="with --device cpu: processes through torchrun (gloo)")
@click.option("--max-iter", type=click.IntRange(min=1), help="iterations to run (default: the spec's "
              "training.max_iter; with --resume, what is left of it after the checkpoint)")
@click.option("--resume", is_flag=True, help="continue from the latest checkpoint_<iteration>.pt in the run folder")
@click.option("--out", callback=out_path, metavar="DIR", help="run folder (default: runs/<name> beside generated/)")
@click.option("--force", is_flag=True, help="start afresh in a run folder an earlier run wrote (its checkpoints, "
              "metrics and model are removed; default: refused)")
@click.option("--regenerate", is_flag=True, help="regenerate generated/<name>/ when `ctrgen check` finds it stale "
              "(default: refuse with the command to run)")
@click.option("--train", "train_data", multiple=True, metavar="PATH", help="Parquet training data of the spec's "
              "columns (a folder, its _file_list.txt or .parquet files; repeatable) instead of the data the spec "
              "names: e.g. a spec whose HugeCTR reader reads Norm or Raw files; with --eval")
@click.option("--eval", "eval_data", metavar="PATH", help="Parquet evaluation data of the spec's columns, with --train")
def train_command(spec: Path, extra: tuple[str, ...], gpus: int | None, device: str | None, ranks: int | None,
                  max_iter: int | None, resume: bool, out: Path | None, force: bool, regenerate: bool,
                  train_data: tuple[str, ...] = (), eval_data: str | None = None) -> None:
    """Run generated/<name>/train_torch.py for SPEC on the data it names (etl.output.dir's train/ and valid/, else
    data:) with the spec's solver and training settings. The command is printed first; the run folder gets the
    checkpoints, model.pt, metrics.json, metrics.jsonl, tensorboard/ (with the tensorboard package) and run.json
    (what `ctrgen report` needs). Exit status: the trainer's (2: bad input, one line)."""
    from ..output import apply_write, compare, plan_write
    from ..pipeline import open_spec, render_spec
    from .launch import TRAINER, gpu_count, plan_launch
    from ..runtime.progress import TENSORBOARD_DIR
    from .child import run_trainer
    from .record import RUN_FILE, run_record, write_json

    if gpus is not None and device == "cpu":
        raise UserError.one(spec, "--gpus and --device cpu exclude each other", field="--gpus",
                            fix="--device cpu --ranks N for CPU processes")
    if ranks is not None and device != "cpu":
        raise UserError.one(spec, "--ranks is for CPU processes", field="--ranks",
                            fix="add --device cpu, or use --gpus N for GPUs")
    if bool(train_data) != (eval_data is not None):
        raise UserError.one(spec, "--train and --eval go together", field="--train" if eval_data else "--eval",
                            fix="pass both: --train PATH --eval PATH")
    if out is not None:
        check_run_folder(out)
    ctx = open_spec(spec)
    rendered = render_spec(ctx)
    if TRAINER not in rendered.files:
        raise ctx.loaded.error(("targets",), "the spec has no PyTorch trainer to run", fix="add torch to targets")
    folder = ctx.root / "generated" / rendered.name
    drift = compare(folder, rendered.files, display=f"generated/{rendered.name}")
    write, note = None, ""
    if not drift.clean:
        if not folder.exists():     # never generated (e.g. right after `ctrgen import`): nothing to overwrite
            write, note = plan_write(folder, rendered.files), f"generated {folder}"
        elif not regenerate:
            raise UserError.one(folder, "out of date with its spec ('ctrgen check' finds it stale)",
                                fix=f"run 'ctrgen generate {ctx.display}', or pass --regenerate")
        else:
            write, note = plan_write(folder, rendered.files), f"regenerated {folder} (it was stale)"
    if gpus is not None:
        found = gpu_count()
        if found < gpus:
            raise UserError.one(spec, f"{gpus} GPU(s) asked, this machine has {found}", field="--gpus",
                                fix=f"--gpus {found}" if found else "--device cpu")
        device = "cuda"
    run = out if out is not None else ctx.root / "runs" / rendered.name
    check_no_earlier_run(run, resume=resume, force=force)
    launch = plan_launch(ctx, folder, run, ranks=gpus or ranks or 1, device=device, max_iter=max_iter,
                         resume=resume, extra=("--force", *extra) if force else extra, continuous=rendered.job.continuous is not None,
                         given=(list(train_data), eval_data) if eval_data is not None else None)
    if write is not None:           # after every check of the command line, the spec and its data: a refusal writes nothing
        apply_write(write)
        click.echo(note, err=True)
    # This checkout's codegen.runtime, whichever ctrgen the environment installs.
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    record = run_record(ctx, rendered, launch)
    click.echo("$ " + shlex.join([f"PYTHONPATH={env['PYTHONPATH']}", *launch.argv]), err=True)
    code = run_trainer(launch.argv, env)
    if code == 0:       # the run's record once it finished (a refused or failed run leaves none)
        write_json(run / RUN_FILE, record)
        click.echo(f"run folder   {run}\nreport       ctrgen report {run}", err=True)
        if (run / TENSORBOARD_DIR).is_dir():
            click.echo(f"TensorBoard  tensorboard --logdir {run / TENSORBOARD_DIR}", err=True)
    sys.exit(code)


def check_run_folder(out: Path) -> None:
    """--out is a folder or can be made one: not a file, nor under one."""
    for part in (out, *out.parents):
        if os.path.lexists(part):
            if not part.is_dir():
                where = "is a file, not a folder" if part == out else f"is under {part}, which is not a folder"
                raise UserError.one(out, where, field="--out", fix="name a folder for the run, e.g. --out runs/m")
            return


def check_no_earlier_run(run: Path, *, resume: bool, force: bool) -> None:
    """The trainer's rule for its run folder (codegen.runtime.run_folder), checked before anything is written or
    started: a folder an earlier run wrote takes --resume or --force."""
    from ..runtime.run_folder import earlier_run

    found = earlier_run(run)
    if found and not (resume or force):
        raise UserError.one(run, f"holds an earlier run ({', '.join(found[:4])}{', ...' if len(found) > 4 else ''})",
                            field="--out", fix="--resume to continue it, --force to start afresh (its files are "
                                               "removed), or another --out")


EPILOG_REPORT = """\b
Examples:
  ctrgen report runs/movielens                              # runs/movielens/report.html
  ctrgen report runs/lr-0.001 runs/lr-0.01 --out compare.html   # two runs overlaid, a colour each
"""


@click.command(epilog=EPILOG_REPORT, short_help="Write one self-contained HTML page of one or more training runs.")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="RUN_DIR...")
@click.option("--out", callback=out_path, metavar="FILE", help="default: RUN_DIR/report.html (one run; several "
              "runs need --out)")
def report_command(run_dirs: tuple[Path, ...], out: Path | None) -> None:
    """One HTML page (no script, no network) of `ctrgen train` runs: loss, AUC, PR-AUC, normalized entropy,
    calibration, throughput and learning-rate curves (inline SVG from metrics.jsonl; several runs overlaid with a
    legend, the best evaluation marked, epoch boundaries dashed), hyperparameters and data statistics side by side,
    the model graph, hardware, the command line, the data and the generated files' digests."""
    from ..output import replace_file
    from .report import render_report

    if out is None and len(run_dirs) > 1:
        raise UserError.one(run_dirs[0], f"{len(run_dirs)} runs compared: the page belongs to none of their folders",
                            field="--out", fix="name the page, e.g. --out compare.html")
    target = out if out is not None else run_dirs[0] / "report.html"
    page = render_report(list(run_dirs))
    check_out_file(target)
    replace_file(target, page)
    click.echo(f"wrote {target}")
