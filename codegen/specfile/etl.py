"""The spec's ``etl:`` section: raw inputs, NVTabular operators per column group, split and output layout.

``ctrgen etl SPEC`` renders it into ``generated/<name>/etl.py`` (templates/etl/etl.py.j2) and runs that. Operator
and argument names are NVTabular's own, so the section reads like the workflow the seeds write by hand::

    etl:
      inputs:
        train: [../data/ml-25m/ratings.csv]
        columns: {userId: int64, movieId: int64, rating: float64, timestamp: int64}
      drop: [timestamp]
      join: {path: ../data/ml-25m/movies.csv, on: [movieId], columns: {movieId: int64, genres: str},
             multi_hot: {genres: "|"}}
      groups:
        - {columns: [userId, movieId, genres], ops: [Categorify]}
        - {columns: [rating], ops: [{LambdaOp: {compare: ">", value: 3, dtype: int8}}], role: label}
      split: {valid_fraction: 0.2}
      output: {dir: ../data/movielens, out_files_per_proc: 2, shuffle: true, reader: hugectr}

Column names are data, never code: they reach etl.py as string literals only, and the one LambdaOp form accepted is
a comparison with a number, which ctrgen writes itself.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_serializer, model_validator

from ..errors import field_path

PosInt = Annotated[int, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]
Float = Annotated[float, Field(allow_inf_nan=False)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)   # as the rest of the spec: no coercion



def _column_name(value: str) -> str:
    # NVTabular names a file after each categorical column (categories/unique.<name>.parquet): a '/' or '\\' would
    # write it elsewhere, '.' and '..' are folders.
    if "/" in value or "\\" in value or value in (".", ".."):
        raise ValueError("a column name may not hold '/' or '\\' or be '.' or '..' (NVTabular writes a file named "
                         "after it)")
    return value


# Column names of user files: printable text without control characters (emitted with repr()), no path separator.
ColumnName = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$"),
                       AfterValidator(_column_name)]
PathText = Annotated[str, Field(min_length=1, pattern=r"^[^\x00-\x1f\x7f]+$")]
# Raw column dtypes as pandas / pyarrow spell them; "str" for text (categorical ids kept as strings).
RawDtype = Literal["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
                   "bool", "str"]
# A tab is the one control character a separator may be (TSV files).
Separator = Annotated[str, Field(min_length=1, max_length=8, pattern=r"^(\t|[^\x00-\x1f\x7f]+)$")]
# Seeds reach numpy as uint64 (seed + 1 in the split's hash): at most INT64_MAX.
Seed = Annotated[int, Field(ge=0, le=2**63 - 1)]
# More files than this per split is no dataset layout (each is a Parquet file per split and worker).
MAX_OUT_FILES = 10_000


class EtlInputs(Strict):
    """The raw files. Relative paths are relative to the spec's folder."""

    train: list[PathText] = Field(..., min_length=1, description="raw training files (parquet or CSV)")
    valid: list[PathText] | None = Field(
        None, min_length=1, description="raw validation files (omitted: split.valid_fraction of train is held out)")
    format: Literal["parquet", "csv"] | None = Field(None, description="default: from the file extension")
    sep: Separator = Field(",", description="CSV field separator")
    columns: dict[ColumnName, RawDtype] = Field(
        ..., min_length=1, description="every raw column the ETL reads, with the dtype it is read as")
    multi_hot: dict[ColumnName, Separator] = Field(
        default_factory=dict, description="text columns holding lists, split on this separator (e.g. genres: '|')")


class EtlJoin(Strict):
    """A side table joined on key columns with NVTabular's JoinExternal (seed 001: genres joined from movies)."""

    path: PathText = Field(..., description="parquet or CSV file (read whole, as JoinExternal needs it in memory)")
    format: Literal["parquet", "csv"] | None = None
    sep: Separator = ","
    on: list[ColumnName] = Field(..., min_length=1, description="key columns, present in both tables")
    how: Literal["left", "inner"] = "left"
    columns: dict[ColumnName, RawDtype] = Field(..., min_length=1, description="the table's columns and dtypes")
    multi_hot: dict[ColumnName, Separator] = Field(default_factory=dict)


# ---- operators -------------------------------------------------------------------------------------------------

class CategorifyArgs(Strict):
    freq_threshold: NonNegInt = Field(0, description="categories seen fewer times map to the out-of-vocabulary id")
    max_size: NonNegInt = Field(0, description="keep at most this many most frequent categories (0: all)")
    num_buckets: PosInt | None = Field(None, description="hash infrequent / out-of-vocabulary values into buckets")


class FillMissingArgs(Strict):
    fill_val: Float = 0.0
    add_binary_cols: bool = False


class ClipArgs(Strict):
    min_value: Float | None = None
    max_value: Float | None = None

    @model_validator(mode="after")
    def _bounds(self):
        if self.min_value is None and self.max_value is None:
            raise ValueError("give min_value, max_value or both")
        if self.min_value is not None and self.max_value is not None and self.min_value > self.max_value:
            raise ValueError("min_value is greater than max_value")
        return self


