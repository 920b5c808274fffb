"""The spec's ``etl:`` section checked as a whole and turned into a plan: which columns each operator chain reads,
what it writes, in which role and with which on-disk dtype.

Pydantic has checked each field; here the fields are checked against each other (a column used twice, a group on a
column nobody reads, a comparison on text, ...), each problem reported with its spec line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import Problem, UserError
from ..specfile.etl import CATEGORICAL_OPS, EtlSpec
from ..specfile.load import LoadedSpec

NUMERIC = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "bool")
CONTINUOUS_OPS = ("FillMissing", "Clip", "LogOp", "Normalize")
Err = Callable[..., None]   # err(loc under etl, message, fix=""): one problem, reported with its spec line


@dataclass(frozen=True)
class Comparison:
    """LambdaOp's one accepted form, ``(col <compare> value).astype(dtype)``: the spec's values, its defaults in."""

    compare: str
    value: float
    dtype: str


@dataclass(frozen=True)
class CategorifyLimits:
    """What a Categorify keeps: the spec's values, its defaults in."""

    freq_threshold: int                 # 0: every category
    max_size: int                       # 0: no limit
    num_buckets: int | None             # None: no hashing of the infrequent ones


@dataclass(frozen=True)
class OpStep:
    name: str                           # NVTabular operator class
    args: tuple[tuple[str, object], ...]  # keyword arguments that differ from NVTabular's defaults, in field order
    comparison: Comparison | None = None    # LambdaOp's, for the renderer to read (args is only printed)
    limits: CategorifyLimits | None = None  # Categorify's


@dataclass(frozen=True)
class GroupPlan:
    columns: tuple[str, ...]            # raw (or joined) columns read
    ops: tuple[OpStep, ...]
    role: str                           # categorical | continuous | label
    joined: bool                        # reads a column of the join table: goes through JoinExternal
    multi_hot: tuple[str, ...]          # list columns among `columns`


@dataclass(frozen=True)
class CrossPlan:
    columns: tuple[str, ...]
    num_buckets: int | None
    freq_threshold: int

    @property
    def output(self) -> str:
        # NVTabular's names: Categorify(encode_type="combo") joins with "_", HashedCross with "_X_".
        return ("_X_" if self.num_buckets else "_").join(self.columns)


@dataclass(frozen=True)
class RawInputs:
    columns: dict[str, str]             # raw column -> dtype, in the spec's order
    multi_hot: dict[str, str]           # list column -> separator (CSV)
    sep: str


@dataclass(frozen=True)
class JoinPlan:
    path: str
    sep: str
    on: tuple[str, ...]
    how: str
    columns: dict[str, str]
    multi_hot: dict[str, str]


@dataclass(frozen=True)
class SplitPlan:
    valid_fraction: float
    seed: int


@dataclass(frozen=True)
class NormPlan:
    rows_per_file: int
    files_per_list: int
    check_type: str                     # Sum | Non


@dataclass(frozen=True)
class OutputPlan:
    dir: str                            # relative to the spec's folder
    reader: str                         # hugectr | torch | none
    part_size: str
    out_files_per_proc: int
    shuffle: bool
    seed: int
    shuffle_valid: bool = False
    format: str = "parquet"             # norm: also HugeCTR Norm files under <dir>/norm/
    norm: NormPlan | None = None


@dataclass(frozen=True)
class ClusterPlan:
    """The local Dask cluster etl.py starts (LocalCUDACluster's names)."""

    workers: int | None                 # devices alone: one worker per device, as dask-cuda starts them
    protocol: str
    devices: tuple[int, ...] | None
    device_memory_limit: float
    rmm_pool: bool
    local_directory: str | None
    threads_per_worker: int
    memory_limit: str | float           # host memory per worker, as Dask reads it
    memory_target_fraction: float | None   # None: Dask's config
    memory_spill_fraction: float | None


