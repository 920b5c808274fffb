"""Model presets: short spec sections that expand to the dense layers of a known architecture.

A preset returns :class:`RawLayer` entries, the same thing an explicit ``layers:`` list produces, so shape
inference, HugeCTR's checks and every renderer treat both alike. Every dimension is derived from the features and
the embeddings (slot counts, vec sizes, dense width), never typed. Names follow HugeCTR's samples (reshape1, fc1,
relu1, ..., loss) so generated scripts read like the hand-written ones. Graphs: docs/hugectr.md §3, §6.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Located
from ..hugectr.versions import Profile
from .ir import Embedding


@dataclass
class RawLayer:
    """A dense layer before shape inference: what a preset or an explicit `layers:` entry asks for."""

    type: str
    bottoms: tuple[str, ...]
    tops: tuple[str, ...]
    params: dict
    origin: tuple  # spec location of the entry that produced it
    group: tuple | None = None  # (type, bottoms, tops, num_outputs, last_act_type) of the GroupDenseLayer it expands


def preset_error(loc: tuple, message: str, fix: str = "") -> Located:
    """A preset knob that cannot build the graph; ``loc`` is its spec location (``("model", "units", 1)``)."""
    return Located(message, fix=fix, loc=loc)


@dataclass
class Ctx:
    spec: object
    embeddings: list[Embedding]
    dense_dim: int
    label: str
    dense_name: str
    profile: Profile
    labels: tuple[str, ...] = ()  # every label (multi-task presets: one loss per label)
    layers: list[RawLayer] = field(default_factory=list)
    uses: dict[str, int] = field(default_factory=dict)

    def add(self, type_: str, bottoms, top, **params) -> str:
        bottoms = (bottoms,) if isinstance(bottoms, str) else tuple(bottoms)
        tops = (top,) if isinstance(top, str) else tuple(top)
        self.layers.append(RawLayer(type_, bottoms, tops, params, ("model",)))
        return tops[0]

    def embedding(self, name: str, loc: tuple) -> Embedding:
        for e in self.embeddings:
            if e.name == name:
                return e
        raise preset_error(loc, f"{name!r} is not an embedding of this spec",
                          fix=f"use one of {[e.name for e in self.embeddings]}")

    def mlp(self, x: str, units: list[int], dropout: float | None, start: int = 1,
            batch_norm: bool = False) -> tuple[str, int]:
        """FC -> ReLU (-> BatchNorm) (-> Dropout) per width; returns the last tensor and the next fc index."""
        i = start
        for width in units:
            self.add("InnerProduct", x, f"fc{i}", num_output=width)
            x = self.add("ReLU", f"fc{i}", f"relu{i}")
            if batch_norm:      # torch's BatchNorm1d defaults (momentum is HugeCTR's factor)
                x = self.add("BatchNorm", x, f"bn{i}", factor=0.1, eps=1e-5)
            if dropout is not None:
                x = self.add("Dropout", x, f"dropout{i}", dropout_rate=dropout)
            i += 1
        return x, i

    def reshape_flat(self, e: Embedding, top: str) -> str:
        # leading_dim = slots x vec: a changed vec size or feature count stays consistent.
        return self.add("Reshape", e.name, top, leading_dim=e.slot_num * e.vec_size)

    def branches(self, tensor: str, n: int, width: int, stem: str) -> list[str]:
        """Feed `tensor` to n layers: HugeCTR >= 3.3 inserts the Slice itself (graph_analysis); older releases need
        it written out (hugectr.md §2.7)."""
        if self.profile.has("auto_slice"):
            return [tensor] * n
        tops = [f"{stem}{k}" for k in range(1, n + 1)]
        self.add("Slice", tensor, tops, ranges=[(0, width)] * n)
        return tops

    def loss(self, x: str) -> None:
        self.add("BinaryCrossEntropyLoss", (x, self.label), "loss")


def _mlp(c: Ctx) -> None:
    s = c.spec
    feeds = [c.reshape_flat(e, f"reshape{i}") for i, e in enumerate(c.embeddings, start=1)]
    if c.dense_dim:
        feeds.append(c.dense_name)
    x = feeds[0] if len(feeds) == 1 else c.add("Concat", feeds, "concat1")
    x, i = c.mlp(x, s.units, s.dropout, batch_norm=s.batch_norm)
    c.add("InnerProduct", x, f"fc{i}", num_output=1)
    c.loss(f"fc{i}")


def _wdl(c: Ctx) -> None:
    s = c.spec
    deep, wide = c.embedding(s.deep, ("model", "deep")), c.embedding(s.wide, ("model", "wide"))
    if wide.vec_size != 1:
        raise preset_error(("model", "wide"), f"the wide embedding {wide.name!r} has embedding_vec_size "
                                              f"{wide.vec_size}",
                          fix="set its embedding_vec_size to 1 (a linear model over the wide slots)")
    c.reshape_flat(deep, "reshape1")
    wide_out = c.reshape_flat(wide, "reshape2")
    if wide.slot_num > 1:  # one wide slot is already one number per sample (seed 003); several are summed
        wide_out = c.add("ReduceSum", "reshape2", "wide_redn", axis=1)
    x = c.add("Concat", ["reshape1", c.dense_name], "concat1") if c.dense_dim else "reshape1"
    x, i = c.mlp(x, s.units, s.dropout)
    c.add("InnerProduct", x, f"fc{i}", num_output=1)
    c.add("Add", [f"fc{i}", wide_out], "add1")
    c.loss("add1")


def _dcn(c: Ctx) -> None:
    s = c.spec
    if s.projection_dim is not None and not c.profile.has_arg("DenseLayer", "projection_dim"):
        raise preset_error(("model", "projection_dim"), f"DCNv2 (projection_dim) is not in HugeCTR {c.profile.name}",
                          fix="remove it (DCNv1), or target HugeCTR 4.3 or later")
    feeds = [c.reshape_flat(e, f"reshape{i}") for i, e in enumerate(c.embeddings, start=1)]
    if c.dense_dim:
        feeds.append(c.dense_name)
    x = feeds[0] if len(feeds) == 1 else c.add("Concat", feeds, "concat1")
    width = sum(e.slot_num * e.vec_size for e in c.embeddings) + c.dense_dim
    cross_in, deep_in = c.branches(x, 2, width, "slice1")
    cross = {"num_layers": s.cross_layers}
    if s.projection_dim is not None:
        cross["projection_dim"] = s.projection_dim
    c.add("MultiCross", cross_in, "multicross1", **cross)
    y, i = c.mlp(deep_in, s.units, s.dropout)
    c.add("Concat", [y, "multicross1"], "concat2")
    c.add("InnerProduct", "concat2", f"fc{i}", num_output=1)
    c.loss(f"fc{i}")


def _dlrm_checks(c: Ctx) -> Embedding:
    s = c.spec
    if len(c.embeddings) != 1:
        raise preset_error(("embeddings",), "the dlrm preset interacts one embedding table with the bottom MLP",
                          fix="use a single embedding over all categorical slots")
    e = c.embeddings[0]
    if not c.dense_dim:
        raise preset_error(("features", "continuous"), "DLRM needs continuous features for its bottom MLP",
                          fix="use the mlp or dcn preset for data without continuous columns")
    if s.bottom_units[-1] != e.vec_size:
        raise preset_error(("model", "bottom_units"),
                          f"the bottom MLP ends at width {s.bottom_units[-1]} but embedding_vec_size is {e.vec_size} "
                          "(Interaction needs equal widths)",
                          fix=f"end bottom_units with {e.vec_size}")
    return e


def _dlrm(c: Ctx) -> None:
    s, e = c.spec, _dlrm_checks(c)
    x, i = c.mlp(c.dense_name, s.bottom_units, None)
    c.add("Interaction", [x, e.name], "interaction1")
    x, i = c.mlp("interaction1", s.top_units, None, start=i)
    c.add("InnerProduct", x, f"fc{i}", num_output=1)
    c.loss(f"fc{i}")


def _dlrm_mlp(c: Ctx) -> None:
    """samples/dlrm/dgx_a100_mlp.py (4.2 - 23.09): the same DLRM with Layer_t.MLP stacks; Interaction's second top
    (the gradient buffer) feeds the top MLP too."""
    s, e = c.spec, _dlrm_checks(c)
    # the sample's DenseLayerComputeConfig (23.04 and later): overlapped weight gradients; bias fused on the top MLP
    cfg = c.profile.has_arg("DenseLayer", "compute_config")
    bottom = {"compute_config": {"hugectr.DenseLayerComputeConfig": {"async_wgrad": True, "fuse_wb": False}}}
    top = {"compute_config": {"hugectr.DenseLayerComputeConfig": {"async_wgrad": True, "fuse_wb": True}}}
    c.add("MLP", c.dense_name, "mlp1", num_outputs=list(s.bottom_units), act_type="Relu", **(bottom if cfg else {}))
    c.add("Interaction", ["mlp1", e.name], ["interaction1", "interaction_grad"])
    c.add("MLP", ["interaction1", "interaction_grad"], "mlp2", num_outputs=[*s.top_units, 1],
          activations=["Relu"] * len(s.top_units) + ["Non"], **(top if cfg else {}))
    c.loss("mlp2")


def _deepfm(c: Ctx) -> None:
    s = c.spec
    if len(c.embeddings) != 1:
        raise preset_error(("embeddings",), "the deepfm preset uses one embedding table over all categorical slots",
                          fix="use a single embedding")
    e = c.embeddings[0]
    k, slots, dense = e.vec_size - 1, e.slot_num, c.dense_dim
    if k < 1:
        raise preset_error(("embeddings", 0, "embedding_vec_size"), "DeepFM needs embedding_vec_size >= 2 "
                          "(k factors plus one first-order weight)", fix="e.g. 11 for k = 10")
    # (B, S, k+1) -> rows of k+1 -> split factors / first-order weight -> back to per-sample (hugectr.md §3).
    c.add("Reshape", e.name, "reshape1", leading_dim=k + 1)
    c.add("Slice", "reshape1", ["slice11", "slice12"], ranges=[(0, k), (k, k + 1)])
    c.add("Reshape", "slice11", "reshape2", leading_dim=slots * k)
    c.add("Reshape", "slice12", "reshape3", leading_dim=slots)
    if dense:
        d1, d2 = c.branches(c.dense_name, 2, dense, "slice2")
        c.add("WeightMultiply", d1, "weight_multiply1", weight_dims=[dense, k])
        c.add("WeightMultiply", d2, "weight_multiply2", weight_dims=[dense, 1])
        second = c.add("Concat", ["reshape2", "weight_multiply1"], "concat1")
    else:
        second = "reshape2"
    deep_in, fm_in = c.branches(second, 2, (slots + dense) * k, "slice3")
    x, i = c.mlp(deep_in, s.units, s.dropout)
    c.add("InnerProduct", x, f"fc{i}", num_output=1)
    c.add("FmOrder2", fm_in, "fmorder2", out_dim=k)
    c.add("ReduceSum", "fmorder2", "reducesum1", axis=1)
    # samples/deepfm concatenates the first-order terms here, after the second-order sum (layer order = the sample's)
    first = c.add("Concat", ["reshape3", "weight_multiply2"], "concat2") if dense else "reshape3"
    c.add("ReduceSum", first, "reducesum2", axis=1)
    c.add("Add", [f"fc{i}", "reducesum1", "reducesum2"], "add")
    c.loss("add")


PRESETS = {"mlp": _mlp, "wdl": _wdl, "dcn": _dcn, "dlrm": _dlrm, "dlrm_mlp": _dlrm_mlp, "deepfm": _deepfm}