class NormalizeArgs(Strict):
    out_dtype: Literal["float32", "float64"] = "float32"


class LambdaArgs(Strict):
    """The label of the seeds, ``(col > 3).astype("int8")``, as data: a comparison with a number."""

    compare: Literal[">", ">=", "<", "<=", "==", "!="]
    value: Float
    dtype: Literal["int8", "int32", "int64", "float32"] = "int8"


class NoArgs(Strict):
    pass


OP_ARGS: dict[str, type[Strict]] = {
    "Categorify": CategorifyArgs, "FillMissing": FillMissingArgs, "Clip": ClipArgs, "LogOp": NoArgs,
    "Normalize": NormalizeArgs, "LambdaOp": LambdaArgs,
}
# Operators on categorical ids vs. on numbers: a group may not mix the two.
CATEGORICAL_OPS = frozenset({"Categorify"})


class EtlOp(Strict):
    name: Literal[tuple(OP_ARGS)]
    args: Any = None

    @model_serializer
    def _as_written(self) -> Any:
        """Back to the form users write: ``Categorify`` or ``{Clip: {min_value: 0}}`` (the spec writer's inverse)."""
        args = self.args
        given = {k: getattr(args, k) for k in type(args).model_fields if k in args.model_fields_set} if args else {}
        return {self.name: given} if given else self.name


def _parse_op(value: Any) -> dict:
    """``Categorify`` or ``{Categorify: {freq_threshold: 5}}`` -> ``{"name": ..., "args": validated model}``."""
    if isinstance(value, str):
        name, raw = value, {}
    elif isinstance(value, dict) and len(value) == 1:
        (name, raw), = value.items()
        raw = {} if raw is None else raw
    else:
        raise ValueError("an operator is a name (Categorify) or a one-key map ({Clip: {min_value: 0}})")
    if name not in OP_ARGS:
        raise ValueError(f"unknown operator {name!r}; one of: {', '.join(OP_ARGS)}")
    if not isinstance(raw, dict):
        raise ValueError(f"{name}'s arguments must be a map")
    try:
        args = OP_ARGS[name].model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = field_path(err["loc"])
        msg = "unknown argument" if err["type"] == "extra_forbidden" else err["msg"]
        raise ValueError(f"{name}{'.' + where if where else ''}: {msg}") from None
    return {"name": name, "args": args}


class EtlGroup(Strict):
    """Columns that go through the same chain of operators (``columns >> op >> op``)."""

    columns: list[ColumnName] = Field(..., min_length=1)
    ops: list[EtlOp] = Field(..., description="NVTabular operators in order: Categorify, FillMissing, Clip, LogOp, "
                             "Normalize, LambdaOp (a comparison); [] passes the columns through (give role:)")
    role: Literal["categorical", "continuous", "label"] | None = Field(
        None, description="default: categorical after Categorify, label after LambdaOp, else continuous")

    @model_validator(mode="after")
    def _passthrough(self):
        if not self.ops and self.role not in ("continuous", "label"):
            raise ValueError("a group without operators passes its columns through: give role: label or continuous")
        return self

    @field_validator("ops", mode="before")
    @classmethod
    def _ops(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [_parse_op(v) for v in value]


class EtlCross(Strict):
    """A crossed column (the wide input of Wide&Deep): ids of value pairs seen in training, or hashed buckets."""

    columns: list[ColumnName] = Field(..., min_length=2)
    num_buckets: PosInt | None = Field(
        None, description="HashedCross into this many buckets (output <a>_X_<b>); omitted: Categorify "
                          "encode_type='combo' (output <a>_<b>, one id per pair seen in training)")
    freq_threshold: NonNegInt = Field(0, description="combo encoding only")


class EtlSplit(Strict):
    valid_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.2
    seed: Seed = Field(0, description="the split depends on the row number and this seed only")


class EtlNorm(Strict):
    """HugeCTR Norm files written beside the Parquet output (seed 003's preprocess.sh), under <dir>/norm/."""

    rows_per_file: PosInt = Field(100000, description="records per Norm data file")
    files_per_list: PosInt = Field(100, description="data files per training file list (file_list.N.txt), one "
                                                    "list per continuous-training source (seed 003: 100)")
    check_type: Literal["Sum", "Non"] | None = Field(
        None, description="Check_t the files are written for; the model's reader reads them with the same one: "
                          "default data.check_type (Sum for Norm, seed 003's), and data.check_type takes this one "
                          "when it is not given; the two set apart must agree")


def _part_size(value: str) -> str:
    number, unit = re.fullmatch(r"([0-9.]+)([A-Z]+)", value).groups()  # type: ignore[union-attr]
    size = float(number) * {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}[unit]
    if not 1 << 10 <= size <= 64 << 30:
        raise ValueError("a partition is between 1KB and 64GB (Dask works on one at a time per worker)")
    return value


class EtlOutput(Strict):
    dir: PathText = Field(..., description="where train/, valid/ and workflow/ are written (relative to the spec)")
    out_files_per_proc: Annotated[int, Field(gt=0, le=MAX_OUT_FILES)] = Field(
        2, description="parquet files per split; fixed whatever the number of Dask workers, so that the output "
                       "does not depend on it")
    shuffle: bool = Field(True, description="shuffle the training rows within each partition (seeded)")
    shuffle_valid: bool = Field(
        False, description="shuffle the validation rows too, as seed 001's Shuffle.PER_WORKER does (seeded; seed "
                           "000 writes them in order: false)")
    seed: Seed = Field(0, description="seed of the shuffle")
    reader: Literal["hugectr", "torch", "none"] = Field(
        "hugectr", description="on-disk dtypes: hugectr/torch = int64 categorical ids, float32 continuous and labels; "
                               "none = the workflow's dtypes")
    part_size: Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?(B|KB|MB|GB)$"),
                         AfterValidator(_part_size)] = Field(
        "100MB", description="nvt.Dataset part_size (the partitions Dask works on)")
    format: Literal["parquet", "norm"] = Field(
        "parquet", description="norm: also write HugeCTR Norm files and file lists under <dir>/norm/ (keys of "
                               "solver.i64_input_key's width, slot offsets added)")
    norm: EtlNorm = Field(default_factory=EtlNorm, description="the Norm files' layout (format: norm)")


