"""Read the feature table (:class:`~codegen.features.Features`) from NVTabular output.

Accepted inputs (docs/environment.md §3, §5):

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

import json
import os
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .errors import UserError
from .inputs import MAX_SCHEMA_BYTES, check_json_depth, check_regular, parse_json, read_text
from .features import Column, Features
from .workflow_schema import (SchemaColumn, SchemaInfo, read_schema_json, read_schema_pbtxt, schema_cardinality,
                              schema_max_len)

if TYPE_CHECKING:
    from .specfile.context import SpecContext

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
# The spec fields that override each role (codegen/specfile FeaturesSpec), for error messages.
ROLE_FIELDS = {"categorical": "features.categorical", "continuous": "features.continuous", "labels": "features.label"}

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


def read_workflow_features(ctx: SpecContext, workflow: Path, *, allow_import: bool = True) -> Features:
    """The features of ``workflow`` with the roles the spec of ``ctx`` names."""
    f = ctx.spec.features
    return read_features(workflow, categorical=f.categorical, continuous=f.continuous, labels=f.label,
                         allow_import=allow_import)


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
            return _with_metadata(read_schema_json(path), _dataset_dir_of(path))
        if path.name.endswith(".pbtxt"):
            return _with_metadata(read_schema_pbtxt(path), _dataset_dir_of(path))
        raise _not_recognised(path)
    if (path / WORKFLOW_PICKLE).is_file():
        return _read_workflow_dir(path, allow_import=allow_import)
    # lexists: a FIFO or device standing for a schema file is refused by its reader, not taken for no schema
    if os.path.lexists(path / DATASET_SCHEMA_JSON):
        return _with_metadata(read_schema_json(path / DATASET_SCHEMA_JSON, shown=path), path)
    if os.path.lexists(path / DATASET_SCHEMA_PBTXT):
        return _with_metadata(read_schema_pbtxt(path / DATASET_SCHEMA_PBTXT, shown=path), path)
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
        info = read_schema_pbtxt(pbtxt, shown=path)
        inputs = path / WORKFLOW_INPUT_SCHEMA
        if inputs.is_file():
            info = replace(info, input_columns=read_schema_pbtxt(inputs, shown=path, untyped="object").columns)
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
    except (UserError, ValueError, KeyError, TypeError):
        return "NVTabular workflow"


def _load_workflow(path: Path) -> SchemaInfo:
    saved_with = _workflow_provenance(path)
    try:
        from .runtime.nvt_import import import_nvtabular

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
    card = schema_cardinality(props.get("embedding_sizes"), (props.get("domain") or {}).get("max"), col.name)
    dims = [(d.min, d.max) for d in col.shape.dims] if col.shape.dims is not None else []
    return SchemaColumn(name=col.name, dtype=dtype, tags=tags, cardinality=card, is_list=bool(col.is_list),
                        is_ragged=bool(col.is_ragged),
                        max_len=schema_max_len(props.get("value_count"), dims) if col.is_list else None)


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
