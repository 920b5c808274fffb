"""The sparse part of the graph: the spec's sparse inputs over the feature table's categorical columns (slots,
nnz per slot, multi-hot) and their SparseEmbedding calls (slot_size_array, workspace, max_vocabulary_size_global by
the release's formula), as functions over the build context (graph/context.py)."""

from __future__ import annotations

from ..features import Column
from ..hugectr import api as A
from ..hugectr import versions as V
from ..hugectr.versions import Profile
from .context import BuildContext, extra_args
from .ir import Embedding, Optimizer, SparseInput

EMBEDDING_FIELDS = ("embedding_type", "workspace_size_per_gpu_in_mb", "embedding_vec_size", "combiner",
                    "sparse_embedding_name", "bottom_name", "slot_size_array", "optimizer")


def sparse_inputs(ctx: BuildContext, cats: tuple[Column, ...]) -> list[SparseInput]:
    out: list[SparseInput] = []
    specs = ctx.spec.input.sparse
    pos = 0
    names = [c.name for c in cats]
    for i, si in enumerate(specs):
        if si.columns is None:
            # Omitted on the last input: the slots the inputs before it left (all of them for a single input).
            if i != len(specs) - 1:
                ctx.fail(("input", "sparse", i, "columns"),
                         "only the last sparse input may omit its columns (it takes the remaining slots)",
                         fix=f"split {names} into contiguous runs")
                continue
            cols = list(cats[pos:])
        else:
            cols = []
            for j, n in enumerate(si.columns):
                col = next((c for c in cats if c.name == n), None)
                if col is None:
                    ctx.fail(("input", "sparse", i, "columns", j), f"{n!r} is not a categorical column",
                             fix=f"use one of {names}")
                else:
                    cols.append(col)
        got = [c.name for c in cols]
        want = names[pos:pos + len(cols)]
        if got != want and cols:
            ctx.fail(("input", "sparse", i, "columns"),
                     f"{got} is not the next run of slots {want}: HugeCTR assigns slots to sparse inputs in the "
                     "data's column order", fix=f"reorder to follow the slot order {names}")
        pos += len(cols)
        nnz = _nnz(ctx, i, si.nnz_per_slot, cols)
        out.append(SparseInput(
            name=si.name, columns=tuple(c.name for c in cols),
            cardinalities=tuple(int(c.cardinality or 0) for c in cols), nnz_per_slot=nnz,
            is_fixed_length=si.is_fixed_length,
            nnz_arg=nnz if isinstance(si.nnz_per_slot, list) or len(set(nnz)) > 1 else nnz[0],
            multi_hot=tuple(c.multi_hot for c in cols)))
    if pos != len(cats) and not ctx.problems:
        ctx.fail(("input", "sparse"), f"the sparse inputs cover {pos} of {len(cats)} categorical columns",
                 fix=f"assign every column of {names} to a sparse input")
    if len({s.name for s in out}) != len(out):
        ctx.fail(("input", "sparse"), "sparse input names must be unique")
    return out


def _nnz(ctx: BuildContext, i: int, given, cols: list[Column]) -> tuple[int, ...]:
    if isinstance(given, list):
        if len(given) != len(cols):
            ctx.fail(("input", "sparse", i, "nnz_per_slot"),
                     f'{len(given)} values for {len(cols)} slots (HugeCTR: "slot num != nnz_per_slot.size().")',
                     fix="give one value per column, or a single int")
            return tuple(1 for _ in cols)
        values = list(given)
    elif isinstance(given, int):
        values = [given] * len(cols)
    else:
        values = []
        for c in cols:
            if c.multi_hot and c.max_len is None:
                ctx.fail(("input", "sparse", i, "nnz_per_slot"),
                         f"column {c.name!r} is multi-hot and its schema records no maximum length",
                         fix="set nnz_per_slot to the longest list the data holds")
            values.append(c.max_len or 1 if c.multi_hot else 1)
    for c, v in zip(cols, values):
        if c.multi_hot and c.max_len is not None and v < c.max_len:
            ctx.fail(("input", "sparse", i, "nnz_per_slot"),
                     f"{v} is less than the longest {c.name!r} list ({c.max_len}) in the workflow schema",
                     fix=f"use at least {c.max_len}")
    return tuple(values)


def sparse_embeddings(ctx: BuildContext, sparse: list[SparseInput], optimizer: Optimizer,
                      gpu_count: int) -> list[Embedding]:
    p = ctx.profile
    by_name = {s.name: s for s in sparse}
    out = []
    for i, e in enumerate(ctx.spec.embeddings):
        loc = ("embeddings", i)
        si = by_name.get(e.input)
        if si is None:
            ctx.fail((*loc, "input"), f'{e.input!r} is not a sparse input (HugeCTR: "Cannot find bottom")',
                     fix=f"use one of {sorted(by_name)}")
            continue
        ws = e.workspace_size_per_gpu_in_mb
        if ws is None and not p.has("workspace_optional"):
            ctx.fail((*loc, "workspace_size_per_gpu_in_mb"), f"required by HugeCTR {p.name}",
                     fix="set it (MB of embedding table per GPU)")
        if (ws is None or ws == 0) and not e.slot_size_array:
            if p.has("workspace_optional"):
                ctx.fail((*loc, "workspace_size_per_gpu_in_mb"),
                         '"need workspace_size_per_gpu_in_mb or slot_size_array"',
                         fix="set workspace_size_per_gpu_in_mb, or slot_size_array: true")
        if e.embedding_type == "LocalizedSlotSparseEmbeddingOneHot":
            if ctx.spec.data.format not in ("raw", "raw_async") or not e.slot_size_array:
                ctx.fail((*loc, "embedding_type"),
                         "LocalizedSlotSparseEmbeddingOneHot needs the Raw reader and slot_size_array",
                         fix="use LocalizedSlotSparseEmbeddingHash for Parquet data")
        if p.has("raw_async_with_hybrid") and \
                (e.embedding_type == "HybridSparseEmbedding") != (ctx.spec.data.format == "raw_async"):
            ctx.fail((*loc, "embedding_type"), '"Raw async reader and hybrid embedding must come together"',
                     fix="use data.format: raw_async with HybridSparseEmbedding, or neither")
        vocab = 0
        if ws:
            vocab = V.max_vocabulary_size_per_gpu(p, ws, e.embedding_vec_size, optimizer.type,
                                                  optimizer.update_type) * gpu_count
        out.append(Embedding(
            name=e.name, bottom=e.input, embedding_type=e.embedding_type, vec_size=e.embedding_vec_size,
            combiner=e.combiner, workspace_mb=ws, workspace_in_effect=_workspace(ws, p),
            slot_size_array=si.cardinalities if e.slot_size_array else None,
            explicit_optimizer=e.optimizer == "model", optimizer=optimizer,
            max_vocabulary_size_global=vocab, slot_num=si.slot_num,
            extra=extra_args(ctx, "SparseEmbedding", (*loc, "args"), e.args, EMBEDDING_FIELDS), init=e.init))
    if len({e.name for e in out}) != len(out):
        ctx.fail(("embeddings",), "embedding names must be unique")
    return out


def _workspace(given: int | None, p: Profile) -> int:
    """workspace_size_per_gpu_in_mb in effect: the given one, else the release's default (a release that requires it
    has it given: sparse_embeddings refuses a spec without it there, and 0 stands in until the build stops)."""
    if given is not None:
        return given
    return int(A.default("SparseEmbedding", "workspace_size_per_gpu_in_mb", p.name)) if p.has("workspace_optional") \
        else 0
