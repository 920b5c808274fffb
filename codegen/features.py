"""The feature table a model is generated from, and its lock file.

A :class:`Features` describes the columns an NVTabular workflow writes: categorical columns in slot order (the order
NVTabular writes them to ``_metadata.json``, which is the order of HugeCTR's ``slot_size_array``), continuous columns
and labels, with dtypes and cardinalities taken from the workflow's output schema (never from a formula: NVTabular
23.8 reserves ids 0-2, see docs/environment.md §4).

The *features lock* is a small JSON file committed beside the spec. ``check``, ``summary`` and ``validate`` read it,
so they run without the workflow and without importing nvtabular. When the workflow is present its features are
compared with the lock and a stale lock is reported.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .errors import Problems, UserError
from .inputs import INT32_MAX, INT64_MAX, MAX_LOCK_BYTES, check_json_depth, json_positions, read_text

LOCK_VERSION = 1

# dtype names as numpy spells them; the only ones a HugeCTR Parquet reader accepts for each role.
CATEGORICAL_DTYPES = ("int32", "int64", "uint32", "uint64")
NUMERIC_DTYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str
    # Categorical columns only: embedding rows needed (= max id + 1, from the schema).
    cardinality: int | None = None
    # List (multi-hot) column; ``max_len`` is the largest list length the schema records, if any.
    multi_hot: bool = False
    max_len: int | None = None


@dataclass(frozen=True)
class Features:
    categorical: tuple[Column, ...]
    continuous: tuple[Column, ...]
    labels: tuple[Column, ...]
    # Where the table came from: "workflow", "schema.pbtxt", "schema.json" or "recorded" (typed from a notebook).
    source_kind: str = "recorded"
    # Free-form provenance shown in headers and model cards (e.g. "nvtabular 23.08.00").
    provenance: str = ""
    # The raw columns a serving request carries: the workflow's input schema without the columns that only feed
    # labels (e.g. C1 and C2, not the derived C1_C2). None when unknown (a dataset schema or an older lock); the
    # Triton preprocessing model then takes the categorical and continuous columns. Not part of equality: it
    # describes the request, not the columns HugeCTR reads.
    inputs: tuple[Column, ...] | None = field(default=None, compare=False)

    def request_columns(self) -> tuple[Column, ...]:
        """What a serving request carries: ``inputs`` when known, else the categorical + continuous columns."""
        if self.inputs is not None:
            return self.inputs
        return (*self.categorical, *self.continuous)

    def column(self, name: str) -> Column | None:
        for col in (*self.categorical, *self.continuous, *self.labels):
            if col.name == name:
                return col
        return None

    @property
    def slot_size_array(self) -> list[int]:
        return [int(c.cardinality or 0) for c in self.categorical]

    # ---- lock file -------------------------------------------------------------------------------------------
    def to_lock(self) -> dict:
        def cols(cs: tuple[Column, ...]) -> list[dict]:
            out = []
            for c in cs:
                d = {k: v for k, v in asdict(c).items() if v is not None and v is not False}
                out.append(d)
            return out

        doc = {
            "ctrgen_features_lock": LOCK_VERSION,
            "source": self.source_kind,
            "provenance": self.provenance,
            "categorical": cols(self.categorical),
            "continuous": cols(self.continuous),
            "labels": cols(self.labels),
        }
        if self.inputs is not None:
            doc["inputs"] = cols(self.inputs)
        return doc

    def lock_text(self) -> str:
        return json.dumps(self.to_lock(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    def fingerprint(self) -> str:
        """sha256 of the lock content; goes into generated headers."""
        return hashlib.sha256(self.lock_text().encode("utf-8")).hexdigest()

    def same_columns(self, other: "Features") -> bool:
        """True when both describe the same columns (provenance and source kind aside)."""
        return (self.categorical, self.continuous, self.labels) == (
            other.categorical, other.continuous, other.labels)


_REGEN = "regenerate the lock with 'ctrgen lock SPEC'"


def _column_from(d: object, where: str, path: Path, problems: Problems) -> Column | None:
    """The column, or None after adding what is wrong with it to ``problems``."""
    if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not isinstance(d.get("dtype"), str):
        problems.add(path, "each column needs a string 'name' and 'dtype'", field=where, fix=_REGEN)
        return None
    before = len(problems)
    if not d["name"].strip():
        # The name becomes a Triton input and a DataFrame column: an empty or blank one is an unnamed input.
        problems.add(path, f"column name {d['name']!r} is empty", field=where, fix=_REGEN)
    unknown = set(d) - {"name", "dtype", "cardinality", "multi_hot", "max_len"}
    if unknown:
        problems.add(path, f"unknown keys {sorted(unknown)}", field=where, fix=_REGEN)
    card = d.get("cardinality")
    # Keys are int64 in HugeCTR's readers (slot offsets added): a cardinality must fit one.
    if card is not None and (not isinstance(card, int) or isinstance(card, bool) or not 0 < card <= INT64_MAX):
        problems.add(path, f"cardinality must be a positive integer of at most 2**63-1 (int64 keys), got {card!r}",
                     field=where, fix=_REGEN)
    max_len = d.get("max_len")
    if max_len is not None and (not isinstance(max_len, int) or isinstance(max_len, bool) or
                                not 0 < max_len <= INT32_MAX):
        problems.add(path, f"max_len must be a positive integer of at most 2**31-1 (nnz_per_slot is an int), got "
                           f"{max_len!r}", field=where, fix=_REGEN)
    if not isinstance(d.get("multi_hot", False), bool):
        problems.add(path, f"multi_hot must be true or false, got {d['multi_hot']!r}", field=where, fix=_REGEN)
    if len(problems) > before:
        return None
    return Column(name=d["name"], dtype=d["dtype"], cardinality=card, multi_hot=bool(d.get("multi_hot", False)),
                  max_len=max_len)


def features_from_lock(data: object, path: Path) -> Features:
    """The lock's features; every problem of the lock is reported at once."""
    if not isinstance(data, dict) or data.get("ctrgen_features_lock") != LOCK_VERSION:
        raise UserError.one(path, f"not a ctrgen features lock (expected \"ctrgen_features_lock\": {LOCK_VERSION})",
                            fix="regenerate it with 'ctrgen lock SPEC'")
    problems = Problems()
    groups = {}
    for key in ("categorical", "continuous", "labels", "inputs"):
        if key == "inputs" and key not in data:
            groups[key] = None
            continue
        items = data.get(key, [])
        if not isinstance(items, list):
            problems.add(path, "must be a list", field=key)
            items = []
        columns = [_column_from(d, f"{key}[{i}]", path, problems) for i, d in enumerate(items)]
        groups[key] = tuple(c for c in columns if c is not None)
        if key == "categorical":
            for i, c in enumerate(columns):
                # An imported script that hashes its keys (Norm/Raw reader, no slot_size_array) names no
                # cardinality.
                if c is not None and c.cardinality is None and data.get("source") != "imported":
                    problems.add(path, f"categorical column {c.name!r} has no cardinality", field=f"categorical[{i}]",
                                 fix="regenerate the lock from the workflow with 'ctrgen lock SPEC'")
    for names in ([c.name for k in ("categorical", "continuous", "labels") for c in groups[k] or ()],
                  [c.name for c in groups["inputs"] or ()]):
        seen: set[str] = set()
        for name in names:
            if name in seen:
                problems.add(path, f"column {name!r} is listed twice: two model inputs of one name", fix=_REGEN)
            seen.add(name)
    problems.raise_if_any()
    return Features(categorical=groups["categorical"], continuous=groups["continuous"], labels=groups["labels"],
                    source_kind=str(data.get("source", "recorded")), provenance=str(data.get("provenance", "")),
                    inputs=groups["inputs"])


