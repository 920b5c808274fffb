"""``ctrgen validate``: the click command. Attach it to the main group with
``main.add_command(validate_command, "validate")``. Exit status: 0 no defects, 1 defects found (or warnings with
--strict), 2 unusable input (one line per problem, no traceback)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ...errors import UserError
from ...features import Features
from ..lint.findings import ERROR, WARNING, count, render_findings
from ..lint.validate import validate_repository

EPILOG = """\b
Examples:
  ctrgen validate generated/movielens/triton
  ctrgen validate models/ --ps models/ps.json --format json
  ctrgen validate models/ --root-map /model=models      # ps.json says /model/movielens/1/...
  ctrgen validate generated/movielens/triton --features-lock specs/movielens.features.lock.json
  ctrgen validate generated/deepfm_vertex/triton --spec specs/deepfm_vertex.yaml   # the spec's columns of its lock

\b
Checks (docs/triton.md §2, §4, §5, §7):
  hugectr models  inputs DES/CATCOLUMN/ROWINDEX and dtypes, dims, KIND_GPU, max_batch_size and name vs ps.json,
                  gpucache*, slots/des_feature_num/label_dim/cat_feature_num/max_nnz/embedding_vector_size vs the
                  graph JSON, key width, per-table lists of ps.json, dense and sparse files
  ensembles       input_map/output_map names and dtypes between steps, *_nvt naming, version folders
  features lock   slot_size_array, slot count, dense_dim, labels, NVT cats/conts order, key dtype
"""


def spec_lock(spec: Path) -> tuple[Features, Path, bool | None]:
    """--spec: the spec's lock on the columns it trains on (the spec is built first, so unknown columns fail with
    generation's own messages), the lock's path relative to the working directory, and the key width of a Norm or
    Raw spec (whose files record none: the spec's i64_input_key, not the lock, decides it)."""
    from ...model.build import spec_features
    from ...specfile.context import open_spec

    ctx = open_spec(Path(spec))
    features = spec_features(ctx)
    key_long = None if ctx.spec.data.format == "parquet" else bool(ctx.spec.solver.i64_input_key)
    return features, Path(os.path.relpath(ctx.lock_path)), key_long


def _parse_root_map(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for value in values:
        prefix, sep, local = value.partition("=")
        if not sep or not prefix.startswith("/") or not local:
            raise click.BadParameter(f"{value!r}: expected /PREFIX=LOCAL_DIR, e.g. /model=models", ctx, param)
        out[prefix] = Path(local)
    return out


@click.command("validate", epilog=EPILOG, short_help="Lint a Triton repository of HugeCTR models.",
               context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--ps", "ps", type=click.Path(path_type=Path),
              help="the ps.json the server gets (default: every ps.json under PATH)")
@click.option("--root-map", "root_map", multiple=True, callback=_parse_root_map, metavar="/PREFIX=DIR",
              help="read absolute paths under /PREFIX (as the serving container sees them) from DIR; repeatable")
@click.option("--features-lock", "features_lock", type=click.Path(path_type=Path),
              help="check the training side against this features lock (specs/<name>.features.lock.json)")
@click.option("--spec", "spec", type=click.Path(path_type=Path),
              help="check the training side against this spec's columns of its features lock (a spec may use a "
                   "subset of a shared lock)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--strict", is_flag=True, help="exit 1 on warnings too (data- or release-dependent findings)")
def validate_command(path: Path, ps: Path | None, root_map: dict[str, Path], features_lock: Path | None,
                     spec: Path | None, fmt: str, strict: bool) -> None:
    """Lint the Triton model repository at PATH: config.pbtxt <-> ps.json <-> graph JSON <-> features lock.

    Each finding names the file, the field, both values and the fix. Relative paths in config.pbtxt and ps.json
    are read from the repository root; absolute ones through --root-map.
    """
    try:
        findings = validate_repository(path, ps=ps, root_map=root_map, features_lock=features_lock,
                                       spec_lock=None if spec is None else (lambda: spec_lock(spec)))
    except UserError as exc:
        click.echo(exc.format(), err=True)
        sys.exit(2)
    click.echo(render_findings(findings, fmt), nl=False)
    failing = count(findings, ERROR) + (count(findings, WARNING) if strict else 0)
    sys.exit(1 if failing else 0)
