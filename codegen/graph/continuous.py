"""The spec's ``continuous_training:`` section -> :class:`ContinuousTraining`, with the checks HugeCTR makes when the
model is constructed with an embedding cache (hugectr.md §1.8, §4.1), reported before anything is generated.

Which cache a release has is a row of ``versions.CONTINUOUS``: CreateMOS (model oversubscriber, up to 3.2)
takes one parameter-server kind for all tables (``use_host_memory_ps``); CreateETC (embedding training cache,
3.3 up to 23.12) takes one ``TrainPSType_t`` per table. The table-count and local-path rules are those of
``ParameterServerManager`` (NVIDIA-Merlin/HugeCTR
``HugeCTR/src/embedding_training_cache/parameter_server_manager.cpp``): "Must specify the PS type for each embedding
table", one sparse model file per table, and with a Cached table "Num of local_paths (N) != Num of MPI ranks (M)".
"""

from __future__ import annotations

from collections.abc import Sequence

from ..hugectr import versions as V
from ..specfile.model import ContinuousTrainingSpec, HMemCacheSpec, LowLevelSpec
from .context import BuildContext
from .ir import ContinuousTraining, DataPass

MOS_KINDS = ("host_memory", "ssd")
ETC_KINDS = {"staged": "Staged", "cached": "Cached"}
LOC = ("continuous_training",)

EPOCH_MODE = '"The embedding training cache can only be used under epoch mode, i.e., repeat_dataset is set False"'


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _loc(*parts) -> tuple:
    return (*LOC, *parts)


def build_continuous(ctx: BuildContext, n_embeddings: int, nodes: int) -> ContinuousTraining | None:
    """None when the spec has no continuous_training section; problems go to ``ctx.fail``."""
    spec = ctx.spec
    ct = spec.continuous_training
    if ct is None:
        return None
    p = ctx.profile
    if not V.CONTINUOUS_ANY.covers(p.release):
        ctx.fail(LOC, f"continuous training (CreateMOS / CreateETC) is not in HugeCTR {p.name}; it exists in "
                      f"{V.CONTINUOUS_ANY.describe()}", fix="target one of those releases or remove the section")
        return None
    cache = "mos" if p.has_api("CreateMOS") else "etc"
    launch = [t for t in spec.targets if t in ("task", "vertex", "cluster")]
    if launch:
        ctx.fail(("targets",), f"{launch} run task.py, one fit without the incremental passes of continuous_training",
                 fix="keep targets: [hugectr] for continuous training (model.py and model_low_level.py)")
    # ---- epoch mode (hugectr.md §4.1) ---------------------------------------------------------------------------
    if spec.solver.repeat_dataset:
        ctx.fail(("solver", "repeat_dataset"), f"continuous training needs epoch mode: {EPOCH_MODE}",
                 fix="set solver.repeat_dataset: false and training.num_epochs")

    kinds = [ct.ps] * (1 if cache == "mos" else n_embeddings) if isinstance(ct.ps, str) else list(ct.ps)
    ps_types = _ps_types(ctx, cache, kinds, n_embeddings)
    _check_sparse_models(ctx, ct, n_embeddings)
    local_paths, hmem = _cache(ctx, ct, cache, kinds, nodes)
    if ct.dense_model is not None and ct.train_from_scratch:
        ctx.fail(_loc("dense_model"), "a dense model is loaded only when continuing from existing models",
                 fix="set train_from_scratch: false, or remove dense_model")
    passes = _passes(ctx, ct)
    low = _low_level(ctx, ct, n_embeddings)

    t = spec.training
    return ContinuousTraining(
        cache=cache, ps_types=tuple(ps_types), sparse_models=tuple(ct.sparse_models),
        train_from_scratch=ct.train_from_scratch, dense_model=ct.dense_model, local_paths=tuple(local_paths),
        hmem_cache=hmem, passes=tuple(passes), save_prefix=ct.save_prefix, incremental_model=ct.incremental_model,
        low_level=ct.low_level is not False, first_batch_flag=p.has_api("train_is_first_batch"),
        num_epochs=t.num_epochs or 0, display=t.display, eval_interval=t.eval_interval,
        max_eval_batches=spec.solver.max_eval_batches,
        low_sparse_models=tuple(low.sparse_models or ()) if low else (),
        low_eval_source=low.eval_source if low else None, low_save_prefix=low.save_prefix if low else None)