@dataclass(frozen=True)
class EtlPlan:
    inputs: RawInputs
    join: JoinPlan | None
    drop: tuple[str, ...]
    split: SplitPlan
    output: OutputPlan
    cluster: ClusterPlan
    train: tuple[str, ...]              # as written in the spec (relative to its folder)
    valid: tuple[str, ...] | None
    train_format: str
    join_format: str | None
    groups: tuple[GroupPlan, ...]
    crosses: tuple[CrossPlan, ...]
    categorical: tuple[str, ...]        # output columns, in slot order (crossed columns first)
    continuous: tuple[str, ...]
    labels: tuple[str, ...]
    dtypes: dict[str, str]              # to_parquet dtypes (scalar columns only: list columns stay list<int64>)
    multi_hot_outputs: tuple[str, ...]
    hashing: bool                       # a HashedCross or Categorify(num_buckets): rows get a constant index

    @property
    def read_columns(self) -> tuple[str, ...]:
        return tuple(self.inputs.columns)


def _format(paths: list[str], given: str | None) -> str | None:
    if given:
        return given
    suffixes = {PurePosixPath(p).suffix.lower() for p in paths}
    if suffixes <= {".parquet", ".pq"}:
        return "parquet"
    if suffixes <= {".csv", ".txt", ".tsv"}:
        return "csv"
    return None


def _op_step(op) -> OpStep:
    args = op.args
    given = tuple((k, getattr(args, k)) for k in type(args).model_fields if k in args.model_fields_set)
    comparison = Comparison(args.compare, float(args.value), args.dtype) if op.name == "LambdaOp" else None
    limits = CategorifyLimits(args.freq_threshold, args.max_size, args.num_buckets) if op.name == "Categorify" \
        else None
    return OpStep(op.name, given, comparison, limits)


def build_plan(loaded: LoadedSpec) -> EtlPlan:
    etl = loaded.spec.etl
    assert etl is not None
    problems: list[Problem] = []

    def err(loc: tuple, message: str, fix: str = "") -> None:
        problems.extend(loaded.error(("etl",) + loc, message, fix).problems)

    raw, joined_cols, multi_hot, train_format, join_format = _check_inputs(etl, err)
    used: dict[str, tuple] = {}
    groups = _plan_groups(etl, err, {**raw, **joined_cols}, joined_cols, multi_hot, used)
    crosses = _plan_crosses(etl, err, raw, multi_hot, groups, used)
    hashing = [("cross", xi) for xi, x in enumerate(crosses) if x.num_buckets] + [
        ("groups", gi) for gi, g in enumerate(groups) for op in g.ops if op.limits and op.limits.num_buckets]
    _check_coverage(etl, err, raw, multi_hot, hashing, used)
    norm_check = _norm_check(loaded, err)
    if problems:
        raise UserError(problems)
    return _plan(etl, train_format, join_format, groups, crosses, norm_check, bool(hashing))


def _check_inputs(etl: EtlSpec, err: Err) -> tuple[Mapping[str, str], Mapping[str, str], set[str], str | None,
                                                  str | None]:
    """The input and join-table columns checked against each other: (input columns, join-table columns, list
    columns, the training files' format, the join table's format)."""
    inputs, join = etl.inputs, etl.join
    raw = dict(inputs.columns)
    joined_cols = {c: t for c, t in (join.columns.items() if join else ()) if c not in (join.on if join else ())}
    for c in joined_cols:
        if c in raw:
            err(("join", "columns", c), f"column {c!r} is in both the input and the join table",
                fix="rename it in one of them, or drop it from the join table's columns")

    train_format = _format(inputs.train, inputs.format)
    if train_format is None:
        err(("inputs", "train"), "cannot tell the file format from the extensions",
            fix="set inputs.format: parquet or csv")
    if inputs.valid and _format(inputs.valid, inputs.format) != train_format:
        err(("inputs", "valid"), "validation files have another format than the training files")
    join_format = None
    if join:
        join_format = _format([join.path], join.format)
        if join_format is None:
            err(("join", "path"), "cannot tell the file format from the extension", fix="set join.format")
        for i, key in enumerate(join.on):
            if key not in raw:
                err(("join", "on", i), f"join key {key!r} is not an input column", fix="add it to inputs.columns")
            if key not in join.columns:
                err(("join", "on", i), f"join key {key!r} is not a column of the join table",
                    fix="add it to join.columns")
            elif key in raw and (raw[key] == "str") != (join.columns[key] == "str"):
                err(("join", "columns", key), f"join key {key!r} is text on one side and a number on the other")
        for c, _sep in join.multi_hot.items():
            if join.columns.get(c) != "str":
                err(("join", "multi_hot", c), f"{c!r} must be a 'str' column of the join table to be split")
    for c in inputs.multi_hot:
        if raw.get(c) != "str":
            err(("inputs", "multi_hot", c), f"{c!r} must be a 'str' input column to be split")
    multi_hot = set(inputs.multi_hot) | set(join.multi_hot if join else ())

    for i, c in enumerate(etl.drop):
        if c not in raw:
            err(("drop", i), f"dropped column {c!r} is not an input column", fix="list it in inputs.columns")
    return raw, joined_cols, multi_hot, train_format, join_format


