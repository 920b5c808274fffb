"""What of the model torch.compile traces: the dense layers, with a sharded table's assembly of its exchanged rows;
the tables' lookups and exchanges stay eager (their row-update leaves and collectives are the trainer's own)."""

from __future__ import annotations

import torch

from .layers import FEATURES_MULTIPLE, SparseEmbedding, padded_linear


def compile_model(model: torch.nn.Module, device: torch.device, backend: str | object = "inductor"):
    """torch.compile(model) with every table's lookups (local_lookup, and a sharded table's fetch) run eagerly, and
    every linear layer whose input width is not a multiple of FEATURES_MULTIPLE run on padded widths (padded_linear).

    A sharded table's forward is fetch, then assemble. Dynamo compiles what follows a graph break inside a called
    module as a graph of its own unless nested graph breaks are on; assemble's graph then ends in the (batch, slots,
    vec) vectors, and autograd hands a compiled graph's backward its outputs' gradients contiguous: a copy of the
    Interaction's strided gradient each step (0.26 ms of a 2-rank Criteo-Kaggle step, 32768 a rank). With nested
    graph breaks, assemble is traced with the layers that read its vectors, and inductor writes their gradient in the
    layout the exchange's backward reads. (torch without the setting keeps the separate graph.)"""
    sharded = False
    for layer in model.modules():
        if type(layer) is torch.nn.Linear and layer.in_features % FEATURES_MULTIPLE:
            layer.forward = padded_linear(layer)  # type: ignore[method-assign]
        elif isinstance(layer, SparseEmbedding):
            layer.local_lookup = torch.compiler.disable(layer.local_lookup)  # type: ignore[method-assign]
            layer.fetch = torch.compiler.disable(layer.fetch)  # type: ignore[method-assign]
            layer.kernels = device.type == "cuda"
            sharded = sharded or layer.shard is not None
    if sharded and hasattr(torch._dynamo.config, "nested_graph_breaks"):
        torch._dynamo.config.nested_graph_breaks = True
    return torch.compile(model, backend=backend)
