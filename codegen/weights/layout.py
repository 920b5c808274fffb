"""Where each weight of the typed model lives in HugeCTR's files and in the PyTorch trainer's state_dict.

HugeCTR's dense file is every trainable layer's weights, float32, in network order (the dense layers as model.py adds
them; hugectr.md §5). Per layer type (the layers' constructors in NVIDIA-Merlin/HugeCTR@v23.06.00:HugeCTR/src/layers,
and hugectr2onnx's hugectr_loader.py, which reads the file the same way):

* InnerProduct, FusedInnerProduct: the kernel (in, out) row-major, then the bias (out). nn.Linear keeps the kernel
  transposed, (out, in).
* MLP: per width the kernel (in, out) and the bias (out); a layer without a bias still has its bias in the file
  (mlp_layer.cu allocates it, and never reads it): exported as zeros, ignored on import.
* MultiCross (DCN v1): per layer its weight (width), then its bias (width); the runtime stacks them as
  (num_layers, width). DCN v2 (projection_dim) is refused: HugeCTR's graph JSON drops projection_dim (hugectr.md
  §2.6), so its files do not say which form they hold.
* BatchNorm, LayerNorm: gamma (width), then beta (width). BatchNorm's running mean and variance are not trainable:
  they go to ``<dense file>.ntp.json``, one entry per BatchNorm in network order.
* WeightMultiply: the weight (d0, d1) row-major.
* Every other layer the PyTorch target translates has no weights in either (PReLU_Dice's alpha and eps,
  MultiHeadAttention, FmOrder2, Interaction: arguments or arithmetic only).

A table's rows: HugeCTR keeps one hash table per embedding, keyed by the keys the reader produced, slot s's ids plus
its slot offset (the Parquet reader's exclusive prefix sums of slot_size_array over every slot of the model; 0 for
readers that add none). The PyTorch table holds the same slots, slot s's rows starting at the cardinalities of the
table's slots before it, and a last padding row that HugeCTR has no key for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..graph.ir import Layer
from ..model.types import Model
from ..render.torch_model import mlp_linears, module_attrs
from ..triton.plan.repository import plan_preprocessing

# Layer types that hold no weights in HugeCTR's dense file nor in the PyTorch Model.
WEIGHTLESS = frozenset({
    "Reshape", "Concat", "Slice", "ReLU", "ReLUHalf", "Sigmoid", "ELU", "Softmax", "Cast", "Dropout", "Add", "Sub",
    "ElementwiseMultiply", "Interaction", "FmOrder2", "ReduceSum", "ReduceMean", "Select", "PReLU_Dice", "Scale",
    "DotProduct", "FusedReshapeConcat", "FusedReshapeConcatGeneral", "MatrixMultiply", "SequenceMask",
    "MultiHeadAttention", "BinaryCrossEntropyLoss", "CrossEntropyLoss", "MultiCrossEntropyLoss"})
# Embedding types whose dump (key, emb_vector[, slot_id]) hugectr.md §5 states.
TABLE_TYPES = {"DistributedSlotSparseEmbeddingHash": False, "LocalizedSlotSparseEmbeddingHash": True}


@dataclass(frozen=True)
class Piece:
    """One run of float32 values of the dense file: a torch tensor, or one row of it."""

    layer: str                       # the HugeCTR layer's top, as messages name it
    key: str                         # the state_dict key; "" for values only HugeCTR keeps (an unused MLP bias)
    shape: tuple[int, ...]           # HugeCTR's shape, row-major in the file
    transpose: bool = False          # torch keeps the transpose (nn.Linear's weight)
    row: int | None = None           # the row of a stacked torch tensor (MultiCross layer i)

    @property
    def count(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class Stats:
    """A BatchNorm's running statistics (the .ntp.json entry)."""

    layer: str
    prefix: str                      # "<attr>." of the nn.BatchNorm1d
    width: int


@dataclass(frozen=True)
class Slot:
    column: str
    rows: int                        # the slot's cardinality
    key_offset: int                  # added to an id to make HugeCTR's key
    row_offset: int                  # where its rows start in the PyTorch table


@dataclass(frozen=True)
class SparseTable:
    name: str                        # the embedding's name (sparse_embedding_name)
    index: int                       # its place in add() order: <prefix><index>_sparse_<iter>.model
    key: str                         # the state_dict key of its weight
    vec_size: int
    slots: tuple[Slot, ...]
    localized: bool                  # the dump has slot_id

    @property
    def rows(self) -> int:           # the PyTorch table's rows, the padding row not counted
        return sum(s.rows for s in self.slots)


