"""Key rules of a hugectr model (triton.md §2.2, §5, R6, R15): the key buffers (``cat_feature_num`` covers the keys
of one sample, ``max_nnz`` those of one slot) and one key width everywhere (``embeddingkey_long_type``,
``supportlonglong``, CATCOLUMN, the lock's categorical dtypes)."""

from __future__ import annotations

from dataclasses import dataclass

from ...hugectr.backend import KEY_DTYPE
from .context import Context
from .findings import WARNING
from ...hugectr.graph_reader import Graph
from .modelconfig import ConfigFile
from .params import Params
from .psentry import PsEntry
from .psjson import as_bool, brief, show

LONG_KEY_COLUMN_DTYPES = ("int64", "uint64")


@dataclass(frozen=True)
class KeyEvidence:
    """Whether requests carry several keys in a slot: known from the lock, declared by cat_feature_num > slots,
    or unknown (then values between the one-hot and the graph's bound depend on the data)."""

    kind: str  # "multi", "one_hot" or "unknown"
    reason: str = ""


def key_evidence(params: Params, graph: Graph, ctx: Context) -> KeyEvidence:
    if ctx.lock is not None:
        multi = [c.name for c in ctx.lock.categorical if c.multi_hot]
        if multi:
            return KeyEvidence("multi", f"the features lock marks {', '.join(multi)} multi-hot")
        return KeyEvidence("one_hot", "the features lock has only one-hot columns")
    if params.get("cat_feature_num", 0) > graph.slots:
        return KeyEvidence("multi", f"cat_feature_num {params['cat_feature_num']} > slots {graph.slots} "
                                    "declares rows with several keys in a slot")
    return KeyEvidence("unknown")


def check_key_buffers(ctx: Context, cfg: ConfigFile, params: Params, graph: Graph, ev: KeyEvidence) -> None:
    """cat_feature_num covers the keys of one sample, max_nnz the keys of one slot (triton.md §2.2, §5, R15)."""
    slots, keys = graph.slots, graph.keys_per_sample
    fix = (f"set cat_feature_num to \"{keys}\" (Σ nnz_per_slot; the backend sizes its key buffer as "
           "max_batch_size × cat_feature_num, triton.md §2.2, R15)")
    if "cat_feature_num" in params:
        have, raw = params["cat_feature_num"], params.raw["cat_feature_num"]
        multi = [s for s in graph.sparse if not s.one_hot]
        shape = "; ".join(f"{s.top} is {'declared multi-hot' if not s.one_hot else 'one-hot'} ({s.slot_num} slots, "
                          f"nnz_per_slot {brief(list(s.nnz_per_slot))}, is_fixed_length "
                          f"{str(s.is_fixed_length).lower()})" for s in (multi or graph.sparse))
        if have <= 0:
            ctx.add_cfg(cfg, "cat_feature_num", f"{show(raw)}: the backend expects at least one categorical "
                    "feature (triton.md §2.2)", fix, param=True, actual=raw, expected=str(keys))
        elif have < slots:
            ctx.add_cfg(cfg, "cat_feature_num", f"{show(raw)} is below the {slots} slots of the graph: every slot "
                    f"sends at least one key per sample ({shape})", fix, param=True, actual=raw,
                    expected=str(keys))
        elif have < keys and ev.kind == "multi":
            ctx.add_cfg(cfg, "cat_feature_num", f"{show(raw)} is below the keys per sample: {shape}: up to "
                    f"{keys} keys per sample, and {ev.reason}", fix, param=True, actual=raw, expected=str(keys))
        elif have < keys and ev.kind == "unknown":
            ctx.add_cfg(cfg, "cat_feature_num", f"{show(raw)} covers one key per slot, but {shape}: up to {keys} "
                    "keys per sample; enough only if requests are one-hot (depends on the data)", fix,
                    param=True, severity=WARNING, actual=raw, expected=str(keys))
    if "max_nnz" in params and params["max_nnz"] < graph.max_nnz and ev.kind != "one_hot":
        widest = max(graph.sparse, key=lambda s: s.max_nnz)
        ctx.add_cfg(cfg, "max_nnz", f"{show(params.raw['max_nnz'])} < nnz_per_slot {widest.max_nnz} of "
                f"{widest.top}: one slot may carry that many keys (triton.md §5, R15)",
                f"set max_nnz to \"{graph.max_nnz}\"", param=True, actual=params.raw["max_nnz"],
                expected=str(graph.max_nnz))
    # A buffer hint: Σ over the tables (the backend's default) or the widest table's (lint fixtures README).
    if "embedding_vector_size" in params and params["embedding_vector_size"] not in (sum(graph.vec_sizes),
                                                                                     max(graph.vec_sizes, default=0)):
        ctx.add_cfg(cfg, "embedding_vector_size", f"{show(params.raw['embedding_vector_size'])} != Σ "
                f"embedding_vec_size {sum(graph.vec_sizes)} of {graph.describe_tables()} {graph.vec_sizes} "
                "(triton.md §2.2)", f"set embedding_vector_size to \"{sum(graph.vec_sizes)}\"", param=True,
                actual=params.raw["embedding_vector_size"], expected=str(sum(graph.vec_sizes)))


