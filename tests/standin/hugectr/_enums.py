"""pybind11 enums of HugeCTR with the members each release has (docs/hugectr.md §1)."""

from __future__ import annotations

from ._release import ALL, NAME, Span


class Member:
    __slots__ = ("enum", "name", "value")

    def __init__(self, enum: str, name: str, value: int):
        self.enum, self.name, self.value = enum, name, value

    def __repr__(self) -> str:
        return f"<{self.enum}.{self.name}: {self.value}>"

    __str__ = lambda self: f"{self.enum}.{self.name}"  # noqa: E731

    def _standin_repr(self) -> str:
        return f"{self.enum}.{self.name}"

    def __int__(self) -> int:
        return self.value

    def __hash__(self) -> int:
        return hash((self.enum, self.name))


class Enum:
    """An enum type: members of the target release are attributes; others raise AttributeError saying why."""

    def __init__(self, name: str, members: dict[str, Span]):
        self._name = name
        self._spans = members
        self.__members__ = {}
        for i, (m, span) in enumerate(members.items()):
            if span.covers():
                self.__members__[m] = Member(name, m, i)
                setattr(self, m, self.__members__[m])

    def __getattr__(self, item: str):
        if item.startswith("__"):
            raise AttributeError(item)
        span = self.__dict__.get("_spans", {}).get(item)
        if span is not None:
            raise AttributeError(f"hugectr.{self._name}.{item} does not exist in HugeCTR {NAME} "
                                 f"(it exists in {span.describe()})")
        raise AttributeError(f"hugectr.{self._name} has no member {item!r} in HugeCTR {NAME}; members: "
                             f"{', '.join(self.__members__)}")

    def __repr__(self) -> str:
        return f"<enum hugectr.{self._name}>"

    def is_member(self, v) -> bool:
        return isinstance(v, Member) and v.enum == self._name


def _all(names: str, span: Span = ALL) -> dict[str, Span]:
    return {n: span for n in names.split()}


Layer_t = Enum("Layer_t", {
    **_all("BatchNorm BinaryCrossEntropyLoss Reshape Concat CrossEntropyLoss Dropout ElementwiseMultiply ELU "
           "InnerProduct"),
    "FusedInnerProduct": Span((3, 2), (23, 12)),
    **_all("Interaction MultiCrossEntropyLoss ReLU ReLUHalf Sigmoid Slice WeightMultiply FmOrder2 Add ReduceSum "
           "Softmax Gather PReLU_Dice GRU MatrixMultiply Scale FusedReshapeConcat FusedReshapeConcatGeneral Sub "
           "ReduceMean MultiCross Cast"),
    "DotProduct": Span((3, 2), (3, 5)),
    "LayerNorm": Span((3, 7)), "MultiHeadAttention": Span((3, 7)), "SequenceMask": Span((3, 9)),
    "MLP": Span((4, 2)), "Select": Span((23, 8)),
})
Embedding_t = Enum("Embedding_t", _all("DistributedSlotSparseEmbeddingHash LocalizedSlotSparseEmbeddingHash "
                                       "LocalizedSlotSparseEmbeddingOneHot HybridSparseEmbedding"))
Optimizer_t = Enum("Optimizer_t", {**_all("Adam AdaGrad MomentumSGD Nesterov SGD"),
                                   "Ftrl": Span((4, 3)), "RMSProp": Span((4, 3))})
Update_t = Enum("Update_t", _all("Local Global LazyGlobal"))
DataReaderType_t = Enum("DataReaderType_t", _all("Norm Raw Parquet RawAsync"))
Check_t = Enum("Check_t", _all("Sum Non"))
SourceType_t = Enum("SourceType_t", _all("FileList Mmap"))
Initializer_t = Enum("Initializer_t", _all("Default Uniform XavierNorm XavierUniform Zero"))
Regularizer_t = Enum("Regularizer_t", _all("L1 L2"))
Activation_t = Enum("Activation_t", _all("Relu Non"))
FcPosition_t = Enum("FcPosition_t", _all("Non Head Body Tail Isolated"))
MetricsType = Enum("MetricsType", _all("AUC AverageLoss HitRate NDCG SMAPE"))
LrPolicy_t = Enum("LrPolicy_t", _all("fixed"))
DeviceLayout = Enum("DeviceLayout", _all("LocalFirst NodeFirst"))
AllReduceAlgo = Enum("AllReduceAlgo", _all("OneShot NCCL"))
Alignment_t = Enum("Alignment_t", _all("Auto Non"))
CommunicationType = Enum("CommunicationType", _all("IB_NVLink_Hier IB_NVLink NVLink_SingleNode"))
HybridEmbeddingType = Enum("HybridEmbeddingType", _all("Distributed Local"))
Tensor_t = Enum("Tensor_t", _all("Train Evaluate"))
# Embedding training cache (v3.3 - v23.09, hugectr.md §1.8)
TrainPSType_t = Enum("TrainPSType_t", _all("Staged Cached", Span((3, 3), (23, 12))))
GroupLayer_t = Enum("GroupLayer_t", _all("GroupFusedInnerProduct", Span((3, 3))))
# Embedding collection (23.04+, embedding_collection_wrapper.hpp)
CommunicationStrategy = Enum("CommunicationStrategy", _all("Uniform Hierarchical", Span((23, 4))))

ENUMS = {e._name: e for e in (
    Layer_t, Embedding_t, Optimizer_t, Update_t, DataReaderType_t, Check_t, SourceType_t, Initializer_t,
    Regularizer_t, Activation_t, FcPosition_t, MetricsType, LrPolicy_t, DeviceLayout, AllReduceAlgo, Alignment_t,
    CommunicationType, HybridEmbeddingType, Tensor_t, TrainPSType_t, GroupLayer_t, CommunicationStrategy)}
# Enums that a release lacks entirely (every member outside the release): the module attribute is absent.
ABSENT = {name for name, e in ENUMS.items() if not e.__members__}
