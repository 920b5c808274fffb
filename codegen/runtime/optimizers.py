"""The optimizer of a generated model: DenseOptimizer for the dense layers, and the embedding tables' row updates
(RowSparseOptimizer; PassOptimizer in continuous training) where they reproduce HugeCTR's update."""

from __future__ import annotations

import torch.nn as nn

from .collection import CollectionTable
from .dense_optim import DenseOptimizer
from .ftrl import LookedUpRows
from .job import Optimizer
from .layers import SparseEmbedding
from .row_optim import Optimizers, PassOptimizer, RowSparseOptimizer


def make_optimizer(spec: Optimizer, model: nn.Module, lr, *, row_updates: bool = False, continuous: bool = False):
    """CreateOptimizer(spec.hugectr) with HugeCTR's effective hyper-parameters (DenseOptimizer: torch.optim's step of
    spec.dense). With ``row_updates`` the embedding tables are updated row by row (RowSparseOptimizer) and
    DenseOptimizer steps the dense layers only; in ``continuous`` training always, with the step of the optimizer's
    sparse form (PassOptimizer), only the rows (and row states) a batch looks up. Ftrl steps an embedding
    collection's tables on the rows a batch looks up only (LookedUpRows): its dense step would move every row."""
    collection = [m for m in model.modules() if isinstance(m, CollectionTable)]
    if spec.hugectr == "Ftrl" and collection:
        for table in collection:
            table.record = True
        rest = [p for p in model.parameters() if all(p is not t.weight for t in collection)]
        return Optimizers(DenseOptimizer(rest, lr, spec.dense, spec.dense_hyper),
                          LookedUpRows(collection, lr, spec.dense_hyper))
    if not row_updates and not continuous:
        return DenseOptimizer(model.parameters(), lr, spec.dense, spec.dense_hyper)
    tables = [m for m in model.modules() if isinstance(m, SparseEmbedding)]
    for table in tables:
        table.row_updates = True
        table.weight.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    rows: RowSparseOptimizer
    if continuous:
        rows = PassOptimizer(tables, lr, spec.hugectr, spec.rows_hyper)
    else:
        if spec.rows is None:
            raise ValueError(f"{spec.hugectr}: no row update reproduces its table update (row_updates needs one)")
        rows = RowSparseOptimizer(tables, lr, spec.rows, spec.rows_hyper)
    return Optimizers(DenseOptimizer(params, lr, spec.dense, spec.dense_hyper), rows)
