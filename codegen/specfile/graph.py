"""The model graph section of a spec: a preset (a family of HugeCTR's samples, written by graph/presets*.py) or an
explicit list of DenseLayers, told apart by ``preset``."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .fields import Ident, PosInt, Prob, Strict, TensorName


class MLPPreset(Strict):
    preset: Literal["mlp"]
    units: list[PosInt] = Field(default_factory=lambda: [128, 128], description="hidden layer widths")
    dropout: Prob | None = Field(None, description="Dropout rate after each hidden ReLU (none by default)")
    batch_norm: bool = Field(False, description="a BatchNorm after each hidden ReLU, before its Dropout (NVTabular's "
                                                "PyTorch Model, seed 001), with torch's BatchNorm1d defaults: factor "
                                                "(momentum) 0.1, eps 1e-5")


class WDLPreset(Strict):
    """Wide & Deep (HugeCTR samples/wdl): wide embedding (vec 1) summed, deep embedding + dense through an MLP."""

    preset: Literal["wdl"]
    wide: Ident = Field(..., description="name of the wide embedding (embedding_vec_size 1)")
    deep: Ident = Field(..., description="name of the deep embedding")
    units: list[PosInt] = Field(default_factory=lambda: [1024, 1024])
    dropout: Prob | None = 0.5


class DCNPreset(Strict):
    """Deep & Cross (HugeCTR samples/dcn): MultiCross beside an MLP over [embeddings, dense]."""

    preset: Literal["dcn"]
    cross_layers: PosInt = 6
    projection_dim: PosInt | None = Field(None, description="DCNv2 low-rank projection (HugeCTR >= 4.3)")
    units: list[PosInt] = Field(default_factory=lambda: [1024, 1024])
    dropout: Prob | None = 0.5


class DLRMPreset(Strict):
    """DLRM (HugeCTR samples/dlrm): bottom MLP on dense, Interaction with the embeddings, top MLP."""

    preset: Literal["dlrm"]
    bottom_units: list[PosInt] = Field(default_factory=lambda: [512, 256, 128],
                                       description="bottom MLP; the last width must equal embedding_vec_size")
    top_units: list[PosInt] = Field(default_factory=lambda: [1024, 1024, 512, 256])


class DeepFMPreset(Strict):
    """DeepFM (HugeCTR samples/deepfm, seed 004): embedding of vec k+1 = k factors + a first-order weight."""

    preset: Literal["deepfm"]
    units: list[PosInt] = Field(default_factory=lambda: [400, 400, 400])
    dropout: Prob | None = 0.5


class DLRMMLPPreset(DLRMPreset):
    """DLRM as samples/dlrm/dgx_a100_mlp.py builds it (HugeCTR 4.2 and later): Layer_t.MLP for both MLPs."""

    preset: Literal["dlrm_mlp"]  # type: ignore[assignment]


class NCFPreset(Strict):
    """NCF (HugeCTR samples/ncf/ncf.py): an MLP over one embedding of two slots, user and item."""

    preset: Literal["ncf"]
    units: list[PosInt] = Field(default_factory=lambda: [256, 256, 128, 64])
    dropout: Prob | None = 0.5


class GMFPreset(Strict):
    """GMF (HugeCTR samples/ncf/gmf.py): user x item vectors, one FC."""

    preset: Literal["gmf"]


class NeuMFPreset(NCFPreset):
    """NeuMF (HugeCTR samples/ncf/neumf.py): one embedding whose vectors hold an MLP part and a GMF part."""

    preset: Literal["neumf"]  # type: ignore[assignment]
    gmf_vec_size: PosInt = Field(8, description="numbers of each vector that feed GMF (the rest feed the MLP)")


class DINPreset(Strict):
    """DIN (HugeCTR samples/din/din_parquet.py): attention of the target item over the user's history."""

    preset: Literal["din"]
    user: Ident = Field("sparse_embedding_user", description="embedding of the user slot(s)")
    items: Ident = Field("sparse_embedding_good", description="item embedding: history slots, then the target")
    categories: Ident = Field("sparse_embedding_cate", description="category embedding, slots as items'")
    attention_units: PosInt = 40
    units: list[PosInt] = Field(default_factory=lambda: [200, 80], description="FC + PReLU_Dice widths")


class BSTPreset(Strict):
    """BST (HugeCTR samples/bst, 4.3 - 23.06): a transformer block over the history, masked by its length."""

    preset: Literal["bst"]
    user: Ident = "sparse_embedding_user"
    items: Ident = Field("sparse_embedding_good", description="item history embedding")
    target_item: Ident = "sparse_embedding_item_good"
    categories: Ident = Field("sparse_embedding_cate", description="category history embedding")
    target_category: Ident = "sparse_embedding_item_cate"
    heads: PosInt = 4
    ffn_units: PosInt = 128
    pooling: Literal["avg", "concat"] = Field("avg", description="bst_avg_pooling.py or bst_concat.py")
    units: list[PosInt] = Field(default_factory=lambda: [256, 128, 64], description="FC + PReLU_Dice widths")


class MMoEPreset(Strict):
    """MMoE (HugeCTR samples/mmoe/mmoe_parquet.py): gated experts, one tower and loss per label."""

    preset: Literal["mmoe"]
    experts: Annotated[int, Field(ge=2, le=64, strict=True)] = 3
    expert_units: list[PosInt] = Field(default_factory=lambda: [256, 128])
    tower_units: list[PosInt] = Field(default_factory=lambda: [64])
    dropout: Prob | None = 0.5


class SharedBottomPreset(Strict):
    """Shared-bottom (HugeCTR samples/mmoe/shared_bottom.py): one shared MLP, one tower and loss per label."""

    preset: Literal["shared_bottom"]
    units: list[PosInt] = Field(default_factory=lambda: [128, 256])
    tower_units: list[PosInt] = Field(default_factory=lambda: [64])
    dropout: Prob | None = 0.5


class LayerSpec(BaseModel):
    """One explicit HugeCTR DenseLayer; parameters are DenseLayer's argument names."""

    model_config = ConfigDict(extra="allow", frozen=True, protected_namespaces=())
    type: Ident
    bottom: TensorName | list[TensorName]
    top: TensorName | list[TensorName]


class ExplicitGraph(Strict):
    preset: Literal["layers"]
    layers: list[LayerSpec] = Field(..., description="at least one, except in a reader_check spec")


ModelSpec = Annotated[Union[MLPPreset, WDLPreset, DCNPreset, DLRMPreset, DeepFMPreset, DLRMMLPPreset, NCFPreset,
                            GMFPreset, NeuMFPreset, DINPreset, BSTPreset, MMoEPreset, SharedBottomPreset,
                            ExplicitGraph],
                     Field(discriminator="preset")]
