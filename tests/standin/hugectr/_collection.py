"""The embedding collection API of 4.2+ (EmbeddingTableConfig, EmbeddingCollectionConfig, CommunicationStrategy).

Signatures: HugeCTR/include/pybind/embedding_collection_wrapper.hpp of the release line (4.3: output_layout and
indices_only; 23.04+: use_exclusive_keys and comm_strategy). Lookup outputs: (batch, 1, ev_size), or
(batch, 1, max_hotness * ev_size) with the concat combiner (allocate_ebc_output_helper_for_feature_major).
The 3.7 - 4.1 EmbeddingPlanner is not imitated: no release the stand-in imitates has it.
"""

from __future__ import annotations

from ._api import HugeCTRError, _call, _Obj
from ._enums import CommunicationStrategy
from ._record import record
from ._release import RELEASE, Span
from ._sig import P, bind

SPAN = Span((4, 2))
COMBINERS = ("sum", "average", "concat")

TABLE = [P("name", kind="str"), P("max_vocabulary_size", kind="int"), P("ev_size", kind="int"),
         P("opt_params_or_empty", None, "any"), P("init_param_or_empty", None, "any")]
CONFIG = [P("output_layout", "feature_major", "str", Span((4, 3), (23, 4))),
          P("indices_only", False, "bool", Span((4, 3), (23, 4))),
          P("use_exclusive_keys", False, "bool", Span((23, 4))),
          P("comm_strategy", getattr(CommunicationStrategy, "Uniform", None), "CommunicationStrategy",
            Span((23, 4)))]
LOOKUP = [P("table_config", kind="obj:EmbeddingTableConfig"), P("bottom_name", kind="str"),
          P("top_name", kind="str"), P("combiner", kind="str")]
# 23.04+: the list overload (one batch-major output named top_name)
GROUPED = [P("table_config", kind="list"), P("bottom_name", kind="list[str]"), P("top_name", kind="str"),
           P("combiner", kind="list[str]")]
SHARD = [P("shard_matrix", kind="list"), P("shard_strategy", kind="list")]


class EmbeddingTableConfig(_Obj):
    _kind = "EmbeddingTableConfig"

    def __init__(self, *args, **kwargs):
        b = _call("hugectr.EmbeddingTableConfig", TABLE, args, kwargs)
        if b["ev_size"] <= 0:
            raise HugeCTRError(f"ev_size({b['ev_size']}) must be positive")
        super().__init__(b)


class EmbeddingCollectionConfig(_Obj):
    _kind = "EmbeddingCollectionConfig"

    def __init__(self, *args, **kwargs):
        b = _call("hugectr.EmbeddingCollectionConfig", CONFIG, args, kwargs)
        if b.get("output_layout", "feature_major") not in ("feature_major", "batch_major"):
            raise HugeCTRError(f"output_layout {b['output_layout']!r} is not feature_major or batch_major")
        super().__init__(b)
        self.lookups: list[dict] = []
        self.tables: dict[str, EmbeddingTableConfig] = {}
        self.sharded = False
        self.grouped: str | None = None   # the batch-major output's name (grouped lookup)

    def embedding_lookup(self, *args, **kwargs) -> None:
        record("EmbeddingCollectionConfig.embedding_lookup", args, kwargs)
        first = args[0] if args else kwargs.get("table_config")
        if isinstance(first, (list, tuple)) and RELEASE >= (23, 4):
            b = bind("EmbeddingCollectionConfig.embedding_lookup", GROUPED, args, kwargs)
            if self.lookups:
                raise HugeCTRError("empty lookup params required")
            if not len(b["table_config"]) == len(b["bottom_name"]) == len(b["combiner"]):
                raise HugeCTRError("table_config, bottom_name and combiner lists differ in length")
            self.grouped = b["top_name"]
            for i, (t, bottom, combiner) in enumerate(zip(b["table_config"], b["bottom_name"], b["combiner"])):
                self._lookup({"table_config": t, "bottom_name": bottom, "top_name": f"{b['top_name']}{i}",
                              "combiner": combiner})
            return
        self._lookup(bind("EmbeddingCollectionConfig.embedding_lookup", LOOKUP, args, kwargs))

    def _lookup(self, b: dict) -> None:
        if type(b["table_config"]).__name__ != "EmbeddingTableConfig":
            raise TypeError(f"embedding_lookup(): table_config must be a hugectr.EmbeddingTableConfig, got "
                            f"{b['table_config']!r}")
        if b["combiner"] not in COMBINERS:
            raise HugeCTRError(f"combiner {b['combiner']!r} is not one of {', '.join(COMBINERS)}")
        t = b["table_config"]
        if t.name in self.tables and self.tables[t.name].__dict__ != t.__dict__ | {"_id": self.tables[t.name]._id}:
            raise HugeCTRError(f"table {t.name!r} is configured twice with different arguments")
        self.tables.setdefault(t.name, t)
        self.lookups.append(b)

    def shard(self, *args, **kwargs) -> None:
        record("EmbeddingCollectionConfig.shard", args, kwargs)
        b = bind("EmbeddingCollectionConfig.shard", SHARD, args, kwargs)
        for row in b["shard_matrix"]:
            for name in row:
                if name not in self.tables:
                    raise HugeCTRError(f"shard_matrix names table {name!r}, which no lookup uses")
        self.sharded = True