def _ps_types(ctx: BuildContext, cache: str, kinds: Sequence[str], n_embeddings: int) -> list[str]:
    """The parameter servers asked for, as the release's cache names them ([] after a problem)."""
    p = ctx.profile
    ps_types: list[str] = []
    if cache == "mos":
        wrong = sorted({k for k in kinds if k not in MOS_KINDS})
        if wrong:
            ctx.fail(_loc("ps"), f"{wrong} are CreateETC parameter servers ({V.CONTINUOUS['CreateETC'].describe()}); "
                                 f"HugeCTR {p.name} has CreateMOS ({V.CONTINUOUS['CreateMOS'].describe()}), "
                                 "which takes host_memory or ssd",
                     fix="use ps: host_memory (or ssd), or target HugeCTR 3.3 or later")
        elif len(set(kinds)) > 1:
            ctx.fail(_loc("ps"), f"CreateMOS takes one parameter server for all tables (use_host_memory_ps), "
                                 f"got {kinds}", fix="use a single kind: host_memory or ssd")
        else:
            ps_types = [kinds[0]]
    else:
        wrong = sorted({k for k in kinds if k not in ETC_KINDS})
        if wrong:
            ctx.fail(_loc("ps"), f"{wrong} are CreateMOS parameter servers ({V.CONTINUOUS['CreateMOS'].describe()}); "
                                 f"HugeCTR {p.name} has CreateETC ({V.CONTINUOUS['CreateETC'].describe()}), which "
                                 "takes staged (whole table in host memory) or cached (SSD behind a host-memory cache)",
                     fix="use ps: staged or ps: cached (one per embedding)")
        elif len(kinds) != n_embeddings:
            ctx.fail(_loc("ps"), f'{_n(len(kinds), "parameter server")} for {_n(n_embeddings, "embedding")} '
                                 '(HugeCTR: "Must specify the PS type for each embedding table")',
                     fix="give one kind per embedding, or a single kind for all")
        else:
            ps_types = [ETC_KINDS[k] for k in kinds]
    return ps_types


def _check_sparse_models(ctx: BuildContext, ct: ContinuousTrainingSpec, n_embeddings: int) -> None:
    if len(ct.sparse_models) != n_embeddings:
        ctx.fail(_loc("sparse_models"), f"{_n(len(ct.sparse_models), 'sparse model')} for "
                                        f"{_n(n_embeddings, 'embedding')} (HugeCTR: "
                                        '"embedding_params.size() != sparse_embedding_files.size()")',
                 fix="list one sparse model folder per embedding, in embeddings order")
    if len(set(ct.sparse_models)) != len(ct.sparse_models):
        ctx.fail(_loc("sparse_models"), "two embeddings share a sparse model folder", fix="give each its own folder")


def _cache(ctx: BuildContext, ct: ContinuousTrainingSpec, cache: str, kinds: Sequence[str],
           nodes: int) -> tuple[list[str], tuple | None]:
    """CreateETC's local paths and host-memory cache settings, which only cached tables take."""
    cached = cache == "etc" and "cached" in kinds   # decided on what was asked, also when the count is wrong
    local_paths: list[str] = []
    hmem = None
    if cache == "mos":
        for name in ("local_paths", "hmem_cache"):
            if getattr(ct, name) is not None:
                ctx.fail(_loc(name), f"CreateMOS has no {name} (CreateETC has, "
                                     f"{V.CONTINUOUS['CreateETC'].describe()})", fix="remove it")
    else:
        if not cached:
            for name in ("local_paths", "hmem_cache"):
                if getattr(ct, name) is not None:
                    ctx.fail(_loc(name), "only cached tables use it, and no table is cached",
                             fix="remove it, or use ps: cached for a table")
        else:
            local_paths = list(ct.local_paths) if ct.local_paths is not None else ["./"] * nodes
            if len(local_paths) != nodes:
                ctx.fail(_loc("local_paths"), f'{_n(len(local_paths), "local path")} for {_n(nodes, "node")} in '
                                              'solver.vvgpu '
                                              f'(HugeCTR: "Num of local_paths ({len(local_paths)}) != Num of MPI '
                                              f'ranks ({nodes})")', fix="give one local path per node")
            h = ct.hmem_cache or HMemCacheSpec()
            hmem = (("num_blocks", h.num_blocks), ("target_hit_rate", float(h.target_hit_rate)),
                    ("max_num_evict", h.max_num_evict))
    return local_paths, hmem


