"""``ctrgen etl SPEC``: generate etl.py from the spec's etl: section and run it (one process or a Dask cluster)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

EPILOG = """\b
Examples:
  ctrgen etl specs/movielens.yaml                  # one process; writes data + workflow, then the features lock
  ctrgen etl specs/movielens.yaml --workers 4      # a local Dask cluster (LocalCUDACluster + RMM pool on GPUs)
  ctrgen etl specs/movielens.yaml --scheduler tcp://10.0.0.5:8786   # an existing Dask cluster
  ctrgen etl specs/movielens.yaml --check-lock     # CI: exit 1 when the committed lock no longer matches
"""


@click.command(epilog=EPILOG, short_help="Generate etl.py from the spec's etl: section and run it.")
@click.argument("spec", type=click.Path(path_type=Path))
@click.option("--workers", type=click.IntRange(min=1), help="run on a local Dask cluster of N workers")
@click.option("--scheduler", metavar="ADDRESS", help="run on an existing Dask cluster (scheduler address)")
@click.option("--check-lock", is_flag=True, help="compare the features lock with the new workflow instead of "
                                                 "writing it (exit 1 when it differs)")
@click.option("--out", type=click.Path(path_type=Path), help="output root for etl.py (default: generated/ beside "
                                                             "specs/)")
@click.option("--force", is_flag=True, help="overwrite an etl.py that ctrgen did not write")
def etl_command(spec: Path, workers: int | None, scheduler: str | None, check_lock: bool, out: Path | None,
                force: bool) -> None:
    """Generate OUT/<name>/etl.py from SPEC's etl: section and run it: read the raw files, fit the NVTabular
    workflow on the training rows, write train/ and valid/ parquet (the dtypes the target reader needs) and
    workflow/ into etl.output.dir, then write the features lock beside the spec.

    The raw files are checked first (columns, dtypes, rows); the output appears only when complete. The same
    inputs and seeds give byte-identical parquet and categories with any number of workers.
    """
    from .run import STEPS, run_etl, summary_lines

    if not sys.stderr.isatty():     # click's bar prints its label alone on a line when it cannot draw
        result = run_etl(spec, workers=workers, scheduler=scheduler, check_lock=check_lock, out_root=out,
                         force=force)
    else:
        with click.progressbar(length=STEPS, label="etl", file=sys.stderr, show_eta=False,
                               item_show_func=lambda label: label) as bar:
            def progress(label: str) -> None:
                bar.update(1, label)

            result = run_etl(spec, workers=workers, scheduler=scheduler, check_lock=check_lock, out_root=out,
                             force=force, progress=progress)
    for line in summary_lines(result):
        click.echo(line)
    sys.exit(1 if result.drift else 0)
