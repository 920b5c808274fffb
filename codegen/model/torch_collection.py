"""What the torch target needs of an embedding collection (runtime/collection.py translates it), and what it refuses.

A table's rows are its ``max_vocabulary_size``; a lookup's keys are the ids of its one-slot input plus the offset
HugeCTR's Parquet reader adds to that slot (add_input.cpp: the sums of slot_size_array before it; the Raw, RawAsync
and Norm readers add none). The collection itself adds no offset per slot (keys_to_indices.cu, 23.06): a key past
its table's rows overflows in HugeCTR, so such a spec is refused rather than translated.
"""

from __future__ import annotations

from ..graph.ir import EmbeddingCollection, TrainingJob

# EmbeddingCollectionConfig arguments that place or exchange keys and vectors but leave the arithmetic as it is.
PLACEMENT_ARGS = frozenset({"use_exclusive_keys", "comm_strategy", "output_layout"})
TABLE_ARGS = frozenset({"name", "table_id", "id_space", "max_vocabulary_size", "ev_size"})
# ragged_static_embedding.cu (23.06) updates a static table (max_vocabulary_size > 0) with these only.
STATIC_OPTIMIZERS = ("SGD", "AdaGrad")
LOC = ("embedding_collection",)


def key_offsets(job: TrainingJob) -> dict[str, int]:
    """Sparse input -> the offset HugeCTR's reader adds to its (first) slot's keys."""
    reader = dict(job.reader)
    sizes = reader.get("slot_size_array")
    fmt = getattr(reader.get("data_reader_type"), "member", None)
    out, start = {}, 0
    for s in job.graph.sparse:
        out[s.name] = start if fmt == "Parquet" and sizes else 0
        start += sum(int(c or 0) for c in s.cardinalities)
    return out


def table_rows(collection: EmbeddingCollection) -> list[int]:
    """Each table's max_vocabulary_size (-1: a dynamic hash table)."""
    return [int(dict(t.args)["max_vocabulary_size"]) for t in collection.tables]  # type: ignore[call-overload]


def collection_problems(job: TrainingJob) -> list[tuple[tuple, str, str]]:
    """(spec location, message, fix) of what in the collection the torch target cannot translate exactly."""
    c = job.graph.collection
    if c is None:
        return []
    out: list[tuple[tuple, str, str]] = []
    drop = "or drop 'torch' from targets"
    for name, _ in c.args:
        if name not in PLACEMENT_ARGS:
            out.append(((*LOC, "args", name), f"the torch target does not translate EmbeddingCollectionConfig's "
                        f"{name!r}", f"remove it, {drop}"))
    rows = table_rows(c)
    for i, t in enumerate(c.tables):
        for name, _ in t.args:
            if name not in TABLE_ARGS:
                out.append(((*LOC, "tables", i, "args", name), f"the torch target does not translate {t.func}'s "
                            f"{name!r}", f"remove it, {drop}"))
        if rows[i] < 0:
            out.append(((*LOC, "tables", i, "max_vocabulary_size"), "-1 is a dynamic hash table, whose rows are the "
                        "keys HugeCTR meets: the torch target needs the table's rows", f"give the rows, {drop}"))
    if any(r > 0 for r in rows) and job.optimizer.type not in STATIC_OPTIMIZERS:
        out.append((("optimizer", "type"), f"HugeCTR updates a table of max_vocabulary_size > 0 with "
                    f"{' or '.join(STATIC_OPTIMIZERS)} only, not {job.optimizer.type}", f"use SGD or AdaGrad, {drop}"))
    sparse = {s.name: s for s in job.graph.sparse}
    offsets = key_offsets(job)
    for i, lk in enumerate(c.lookups):
        tables = lk.table if isinstance(lk.table, tuple) else (lk.table,)
        for table, bottom in zip(tables, lk.bottoms):
            s = sparse[bottom]
            if s.slot_num != 1:
                out.append(((*LOC, "lookups", i, "bottom"), f"input {bottom!r} has {s.slot_num} slots: the torch "
                            "target translates lookups of one-slot inputs", f"one sparse input per slot, {drop}"))
                continue
            top = offsets[bottom] + int(s.cardinalities[0] or 0)
            if rows[table] >= 0 and top > rows[table]:
                why = f" (the Parquet reader's slot_size_array offset {offsets[bottom]} + cardinality " \
                      f"{s.cardinalities[0]})" if offsets[bottom] else " (its cardinality)"
                out.append(((*LOC, "lookups", i, "table"), f"input {bottom!r}'s keys reach {top}{why}, past the "
                            f"{rows[table]} rows of table {table}: HugeCTR's embedding collection adds no slot offset "
                            "of its own and overflows", f"size the table to {top} rows, or read the data without "
                            f"slot_size_array, {drop}"))
    return out
