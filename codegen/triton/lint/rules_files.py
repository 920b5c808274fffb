"""The weight files a HugeCTR model is served from (hugectr.md §5, triton.md §5): the dense file
(``<prefix>_dense_<iter>.model``, raw float32) and one sparse folder per embedding table
(``<prefix><i>_sparse_<iter>.model/`` with ``key`` int64 and ``emb_vector`` float32 × vec per key)."""

from __future__ import annotations

import re
from pathlib import Path

from .context import Context
from .findings import WARNING
from ...hugectr.graph_reader import Graph
from .modelconfig import ConfigFile
from .psentry import PsEntry
from .psjson import show
from .params import Params
from .training_side import resolve_named

SPARSE_PARTS = ("key", "emb_vector")
SPARSE_INDEX = re.compile(r"(\d+)_sparse_\d+\.model$")


def check_model_files(ctx: Context, cfg: ConfigFile, params: Params, ps: PsEntry | None, graph: Graph | None) -> None:
    bases = [cfg.repo_root, ctx.root]
    if ps is not None:
        ps_bases = [*bases, ps.file.path.parent]
        if isinstance(ps.raw("dense_file"), str):
            _dense(ctx, cfg, ps, "dense_file", ps.raw("dense_file"), ps_bases)
        sparse = ps.raw("sparse_files")
        if isinstance(sparse, list):
            for i, given in enumerate(sparse):
                if isinstance(given, str):
                    _sparse(ctx, cfg, ps, i, given, ps_bases, graph)
    # Parameters that override ps.json for this model (triton.md §2.2).
    if params.get("dense_file"):
        _dense(ctx, cfg, None, "dense_file", params["dense_file"], bases)
    if params.get("sparse_files"):
        for i, given in enumerate(p.strip() for p in params["sparse_files"].split(",")):
            _sparse(ctx, cfg, None, i, given, bases, graph)


def _add(ctx: Context, cfg: ConfigFile, ps: PsEntry | None, field: str, message: str, fix: str = "", **kw) -> None:
    if ps is not None:
        ps.add(field, message, fix, **kw)
    else:
        ctx.add_cfg(cfg, field, message, fix, param=True, **kw)


def _dense(ctx: Context, cfg: ConfigFile, ps: PsEntry | None, field: str, given: str, bases: list[Path]) -> None:
    path = resolve_named(ctx, field, given, bases, cfg=None if ps else cfg, ps=ps)
    if path is None:
        return
    if not path.is_file():
        _add(ctx, cfg, ps, field, f"{show(given)} is not a file: HugeCTR writes the dense weights as one file "
             "(hugectr.md §5)", "name the <prefix>_dense_<iter>.model file")
    elif path.stat().st_size % 4:
        _add(ctx, cfg, ps, field, f"{show(given)} holds {path.stat().st_size} bytes, not whole float32 values "
             "(hugectr.md §5)", "copy the dense model again from training")


def _sparse(ctx: Context, cfg: ConfigFile, ps: PsEntry | None, i: int, given: str, bases: list[Path],
            graph: Graph | None) -> None:
    field = "sparse_files"
    path = resolve_named(ctx, field, given, bases, cfg=None if ps else cfg, ps=ps)
    if path is None:
        return
    m = SPARSE_INDEX.search(path.name)
    if m and int(m.group(1)) != i:
        _add(ctx, cfg, ps, field, f"entry {i} = {show(given)} is named for table {int(m.group(1))} "
             "(<prefix><i>_sparse_<iter>.model, hugectr.md §5)", "list the sparse models in graph order",
             severity=WARNING, actual=given)
    if not path.is_dir():
        _add(ctx, cfg, ps, field, f"entry {i} = {show(given)} is not a folder: HugeCTR writes each sparse model as a "
             "folder holding key and emb_vector (hugectr.md §5)", "name the <prefix><i>_sparse_<iter>.model folder",
             actual=given)
        return
    missing = [part for part in SPARSE_PARTS if not (path / part).is_file()]
    if missing:
        _add(ctx, cfg, ps, field, f"entry {i} = {show(given)} has no {' or '.join(missing)} (hugectr.md §5)",
             "copy the whole sparse model folder from training", actual=given)
        return
    key_bytes = (path / "key").stat().st_size
    emb_bytes = (path / "emb_vector").stat().st_size
    if key_bytes % 8:
        _add(ctx, cfg, ps, field, f"entry {i} = {show(given)}: key holds {key_bytes} bytes, not whole int64 keys "
             "(hugectr.md §5)", "copy the sparse model again from training", actual=given)
        return
    if graph is None or i >= len(graph.tables):
        return
    table, keys = graph.tables[i], key_bytes // 8
    if emb_bytes != keys * table.vec_size * 4:
        per_key = f"{emb_bytes / (4 * keys):g} floats per key" if keys else f"{emb_bytes} bytes for 0 keys"
        _add(ctx, cfg, ps, field, f"entry {i} = {show(given)}: emb_vector holds {per_key} ({keys} keys), but "
             f"{table.describe()} has embedding_vec_size {table.vec_size}: a file of another table or model "
             "(hugectr.md §5)", "list the sparse models in graph order, from the training run of this graph",
             actual=given)