def _plan_groups(etl: EtlSpec, err: Err, known: Mapping[str, str], joined_cols: Mapping[str, str], multi_hot: set[str],
                 used: dict[str, tuple]) -> list[GroupPlan]:
    """Each group's columns and role (categorical, continuous, label); ``used`` learns who reads each column."""
    groups: list[GroupPlan] = []
    for gi, g in enumerate(etl.groups):
        names = [op.name for op in g.ops]
        for ci, c in enumerate(g.columns):
            if c not in known:
                err(("groups", gi, "columns", ci), f"column {c!r} is not an input or join-table column",
                    fix="add it to inputs.columns (or join.columns)")
            elif c in etl.drop:
                err(("groups", gi, "columns", ci), f"column {c!r} is dropped", fix="remove it from drop")
            if c in used:
                err(("groups", gi, "columns", ci), f"column {c!r} is already transformed by another group",
                    fix="one group per column (NVTabular would write the same output name twice)")
            used[c] = ("groups", gi)
        if CATEGORICAL_OPS & set(names):
            if names != ["Categorify"]:
                err(("groups", gi, "ops"), "Categorify is the only operator of its group",
                    fix="put continuous operators in a group of their own")
            role = "categorical"
        elif not names:
            role = g.role or "continuous"
        elif "LambdaOp" in names:
            if names != ["LambdaOp"]:
                err(("groups", gi, "ops"), "LambdaOp (a comparison) is the only operator of its group")
            role = "label"
        else:
            role = "continuous"
        for ci, c in enumerate(g.columns):
            if role != "categorical" and c in multi_hot:
                err(("groups", gi, "columns", ci), f"list column {c!r} can only be categorified")
            if role != "categorical" and known.get(c) == "str":
                err(("groups", gi, "columns", ci), f"text column {c!r} needs Categorify ({names[0]} works on "
                    "numbers)", fix="read it as a number in inputs.columns, or categorify it")
        if g.role is not None:
            if role == "categorical" and g.role != "categorical":
                err(("groups", gi, "role"), "a Categorify group is categorical")
            role = g.role
        groups.append(GroupPlan(columns=tuple(g.columns), ops=tuple(_op_step(op) for op in g.ops),
                                role=role, joined=any(c in joined_cols for c in g.columns),
                                multi_hot=tuple(c for c in g.columns if c in multi_hot)))
    return groups


def _plan_crosses(etl: EtlSpec, err: Err, raw: Mapping[str, str], multi_hot: set[str], groups: list[GroupPlan],
                  used: dict[str, tuple]) -> list[CrossPlan]:
    """The crossed columns, each named as NVTabular names its output."""
    crosses = []
    outputs = {c for g in groups for c in g.columns}
    for xi, x in enumerate(etl.cross):
        for ci, c in enumerate(x.columns):
            if c not in raw or c in multi_hot:
                err(("cross", xi, "columns", ci), f"crossed column {c!r} must be a one-hot input column")
        plan = CrossPlan(tuple(x.columns), x.num_buckets, x.freq_threshold)
        if plan.output in outputs:
            err(("cross", xi), f"the crossed column's name {plan.output!r} is taken by another output column")
        if x.num_buckets and x.freq_threshold:
            err(("cross", xi, "freq_threshold"), "freq_threshold applies to combo encoding, not to hashed crosses")
        outputs.add(plan.output)
        crosses.append(plan)
        for c in x.columns:
            used.setdefault(c, ("cross", xi))
    return crosses


