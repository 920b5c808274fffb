"""Parameter names of hugectr calls by release, to name the arguments a script passes by position."""

from __future__ import annotations

# Names of positional parameters of the calls published scripts pass positionally (hugectr.md §1, §1.8, §1.9).
POSITIONAL: dict[str, tuple[str, ...]] = {
    "DataReaderSparseParam": ("top_name", "nnz_per_slot", "is_fixed_length", "slot_num"),
    "Model": ("solver", "reader_params", "opt_params", "etc_params"),
    "Model.graph_to_json": ("graph_config_file",),
    "Model.compile": ("loss_names", "loss_weights"),
    "Model.add": ("layer",),
    "Model.fit": ("num_epochs", "max_iter", "display", "eval_interval", "snapshot", "snapshot_prefix"),
    "Model.save_params_to_files": ("prefix", "iter"),
    "Model.load_dense_weights": ("dense_model_file",),
    "Model.set_source": ("source", "keyset", "eval_source"),
    "CreateMOS": ("train_from_scratch", "use_host_memory_ps", "trained_sparse_models", "dest_sparse_models"),
    "CreateETC": ("ps_types", "sparse_models", "local_paths", "hmem_cache_configs"),
    "CreateHMemCache": ("num_blocks", "target_hit_rate", "max_num_evict"),
    "HybridEmbeddingParam": ("max_num_frequent_categories", "max_num_infrequent_samples", "p_dup_max",
                             "max_all_reduce_bandwidth", "max_all_to_all_bandwidth", "efficiency_bandwidth_ratio",
                             "communication_type", "hybrid_embedding_type"),
    "tools.DataGenerator": ("data_generator_params",),
    "inference.InferenceModel": ("model_config_path", "inference_params"),
    "inference.CreateInferenceSession": ("model_config_path", "inference_params"),
    "Model.export_predictions": ("output_prediction_file_name", "output_label_file_name"),
    "Model.load_sparse_weights": ("sparse_embedding_files",),
    "Model.load_dense_optimizer_states": ("dense_opt_states_file",),
    "Model.load_sparse_optimizer_states": ("sparse_opt_states_files",),
    "Model.freeze_embedding": ("embedding_name",),
    "Model.unfreeze_embedding": ("embedding_name",),
    "Model.check_out_tensor": ("tensor_name", "tensor_type"),
}
# Overloads the API table merges into one parameter list, so that their first parameter gets one name per overload.
OVERLOADED = frozenset({"Model.add"})
# AsyncParam's third parameter was io_block_size up to 4.0 and max_num_requests_per_thread from 4.1.
_ASYNC_OLD = ("num_threads", "num_batches_per_thread", "io_block_size", "io_depth", "io_alignment", "shuffle",
              "aligned_type")
_ASYNC_NEW = ("num_threads", "num_batches_per_thread", "max_num_requests_per_thread", "io_depth", "io_alignment",
              "shuffle", "aligned_type", "multi_hot_reader", "is_dense_float")


def param_names(func: str, version: str | None = None) -> tuple[str, ...] | None:
    """Ordered parameter names of ``func`` in release ``version`` (None where unknown)."""
    try:
        from ..hugectr import api  # the per-release table read from HugeCTR's own bindings
    except ImportError:
        api = None
    if func in OVERLOADED:
        return POSITIONAL[func]
    if api is not None and version is not None:
        try:
            names = tuple(p.name for p in api.signature(func, version))
        except Exception:
            names = ()
        if names:
            return names
    if func == "AsyncParam":
        from ..hugectr import versions as V

        if version is None or V.profile(version) is None:
            return _ASYNC_NEW
        return _ASYNC_NEW if V.holds("async_param_order_4_1", version) else _ASYNC_OLD
    return POSITIONAL.get(func)
