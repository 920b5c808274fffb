"""The PyTorch target's rules: what train_torch.py cannot translate, found on the built HugeCTR job (presets expanded,
each layer with its spec location) and run by the model builder when the spec's targets include torch. The facts
(optimizers, layer types) are ``codegen.torch_target``'s, the same the renderer translates with."""

from __future__ import annotations

from ..graph.ir import Layer, TrainingJob
from ..hugectr import versions as V
from .torch_collection import collection_problems
from ..torch_target import LAYER_TYPES, LOSSES, OPTIMIZERS, SPARSE_OPTIMIZERS

DROP = "drop 'torch' from targets"


def _masked_softmax(layer: Layer, release: str) -> str | None:
    """Why the two-input Softmax (MaskedSoftmaxLayer) cannot be followed, if it cannot: its kernel indexes the scores as
    (batch, heads, rows, S), and up to 23.06 takes rows = S (masked_softmax_layer.cu)."""
    dims = layer.in_shapes[0].dims
    if len(dims) != 3:
        return (f"HugeCTR's MaskedSoftmaxLayer indexes its scores as 4D (batch, heads, rows, S), not "
                f"{len(dims) + 1}D")
    if dims[1] != dims[2] and not V.holds("masked_softmax_rows", release):
        return (f"up to 23.06 HugeCTR's MaskedSoftmaxLayer reads its scores as (batch, heads, S, S) with S = {dims[1]}, "
                f"which scores of last dimension {dims[2]} do not fill in order")
    return None


LOSS_NAMES = "BinaryCrossEntropyLoss, CrossEntropyLoss or MultiCrossEntropyLoss"


def _loss(layer: Layer) -> tuple[str, str] | None:
    """(why, fix) where a loss layer cannot be trained as HugeCTR trains it."""
    p = dict(layer.params)
    if p.get("use_regularizer"):
        return ("its regularizer adds lambda times the L1 or L2 norm of the weights to the loss and their gradients, "
                "which train_torch.py does not", "remove use_regularizer")
    weights = list(layer.values["target_weight_vec"])   # HugeCTR's default included (graph.ir.dense_values)
    if layer.type == "MultiCrossEntropyLoss" and len(weights) != layer.in_shapes[0].width:
        return (f"its target_weight_vec holds {len(weights)} weights for {layer.in_shapes[0].width} input columns: "
                "HugeCTR throws 'target_weight.size() != input_tensor.get_dims()[0]'",
                "give target_weight_vec one weight per input column")
    return None


def shared_slots(job: TrainingJob) -> dict[str, str]:
    """Column -> the column whose rows it shares, for each slot of size 0 in the slot_size_array the reader passes:
    HugeCTR offsets its ids by the sizes before it (add_input.cpp), so they are keys of the next slot of a size in its
    input. A run of them ending its input shares the rows of its last slot, which no size counts: that slot's rows
    come from the data (HugeCTR hashes the run's keys into its workspace-sized table) and it maps to itself."""
    if not job.reader_plan.slot_sizes:
        return {}
    out: dict[str, str] = {}
    for s in job.graph.sparse:
        for i, (name, card) in enumerate(zip(s.columns, s.cardinalities)):
            if card == 0:
                out[name] = next((n for n, c in zip(s.columns[i + 1:], s.cardinalities[i + 1:]) if c),
                                 s.columns[-1])
    return out


def torch_problems(job: TrainingJob) -> list[tuple[tuple, str, str]]:
    """(spec location, message, fix) of everything in ``job`` the torch target cannot translate."""
    g = job.graph
    out: list[tuple[tuple, str, str]] = []
    for layer in g.layers:
        if layer.type not in LAYER_TYPES:
            out.append((layer.origin or ("model",), f"layer {layer.tops[0]!r}: the torch target has no translation "
                        f"for layer type {layer.type!r}", f"use the layer types of the presets, or {DROP}"))
        elif layer.type == "Softmax" and len(layer.bottoms) == 2 and \
                (masked := _masked_softmax(layer, job.hugectr_version)) is not None:
            out.append((layer.origin or ("model",), f"layer {layer.tops[0]!r}: the torch target cannot translate this "
                        f"masked Softmax ({masked})", f"give it 4D scores (batch, heads, S, S), or {DROP}"))
        elif layer.type in LOSSES and (loss := _loss(layer)) is not None:
            out.append((layer.origin or ("model",), f"layer {layer.tops[0]!r}: the torch target cannot translate this "
                        f"{layer.type} ({loss[0]})", f"{loss[1]}, or {DROP}"))
    if not out and not any(layer.type in LOSSES for layer in g.layers):
        out.append((("model",), "the graph ends without a loss layer", f"end it with {LOSS_NAMES}, or {DROP}"))
    kind = job.optimizer.type
    if kind not in OPTIMIZERS:
        out.append((("optimizer", "type"), f"the torch target has no {kind} optimizer",
                    "use one of " + ", ".join(sorted(OPTIMIZERS)) + f", or {DROP}"))
    elif kind == "Ftrl" and g.embeddings:
        out.append((("optimizer", "type"), "HugeCTR's SparseEmbedding has no Ftrl update (sparse_optimizer.cu's "
                    "update_params throws 'Invalid optimizer type'; only the embedding collection's tables train "
                    "with Ftrl)", f"look the tables up through embedding_collection, use another optimizer, or {DROP}"))
    elif job.continuous is not None and kind not in SPARSE_OPTIMIZERS:
        out.append((("optimizer", "type"), "continuous training with the torch target updates only the embedding "
                    f"rows of each pass, which needs a sparse {kind} (torch has none)",
                    "use one of " + ", ".join(sorted(SPARSE_OPTIMIZERS)) + f", or {DROP}"))
    # An imported script's Parquet reader names its label_dim label columns at run time (_metadata.json), and so does
    # the trainer; elsewhere the features name each label column.
    if any(d != 1 for d in g.label_dims) and not job.labels_from_metadata:
        out.append((("input", "label_dim"), "the torch target reads one Parquet label column per label, and HugeCTR's "
                    "Parquet reader takes label_dim + dense_dim label and continuous columns, labels first: a label "
                    f"of dimension {max(g.label_dims)} needs as many label columns, which the features name as "
                    "labels of dimension 1", f"list the label columns under features.label and remove "
                    f"input.label_dim, or {DROP}"))
    out += collection_problems(job)
    return out