def _check_coverage(etl: EtlSpec, err: Err, raw: Mapping[str, str], multi_hot: set[str], hashing: list[tuple],
                    used: dict[str, tuple]) -> None:
    """Hashing without list columns, and every input column transformed, joined on or dropped."""
    join = etl.join
    if hashing and multi_hot:
        # etl.py gives every row the same index so that hashes depend on values only; NVTabular's list
        # Categorify regroups lists by index and needs it unique.
        err(hashing[0], "hashing (num_buckets) and multi-hot list columns cannot be combined in one ETL on "
            "NVTabular 23.8, which hashes pandas rows together with their index",
            fix="use a combo cross / plain Categorify, or run the list columns in an ETL of their own")
    for key in (join.on if join else ()):
        used.setdefault(key, ("join", "on"))
    for c in raw:
        if c not in used and c not in etl.drop:
            err(("inputs", "columns", c), f"input column {c!r} is neither transformed nor dropped",
                fix=f"add it to a group, or to drop: [{c}]")


def _norm_check(loaded: LoadedSpec, err: Err) -> str:
    """The Check_t of the Norm files written: the model's reader's when it reads them."""
    etl = loaded.spec.etl
    assert etl is not None
    asked = etl.output.norm.check_type
    norm_check: str = asked or "Sum"
    if etl.output.format == "norm" and loaded.spec.data.format == "norm":   # the files the model's reader reads
        norm_check = loaded.spec.reader_check_type()
        if asked not in (None, norm_check):
            err(("output", "norm", "check_type"), f"the Norm files would be written for Check_t.{asked}, but the "
                f"model's reader reads them with data.check_type Check_t.{norm_check}",
                fix=f"remove etl.output.norm.check_type (data.check_type decides for both), or set both to {asked}")
    return norm_check


def _plan(etl: EtlSpec, train_format: str | None, join_format: str | None, groups: list[GroupPlan],
          crosses: list[CrossPlan], norm_check: str, hashing: bool) -> EtlPlan:
    """The checked section as the plan: output columns in slot order and their on-disk dtypes."""
    inputs = etl.inputs
    cats = tuple(x.output for x in crosses) + tuple(c for g in groups if g.role == "categorical" for c in g.columns)
    conts = tuple(c for g in groups if g.role == "continuous" for c in g.columns)
    labels = tuple(c for g in groups if g.role == "label" for c in g.columns)
    multi_out = tuple(c for g in groups for c in g.multi_hot)
    dtypes: dict[str, str] = {}
    if etl.output.reader != "none":
        dtypes.update({c: "int64" for c in cats if c not in multi_out})
        dtypes.update({c: "float32" for c in conts + labels})
    j, o, cl = etl.join, etl.output, etl.cluster
    return EtlPlan(inputs=RawInputs(columns=dict(inputs.columns), multi_hot=dict(inputs.multi_hot), sep=inputs.sep),
                   join=None if j is None else JoinPlan(path=j.path, sep=j.sep, on=tuple(j.on), how=j.how,
                                                        columns=dict(j.columns), multi_hot=dict(j.multi_hot)),
                   drop=tuple(etl.drop), split=SplitPlan(valid_fraction=etl.split.valid_fraction, seed=etl.split.seed),
                   output=OutputPlan(dir=o.dir, reader=o.reader, part_size=o.part_size,
                                     out_files_per_proc=o.out_files_per_proc, shuffle=o.shuffle, seed=o.seed,
                                     shuffle_valid=o.shuffle_valid,
                                     format=o.format,
                                     norm=NormPlan(o.norm.rows_per_file, o.norm.files_per_list, norm_check)
                                     if o.format == "norm" else None),
                   cluster=ClusterPlan(workers=len(cl.devices) if cl.devices else cl.workers, protocol=cl.protocol,
                                       devices=None if cl.devices is None else tuple(cl.devices),
                                       device_memory_limit=cl.device_memory_limit, rmm_pool=cl.rmm_pool,
                                       local_directory=cl.local_directory, threads_per_worker=cl.threads_per_worker,
                                       memory_limit=cl.memory_limit, memory_target_fraction=cl.memory_target_fraction,
                                       memory_spill_fraction=cl.memory_spill_fraction),
                   train=tuple(inputs.train), valid=tuple(inputs.valid) if inputs.valid else None,
                   train_format=train_format or "parquet", join_format=join_format, groups=tuple(groups),
                   crosses=tuple(crosses), categorical=cats, continuous=conts, labels=labels, dtypes=dtypes,
                   multi_hot_outputs=multi_out, hashing=hashing)


def output_dir(spec_path: Path, plan: EtlPlan) -> Path:
    return (spec_path.resolve().parent / plan.output.dir).resolve()
