"""The ``parameters`` of a hugectr model's config.pbtxt (triton.md §2.2): every value is a ``string_value``; this
table says how to read each one and which ps.json key the backend uses when it is absent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...errors import Located
from .context import Context
from .modelconfig import ConfigFile
from .psjson import as_bool, as_float, as_int


@dataclass(frozen=True)
class Param:
    """A config.pbtxt parameter (triton.md §2.2): how to read its string, and the ps.json key used when absent."""

    key: str
    read: Callable[[str], Any]
    ps_key: str | None = None


PARAMS = (
    Param("config", str, "network_file"),
    Param("slots", as_int, "slot_num"),
    Param("des_feature_num", as_int, "maxnum_des_feature_per_sample"),
    Param("cat_feature_num", as_int),          # absent: Σ maxnum_catfeature_query_per_table_per_sample
    Param("max_nnz", as_int),
    Param("embedding_vector_size", as_int),    # absent: Σ embedding_vecsize_per_table
    Param("label_dim", as_int, "label_dim"),
    Param("embeddingkey_long_type", as_bool, "supportlonglong"),
    Param("gpucache", as_bool, "gpucache"),
    Param("gpucacheper", as_float, "gpucacheper"),
    Param("hit_rate_threshold", as_float, "hit_rate_threshold"),
    Param("dense_file", str, "dense_file"),
    Param("sparse_files", str, "sparse_files"),
    Param("refresh_interval", as_int),
    Param("refresh_delay", as_int),
    Param("freeze_sparse", as_bool),
    Param("mixed_precision", as_bool),
)


class Params(dict):
    """Typed config.pbtxt parameters: key -> value (absent keys and unreadable strings are missing); ``raw`` holds
    the strings as written, for messages."""

    def __init__(self) -> None:
        super().__init__()
        self.raw: dict[str, str] = {}


def read_params(ctx: Context, cfg: ConfigFile) -> Params:
    params = Params()
    for p in PARAMS:
        raw = cfg.string_param(p.key)
        if raw is None:
            continue
        params.raw[p.key] = raw
        try:
            params[p.key] = p.read(raw)
        except Located as exc:
            ctx.add_cfg(cfg, p.key, f"{exc} (triton.md §2.2)", "every parameter is a string_value: a decimal string, "
                    "or \"true\"/\"false\" (triton.md §2.2)", param=True, actual=raw)
    return params