@dataclass(frozen=True)
class Layout:
    model: str
    dense: tuple[Piece, ...]
    stats: tuple[Stats, ...]
    tables: tuple[SparseTable, ...]

    @property
    def dense_count(self) -> int:
        return sum(p.count for p in self.dense)


def _refuse(spec: str, layer: str, why: str) -> UserError:
    return UserError.one(spec, f"layer '{layer}': {why}", field="model",
                         fix="ctrgen weights moves the weights of the layers docs/hugectr.md §5 lists")


def _dense_pieces(spec: str, layer: Layer, attr: str) -> list[Piece]:
    t, top = layer.type, layer.tops[0]
    p: dict[str, Any] = layer.values    # HugeCTR's defaults included (graph.ir.dense_values)
    width = layer.in_shapes[0].width if layer.in_shapes else 0
    if t in ("InnerProduct", "FusedInnerProduct"):
        out = int(p["num_output"])
        return [Piece(top, f"{attr}.weight", (width, out), transpose=True), Piece(top, f"{attr}.bias", (out,))]
    if t == "MLP":
        pieces = []
        for index, w_in, w_out, bias in mlp_linears(layer):
            pieces.append(Piece(top, f"{attr}.{index}.weight", (w_in, w_out), transpose=True))
            pieces.append(Piece(top, f"{attr}.{index}.bias" if bias else "", (w_out,)))
        return pieces
    if t == "MultiCross":
        if p.get("projection_dim"):
            raise _refuse(spec, top, "MultiCross with projection_dim (DCN v2): HugeCTR's graph JSON does not keep "
                          "projection_dim, so which form its dense file holds cannot be known")
        pieces = []
        for i in range(int(p["num_layers"])):
            pieces += [Piece(top, f"{attr}.weight", (width,), row=i), Piece(top, f"{attr}.bias", (width,), row=i)]
        return pieces
    if t in ("BatchNorm", "LayerNorm"):
        return [Piece(top, f"{attr}.weight", (width,)), Piece(top, f"{attr}.bias", (width,))]
    if t == "WeightMultiply":
        rows, cols = (int(d) for d in p["weight_dims"])
        return [Piece(top, f"{attr}.weight", (rows, cols))]
    if t in WEIGHTLESS:
        return []
    raise _refuse(spec, top, f"type {t}: where its weights lie in HugeCTR's dense file is not known to ctrgen")


def layout_of(model: Model) -> Layout:
    """The model's layout in HugeCTR's files; a layer or table it cannot map exactly is refused in one line."""
    spec = model.provenance.spec
    job = model.job
    g = job.graph
    if g.collection is not None:
        raise UserError.one(spec, "an embedding collection's tables are dumped by embedding_dump, whose files ctrgen "
                            "does not read or write", field="embedding_collection",
                            fix="use SparseEmbedding tables (embeddings:) to move weights")
    attrs = module_attrs(job)
    dense: list[Piece] = []
    stats: list[Stats] = []
    for layer in g.layers:
        if layer.auto:
            continue
        pieces = _dense_pieces(spec, layer, attrs.get(layer.tops[0], ""))
        dense += pieces
        if layer.type == "BatchNorm":
            stats.append(Stats(layer.tops[0], f"{attrs[layer.tops[0]]}.", layer.in_shapes[0].width))
    pre = plan_preprocessing(job, model.features)
    tables = []
    for index, (e, planned) in enumerate(zip(g.embeddings, pre.tables)):
        if e.embedding_type not in TABLE_TYPES:
            raise UserError.one(spec, f"embedding '{e.name}': {e.embedding_type}'s dump is not the key / emb_vector "
                                "layout docs/hugectr.md §5 states", field="embeddings",
                                fix="DistributedSlotSparseEmbeddingHash or LocalizedSlotSparseEmbeddingHash")
        slots, row = [], 0
        for s in planned.slots:
            if s.cardinality <= 0:
                raise UserError.one(spec, f"embedding '{e.name}': column '{s.column}' has no cardinality in the "
                                    "features lock, so its keys cannot be placed", field="features",
                                    fix="lock the features from a workflow or dataset schema with cardinalities")
            slots.append(Slot(s.column, s.cardinality, s.offset, row))
            row += s.cardinality
        if len(slots) > 1 and not any(s.key_offset for s in slots):
            raise UserError.one(spec, f"embedding '{e.name}': the reader adds no slot offsets (no slot_size_array), so "
                                "a key of its file does not tell its slot", field="data",
                                fix="read Parquet with slot_size_array (the default for data.format parquet)")
        tables.append(SparseTable(e.name, index, f"{attrs[e.name]}.weight", e.vec_size, tuple(slots),
                            TABLE_TYPES[e.embedding_type]))
    return Layout(model.name, tuple(dense), tuple(stats), tuple(tables))