def _passes(ctx: BuildContext, ct: ContinuousTrainingSpec) -> list[DataPass]:
    """The data passes: one keyset per source (hugectr.md §1.8, §4.1)."""
    spec = ctx.spec
    passes: list[DataPass] = []
    eval_source = spec.data.eval
    for i, ps in enumerate(ct.passes):
        loc = _loc("passes", i)
        if i == 0:
            if ps.source is not None and list(ps.source) != list(spec.data.train):
                ctx.fail((*loc, "source"), f"the first pass trains on the reader's source {list(spec.data.train)} "
                                           "(data.train)", fix="omit source in the first pass, or make it data.train")
            source = list(spec.data.train)
            if ps.eval_source is not None and ps.eval_source != spec.data.eval:
                ctx.fail((*loc, "eval_source"), f"the first pass evaluates on the reader's eval_source "
                                                f"{spec.data.eval!r} (data.eval)",
                         fix="omit eval_source in the first pass, or make it data.eval")
            text = ('"The number of keyset files must equal that of training data source when using embedding '
                    'training cache"')
        else:
            if ps.source is None:
                ctx.fail((*loc, "source"), "field required (passes after the first switch files with set_source)",
                         fix="list this pass's training file lists")
                continue
            source = list(ps.source)
            text = '"The number of training data sources should equal that of the keyset files"'
        if len(ps.keyset) != len(source):
            ctx.fail((*loc, "keyset"), f"{_n(len(ps.keyset), 'keyset file')} for "
                                       f"{_n(len(source), 'training source')} (HugeCTR: {text})",
                     fix="give one keyset per source, in the same order ('ctrgen keysets' writes them)")
        eval_source = ps.eval_source or eval_source
        if not ps.fit and (i == 0 or ct.low_level is not False):
            ctx.fail((*loc, "fit"), "the first pass trains on the reader's source" if i == 0 else
                     "model_low_level.py trains on every pass; a pass without fit has no low-level form",
                     fix="remove fit: false" if i == 0 else "set low_level: false, or remove fit: false")
        passes.append(DataPass(source=tuple(source), keyset=tuple(ps.keyset), eval_source=eval_source, fit=ps.fit))
    return passes


def _low_level(ctx: BuildContext, ct: ContinuousTrainingSpec, n_embeddings: int) -> LowLevelSpec | None:
    """model_low_level.py's own settings, if the spec gives them."""
    low = ct.low_level if not isinstance(ct.low_level, bool) else None
    if low is not None and low.sparse_models is not None:
        if len(low.sparse_models) != n_embeddings:
            ctx.fail(_loc("low_level", "sparse_models"), f"{_n(len(low.sparse_models), 'sparse model')} for "
                                                         f"{_n(n_embeddings, 'embedding')}",
                     fix="list one sparse model folder per embedding, in embeddings order")
        if set(low.sparse_models) & set(ct.sparse_models) or len(set(low.sparse_models)) != len(low.sparse_models):
            ctx.fail(_loc("low_level", "sparse_models"), "a folder the other script also trains, or one listed twice "
                                                         "(the two scripts would overwrite each other's tables)",
                     fix="give model_low_level.py folders of its own, e.g. wdl_low_0_sparse_model")
    return low
