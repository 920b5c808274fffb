"""ps.json per-table lists (triton.md §4): each holds exactly one entry per embedding layer of
the graph JSON, in JSON order, and HugeCTR names the tables by the embeddings' ``top``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...errors import Located
from .findings import ERROR, WARNING
from ...hugectr.graph_reader import Graph, Table
from .psentry import PsEntry
from .psjson import as_float, as_int, as_list, brief, show
from .rules_keys import KeyEvidence


@dataclass(frozen=True)
class Entry:
    """The verdict on one entry: what is wrong with it (None: nothing) and what a consistent entry holds, typed
    (triton.md §4: emit typed JSON)."""

    expected: Any
    problem: str | None = None
    severity: str = ERROR


def _sparse_file(t: Table, v: Any, ev: KeyEvidence) -> Entry:
    # Only the type here; the folder and its contents are checked in rules_files.py.
    if not isinstance(v, str):
        return Entry(_sparse_name(t), "is not a path")
    return Entry(v)


def _sparse_name(t: Table) -> str:
    return f"<prefix>{t.index}_sparse_<iter>.model"  # hugectr.md §5


def _default_value(t: Table, v: Any, ev: KeyEvidence) -> Entry:
    try:
        return Entry(as_float(v))
    except Located:
        return Entry(0.0, "is not a number")


def _max_keys(t: Table, v: Any, ev: KeyEvidence) -> Entry:
    """Keys per sample of table t: at least one per slot, at most Σ nnz_per_slot, which HugeCTR derives
    (get_max_feature_num_per_sample_from_nnz_per_slot); values in between depend on the data."""
    lo, hi, top = t.input.slot_num, t.input.keys_per_sample, t.input.top
    try:
        n = as_int(v)
    except Located:
        return Entry(hi, "is not an integer")
    if n < lo:
        return Entry(hi, f"< the {lo} slots of {top} (each slot sends at least one key per sample)")
    if n > hi:
        return Entry(hi, f"> Σ nnz_per_slot {hi} of {top}: it counts keys per sample, not cardinalities")
    if n < hi and ev.kind == "multi":
        return Entry(hi, f"< Σ nnz_per_slot {hi} of {top}, and {ev.reason}")
    if n < hi and ev.kind == "unknown":
        return Entry(n, f"< Σ nnz_per_slot {hi} of {top} (nnz_per_slot {brief(list(t.input.nnz_per_slot))}): "
                        "enough only if requests carry fewer keys (depends on the data)", WARNING)
    return Entry(n)


def _vec_size(t: Table, v: Any, ev: KeyEvidence) -> Entry:
    try:
        n = as_int(v)
    except Located:
        return Entry(t.vec_size, "is not an integer")
    if n != t.vec_size:
        return Entry(t.vec_size, f"!= training embedding_vec_size {t.vec_size} of {t.describe()}")
    return Entry(n)


def _table_name(t: Table, v: Any, ev: KeyEvidence) -> Entry:
    if v != t.top:
        return Entry(t.top, f"!= the graph's embedding top {show(t.top)} (HugeCTR names tables by it)")
    return Entry(v)


@dataclass(frozen=True)
class TableList:
    key: str
    check: Callable[[Table, Any, KeyEvidence], Entry]
    default: Callable[[Table], Any]
    when_absent: str | None     # severity when the key is absent; None: optional
    absent_note: str = ""


TABLE_LISTS = (
    TableList("sparse_files", _sparse_file, _sparse_name, ERROR, "the backend loads one sparse model per table"),
    TableList("default_value_for_each_table", _default_value, lambda t: 0.0, ERROR,
              "hugectr_backend v4.3 requires it"),
    TableList("maxnum_catfeature_query_per_table_per_sample", _max_keys, lambda t: t.input.keys_per_sample,
              WARNING, "hugectr_backend v3.7+ requires it"),
    TableList("embedding_vecsize_per_table", _vec_size, lambda t: t.vec_size, WARNING,
              "hugectr_backend v3.7+ requires it"),
    TableList("embedding_table_names", _table_name, lambda t: t.top, None),
)


def check_table_lists(ps: PsEntry, graph: Graph, ev: KeyEvidence) -> None:
    tables = graph.tables
    for spec in TABLE_LISTS:
        wanted = [spec.default(t) for t in tables]
        if not ps.has(spec.key):
            if spec.when_absent:
                ps.add(spec.key, f"absent from {ps.where()}: {spec.absent_note}; {graph.describe_tables()}",
                       f"add \"{spec.key}\": {show(wanted)} (one entry per table, graph order; triton.md §4)",
                       severity=spec.when_absent, expected=wanted)
            continue
        values = ps.value(spec.key, as_list)
        if values is None:
            continue
        errors: list[str] = []
        warnings: list[str] = []
        expected: list[Any] = []
        if len(values) != len(tables):
            errors.append(f"has {len(values)} entr{'y' if len(values) == 1 else 'ies'} for "
                          f"{graph.describe_tables()}")
        for t in tables:
            if t.index >= len(values):
                expected.append(spec.default(t))
                continue
            entry = spec.check(t, values[t.index], ev)
            expected.append(entry.expected)
            if entry.problem:
                (errors if entry.severity == ERROR else warnings).append(
                    f"entry {t.index} = {show(values[t.index])} {entry.problem}")
        if errors:
            ps.add(spec.key, f"{brief(values)}: {'; '.join(errors)}; expected {brief(expected)}",
                   f"write \"{spec.key}\": {brief(expected)} (one entry per embedding table, in graph order; "
                   "triton.md §4)", actual=values, expected=expected)
        if warnings:
            ps.add(spec.key, f"{brief(values)}: {'; '.join(warnings)}",
                   f"use {brief(wanted)} (Σ nnz_per_slot per table) unless every request is known to carry fewer "
                   "keys (triton.md §4, R15)", severity=WARNING, actual=values, expected=wanted)
