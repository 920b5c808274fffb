"""``ctrgen keysets``: write the keyset file of each training source (hugectr.md §1.8)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

from ..errors import UserError
from .norm import norm_keys
from .parquet import SlotLayout, parquet_keys
from .raw import RawLayout, raw_keys
from .sources import Source, default_keyset_path, open_source
from .write import to_keyset, write_keyset

EPILOG = """\b
Examples:
  ctrgen keysets --spec specs/wdl_continuous_etc.yaml      # every pass's keysets, at the paths the spec names
  ctrgen keysets /data/criteo/day_0/_file_list.txt         # NVTabular output: _file_list.keyset beside the list
  ctrgen keysets wdl_data/file_list.3.txt wdl_data/file_list.4.txt --key-type int32   # Norm file lists
  ctrgen keysets day_0/_file_list.txt --spec specs/wdl_continuous_etc.yaml -o day_0.keyset
  ctrgen keysets train_data.bin --spec specs/dlrm_raw.yaml           # Raw: the spec gives the sample layout
\b
A keyset holds the unique keys of one source, as the embedding sees them: Parquet and Raw ids plus the slot offsets
HugeCTR's reader adds (exclusive prefix sums of slot_size_array, in slot order); Norm keys as stored. Keys are
8-byte with i64_input_key, else 4-byte (HugeCTR's unsigned int). Paths in file lists and in the spec are read as
HugeCTR reads them: absolute, or relative to the working directory.
"""


@dataclass(frozen=True)
class Expectations:
    """What the model reading these sources expects (from --spec, the options, or the data's schema)."""

    fmt: str | None
    key_type: str | None
    key_origin: str
    layout: SlotLayout | None
    slot_num: int | None
    check_sum: bool | None
    raw: RawLayout | None = None     # Raw data: the sample layout (only a spec gives it)


def _from_spec(spec: Path) -> tuple[Expectations, list[tuple[Path, Path]]]:
    from ..lock import load_features
    from ..model.build import build_job
    from ..specfile.context import open_spec

    ctx = open_spec(spec)
    features, _ = load_features(ctx, check_stale=False)
    job = build_job(ctx, features)
    slots = [(c, n) for s in job.graph.sparse for c, n in zip(s.columns, s.cardinalities)]
    fmt = ctx.spec.data.format
    if fmt == "raw_async":
        raise UserError.one(spec, "keysets are written for Parquet, Norm and Raw data (continuous training reads no "
                                  "RawAsync)", field="data.format", fix="use data.format: raw")
    given = dict(job.reader).get("slot_size_array")
    sizes = [int(x) for x in given] if isinstance(given, list) else [0] * len(slots)
    raw = RawLayout(label_dense_dim=sum(job.graph.label_dims) + job.graph.dense_dim,
                    slot_offsets=tuple(int(x) for x in np.cumsum([0, *sizes[:-1]]))) if fmt == "raw" else None
    lock = ctx.lock_display
    exp = Expectations(
        fmt=fmt, key_type="int64" if job.i64_input_key else "int32",
        key_origin=f"i64_input_key={job.i64_input_key} of {ctx.display}",
        layout=SlotLayout(tuple(c for c, _ in slots), tuple(n for _, n in slots), lock),
        slot_num=len(slots), check_sum=True if fmt == "norm" else None, raw=raw)
    pairs: list[tuple[Path, Path]] = []
    if job.continuous is not None:
        for p in job.continuous.passes:
            pairs += [(Path(s), Path(k)) for s, k in zip(p.source, p.keyset)]
    return exp, pairs


def _layout_from_data(source: Source, schema: Path | None) -> SlotLayout:
    from ..workflow import read_features

    where = schema or source.files[0].parent
    feats = read_features(where, allow_import=False)
    cats = feats.categorical
    return SlotLayout(tuple(c.name for c in cats), tuple(int(c.cardinality or 0) for c in cats), str(where))


def _keys(source: Source, exp: Expectations, schema: Path | None, advance) -> tuple[np.ndarray, str]:
    parts = []
    if source.fmt == "parquet":
        layout = exp.layout or _layout_from_data(source, schema)
        width = exp.key_type
        for f in source.files:
            keys, found = parquet_keys(f, layout)
            if width is not None and found != width:
                raise UserError.one(f, f"column {layout.columns[0]!r} (like every key column here) holds {found} "
                                       f"ids, but the keys are {width} ({exp.key_origin}; HugeCTR: \"Parquet col "
                                       "type is not consistent with solver.i64_input_key\")",
                                    field=layout.columns[0],
                                    fix="write the ids with the width the model uses (to_parquet dtypes=...)")
            width = found
            parts.append(keys)
            advance(f)
        return np.concatenate(parts), width or "int64"
    if source.fmt == "raw":
        if exp.raw is None or exp.key_type is None:
            raise UserError.one(source.path, "Raw files record neither their sample layout nor their key width",
                                field="--spec", fix="pass --spec (the model's label, dense and slot layout)")
        for f in source.files:
            parts.append(raw_keys(f, exp.raw))
            advance(f)
        return np.concatenate(parts), exp.key_type
    if exp.key_type is None:
        raise UserError.one(source.path, "Norm files do not record their key width", field="--key-type",
                            fix="pass --key-type int32 or int64 (i64_input_key), or --spec")
    for f in source.files:
        keys, _ = norm_keys(f, exp.key_type, slot_num=exp.slot_num, check_sum=exp.check_sum)
        parts.append(keys)
        advance(f)
    return np.concatenate(parts), exp.key_type


class _Bar:
    """Progress over the bytes read: click's bar on a terminal, nothing in logs (the summary lines follow)."""

    def __init__(self, total: int, *, enabled: bool, stream=None) -> None:
        stream = stream or sys.stderr
        self.bar = (click.progressbar(length=max(total, 1), label="reading keys", file=stream, show_eta=False,
                                      item_show_func=lambda name: name)
                    if enabled and stream.isatty() else None)

    def advance(self, nbytes: int, label: str) -> None:
        if self.bar is not None:
            self.bar.update(nbytes, label)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.render_finish()


@click.command(epilog=EPILOG, short_help="Write the keyset file of each training source.")
@click.argument("sources", nargs=-1, type=click.Path(path_type=Path))
@click.option("--spec", type=click.Path(path_type=Path),
              help="model spec: key width (i64_input_key), format, slot order and sizes from it and its lock; "
                   "without SOURCES, every pass of its continuous_training section")
@click.option("--key-type", type=click.Choice(["int32", "int64"]),
              help="key width (default: the spec's i64_input_key, else the Parquet id columns' dtype)")
@click.option("--format", "fmt", type=click.Choice(["parquet", "norm", "raw"]),
              help="data format (default: the spec's, else Parquet for .parquet files and Norm otherwise)")
@click.option("--schema", type=click.Path(path_type=Path),
              help="Parquet without --spec: the dataset folder, schema file or saved workflow that gives the slot "
                   "order and sizes (default: the folder of each source's first data file)")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="keyset file to write (one source only)")
@click.option("--out-dir", type=click.Path(path_type=Path),
              help="write <source stem>.keyset here (default: beside each source)")
@click.option("-q", "--quiet", is_flag=True, help="no progress bar")
def keysets_command(sources: tuple[Path, ...], spec: Path | None, key_type: str | None, fmt: str | None,
                    schema: Path | None, output: Path | None, out_dir: Path | None, quiet: bool) -> None:
    """Write the keyset file of each training SOURCE (a HugeCTR file list or one data file): the unique keys it
    holds, for the embedding cache of continuous training (CreateMOS / CreateETC)."""
    exp = Expectations(fmt=None, key_type=None, key_origin="", layout=None, slot_num=None, check_sum=None)
    spec_pairs: list[tuple[Path, Path]] = []
    if spec is not None:
        exp, spec_pairs = _from_spec(spec)
    if key_type is not None:
        exp = Expectations(exp.fmt, key_type, "--key-type", exp.layout, exp.slot_num, exp.check_sum, exp.raw)
    if fmt is not None:
        if exp.fmt is not None and exp.fmt != fmt:
            raise UserError.one(spec, f"the spec's data is {exp.fmt}", field="--format", fix="drop --format")
        exp = Expectations(fmt, exp.key_type, exp.key_origin, exp.layout, exp.slot_num, exp.check_sum, exp.raw)
    if output is not None and out_dir is not None:
        raise UserError.one("--output", "use either --output or --out-dir", field="--output")

    if sources:
        if output is not None and len(sources) != 1:
            raise UserError.one("--output", f"names one file for {len(sources)} sources", field="--output",
                                fix="use --out-dir, or one source per call")
        pairs = [(s, output if output is not None else
                  (out_dir / default_keyset_path(s).name if out_dir else default_keyset_path(s))) for s in sources]
    elif spec_pairs:
        if output is not None or out_dir is not None:
            raise UserError.one(spec, "the spec names each keyset path already", field="--output/--out-dir",
                                fix="drop the option, or name SOURCES")
        pairs = spec_pairs
    else:
        raise UserError.one(spec or "SOURCES", "no sources: name file lists or data files, or a spec with a "
                                               "continuous_training section", field="SOURCES",
                            fix="e.g. ctrgen keysets /data/day_0/_file_list.txt")

    for line in write_keysets(pairs, exp, schema=schema, quiet=quiet):
        click.echo(line)


def write_keysets(pairs: list[tuple[Path, Path]], exp: Expectations, *, schema: Path | None = None,
                  quiet: bool = False) -> list[str]:
    """Read every source, then write every keyset (nothing is written when a source is bad); one line each."""
    opened = [(open_source(s, exp.fmt), out) for s, out in pairs]   # every source is checked before any work
    total = sum(f.stat().st_size for src, _ in opened for f in src.files)
    bar = _Bar(total, enabled=not quiet)
    results = []
    for src, out in opened:
        keys, width = _keys(src, exp, schema, lambda f: bar.advance(f.stat().st_size, f.name))
        results.append((src, out, to_keyset(keys, width, where=str(src.path)), width))
    bar.close()
    lines = []
    for src, out, keys, width in results:
        write_keyset(out, keys)
        lines.append(f"wrote {out}: {keys.size} keys ({width}) from {src.path} ({len(src.files)} file(s), {src.fmt})")
    return lines


def spec_keysets(spec: Path, *, quiet: bool = True) -> list[str]:
    """Every keyset of a spec's continuous_training passes, at the paths it names (``ctrgen keysets --spec``)."""
    exp, pairs = _from_spec(spec)
    return write_keysets(pairs, exp, quiet=quiet) if pairs else []
