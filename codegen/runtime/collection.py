"""HugeCTR's embedding collection (EmbeddingTableConfig + embedding_lookup, 3.7 - 25.x) as torch modules.

A table is one EmbeddingTableConfig: ``max_vocabulary_size`` rows of ``ev_size`` (in 3.7 - 4.0 ``max_key - min_key``
rows, key min_key in row 0: model/torch_collection.py), shared by every lookup that names it. A key is its table's
row itself: KeysToIndicesConverter (HugeCTR/embedding/operators/keys_to_indices.cu, 23.06, keys_to_indices_kernel)
maps key k of a table to ``start of the table + k``, with no per-slot offset of its own (the
old SparseEmbedding's). The only offset a key carries is the Parquet reader's (add_input.cpp: slot_size_array sums,
added to every key of slot s), which the generated model passes as ``offset``. The initial rows are uniform in
(-sqrt(1 / max_vocabulary_size), +sqrt(1 / max_vocabulary_size)) (ragged_static_embedding.cu, Initializer_t::Default);
a dynamic hash table's (max_vocabulary_size -1) are uniform in (-0.05, 0.05) (third_party/dynamic_embedding_table,
cuco/initializer.cuh: (curand_uniform - 0.5) * 0.1), its rows the keys its inputs can hold (model/torch_collection.py).
A lookup pools a sample's keys with its combiner (model_forward.cu: average divides the sum by the sample's number of
keys) or, with concat, writes them side by side, zeros after the last key.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

COMBINER_MODES = {"sum": "sum", "average": "mean"}


class CollectionTable(nn.Module):
    """One EmbeddingTableConfig: ``rows`` rows of ``ev_size``, then a padding row (zero, never trained) that -1 (no
    key) maps to; initial rows uniform in (-bound, bound), sqrt(1 / rows) by default (a static table's)."""

    def __init__(self, rows: int, ev_size: int, name: str = "", bound: float | None = None):
        super().__init__()
        self.rows, self.ev_size, self.name = int(rows), int(ev_size), name
        self.record = False      # set by the trainer for Ftrl: keep the keys each training forward looks up
        self.looked_up: torch.Tensor | None = None   # those keys, until the step (runtime/ftrl.py's LookedUpRows)
        self.weight = nn.Parameter(torch.empty(self.rows + 1, self.ev_size))
        with torch.no_grad():
            if not self.weight.is_meta:
                bound = math.sqrt(1.0 / self.rows) if bound is None else bound
                self.weight.uniform_(-bound, bound)
                self.weight[self.rows].zero_()

    def forward(self, ids: torch.Tensor, offset: int, combiner: str) -> torch.Tensor:
        """(batch, width) of one lookup of a one-slot input ``ids`` (batch, 1, nnz), -1 padding: width ev_size,
        or nnz * ev_size with concat."""
        batch, slots, nnz = ids.shape
        keys = torch.where(ids >= 0, ids + offset, self.rows).reshape(batch, slots * nnz)
        if self.record and torch.is_grad_enabled():
            flat = keys.reshape(-1)
            self.looked_up = flat if self.looked_up is None else torch.cat([self.looked_up, flat])
        if combiner == "concat":
            return F.embedding(keys, self.weight, padding_idx=self.rows).reshape(batch, -1)
        pooled = F.embedding_bag(keys, self.weight, mode=COMBINER_MODES[combiner], padding_idx=self.rows)
        if combiner == "average":   # a sample with no key: HugeCTR divides the zero sum by 0 keys (NaN)
            pooled = pooled.masked_fill((ids < 0).all(dim=2).reshape(batch, 1).expand_as(pooled), math.nan)
        return pooled
