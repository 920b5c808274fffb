"""What the torch target needs of an embedding collection (runtime/collection.py translates it), and what it refuses.

A lookup's keys are the ids of its one-slot input plus the offset HugeCTR's Parquet reader adds to that slot
(add_input.cpp: the sums of slot_size_array before it; the Raw, RawAsync and Norm readers add none). A static table's
rows are its ``max_vocabulary_size`` and a key is its row: the collection adds no offset per slot
(keys_to_indices.cu, 23.06), so a key past its table's rows overflows in HugeCTR, and such a spec is refused rather
than translated. A dynamic hash table (``max_vocabulary_size: -1``) gives every key its own vector, whatever its
value: its torch table holds the keys its inputs' cardinalities allow, from the smallest key it can meet (base) to
the largest, row = key - base. In 3.7 - 4.0 a static table is its key range instead: it holds the keys min_key ..
max_key - 1 (ragged_static_embedding.cu builds its rows from them; max_vocabulary_size only tells static from
dynamic), key k in row k - min_key (the lookup's binary_search_index_lower_bound, embedding/view.hpp, finds the last
key <= k), so its rows are max_key - min_key and its base min_key. A key past max_key would read the last key's row
of the shard it is routed to (mp_index_calculation.cu: k % shards; the plan decides which row, and the update kernel's
non-atomic += races where several keys share it), one below min_key the row before the table (index -1): a spec
whose inputs can hold such keys is refused. A dynamic table never reads the range.

The tables train with the dense step, which leaves the rows a batch does not look up as they are for SGD and AdaGrad
(a zero gradient moves neither): HugeCTR's update of either kind of table. Ftrl updates the looked-up rows only
(runtime/ftrl.py), as HugeCTR does from 23.06 for static tables and from its first Ftrl (4.3) for dynamic ones.
Other optimizers are refused.
"""

from __future__ import annotations

from ..graph.ir import EmbeddingCollection, TrainingJob

# EmbeddingCollectionConfig arguments that place or exchange keys and vectors but leave the arithmetic as it is.
PLACEMENT_ARGS = frozenset({"use_exclusive_keys", "comm_strategy", "output_layout"})
TABLE_ARGS = frozenset({"name", "table_id", "id_space", "max_vocabulary_size", "ev_size", "min_key", "max_key"})
# ragged_static_embedding.cu (23.06) updates a static table (max_vocabulary_size > 0) with these and Ftrl only; these
# are the optimizers whose dense step leaves untouched rows as they are (Ftrl steps the looked-up rows: runtime/ftrl.py).
ROW_EXACT_OPTIMIZERS = ("SGD", "AdaGrad")
LOC = ("embedding_collection",)


def key_offsets(job: TrainingJob) -> dict[str, int]:
    """Sparse input -> the offset HugeCTR's reader adds to its (first) slot's keys."""
    sizes, fmt = job.reader_plan.slot_sizes, job.reader_plan.data_reader_type.member
    out, start = {}, 0
    for s in job.graph.sparse:
        out[s.name] = start if fmt == "Parquet" and sizes else 0
        start += sum(int(c or 0) for c in s.cardinalities)
    return out


def table_rows(collection: EmbeddingCollection) -> list[int]:
    """Each table's rows: max_vocabulary_size, or max_key - min_key where a static table has a key range (-1: a
    dynamic hash table)."""
    return [t.key_range[1] - t.key_range[0] if t.rows >= 0 and t.key_range is not None else t.rows
            for t in collection.tables]


def key_range(collection: EmbeddingCollection, table: int) -> tuple[int, int] | None:
    """(min_key, max_key) of a 3.7 - 4.0 table; None where it has none."""
    return collection.tables[table].key_range


def static_base(collection: EmbeddingCollection, table: int) -> int:
    """The key of a static table's first row: its min_key (3.7 - 4.0), else 0."""
    keys = key_range(collection, table)
    return keys[0] if keys is not None else 0


def collection_tables(job: TrainingJob, bottom: str) -> list[dict]:
    """features.json's capacity of the static tables input ``bottom`` is looked up in (a slot sized from the data
    must keep its ids below the table's rows: runtime/row_counts.py)."""
    c = job.graph.collection
    if c is None:
        return []
    rows = table_rows(c)
    read = sorted({t for lk in c.lookups for t, b in zip(_tables(lk), lk.bottoms) if b == bottom and rows[t] >= 0})
    # (the keys below a table's base are refused, so an id is within capacity below rows + base)
    return [{"name": table_label(c, t), "max_vocabulary_size": rows[t] + static_base(c, t),
             "embedding_collection": True} for t in read]


