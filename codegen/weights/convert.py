"""Values between a PyTorch state_dict and HugeCTR's files, through a Layout (layout.py). Everything is checked
before anything is returned: one line per problem, and the caller writes nothing.

Keys absent from a table's file (HugeCTR stores only the keys training looked up) get zero rows: what HPS serves
for a key it does not hold (``default_value_for_each_table``, 0 by default), so the imported model scores a row as
the HugeCTR deployment of the same files does. The padding row stays zero (HugeCTR has no key for it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import Problem, UserError
from .files import Dump
from .layout import Layout, Piece, Table


@dataclass(frozen=True)
class HugeCTRWeights:
    dense: np.ndarray                                   # float32, network order
    stats: list[tuple[np.ndarray, np.ndarray]]          # BatchNorm (running mean, running var), network order
    tables: list[Dump]                                  # add() order


def _array(state: dict, key: str):
    return state[key].detach().cpu().numpy()


def _piece_values(piece: Piece, state: dict) -> np.ndarray:
    if not piece.key:                                   # an MLP bias HugeCTR keeps and never reads
        return np.zeros(piece.count, dtype=np.float32)
    value = _array(state, piece.key)
    if piece.row is not None:
        value = value[piece.row]
    if piece.transpose:
        value = value.T
    return np.ascontiguousarray(value, dtype=np.float32).reshape(-1)


def check_state(layout: Layout, state: dict, where: str) -> None:
    """Every tensor the layout reads is in ``state`` with the shape the spec gives it, finite, float32."""
    problems = []
    expected: dict[str, tuple[int, ...]] = {}
    for p in layout.dense:
        if not p.key:
            continue
        if p.row is not None:
            rows = max(q.row for q in layout.dense if q.key == p.key and q.row is not None) + 1
            expected[p.key] = (rows, *p.shape)
        else:
            expected[p.key] = tuple(reversed(p.shape)) if p.transpose else p.shape
    for s in layout.stats:
        expected[s.prefix + "running_mean"] = expected[s.prefix + "running_var"] = (s.width,)
    for t in layout.tables:
        expected[t.key] = (t.rows + 1, t.vec_size)
    for key, shape in expected.items():
        value = state.get(key)
        if value is None:
            problems.append(Problem(where, f"has no tensor '{key}' of the spec's model", "model",
                                    fix="pass a run of this spec"))
        elif tuple(value.shape) != shape:
            problems.append(Problem(where, f"'{key}' has shape {tuple(value.shape)}; the spec's model has {shape}",
                                    "model", fix="pass a run of this spec (its sizes come from the features lock)"))
        elif not np.isfinite(_array(state, key)).all():
            problems.append(Problem(where, f"'{key}' holds NaN or infinite values", "model",
                                    fix="export weights of a run that trained without diverging"))
    if problems:
        raise UserError(problems)


def to_hugectr(layout: Layout, state: dict) -> HugeCTRWeights:
    """HugeCTR's files' values of a state_dict (checked with check_state first). A table is written with one key
    per row, every slot's ids in order."""
    dense = np.concatenate([_piece_values(p, state) for p in layout.dense]) if layout.dense \
        else np.zeros(0, dtype=np.float32)
    stats = [(np.asarray(_array(state, s.prefix + "running_mean"), dtype=np.float32),
              np.asarray(_array(state, s.prefix + "running_var"), dtype=np.float32)) for s in layout.stats]
    tables = []
    for t in layout.tables:
        weight = np.asarray(_array(state, t.key), dtype=np.float32)
        keys = np.concatenate([np.arange(s.rows, dtype=np.int64) + s.key_offset for s in t.slots])
        slots = np.concatenate([np.full(s.rows, i, dtype=np.uint64) for i, s in enumerate(t.slots)]) \
            if t.localized else None
        tables.append(Dump(keys, weight[:t.rows], slots))
    return HugeCTRWeights(dense, stats, tables)


def _rows(table: Table, dump: Dump, where: str) -> tuple[np.ndarray, list[Problem]]:
    """The PyTorch row of each key of ``dump``; problems for keys outside every slot, repeated keys and slot ids
    that disagree with the key's slot."""
    rows = np.full(len(dump.keys), -1, dtype=np.int64)
    slot_of = np.full(len(dump.keys), -1, dtype=np.int64)
    for i, s in enumerate(table.slots):
        inside = (dump.keys >= s.key_offset) & (dump.keys < s.key_offset + s.rows) & (rows < 0)
        rows[inside] = dump.keys[inside] - s.key_offset + s.row_offset
        slot_of[inside] = i
    problems = []
    outside = np.flatnonzero(rows < 0)
    if len(outside):
        spans = ", ".join(f"{s.column} [{s.key_offset}, {s.key_offset + s.rows})" for s in table.slots[:3])
        problems.append(Problem(where, f"{len(outside)} key(s) fall in no slot of table '{table.name}' (the first: "
                                f"{int(dump.keys[outside[0]])}; the slots' keys: {spans}"
                                f"{', ...' if len(table.slots) > 3 else ''})", "key",
                                fix="import with the spec and features lock the model was trained with"))
        return rows, problems
    unique, counts = np.unique(rows, return_counts=True)
    if (counts > 1).any():
        row = int(unique[np.argmax(counts > 1)])
        problems.append(Problem(where, f"key {int(dump.keys[np.flatnonzero(rows == row)[0]])} is stored "
                                f"{int(counts.max())} times", "key", fix="the file is damaged: save the model again"))
    if dump.slots is not None:
        wrong = np.flatnonzero(dump.slots.astype(np.int64) != slot_of)
        if len(wrong):
            k = wrong[0]
            problems.append(Problem(where, f"key {int(dump.keys[k])} has slot_id {int(dump.slots[k])}; it lies in slot "
                                    f"{int(slot_of[k])} ({table.slots[slot_of[k]].column})", "slot_id",
                                    fix="import with the spec and features lock the model was trained with"))
    return rows, problems


def from_hugectr(layout: Layout, weights: HugeCTRWeights, template: dict, where: list[str]) -> tuple[dict, dict]:
    """The state_dict ``template`` (the spec's Model's, for its keys, dtypes and buffers) with HugeCTR's values;
    ``where``: each table's folder, for messages. Returns it and, per table, the rows no key of the file set."""
    import torch

    state = {k: v.detach().clone() for k, v in template.items()}
    at = 0
    for p in layout.dense:
        values = weights.dense[at:at + p.count].reshape(p.shape)
        at += p.count
        if not p.key:
            continue
        if p.transpose:
            values = values.T
        target = state[p.key] if p.row is None else state[p.key][p.row]
        target.copy_(torch.from_numpy(np.ascontiguousarray(values)))
    for s, (mean, var) in zip(layout.stats, weights.stats):
        state[s.prefix + "running_mean"].copy_(torch.from_numpy(mean))
        state[s.prefix + "running_var"].copy_(torch.from_numpy(var))
        if s.prefix + "num_batches_tracked" in state:       # not in HugeCTR's files; unused with a momentum
            state[s.prefix + "num_batches_tracked"].zero_()
    problems, absent = [], {}
    for t, dump, folder in zip(layout.tables, weights.tables, where):
        rows, found = _rows(t, dump, folder)
        problems += found
        if found:
            continue
        table = np.zeros((t.rows + 1, t.vec_size), dtype=np.float32)
        table[rows] = dump.vectors
        state[t.key] = torch.from_numpy(table)
        absent[t.name] = t.rows - len(rows)
    if problems:
        raise UserError(problems)
    return state, absent