def read_lock(path: Path) -> Features:
    if not os.path.lexists(path):
        raise UserError.one(path, "features lock not found",
                            fix="run 'ctrgen lock SPEC' where the workflow is available, and commit the lock")
    return lock_from_text(read_text(path, "features lock", MAX_LOCK_BYTES), path)


def lock_from_text(text: str, path: Path) -> Features:
    """The lock ``path`` holding ``text`` (as :func:`read_lock` read it) reads as."""
    check_json_depth(text, path, "features lock")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError.one(path, f"invalid JSON: {exc.msg}", line=exc.lineno, col=exc.colno) from None
    except RecursionError:
        raise UserError.one(path, "invalid JSON: nested too deeply", fix=_REGEN) from None
    except ValueError as exc:       # int() of a number of more than 4300 digits
        raise UserError.one(path, f"a number is too long to read ({str(exc).split(':')[0]})",
                            fix=_REGEN) from None
    try:
        return features_from_lock(data, path)
    except UserError as exc:
        raise _with_lines(exc, path, text) from None


def _with_lines(exc: UserError, path: Path, text: str) -> UserError:
    """The lock's problems with the line and column of the field each names (``categorical[1]``)."""
    where = json_positions(text)
    problems = []
    for p in exc.problems:
        loc = tuple(int(x) if x.isdigit() else x for x in re.findall(r"[^.\[\]]+", p.field))
        line, col = where.get(loc, (p.line, p.col)) if p.file == str(path) and p.line is None else (p.line, p.col)
        problems.append(replace(p, line=line, col=col))
    return UserError(problems)


def describe_lock_drift(locked: Features, fresh: Features) -> list[str]:
    out: list[str] = []
    for group in ("categorical", "continuous", "labels"):
        a = {c.name: c for c in getattr(locked, group)}
        b = {c.name: c for c in getattr(fresh, group)}
        if [c.name for c in getattr(locked, group)] != [c.name for c in getattr(fresh, group)]:
            out.append(f"{group}: lock has {list(a)}, workflow has {list(b)}")
        for name in a.keys() & b.keys():
            if a[name] != b[name]:
                out.append(f"{group}.{name}: lock has {_brief(a[name])}, workflow has {_brief(b[name])}")
    if locked.inputs is not None and fresh.inputs is not None and locked.inputs != fresh.inputs:
        out.append(f"inputs: lock has {[_brief_named(c) for c in locked.inputs]}, workflow has "
                   f"{[_brief_named(c) for c in fresh.inputs]}")
    return sorted(out)


def _brief_named(c: Column) -> str:
    return f"{c.name} ({_brief(c)})"


def _brief(c: Column) -> str:
    parts = [c.dtype]
    if c.cardinality is not None:
        parts.append(f"cardinality {c.cardinality}")
    if c.multi_hot:
        parts.append("multi-hot")
    if c.max_len is not None:
        parts.append(f"max_len {c.max_len}")
    return ", ".join(parts)