def table_label(c: EmbeddingCollection, i: int) -> str:
    """A table's name (4.2+), id (3.8 - 4.1) or id space (3.7); its index where it has none."""
    return c.tables[i].label


def torch_tables(job: TrainingJob) -> tuple[list[int | None], list[int]]:
    """(rows, base) of each table's torch module: a static table's max_vocabulary_size rows from key 0; a dynamic
    one's from the smallest key its inputs can hold to the largest (None: sized from the data at start-up, where the
    reader adds no offsets and a cardinality is unknown)."""
    c = job.graph.collection
    assert c is not None
    rows: list[int | None] = list(table_rows(c))
    bases = [static_base(c, t) if r >= 0 else 0 for t, r in enumerate(rows)]  # type: ignore[operator]
    offsets = key_offsets(job)
    cards = {s.name: int(s.cardinalities[0] or 0) for s in job.graph.sparse}
    for t in range(len(c.tables)):
        if rows[t] >= 0:  # type: ignore[operator]
            continue
        bottoms = bottoms_of(c, t)
        if all(cards[b] for b in bottoms):
            bases[t] = min(offsets[b] for b in bottoms)
            rows[t] = max(offsets[b] + cards[b] for b in bottoms) - bases[t]
        else:
            rows[t] = None
    return rows, bases


def bottoms_of(c: EmbeddingCollection, table: int) -> list[str]:
    """The inputs looked up in ``table``, in lookup order."""
    return [b for lk in c.lookups for t, b in zip(_tables(lk), lk.bottoms) if t == table]


def _tables(lookup) -> tuple[int, ...]:
    return lookup.table if isinstance(lookup.table, tuple) else (lookup.table,)


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
    opt = job.optimizer.type
    if opt == "Ftrl" and any(r > 0 for r in rows) and not job.profile.has("collection_static_ftrl"):
        out.append((("optimizer", "type"), f"HugeCTR {job.hugectr_version}'s embedding collection has no Ftrl update "
                    "for a table of max_vocabulary_size > 0 (ragged_static_embedding.cu throws 'optimizer not "
                    "implemented'; 23.06 adds it)", f"use SGD or AdaGrad, or hugectr_version 23.06 or later, {drop}"))
    elif opt not in (*ROW_EXACT_OPTIMIZERS, "Ftrl"):
        why = f"HugeCTR updates a table of max_vocabulary_size > 0 with {' or '.join(ROW_EXACT_OPTIMIZERS)} only" \
            if any(r > 0 for r in rows) else "the torch target's dense step of a dynamic table would move rows " \
            "HugeCTR's hash table leaves alone"
        out.append((("optimizer", "type"), f"{why}, not {opt}", f"use SGD, AdaGrad or Ftrl, {drop}"))
    sparse = {s.name: s for s in job.graph.sparse}
    offsets = key_offsets(job)
    for i, lk in enumerate(c.lookups):
        for table, bottom in zip(_tables(lk), lk.bottoms):
            s = sparse[bottom]
            if s.slot_num != 1:
                out.append(((*LOC, "lookups", i, "bottom"), f"input {bottom!r} has {s.slot_num} slots: the torch "
                            "target translates lookups of one-slot inputs", f"one sparse input per slot, {drop}"))
                continue
            top = offsets[bottom] + int(s.cardinalities[0] or 0)
            keys = key_range(c, table) if rows[table] >= 0 else None
            if keys is not None and (offsets[bottom] < keys[0] or top > keys[1]):
                out.append(((*LOC, "lookups", i, "table"), f"input {bottom!r}'s keys run from {offsets[bottom]} to "
                            f"{top - 1}, outside table {table}'s keys {keys[0]} .. {keys[1] - 1} (min_key, max_key): "
                            "HugeCTR reads a key past max_key from the last row of the shard it routes to (which "
                            "row depends on the shard plan; their updates race) and one below min_key from outside "
                            "the table", f"set min_key <= {offsets[bottom]} and max_key >= {top}, {drop}"))
            elif keys is None and rows[table] >= 0 and top > rows[table]:
                why = f" (the Parquet reader's slot_size_array offset {offsets[bottom]} + cardinality " \
                      f"{s.cardinalities[0]})" if offsets[bottom] else " (its cardinality)"
                out.append(((*LOC, "lookups", i, "table"), f"input {bottom!r}'s keys reach {top}{why}, past the "
                            f"{rows[table]} rows of table {table}: HugeCTR's embedding collection adds no slot offset "
                            "of its own and overflows", f"size the table to {top} rows, or read the data without "
                            f"slot_size_array, {drop}"))
    return out
