"""The training side: the graph JSON on its own (``slot_size_array`` has one entry per slot of its input, R2) and
against the features lock (triton.md §7 R1, R2, R10, R21): one slot per categorical column in lock order,
``slot_size_array`` = the workflow's cardinalities in that order, ``dense_dim`` = continuous columns, ``label_dim`` =
labels, and multi-hot slots wide enough for the longest list the schema records."""

from __future__ import annotations

from ...features import Features
from .context import Context
from ...hugectr.graph_reader import Graph
from .psjson import brief

REGENERATE = "regenerate the model from the spec and the features lock ('ctrgen generate'); never hand-type slot sizes"


def check_graph(ctx: Context, graph: Graph) -> None:
    for t in graph.tables:
        if t.slot_size_array is not None and len(t.slot_size_array) != t.input.slot_num:
            ctx.add(graph.path, "slot_size_array", f"{t.top}: {len(t.slot_size_array)} entries for the "
                    f"{t.input.slot_num} slots of {t.bottom} (R2; hugectr.md §1.5)", REGENERATE,
                    actual=list(t.slot_size_array))


def check_graph_against_lock(ctx: Context, graph: Graph, lock: Features) -> None:
    cats = lock.categorical
    names = [c.name for c in cats]
    where = f"the features lock {ctx.show_path(ctx.lock_path)}"
    if graph.slots != len(cats):
        ctx.add(graph.path, "slot_num", f"Σ slot_num {graph.slots} ({graph.describe_inputs()}) != the "
                f"{len(cats)} categorical columns of {where} {names} (R2, R21)",
                f"one slot per categorical column; {REGENERATE}", actual=graph.slots, expected=len(cats))
    else:
        for t in graph.tables:
            if t.slot_size_array is None:
                continue
            first, n = t.input.slot_offset, t.input.slot_num
            want = [c.cardinality for c in cats[first:first + n]]
            if len(t.slot_size_array) == n and list(t.slot_size_array) != want:
                ctx.add(graph.path, "slot_size_array", f"{t.top}: {brief(list(t.slot_size_array))} != the "
                        f"cardinalities {brief(want)} of {names[first:first + n]} in {where} (R1: the workflow's "
                        "cardinalities in slot order; serving offsets use the same list)", REGENERATE,
                        actual=list(t.slot_size_array), expected=want)
        for k, col in enumerate(cats):
            if not (col.multi_hot and col.max_len):
                continue
            s = next(s for s in graph.sparse if s.slot_offset <= k < s.slot_offset + s.slot_num)
            nnz = s.nnz_per_slot[k - s.slot_offset]
            if nnz < col.max_len:
                ctx.add(graph.path, "nnz_per_slot", f"slot {k} ({col.name}) of {s.top} has nnz_per_slot {nnz}, but "
                        f"{where} records lists of up to {col.max_len} values (R15)", REGENERATE,
                        actual=nnz, expected=col.max_len)
    if graph.dense_dim != len(lock.continuous):
        ctx.add(graph.path, "dense_dim", f"{graph.dense_dim} != the {len(lock.continuous)} continuous columns of "
                f"{where} {[c.name for c in lock.continuous]} (triton.md §5)", REGENERATE,
                actual=graph.dense_dim, expected=len(lock.continuous))
    if graph.label_dim != len(lock.labels):
        ctx.add(graph.path, "label_dim", f"{graph.label_dim} != the {len(lock.labels)} label columns of {where} "
                f"{[c.name for c in lock.labels]} (triton.md §5)", REGENERATE,
                actual=graph.label_dim, expected=len(lock.labels))