def check_key_width(ctx: Context, cfg: ConfigFile, params: Params, ps: PsEntry | None, catcol: str | None) -> None:
    """One key width everywhere: embeddingkey_long_type, supportlonglong, CATCOLUMN, lock dtypes (§5, R6)."""
    param = params.get("embeddingkey_long_type")
    sll = ps.value("supportlonglong", as_bool, top_level=True) if ps else None
    if param is not None:
        if catcol is not None and KEY_DTYPE[param] != catcol:
            ctx.add_cfg(cfg, "embeddingkey_long_type", f"{show(params.raw['embeddingkey_long_type'])} means "
                    f"{KEY_DTYPE[param]} keys, but CATCOLUMN is {catcol} (triton.md §5, R6)",
                    "use one key width everywhere (int64 keys: \"true\" and TYPE_INT64)", param=True,
                    actual=params.raw["embeddingkey_long_type"], expected=str(catcol == "TYPE_INT64").lower())
        if sll is not None and sll != param:
            ps.add("supportlonglong", f"{str(sll).lower()} but embeddingkey_long_type of "
                   f"{ctx.show_path(cfg.path)} is {show(params.raw['embeddingkey_long_type'])} (triton.md §5, R6)",
                   "use one key width everywhere", top_level=True, actual=ps.raw("supportlonglong", top_level=True),
                   expected=param)
        effective, where = param, ("config", "embeddingkey_long_type")
    elif sll is not None:
        if catcol is not None and KEY_DTYPE[sll] != catcol:
            ps.add("supportlonglong", f"{str(sll).lower()} means {KEY_DTYPE[sll]} keys, but CATCOLUMN of "
                   f"{ctx.show_path(cfg.path)} is {catcol} (triton.md §5, R6)", "use one key width everywhere",
                   top_level=True, actual=ps.raw("supportlonglong", top_level=True), expected=catcol == "TYPE_INT64")
        effective, where = sll, ("ps", "supportlonglong")
    else:
        return
    if ctx.key_long is not None:
        if ctx.key_long != effective:
            message = (f"{str(effective).lower()} ({'64' if effective else '32'}-bit keys), but the spec trains "
                       f"with i64_input_key={ctx.key_long} (its Norm/Raw files hold {'64' if ctx.key_long else '32'}"
                       "-bit keys)")
            fix = f"use {'64' if ctx.key_long else '32'}-bit keys, as training did (i64_input_key={ctx.key_long})"
            if where[0] == "config":
                ctx.add_cfg(cfg, where[1], message, fix, param=True, expected=str(ctx.key_long).lower())
            else:
                ps.add(where[1], message, fix, top_level=True, expected=ctx.key_long)
    elif ctx.lock is not None and ctx.lock.categorical:
        lock_long = any(c.dtype in LONG_KEY_COLUMN_DTYPES for c in ctx.lock.categorical)
        if lock_long != effective:
            dtypes = sorted({c.dtype for c in ctx.lock.categorical})
            message = (f"{str(effective).lower()} ({'64' if effective else '32'}-bit keys), but the features lock "
                       f"{ctx.show_path(ctx.lock_path)} has categorical dtypes {dtypes} (triton.md §5, R5, R6)")
            fix = f"use {'64' if lock_long else '32'}-bit keys, as training did (i64_input_key={lock_long})"
            if where[0] == "config":
                ctx.add_cfg(cfg, where[1], message, fix, param=True, expected=str(lock_long).lower())
            else:
                ps.add(where[1], message, fix, top_level=True, expected=lock_long)
