"""NVTabular schema files -> :class:`SchemaInfo`: ``schema.json`` (merlin's) and ``schema.pbtxt`` (tensorflow-metadata
``Schema`` in protobuf text), with the facts codegen.workflow records (cardinality, dtype, list shape); parsed
``schema.pbtxt`` columns are kept in the user's cache. Neither nvtabular nor merlin is imported here."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from .errors import Problems, UserError
from .inputs import INT64_MAX, MAX_SCHEMA_BYTES, check_json_depth, read_text
# The cardinality rule is the generated task.py's too: written once, in a module it includes verbatim.
from .programs import cardinality
from .programs.cardinality import int_or_none, schema_cardinality

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


# ---- schema files --------------------------------------------------------------------------------------------------

def read_schema_json(path: Path, *, shown: Path | None = None) -> SchemaInfo:
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


def read_schema_pbtxt(path: Path, *, shown: Path | None = None, untyped: str | None = None) -> SchemaInfo:
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
# (codegen/user_cache.py), keyed by the file's text, by this module's source and the cardinality rule's
# (codegen/programs/cardinality.py) and by the protobuf version, so a change to any of them parses again; a problem
# is never kept (it is reported from a fresh parse each time).

def _columns_key(text: str, untyped: str | None) -> str:
    import hashlib

    from google.protobuf import __version__ as protobuf_version

    h = hashlib.sha256()
    for part in (b"ctrgen-schema-columns-1", Path(__file__).read_bytes(), Path(cardinality.__file__).read_bytes(),
                 protobuf_version.encode(), repr(untyped).encode(), text.encode("utf-8", "surrogatepass")):
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
        lo, hi = int_or_none(value_count.get("min")) or 0, int_or_none(value_count.get("max")) or 0
        is_list, is_ragged = (lo > 0 or hi > 0), lo != hi
    else:
        is_list = is_ragged = False
    try:
        card = schema_cardinality(extra.get("embedding_sizes"), domain_max, name)
    except ValueError as exc:
        raise UserError.one(path, f"feature {name!r}: {exc}") from None
    return SchemaColumn(name=name, dtype=dtype, tags=frozenset(str(t) for t in tags), cardinality=card,
                        is_list=is_list, is_ragged=is_ragged,
                        max_len=schema_max_len(value_count, dims) if is_list else None)


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


def schema_max_len(value_count: dict | None, dims: Sequence[tuple]) -> int | None:
    vc_max = int_or_none((value_count or {}).get("max"))
    if vc_max:
        return vc_max
    if len(dims) > 1:
        hi = int_or_none(dims[1][1])
        return hi or None
    return None
