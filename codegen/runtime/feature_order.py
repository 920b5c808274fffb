"""Sharded tables whose slots reach their readers in the shard's order: a table read only by Interactions (which take
any order of their features) skips the gather of its slots into slot order, forward and backward."""

from __future__ import annotations

import torch
import torch.fx
import torch.nn as nn

from .layers import Interaction, SparseEmbedding


class _Calls(torch.fx.Tracer):
    """Traces the Model's own forward only: every submodule is one call (its inside is not the dataflow asked)."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return True


def take_shard_orders(model: nn.Module) -> list[str]:
    """For every sharded SparseEmbedding whose output only Interactions read (as their embeddings), set it to yield
    its slots in its shard's order and each of those Interactions to take that order. The Model's forward is read
    with torch.fx; a forward it cannot trace, or any other reader of a table's output (a reshape, a concat), leaves
    that table in slot order. Returns the log's lines, one a table that changed."""
    tables = {name: m for name, m in model.named_modules() if isinstance(m, SparseEmbedding) and m.shard is not None
              and list(m.shard.order) != sorted(m.shard.order)}
    if not tables or not any(isinstance(m, Interaction) for m in model.modules()):
        return []
    try:
        graph = _Calls().trace(model)
    except Exception:     # (any failure of tracing: the generated forward stays as it is, in slot order)
        return []
    lines: list[str] = []
    taken: set[int] = set()
    for node in graph.nodes:
        if node.op != "call_module" or node.target not in tables:
            continue
        table = tables[str(node.target)]
        assert table.shard is not None, "a sharded table"
        order = list(table.shard.order)
        readers = list(node.users)
        takers = [model.get_submodule(str(r.target)) for r in readers if r.op == "call_module"]
        if not readers or len(takers) != len(readers) or not all(
                isinstance(t, Interaction) and len(r.args) == 2 and not r.kwargs and r.args[1] is node
                and r.args[0] is not node and t.num_features == len(order) + 1 and id(t) not in taken
                for t, r in zip(takers, readers)):
            continue
        taken.update(id(t) for t in takers)
        table.shard_order = True
        for taker in takers:
            taker.take_order(order)
        lines.append(f"{node.target}: its slots go to {', '.join(str(r.target) for r in readers)} in the shard's order "
                     "(no gather into slot order)")
    return lines
