"""``ctrgen query``: raw rows through a served ensemble; with --compare, against the offline scores.

Exit status: 0 ok, 1 a served score differs from the offline one by more than --tolerance, 2 bad input.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import click

from ..errors import UserError

TOLERANCE = 1e-5
PROGRESS_MIN_REQUESTS = 8          # a progress bar from this many requests on

EPILOG = """\b
Examples:
  ctrgen query deploy/movielens --data data/valid.parquet --rows 20       # starts a private server, stops it after
  ctrgen query http://127.0.0.1:8000 --data rows.csv                       # a running 'ctrgen serve'
  ctrgen query deploy/clicks --data raw/clicks.csv --spec specs/clicks.yaml  # list columns split as etl does
  ctrgen query deploy/clicks --data rows.jsonl                             # JSON lines, null for a missing value
  ctrgen query deploy/movielens --data valid.parquet --rows 1000 --compare torch_out
  ctrgen query http://127.0.0.1:8000 --data valid.parquet --compare torch_out --repo deploy/movielens

\b
The file holds raw rows (Parquet, CSV or JSON) with the workflow's input columns, as before the ETL; other columns
are ignored. A CSV's list columns are split as `ctrgen etl` splits them (--spec SPEC, or --list-sep COLUMN=SEP). A
missing value (CSV: an empty field; Parquet and JSON: null) is NaN in a float column and an empty list in a list
column; an integer or text column cannot carry one (refused, naming the row). Scores are printed one per line (row
number, tab, probability); a model of several labels (one output per label) prints a header line and a column per
output. --compare CHECKPOINT scores the same rows offline (the
repository's NVTabular workflow in this process, then train_torch.py's Model with CHECKPOINT/model.pt) and prints
the largest difference of each output; exit 1 when one exceeds --tolerance.
"""


def _tolerance(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """NaN would make every comparison 'agrees' false (or, negated, true); -1 no score could meet."""
    if not math.isfinite(value) or value < 0:
        raise UserError.one(repr(value), "must be a finite number >= 0", field="--tolerance",
                            fix=f"e.g. --tolerance {TOLERANCE:g}")
    return value


@click.command("query", epilog=EPILOG, short_help="Send raw rows through a served ensemble and print the scores.",
               context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.argument("target", metavar="REPO-or-URL")
@click.option("--data", type=click.Path(path_type=Path), required=True,
              help="Parquet, CSV or JSON (.json array of objects, .jsonl a line each) file of raw rows")
@click.option("--spec", type=click.Path(path_type=Path),
              help="the spec whose etl: read the raw data: its CSV separator and list columns' separators")
@click.option("--list-sep", "list_sep", multiple=True, metavar="COLUMN=SEP",
              help="a list column's separator in the CSV (as etl.inputs.multi_hot; repeatable, wins over --spec)")
@click.option("--sep", help="the CSV's field separator (default: --spec's etl.inputs.sep, else ',' or a tab for .tsv)")
@click.option("--rows", type=click.IntRange(min=1), help="send only the first N rows")
@click.option("--model", help="the ensemble to query (default: the only ready ensemble)")
@click.option("--batch-size", type=click.IntRange(min=1),
              help="rows per request (default and upper bound: the ensemble's max_batch_size)")
@click.option("--compare", "checkpoint", type=click.Path(path_type=Path),
              help="train_torch.py's output folder (model.pt, features.json): compare with offline scores")
@click.option("--repo", type=click.Path(path_type=Path),
              help="with a URL and --compare: the repository the server serves (workflow, train_torch.py)")
@click.option("--tolerance", type=float, default=TOLERANCE, show_default=True, callback=_tolerance,
              help="largest accepted |served - offline| (a finite number >= 0)")
@click.option("--quiet", "-q", is_flag=True, help="print no scores, only the summary")
def query_command(target: str, data: Path, spec: Path | None, list_sep: tuple[str, ...], sep: str | None,
                  rows: int | None, model: str | None, batch_size: int | None, checkpoint: Path | None,
                  repo: Path | None, tolerance: float, quiet: bool) -> None:
    """Send the raw rows of --data through the ensemble served at REPO-or-URL (a repository folder: a private server
    is started on free loopback ports for the query) and print each row's scores."""
    from .query import TEXT_SUFFIXES, batch_size_for, client, endpoint, find_ensemble, read_rows, score, typed_frame
    from .raw_rows import JSON_SUFFIXES

    if checkpoint is not None and not checkpoint.is_dir():
        raise UserError.one(checkpoint, "checkpoint folder not found", field="--compare",
                            fix="pass the --output-dir of train_torch.py (model.pt, features.json)")
    if checkpoint is not None and repo is None and not Path(target).is_dir():
        raise UserError.one(target, "--compare needs the repository the server serves", field="--repo",
                            fix="pass --repo DIR, or the repository folder instead of the URL")
    list_seps, spec_sep = list_separators(spec, list_sep)
    if sep is not None and (len(sep) != 1 or sep in "\r\n\""):
        raise UserError.one(sep, "not one character a CSV separates fields with", field="--sep",
                            fix="e.g. --sep ';' or --sep $'\\t'")
    with endpoint(target) as end, client(end.url) as conn:
        ensemble = find_ensemble(conn, end.url, model)
        frame = read_rows(data, ensemble.columns, rows, sep or spec_sep)
        if data.suffix.lower() in TEXT_SUFFIXES + JSON_SUFFIXES:
            frame = typed_frame(frame, ensemble, data, list_seps)
        batch_size = batch_size_for(ensemble, batch_size)
        requests = -(-len(frame) // batch_size)
        if requests >= PROGRESS_MIN_REQUESTS:
            with click.progressbar(length=len(frame), label=f"{ensemble.name}", file=sys.stderr,
                                   show_pos=True) as bar:
                result = score(conn, ensemble, frame, data, batch_size=batch_size, progress=bar.update)
        else:
            result = score(conn, ensemble, frame, data, batch_size=batch_size)
        served_repo = repo or end.repo
    if not quiet:
        _print_scores(result)
    click.echo(f"{len(frame)} row(s) scored by {ensemble.name} in {requests} request(s) of up to {batch_size}: "
               f"latency p50 {result.p50:.2f} ms, p99 {result.percentile(99):.2f} ms", err=True)
    if checkpoint is None:
        return
    from .offline import offline_scores

    offline = offline_scores(served_repo, ensemble.name, checkpoint, frame)
    if not _compare(result, offline, checkpoint, tolerance):
        sys.exit(1)


def list_separators(spec: Path | None, given: tuple[str, ...]) -> tuple[dict[str, str], str | None]:
    """{list column: separator} and the CSV field separator from --spec (its etl.inputs, what `ctrgen etl` read the
    raw files with) and --list-sep COLUMN=SEP (which wins)."""
    seps: dict[str, str] = {}
    field_sep = None
    if spec is not None:
        from ..specfile.load import load_spec

        etl = load_spec(spec).spec.etl
        if etl is None:
            raise UserError.one(spec, "the spec has no etl: section to take the separators from", field="--spec",
                                fix="pass --list-sep COLUMN=SEP for each list column")
        seps.update(etl.inputs.multi_hot)
        field_sep = etl.inputs.sep
    for item in given:
        col, eq, sep = item.partition("=")
        if not eq or not col or not sep:
            raise UserError.one(item, "not COLUMN=SEP", field="--list-sep", fix="e.g. --list-sep 'genres=|'")
        seps[col] = sep
    return seps, field_sep


def _print_scores(result) -> None:
    """One line per row: its number, tab, the score; several columns (one per label) under a header line."""
    if len(result.columns) == 1:
        click.echo("\n".join(f"{i}\t{s:.8g}" for i, s in enumerate(result.scores[:, 0])))
        return
    click.echo("\t".join(("row", *result.columns)))
    click.echo("\n".join("\t".join((str(i), *(f"{s:.8g}" for s in row))) for i, row in enumerate(result.scores)))


def _compare(result, offline, checkpoint: Path, tolerance: float) -> bool:
    """Print the largest |served - offline| of each column (output); whether all are within ``tolerance``. The
    columns line up in order: the outputs are the labels in features.json's order (codegen.triton.plan)."""
    served = result.scores
    if offline.shape != served.shape:
        raise UserError.one(checkpoint, f"the checkpoint's Model scores {offline.shape[1]} value(s) per row, the "
                            f"ensemble answers {served.shape[1]} ({', '.join(result.columns)})", field="--compare",
                            fix="pass the checkpoint this repository's model was trained to")
    rows, agrees = len(served), True
    for j, name in enumerate(result.columns):
        diff = float(abs(offline[:, j] - served[:, j]).max())       # NaN when either side is not finite
        ok = diff <= tolerance
        agrees &= ok
        verdict = "served = offline" if ok else "served != offline"
        label = f" ({name})" if len(result.columns) > 1 else ""
        click.echo(f"{verdict}{label}: max |served - offline| = {diff:.3g} over {rows} row(s) "
                   f"(tolerance {tolerance:g})")
    return agrees
