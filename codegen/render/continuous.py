"""Template context for continuous training (seed 003): the embedding cache object and the incremental passes.

The text is in templates/hugectr/_setup.j2 (the cache), _continuous_fit.j2 (fit per pass, set_source,
get_incremental_model, save_params_to_files) and model_low_level.py.j2 (the low-level loop); this module only turns
the :class:`~codegen.graph.ir.ContinuousTraining` into Python literals.
"""

from __future__ import annotations

from ..graph.ir import Enum, TrainingJob
from .literals import kwargs, py, py_str

PS_WORDS = {"host_memory": "host-memory", "ssd": "SSD-based"}
ETC_WORDS = {"Staged": "staged in host memory", "Cached": "on SSD behind a host-memory cache"}


def cache_context(job: TrainingJob) -> dict | None:
    c = job.continuous
    if c is None:
        return None
    if c.cache == "mos":
        # CreateMOS(train_from_scratch, use_host_memory_ps, trained_sparse_models, dest_sparse_models) (§1.8):
        # new tables go to dest_sparse_models; existing ones are read from (and updated in) trained_sparse_models.
        models = "dest_sparse_models" if c.train_from_scratch else "trained_sparse_models"
        args = [("train_from_scratch", c.train_from_scratch), ("use_host_memory_ps", c.ps_types[0] == "host_memory"),
                (models, list(c.sparse_models))]
        return {"kind": "mos", "args": kwargs(args), "hmem": None, "ps_words": PS_WORDS[c.ps_types[0]]}
    # CreateETC(ps_types, sparse_models, local_paths, hmem_cache_configs) (§1.8). A sparse model folder that does
    # not exist yet is created and trained from scratch.
    args: list[tuple[str, str]] = kwargs([
        ("ps_types", [Enum("TrainPSType_t", t) for t in c.ps_types]),
        ("sparse_models", list(c.sparse_models)),
    ])
    if c.hmem_cache is not None:
        args += kwargs([("local_paths", list(c.local_paths))])
        # One config serves every cached table (HugeCTR copies it to each); one per table of ps_types would be
        # refused when some tables are staged ("Wrong hcache_configs"), and the published scripts pass one.
        args.append(("hmem_cache_configs", "[hc_cnfg]"))
    names = [e.name for e in job.graph.embeddings]
    words = [f"{name}: {ETC_WORDS[t]}" for name, t in zip(names, c.ps_types)]
    return {"kind": "etc", "args": args, "hmem": kwargs(c.hmem_cache) if c.hmem_cache else None, "ps_words": words}


def continuous_context(job: TrainingJob) -> dict | None:
    c = job.continuous
    if c is None:
        return None
    passes = [{
        "source": py(list(p.source)), "keyset": py(list(p.keyset)), "eval_source": py_str(p.eval_source),
        "source_count": len(p.source), "fit": p.fit,
        "pairs": [py((s, k)) for s, k in zip(p.source, p.keyset)],
    } for p in c.passes]
    mos = c.cache == "mos"
    return {
        "passes": passes,
        "graph_file": f"{job.name}.json",
        "fit": kwargs([("num_epochs", c.num_epochs), ("display", c.display), ("eval_interval", c.eval_interval)]),
        "dense_model": py_str(c.dense_model) if c.dense_model else None,
        "incremental_model": c.incremental_model,
        "save_prefix": py_str(c.save_prefix),
        "low_eval_source": py_str(c.low_eval_source) if c.low_eval_source else None,
        "eval_interval": c.eval_interval,
        "max_eval_batches": c.max_eval_batches,
        "cache_var": "model_oversubscriber" if mos else "etc",
        "cache_getter": "get_model_oversubscriber" if mos else "get_embedding_training_cache",
        "first_batch_flag": c.first_batch_flag,
        # hugectr.md §1.9: train()/eval() at 3.2 and 23.06; train(is_first_batch)/eval(is_first_batch) in between.
        "train_args": "is_first_batch=first_batch" if c.first_batch_flag else "",
        "eval_args": "is_first_batch=batches == 0" if c.first_batch_flag else "",
    }