Fraction = Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)]


def _memory_limit(value: str | float) -> str | float:
    """A worker's host memory as Dask's parse_memory_limit reads it, passed through as written: "auto", a fraction of
    the machine's memory, or a size in Dask's units (GB = 10**9, GiB = 2**30)."""
    if isinstance(value, str):
        size = r"[1-9][0-9]{0,15}(\.[0-9]{1,6})?(B|kB|KB|MB|GB|TB|KiB|MiB|GiB|TiB)"
        if value == "auto" or re.fullmatch(size, value):
            return value
    elif 0.0 < value <= 1.0:
        return value
    raise ValueError(f"{value!r} is not auto, a fraction of the machine's memory in (0, 1], or a size such as 16GB "
                     "or 16GiB (digits and a unit, no space)")


MemoryLimit = Annotated[str | Annotated[float, Field(allow_inf_nan=False)], AfterValidator(_memory_limit)]


class EtlCluster(Strict):
    """The local Dask cluster etl.py starts (seed 001's LocalCUDACluster settings; on the CPU, a LocalCluster). The
    output does not depend on any of these: the same parquet and categories with 1 worker or 8."""

    workers: PosInt | None = Field(None, description="local workers (default: one per GPU of devices, else one "
                                                     "process, no cluster; ctrgen etl --workers overrides)")
    protocol: Literal["tcp", "ucx"] = Field(
        "tcp", description="transport between scheduler and workers (ucx: GPU clusters with UCX-Py installed)")
    devices: list[NonNegInt] | None = Field(
        None, min_length=1, description="GPUs the workers use, one worker each (CUDA_VISIBLE_DEVICES); GPU only")
    device_memory_limit: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] = Field(
        0.8, description="fraction of each GPU's memory at which a worker spills to host memory (seed 001: 0.5)")
    rmm_pool: bool = Field(True, description="an RMM memory pool on each GPU worker (seed 001's _rmm_pool)")
    local_directory: PathText | None = Field(
        None, description="the workers' scratch space (spilled data), relative to the spec; default: Dask's")
    threads_per_worker: PosInt = Field(1, description="threads of each worker (CPU: pandas holds the GIL)")
    memory_limit: MemoryLimit = Field(
        "auto", description="host memory of each worker (LocalCluster's and LocalCUDACluster's memory_limit): auto "
                            "(Dask's: the machine's memory shared among the workers; the seed's), a fraction of the "
                            "machine's memory, or a size such as 16GB or 16GiB")
    memory_target_fraction: Fraction | None = Field(
        None, description="share of memory_limit held as data at which a worker starts spilling it to "
                          "local_directory (Dask's distributed.worker.memory.target; default: Dask's config)")
    memory_spill_fraction: Fraction | None = Field(
        None, description="share of memory_limit used by the worker's process at which it spills to local_directory "
                          "(Dask's distributed.worker.memory.spill; default: Dask's config)")

    @model_validator(mode="after")
    def _devices(self) -> "EtlCluster":
        if self.devices is not None and len(set(self.devices)) != len(self.devices):
            raise ValueError("devices: each GPU once")
        if self.devices is not None and self.workers is not None and self.workers != len(self.devices):
            raise ValueError(f"workers: {self.workers}, but {len(self.devices)} devices: one worker per GPU")
        return self


class EtlSpec(Strict):
    inputs: EtlInputs
    join: EtlJoin | None = None
    drop: list[ColumnName] = Field(default_factory=list, description="raw columns read but not written")
    groups: list[EtlGroup] = Field(..., min_length=1)
    cross: list[EtlCross] = Field(default_factory=list)
    split: EtlSplit = Field(default_factory=EtlSplit)
    output: EtlOutput
    cluster: EtlCluster = Field(default_factory=EtlCluster)
