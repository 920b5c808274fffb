"""An embedding collection's lines of train_torch.py's Model (runtime/collection.py; what translates:
model/torch_collection.py): one CollectionTable per EmbeddingTableConfig, one call per lookup with the offset
HugeCTR's reader adds to its input's keys (less a dynamic table's base), its top in HugeCTR's shape."""

from __future__ import annotations

from collections.abc import Callable

from ..graph.ir import TrainingJob
from ..graph.shapes import fmt_shape
from ..model.torch_collection import bottoms_of, key_offsets, table_label, torch_tables
from .literals import py_str


def collection_lines(job: TrainingJob, attr: Callable[[str], str], var: Callable[[str], str], init: list[str],
                     forward: list[str], helpers: set[str]) -> None:
    """Append the tables to ``init``, the lookups to ``forward`` and the runtime class to ``helpers`` (``attr``,
    ``var``: the Python names of a module and of a tensor)."""
    c = job.graph.collection
    if c is None:
        return
    helpers.add("CollectionTable")
    offsets = key_offsets(job)
    table_rows, bases = torch_tables(job)   # a dynamic table from its smallest key (base): row = key - base
    attrs = []
    for i, (t, n) in enumerate(zip(c.tables, table_rows)):
        label = table_label(c, i)
        attrs.append(attr(f"table {label}"))   # (a space: no tensor has this name)
        # None: a dynamic table over slots sized from the data at start-up (the reader adds no offsets)
        rows = str(n) if n is not None else \
            f"max([{', '.join(f'cardinalities[{py_str(b)}][0]' for b in bottoms_of(c, i))}])"
        dynamic = ", bound=0.05" if t.rows == -1 else ""   # its initial rows
        init.append(f"self.{attrs[-1]} = CollectionTable({rows}, {t.ev_size}, name={py_str(label)}{dynamic})")
    for lk in c.lookups:
        tables = lk.table if isinstance(lk.table, tuple) else (lk.table,)
        combiners = lk.combiner if isinstance(lk.combiner, tuple) else (lk.combiner,)
        calls = [f"self.{attrs[t]}({var(b)}, {offsets[b] - bases[t]}, {py_str(comb)})"
                 for t, b, comb in zip(tables, lk.bottoms, combiners)]
        value = calls[0] if len(calls) == 1 else f"torch.cat([{', '.join(calls)}], dim=1)"
        dims = ", ".join(str(d) for d in lk.shape.dims[:-1])
        if dims:   # (batch, 1, width): the 3D top from 3.8
            value = f"{value}.reshape(-1, {dims}, {lk.shape.dims[-1]})"
        forward.append(f"{var(lk.top)} = {value}  # {fmt_shape(lk.shape)}")
