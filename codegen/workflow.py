"""Read the feature table (:class:`~codegen.features.Features`) from NVTabular output.

Accepted inputs (shared/reference/environment.md §3, §5):

* a saved workflow directory (``workflow.pkl`` + ``categories/``): loaded with the real ``nvtabular.Workflow.load``
  (imported lazily, only here), or with ``allow_import=False`` from the ``output_schema.pbtxt`` that ctrgen's demo
  writes next to it (NVTabular's ``Workflow.save`` writes no schema, §3.2);
* a ``to_parquet`` output directory: ``.merlin/schema.json`` (preferred) or ``schema.pbtxt``, with the slot order
  from ``_metadata.json``;
* a ``schema.json`` / ``schema.pbtxt`` file. A schema file that sits inside a ``to_parquet`` output directory takes
  the slot order from that directory's ``_metadata.json`` as well.

Schema files are parsed with ``json`` or protobuf + tensorflow-metadata's ``schema_pb2``; nvtabular and merlin are
never imported for them (§5, §6: ``import nvtabular`` costs 2-3 s).

Facts recorded, all from the schema (never computed):

* cardinality = ``embedding_sizes.cardinality``, else ``int_domain.max + 1``. NVTabular 23.8 reserves ids 0-2, so this
  is the number of uniques + 3 (§4).
* dtype = the schema's dtype as numpy names it. A workflow's output schema and the dataset that ``to_parquet`` wrote
  can differ: the notebooks' label ``LambdaOp(lambda col: (col > 3).astype("int8"))`` is ``int8`` in the workflow
  schema, while ``to_parquet(dtypes={"rating": np.float32})`` stores ``float32`` and the dataset schema says so
  (§2.5). Read the dataset when the on-disk dtype matters.
* multi-hot = a list column (``is_list``; NVTabular's ragged lists are ``is_list and is_ragged``); ``max_len`` is the
  value count's max when the schema records one (a fixed-length list records its length).
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from .errors import Problems, UserError
from .inputs import INT64_MAX, MAX_SCHEMA_BYTES, check_json_depth, check_regular, parse_json, read_text
from .features import Column, Features

WORKFLOW_PICKLE = "workflow.pkl"
WORKFLOW_SCHEMA = "output_schema.pbtxt"      # written by ctrgen (codegen.demo.etl.save_workflow), not by NVTabular
WORKFLOW_INPUT_SCHEMA = "input_schema.pbtxt"  # the same, for the workflow's input schema (the request columns)
DATASET_SCHEMA_JSON = Path(".merlin") / "schema.json"
DATASET_SCHEMA_PBTXT = "schema.pbtxt"
DATASET_METADATA = "_metadata.json"
# workflow.pkl holds the graph of operators (a few MB); the statistics are in categories/.
MAX_PICKLE_BYTES = 1 << 30

# Schema tag values (merlin.schema.Tags) that give a column its default role.
TAG_CATEGORICAL, TAG_CONTINUOUS, TAG_TARGET = "categorical", "continuous", "target"
ROLES = ("categorical", "continuous", "labels")
# The spec fields that override each role (codegen/spec FeaturesSpec), for error messages.
ROLE_FIELDS = {"categorical": "features.categorical", "continuous": "features.continuous", "labels": "features.label"}

_INT_SIZES = {8: "int8", 16: "int16", 32: "int32", 64: "int64"}
_FLOAT_SIZES = {16: "float16", 32: "float32", 64: "float64"}


@dataclass(frozen=True)
class SchemaColumn:
    """One column of an NVTabular output schema, reduced to what ctrgen needs."""

    name: str
    dtype: str                      # numpy name; element dtype for list columns
    tags: frozenset[str]
    cardinality: int | None
    is_list: bool = False
    is_ragged: bool = False
    max_len: int | None = None


@dataclass(frozen=True)
class SchemaInfo:
    """A schema as read from one source, before column roles are assigned."""

    path: Path                      # what was read (the workflow dir, dataset dir or schema file)
    source_kind: str                # "workflow", "schema.json" or "schema.pbtxt" (Features.source_kind)
    provenance: str
    columns: tuple[SchemaColumn, ...]
    # Column roles as _metadata.json lists them (the order HugeCTR reads); None without a _metadata.json.
    metadata_roles: dict[str, tuple[str, ...]] | None = None
    # The loaded nvtabular Workflow (only when read with nvtabular): its input schema gives the request columns.
    workflow: Any = field(default=None, compare=False, repr=False)
    # Without nvtabular: the saved workflow's input_schema.pbtxt, when ctrgen wrote one beside it (merlin writes a
    # raw string column without a type; numpy calls it "object", as the nvtabular path does).
    input_columns: tuple[SchemaColumn, ...] | None = field(default=None, compare=False, repr=False)

    def names(self) -> list[str]:
        return [c.name for c in self.columns]


# ---- entry points --------------------------------------------------------------------------------------------------

def read_features(path: Path, *, categorical: Sequence[str] | None = None, continuous: Sequence[str] | None = None,
                  labels: Sequence[str] | None = None, allow_import: bool = True) -> Features:
    """The feature table of a saved workflow, a transformed dataset directory or a schema file.

    Roles default to ``_metadata.json``'s ``cats``/``conts``/``labels`` for a dataset directory, else to the schema
    tags (categorical / continuous / target). An explicit list replaces the default of its role; its columns must
    exist, and where ``_metadata.json`` lists that role it must agree (HugeCTR reads what ``_metadata.json`` says).
    """
    info = read_schema(path, allow_import=allow_import)
    roles = assign_roles(info, {"categorical": categorical, "continuous": continuous, "labels": labels})
    by_name = {c.name: c for c in info.columns}

    def column(name: str) -> Column:
        c = by_name[name]
        return Column(name=c.name, dtype=c.dtype, cardinality=c.cardinality, multi_hot=c.is_list, max_len=c.max_len)

    for name in roles["categorical"]:
        if by_name[name].cardinality is None:
            raise UserError.one(info.path, f"categorical column {name!r} has no cardinality in the schema "
                                           "(no embedding_sizes or int_domain: was it Categorify'd?)",
                                field=ROLE_FIELDS["categorical"],
                                fix="encode it with nvt.ops.Categorify in the workflow, or list it under "
                                    "features.continuous")
    return Features(
        categorical=tuple(column(n) for n in roles["categorical"]),
        # Cardinality is a categorical fact only; a continuous column keeps dtype and list shape.
        continuous=tuple(Column(c.name, c.dtype, None, c.multi_hot, c.max_len)
                         for c in (column(n) for n in roles["continuous"])),
        labels=tuple(Column(c.name, c.dtype, None, c.multi_hot, c.max_len)
                     for c in (column(n) for n in roles["labels"])),
        source_kind=info.source_kind, provenance=info.provenance,
        inputs=(_request_inputs(info.workflow, roles["labels"]) if info.workflow is not None
                else _request_inputs_from_schema(info.input_columns, roles["labels"])))


def _request_inputs_from_schema(columns: Sequence[SchemaColumn] | None,
                                labels: Sequence[str]) -> tuple[Column, ...] | None:
    """:func:`_request_inputs` from a saved input schema: ``remove_inputs(labels)`` drops the input columns named
    like the labels (merlin.dag Graph.remove_inputs removes input names; derived outputs are not inputs)."""
    if columns is None:
        return None
    drop = set(labels)
    return tuple(Column(name=c.name, dtype=c.dtype, multi_hot=c.is_list) for c in columns if c.name not in drop)


def _request_inputs(workflow: Any, labels: Sequence[str]) -> tuple[Column, ...] | None:
    """The workflow's raw input columns without those only labels need (what NVTabular's exporter did with
    ``remove_inputs(label_columns)``, triton.md §6.2). Mutates the workflow, which is loaded for this read only."""
    if workflow is None:
        return None
    import numpy as np  # already imported by nvtabular

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        schema = workflow.remove_inputs(list(labels)).input_schema if labels else workflow.input_schema
    def dtype_name(c) -> str:
        try:
            return np.dtype(c.dtype.to_numpy).name
        except (TypeError, ValueError):   # text read from CSV / lists of text: merlin records no numpy dtype
            return "object"

    return tuple(Column(name=c.name, dtype=dtype_name(c), multi_hot=bool(c.is_list)) for c in schema)


def read_schema(path: Path, *, allow_import: bool = True) -> SchemaInfo:
    """Classify ``path`` and read its schema (see the module docstring for what is accepted)."""
    path = Path(path)
    if not path.exists():
        raise UserError.one(path, "workflow or schema not found",
                            fix="run the NVTabular ETL first ('ctrgen demo' builds the embedded one) or fix the path")
    if path.is_file():
        if path.name.endswith(".json"):
            return _with_metadata(_read_schema_json(path), _dataset_dir_of(path))
        if path.name.endswith(".pbtxt"):
            return _with_metadata(_read_schema_pbtxt(path), _dataset_dir_of(path))
        raise _not_recognised(path)
    if (path / WORKFLOW_PICKLE).is_file():
        return _read_workflow_dir(path, allow_import=allow_import)
    # lexists: a FIFO or device standing for a schema file is refused by its reader, not taken for no schema
    if os.path.lexists(path / DATASET_SCHEMA_JSON):
        return _with_metadata(_read_schema_json(path / DATASET_SCHEMA_JSON, shown=path), path)
    if os.path.lexists(path / DATASET_SCHEMA_PBTXT):
        return _with_metadata(_read_schema_pbtxt(path / DATASET_SCHEMA_PBTXT, shown=path), path)
    raise _not_recognised(path)


def _not_recognised(path: Path) -> UserError:
    return UserError.one(path, "not a saved NVTabular workflow (workflow.pkl) or a transformed dataset / schema "
                               "(.merlin/schema.json, schema.pbtxt)",
                         fix="point at the directory Workflow.save or to_parquet wrote, or at its schema file")


# ---- roles ---------------------------------------------------------------------------------------------------------

def assign_roles(info: SchemaInfo, explicit: dict[str, Sequence[str] | None]) -> dict[str, list[str]]:
    """Column names per role, in slot order. See :func:`read_features` for the rules."""
    available = info.names()
    meta = info.metadata_roles or {}
    chosen: dict[str, list[str]] = {}
    explicit_cols: dict[str, str] = {}
    for role in ROLES:
        names = explicit.get(role)
        if names is None:
            continue
        if isinstance(names, str):
            raise TypeError(f"{role} must be a sequence of column names, not a string")
        names = list(names)
        field = ROLE_FIELDS[role]
        for name in names:
            if name not in available:
                raise UserError.one(info.path, f"column {name!r} is not in the schema; available: "
                                               f"{', '.join(available)}", field=field,
                                    fix="use one of the available columns")
            if name in explicit_cols:
                other = ROLE_FIELDS[explicit_cols[name]]
                raise UserError.one(info.path, f"column {name!r} is listed under both {other} and {field}",
                                    field=field, fix="give each column one role")
            explicit_cols[name] = role
        if meta.get(role) and names != list(meta[role]):
            raise UserError.one(info.path, f"{names} does not match the {role} that _metadata.json lists for the "
                                           f"data HugeCTR reads: {list(meta[role])}", field=field,
                                fix=f"list them as _metadata.json does, or leave {field} unset")
        chosen[role] = names

    # Defaults for roles not given explicitly: _metadata.json, else tags (target > categorical > continuous).
    taken = set(explicit_cols)
    for role in ROLES:
        if role in chosen:
            continue
        if meta.get(role):
            missing = [n for n in meta[role] if n not in available]
            if missing:
                raise UserError.one(info.path, f"_metadata.json lists {role} {missing} that the schema lacks",
                                    fix="rewrite the dataset with to_parquet (schema and _metadata.json disagree)")
            names = [n for n in meta[role] if n not in taken]
        else:
            names = [c.name for c in info.columns if c.name not in taken and _tag_role(c.tags) == role]
        chosen[role] = names
        taken.update(names)

    if not chosen["labels"]:
        untagged = [c.name for c in info.columns if c.name not in taken]
        raise UserError.one(info.path, "no label column: the schema tags no column 'target'"
                                       + (" and _metadata.json lists no labels" if info.metadata_roles else "")
                                       + (f"; untagged columns: {', '.join(untagged)}" if untagged else ""),
                            field=ROLE_FIELDS["labels"],
                            fix="set features.label in the spec (e.g. label: [rating])")
    return chosen


def _tag_role(tags: frozenset[str]) -> str | None:
    if TAG_TARGET in tags:
        return "labels"
    if TAG_CATEGORICAL in tags:
        return "categorical"
    if TAG_CONTINUOUS in tags:
        return "continuous"
    return None


# ---- saved workflow ------------------------------------------------------------------------------------------------

def _read_workflow_dir(path: Path, *, allow_import: bool) -> SchemaInfo:
    check_regular(path / WORKFLOW_PICKLE, WORKFLOW_PICKLE, MAX_PICKLE_BYTES)
    if allow_import:        # the stale-lock check reads schema files only (no pyarrow on that path)
        check_categories(path)
    provenance = _workflow_provenance(path)
    if not allow_import:
        pbtxt = path / WORKFLOW_SCHEMA
        if not pbtxt.is_file():
            raise UserError.one(path, f"saved workflow has no {WORKFLOW_SCHEMA}, and reading workflow.pkl needs "
                                      "nvtabular", fix="write it when saving the workflow (codegen.demo.etl."
                                                       "save_workflow does) or read the dataset's schema instead")
        info = _read_schema_pbtxt(pbtxt, shown=path)
        inputs = path / WORKFLOW_INPUT_SCHEMA
        if inputs.is_file():
            info = replace(info, input_columns=_read_schema_pbtxt(inputs, shown=path, untyped="object").columns)
    else:
        info = _load_workflow(path)
    return SchemaInfo(path=path, source_kind="workflow", provenance=provenance, columns=info.columns,
                      workflow=info.workflow, input_columns=info.input_columns)


def check_categories(path: Path) -> None:
    """Every Categorify table of a saved workflow (``categories/*.parquet``) must be a readable Parquet file: the
    serving model loads them, and a damaged one would fail only there."""
    tables = sorted((path / "categories").glob("**/*.parquet")) if (path / "categories").is_dir() else []
    if not tables:
        return
    import pyarrow.parquet as pq

    for table in tables:
        check_regular(table, "categories table", MAX_PICKLE_BYTES)
        try:
            pq.read_metadata(table)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError subclasses for damaged files
            raise unreadable_table(table, exc) from None


def unreadable_table(table: Path, exc: Exception) -> UserError:
    """The one message for a damaged ``categories/*.parquet``."""
    return UserError.one(table, f"unreadable Parquet file ({type(exc).__name__}: "
                                f"{str(exc).splitlines()[0] if str(exc) else 'damaged'})",
                         fix="save the workflow again (Workflow.save writes categories/)")


def _workflow_provenance(path: Path) -> str:
    """``nvtabular <version>`` from the workflow's metadata.json (its timestamp is left out: outputs are hashed)."""
    try:
        meta = parse_json(read_text(path / "metadata.json", "metadata.json", MAX_SCHEMA_BYTES), path, "metadata.json")
        return f"NVTabular workflow (nvtabular {meta['versions']['nvtabular']})"
    except (UserError, KeyError, TypeError):
        return "NVTabular workflow"


def _load_workflow(path: Path) -> SchemaInfo:
    saved_with = _workflow_provenance(path)
    try:
        from .nvt_import import import_nvtabular

        nvtabular = import_nvtabular()
    except Exception as exc:  # ImportError, or a broken install failing on import
        raise UserError.one(path, f"cannot load {WORKFLOW_PICKLE}: nvtabular is not importable "
                                  f"({type(exc).__name__}: {exc})",
                            fix="install ctrgen with the [nvt] extra, or read the dataset's .merlin/schema.json "
                                "instead") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            workflow = nvtabular.Workflow.load(str(path))
            schema = workflow.output_schema
    except Exception as exc:  # unpickling runs arbitrary code paths: version mismatch, truncated file, ...
        raise UserError.one(path, f"cannot load {WORKFLOW_PICKLE} ({saved_with}; installed nvtabular "
                                  f"{getattr(nvtabular, '__version__', '?')}): {type(exc).__name__}: {exc}",
                            fix="load it with the nvtabular version that saved it, or read the dataset's "
                                ".merlin/schema.json instead") from None
    return SchemaInfo(path=path, source_kind="workflow", provenance=saved_with,
                      columns=tuple(_column_from_merlin(col) for col in schema), workflow=workflow)


def _column_from_merlin(col: Any) -> SchemaColumn:
    """A merlin ``ColumnSchema`` (environment.md §3.3)."""
    import numpy as np  # already imported by nvtabular

    props = dict(col.properties or {})
    tags = frozenset(t.value if hasattr(t, "value") else str(t) for t in col.tags)
    dtype = np.dtype(col.dtype.to_numpy).name
    card = _cardinality(props.get("embedding_sizes"), (props.get("domain") or {}).get("max"), col.name)
    dims = [(d.min, d.max) for d in col.shape.dims] if col.shape.dims is not None else []
    return SchemaColumn(name=col.name, dtype=dtype, tags=tags, cardinality=card, is_list=bool(col.is_list),
                        is_ragged=bool(col.is_ragged),
                        max_len=_max_len(props.get("value_count"), dims) if col.is_list else None)


# ---- schema files --------------------------------------------------------------------------------------------------

def _read_schema_json(path: Path, *, shown: Path | None = None) -> SchemaInfo:
    """``.merlin/schema.json`` (environment.md §5.1): int64 fields are strings, numbers in extraMetadata floats."""
    text = read_text(path, "schema", MAX_SCHEMA_BYTES)
    check_json_depth(text, path, "schema")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError.one(path, f"invalid JSON: {exc.msg}", line=exc.lineno, col=exc.colno) from None
    features = data.get("feature") if isinstance(data, dict) else None
    if not isinstance(features, list) or not features:
        raise UserError.one(path, "not an NVTabular schema (no 'feature' list)",
                            fix="point at .merlin/schema.json of a to_parquet output")
    columns, problems = [], Problems()       # every feature's problem is reported at once
    for i, f in enumerate(features):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            problems.add(path, "feature without a name", field=f"feature[{i}]")
            continue
        try:
            annotation = f.get("annotation") or {}
            extra = annotation.get("extraMetadata") or [{}]
            columns.append(_column_from_parts(
                path, f["name"], f.get("type", ""), (f.get("intDomain") or {}).get("max"), f.get("valueCount"),
                annotation.get("tag") or [], extra[0] if isinstance(extra[0], dict) else {}))
        except UserError as exc:
            problems.extend(exc)
        except (AttributeError, TypeError, ValueError, IndexError, KeyError):
            problems.add(path, f"feature {f['name']!r} is not shaped like an NVTabular schema feature",
                         field=f"feature[{i}]", fix="write the schema with NVTabular (to_parquet)")
    problems.raise_if_any()
    return SchemaInfo(path=shown or path, source_kind="schema.json", provenance="NVTabular dataset schema "
                      "(.merlin/schema.json)", columns=tuple(columns))


_PBTXT_CACHE: dict[tuple, SchemaInfo] = {}


def _read_schema_pbtxt(path: Path, *, shown: Path | None = None, untyped: str | None = None) -> SchemaInfo:
    """:func:`_parse_schema_pbtxt`, memoised per file state: ``check`` over specs sharing one workflow parses its
    schema once (pure-Python protobuf text parsing is most of a stale-lock check's time)."""
    try:
        st = path.stat()
        key: tuple | None = (str(path.resolve()), st.st_mtime_ns, st.st_size, st.st_ino, str(shown), untyped)
    except OSError:
        key = None
    if key is not None and key in _PBTXT_CACHE:
        return _PBTXT_CACHE[key]
    from . import user_cache

    text = read_text(path, "schema", MAX_SCHEMA_BYTES)
    folder = user_cache.folder("schemas")
    entry = None if folder is None else folder / f"{_columns_key(text, untyped)}.json"
    columns = None if entry is None else _cached_columns(entry)
    if columns is None:
        info = _parse_schema_pbtxt(path, text, shown=shown, untyped=untyped)
        if entry is not None:
            _store_columns(entry, info.columns)
    else:
        info = SchemaInfo(path=shown or path, source_kind="schema.pbtxt",
                          provenance=f"NVTabular schema ({path.name})", columns=columns)
    if key is not None:
        _PBTXT_CACHE[key] = info
    return info


# ---- parsed schemas kept between runs ------------------------------------------------------------------------------
# Parsing a schema.pbtxt is pure-Python protobuf text parsing (protobuf 3.20 here): about 17 ms a file, the largest
# part of `ctrgen check`'s stale-lock comparison. The columns of a schema that parsed are kept in the user's cache
# (codegen/user_cache.py), keyed by the file's text and by this module's source and the protobuf version, so a change
# to either parses again; a problem is never kept (it is reported from a fresh parse each time).

def _columns_key(text: str, untyped: str | None) -> str:
    import hashlib

    from google.protobuf import __version__ as protobuf_version

    h = hashlib.sha256()
    for part in (b"ctrgen-schema-columns-1", Path(__file__).read_bytes(), protobuf_version.encode(),
                 repr(untyped).encode(), text.encode("utf-8", "surrogatepass")):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def _cached_columns(entry: Path) -> tuple[SchemaColumn, ...] | None:
    try:
        rows = json.loads(entry.read_text(encoding="utf-8"))
        return tuple(SchemaColumn(name=r["name"], dtype=r["dtype"], tags=frozenset(r["tags"]),
                                  cardinality=r["cardinality"], is_list=r["is_list"], is_ragged=r["is_ragged"],
                                  max_len=r["max_len"]) for r in rows)
    except (OSError, ValueError, KeyError, TypeError):      # absent, truncated or foreign: parse
        return None


def _store_columns(entry: Path, columns: Sequence[SchemaColumn]) -> None:
    import os
    import tempfile

    rows = [{"name": c.name, "dtype": c.dtype, "tags": sorted(c.tags), "cardinality": c.cardinality,
             "is_list": c.is_list, "is_ragged": c.is_ragged, "max_len": c.max_len} for c in columns]
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(rows, f)
        os.replace(tmp, entry)                              # whole or absent, never half
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _parse_schema_pbtxt(path: Path, text: str, *, shown: Path | None = None,
                        untyped: str | None = None) -> SchemaInfo:
    """tensorflow-metadata ``Schema`` in protobuf text; extra_metadata is a packed ``Struct`` (environment.md §5.2)."""
    from google.protobuf import json_format, struct_pb2, text_format
    from .tfmd import schema_pb2 as _schema_pb2

    schema_pb2 = _schema_pb2()

    try:
        schema = text_format.Parse(text, schema_pb2.Schema())
    except text_format.ParseError as exc:
        line, col = exc.GetLine(), exc.GetColumn()
        raise UserError.one(path, f"invalid schema.pbtxt: {exc}", line=line, col=col) from None
    if not schema.feature:
        raise UserError.one(path, "not an NVTabular schema (no features)",
                            fix="point at schema.pbtxt of a to_parquet output")
    columns, problems = [], Problems()
    for f in schema.feature:
        extra: dict = {}
        if f.annotation.extra_metadata:
            struct = struct_pb2.Struct()
            try:
                struct.ParseFromString(f.annotation.extra_metadata[0].value)
            except Exception:
                raise UserError.one(path, f"feature {f.name!r}: extra_metadata is not a packed Struct") from None
            extra = json_format.MessageToDict(struct)
        value_count = ({"min": f.value_count.min, "max": f.value_count.max}
                       if f.HasField("value_count") else None)
        domain_max = f.int_domain.max if f.HasField("int_domain") and f.int_domain.HasField("max") else None
        try:
            columns.append(_column_from_parts(path, f.name, schema_pb2.FeatureType.Name(f.type), domain_max,
                                              value_count, list(f.annotation.tag), extra, untyped=untyped))
        except UserError as exc:             # every feature's problem is reported at once
            problems.extend(exc)
    problems.raise_if_any()
    return SchemaInfo(path=shown or path, source_kind="schema.pbtxt",
                      provenance=f"NVTabular schema ({path.name})", columns=tuple(columns))


def _column_from_parts(path: Path, name: str, ftype: str, domain_max: Any, value_count: dict | None,
                       tags: Iterable[str], extra: dict, *, untyped: str | None = None) -> SchemaColumn:
    """Decode one feature the way merlin's ``_merlin_column`` does (merlin/schema/io/tensorflow_metadata.py)."""
    size = _whole(extra.get("dtype_item_size") or 0, path, name, "dtype_item_size")
    if ftype == "INT":
        dtype = _INT_SIZES.get(size, "int64")
    elif ftype == "FLOAT":
        dtype = _FLOAT_SIZES.get(size, "float64")
    elif ftype == "BYTES":
        dtype = "str"
    elif untyped is not None and ftype in ("", "TYPE_UNKNOWN"):
        dtype = untyped
    else:
        raise UserError.one(path, f"feature {name!r} has no usable type ({ftype or 'none'})",
                            fix="rewrite the schema with NVTabular")
    raw_dims = extra.get("_dims") or []
    if not isinstance(raw_dims, list):
        raise UserError.one(path, f"feature {name!r}: _dims is {json.dumps(raw_dims)}, not a list",
                            fix="rewrite the schema with NVTabular")
    dims = [tuple(_whole(v, path, name, "_dims", none=True) for v in (d if isinstance(d, list) else [d, d]))
            for d in raw_dims]
    if "is_list" in extra:
        is_list, is_ragged = bool(extra["is_list"]), bool(extra.get("is_ragged", False))
    elif len(dims) > 1:
        is_list = True
        is_ragged = any(lo != hi or hi is None for lo, hi in dims[1:])
    elif value_count is not None:   # merlin: a value_count with a positive bound means a list
        lo, hi = _int_or_none(value_count.get("min")) or 0, _int_or_none(value_count.get("max")) or 0
        is_list, is_ragged = (lo > 0 or hi > 0), lo != hi
    else:
        is_list = is_ragged = False
    try:
        card = _cardinality(extra.get("embedding_sizes"), domain_max, name)
    except ValueError as exc:
        raise UserError.one(path, f"feature {name!r}: {exc}") from None
    return SchemaColumn(name=name, dtype=dtype, tags=frozenset(str(t) for t in tags), cardinality=card,
                        is_list=is_list, is_ragged=is_ragged,
                        max_len=_max_len(value_count, dims) if is_list else None)


# ---- shared decoding -----------------------------------------------------------------------------------------------

def _whole(v: Any, path: Path, name: str, key: str, *, none: bool = False) -> Any:
    """A count of a schema's extra_metadata (Struct numbers arrive as floats): a whole, finite, non-negative number
    of at most 2**63 - 1, else one line naming the feature and the key (text, NaN, Infinity, 1.5 are refused)."""
    if v is None and none:
        return None
    if isinstance(v, float) and v.is_integer() and 0 <= v <= INT64_MAX:
        return int(v)
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT64_MAX:
        return v
    raise UserError.one(path, f"feature {name!r}: {key} is {json.dumps(v)}, not a whole number of at most 2**63 - 1",
                        fix="rewrite the schema with NVTabular")


def _int_or_none(v: Any) -> int | None:
    """int64 proto fields arrive as int (pbtxt), str (JSON) or float (Struct); None/0-as-unset stay as given."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, float) and not v.is_integer():
        raise ValueError(f"expected an integer, got {v!r}")
    return int(v)


def _cardinality(embedding_sizes: Any, domain_max: Any, name: str) -> int | None:
    """``embedding_sizes.cardinality``, else ``int_domain.max + 1`` (environment.md §4); None when neither exists."""
    card = _int_or_none((embedding_sizes or {}).get("cardinality")) if isinstance(embedding_sizes, dict) else None
    if card is None and domain_max is not None:
        card = _int_or_none(domain_max) + 1
    if card is not None and card <= 0:
        raise ValueError(f"cardinality of {name!r} must be positive, got {card}")
    return card


def _max_len(value_count: dict | None, dims: Sequence[tuple]) -> int | None:
    vc_max = _int_or_none((value_count or {}).get("max"))
    if vc_max:
        return vc_max
    if len(dims) > 1:
        hi = _int_or_none(dims[1][1])
        return hi or None
    return None


# ---- _metadata.json (slot order) -----------------------------------------------------------------------------------

def _dataset_dir_of(schema_file: Path) -> Path | None:
    """The to_parquet output directory a schema file belongs to, if it is one."""
    parent = schema_file.parent
    if parent.name == ".merlin":
        parent = parent.parent
    return parent if (parent / DATASET_METADATA).is_file() else None


def _with_metadata(info: SchemaInfo, dataset_dir: Path | None) -> SchemaInfo:
    if dataset_dir is None or not (dataset_dir / DATASET_METADATA).is_file():
        return info
    meta_path = dataset_dir / DATASET_METADATA
    try:
        text = read_text(meta_path, "_metadata.json", MAX_SCHEMA_BYTES)
        check_json_depth(text, meta_path, "_metadata.json")
        meta = json.loads(text)
        roles = {role: tuple(str(c["col_name"]) for c in meta.get(key) or [])
                 for role, key in (("categorical", "cats"), ("continuous", "conts"), ("labels", "labels"))}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError.one(meta_path, f"unreadable _metadata.json ({type(exc).__name__})",
                            fix="rewrite the dataset with to_parquet") from None
    if not any(roles.values()):   # to_parquet without cats/conts/labels writes empty lists (environment.md §3.1)
        return info
    provenance = info.provenance + ", slot order from _metadata.json"
    return SchemaInfo(path=info.path, source_kind=info.source_kind, provenance=provenance, columns=info.columns,
                      metadata_roles=roles)
