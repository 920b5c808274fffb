"""TrainingJob -> the standalone HugeCTR model.py (templates/hugectr/model.py.j2), in the notebooks' style."""

from __future__ import annotations

import posixpath
from dataclasses import replace

from ..graph.ir import Enum, TrainingJob
from ..graph.shapes import fmt_shape
from ..runtime.contract import env_path, read_where_it_runs
from .continuous import cache_context, continuous_context
from .embedding_collection import collection_context
from .env import render
from .literals import ident, kwargs, path_py, py, py_str


def _layer_comment(layer, printed: list) -> str:
    """A comment beside a DenseLayer call whose ``printed`` arguments pass leading_dim (explaining the number)."""
    if layer.type == "Reshape" and dict(printed).get("leading_dim") is not None and layer.in_shapes:
        src = layer.in_shapes[0]
        if len(src.dims) == 2:
            return f"leading_dim = {src.dims[0]} slots x {src.dims[1]} (embedding_vec_size)"
    return ""


class Bindings:
    """Where task.py puts an expression instead of model.py's literal. The default binds nothing (model.py)."""

    def solver(self, key: str, value: object) -> object:
        return value

    def reader(self, key: str, value: object) -> object:
        return value

    def sparse_nnz(self, sparse, value: object) -> object:
        return value

    def embedding(self, embedding, args: list[tuple[str, object]]) -> list[tuple[str, object]]:
        return args

    def layer(self, layer, args: list[tuple[str, object]]) -> list[tuple[str, object]]:
        return args

    def reader_comments(self, slot_cols: list[str]) -> list[str]:
        return [f"slot_size_array: cardinalities of {py(slot_cols)} from the features lock"]


def build_context(job: TrainingJob, bind: Bindings | None = None) -> dict:
    """The values of templates/hugectr/_build.py.j2 (CreateSolver ... compile), shared by model.py and task.py."""
    bind = bind or Bindings()
    g = job.graph
    optimizer_args = [("optimizer_type", Enum("Optimizer_t", job.optimizer.type)), *job.optimizer.hparams]
    sparse = [{
        "name": py_str(s.name),
        "nnz": py(bind.sparse_nnz(s, s.nnz_arg if isinstance(s.nnz_arg, int) else list(s.nnz_arg))),
        "fixed": py(s.is_fixed_length), "slot_num": py(s.slot_num),
        "comment": f"slots: {py(list(s.columns))}",
    } for s in g.sparse]
    if len(g.label_names) == 1:
        input_args = [("label_dim", g.label_dims[0]), ("label_name", g.label_names[0])]
    else:
        input_args = [("label_dims", list(g.label_dims)), ("label_names", list(g.label_names))]
    input_args += [("dense_dim", g.dense_dim), ("dense_name", g.dense_name)]

    embeddings = []
    for e in g.embeddings:
        args = [("embedding_type", Enum("Embedding_t", e.embedding_type))]
        if e.workspace_mb is not None:
            args.append(("workspace_size_per_gpu_in_mb", e.workspace_mb))
        args += [("embedding_vec_size", e.vec_size), ("combiner", e.combiner), ("sparse_embedding_name", e.name),
                 ("bottom_name", e.bottom)]
        if e.slot_size_array:
            args.append(("slot_size_array", list(e.slot_size_array)))
        args += list(e.extra)
        args = bind.embedding(e, args)
        embeddings.append(kwargs(args))
        if e.explicit_optimizer:
            embeddings[-1].append(("optimizer", ident("optimizer")))  # the variable, not a literal

    layers = []
    groups_done: set[tuple] = set()
    for layer in g.layers:
        if layer.group is not None:
            # One GroupDenseLayer call for the FusedInnerProduct chain HugeCTR expands it into.
            if layer.group in groups_done:
                continue
            groups_done.add(layer.group)
            type_, bottoms, tops, outs, last = layer.group
            args = [("group_layer_type", Enum("GroupLayer_t", type_)), ("bottom_name_list", list(bottoms)),
                    ("top_name_list", list(tops)), ("num_outputs", list(outs)),
                    ("last_act_type", Enum("Activation_t", last))]
            layers.append({"args": kwargs(args), "comment": "", "call": "GroupDenseLayer"})
            continue
        args = [("layer_type", Enum("Layer_t", layer.type)), ("bottom_names", list(layer.bottoms)),
                ("top_names", list(layer.tops)), *layer.params]
        args = bind.layer(layer, args)
        layers.append({"args": kwargs(args), "comment": _layer_comment(layer, args), "call": "DenseLayer"})

    reader_comments = []
    slot_cols = [c for s in g.sparse for c in s.columns]
    if job.reader_plan.slot_sizes:
        reader_comments.extend(bind.reader_comments(slot_cols))

    cache = cache_context(job)   # continuous training: CreateMOS / CreateETC, passed as Model's fourth argument
    pre_compile = []
    for step in job.before_compile:
        if step == "graph_to_json":
            if folder_py(job.graph_json):
                pre_compile.append(f"os.makedirs({folder_py(job.graph_json)}, exist_ok=True)")
            pre_compile.append(f"model.graph_to_json(graph_config_file={path_py(job.graph_json)})")
        else:
            pre_compile.append("model.summary()")
    return dict(
        data_generator=kwargs(job.data_generator) if job.data_generator is not None else None,
        data_source=None if job.data_source is None else {"params": kwargs(job.data_source[0]),
                                                          "move_to_local": job.data_source[1]},
        pre_compile=pre_compile,
        cache=cache,
        model_args="solver, reader, optimizer" + (f", {cache['kind']}" if cache else ""),
        solver=kwargs([(k, bind.solver(k, v)) for k, v in job.solver]),
        optimizer=kwargs(optimizer_args),
        optimizer_inline="optimizer = hugectr.CreateOptimizer("
                         + ", ".join(f"{k}={v}" for k, v in kwargs(optimizer_args)) + ")",
        reader=kwargs([(k, bind.reader(k, _reader_path(k, v))) for k, v in job.reader]),
        setup_order=job.setup_order,
        model_class=job.model_class,
        compile_args=kwargs(job.compile_args),
        reader_comments=reader_comments,
        input=kwargs(input_args),
        sparse=sparse,
        embeddings=embeddings,
        collection=collection_context(g.collection),
        layers=layers,
        reader_check=None if job.reader_check is None else {
            "reader": job.reader_check.reader, "batches": job.reader_check.batches,
            "calls": [(of, method, kwargs(args)) for of, method, args in job.reader_check.calls]},
    )


# DataReaderParams arguments that are the spec's data paths (data.train, data.eval): "~/..." is expanded where the
# script runs.
READER_PATHS = ("source", "eval_source")


def _reader_path(key: str, value: object) -> object:
    if key not in READER_PATHS:
        return value
    return [path_py(p) for p in value] if isinstance(value, list) else path_py(value) \
        if isinstance(value, str) else value


def home_paths(job: TrainingJob) -> list[str]:
    """The spec paths under the home folder that model.py writes as os.path.expanduser(...) (it then imports os)."""
    paths = [*job.reader_plan.source, job.reader_plan.eval_source]
    if "graph_to_json" in (*job.before_compile, *job.after_compile):
        paths.append(job.graph_json)
    if job.offline_inference is not None:
        paths.append(job.offline_inference.graph_json)
    return [p for p in paths if isinstance(p, str) and read_where_it_runs(p)]


def folder_of(path: str) -> str:
    """The folder a file path names ("" for none): HugeCTR's ofstream writes nothing into a missing folder, so the
    scripts create it first."""
    return posixpath.dirname(path)


def folder_py(path: str) -> str | None:
    """The folder of a spec file path as Python (None for none); of an environment variable's path, computed where
    the script runs (its value decides where the folder ends)."""
    if env_path(path) is not None:
        return f'os.path.dirname({path_py(path)}) or "."'
    return path_py(folder_of(path)) if folder_of(path) else None


def final_save_context(job: TrainingJob) -> dict | None:
    """model.py's save_params_to_files after fit when fit writes no snapshot (the weights ps.json names)."""
    if job.final_save is None:
        return None
    prefix, iteration = job.final_save
    return {"prefix": py_str(prefix), "iter": iteration, "folder": py_str(folder_of(prefix)) if folder_of(prefix)
            else None, "dense": f"{posixpath.basename(prefix)}_dense_{iteration}.model"}


def render_model_py(job: TrainingJob, header: str) -> str:
    final_save = final_save_context(job)
    graph_folder = folder_py(job.graph_json)
    return render(
        "hugectr/model.py.j2",
        header=header,
        nodes=job.nodes,
        final_save=final_save,
        graph_folder=graph_folder,
        needs_os=bool(graph_folder or (final_save and final_save["folder"]) or home_paths(job)),
        version_note=f"Target: HugeCTR {job.hugectr_version}. Global batch {job.batchsize} over {job.gpu_count} GPU(s).",
        **build_context(job),
        fit=kwargs(job.fit),
        graph_json=path_py(job.graph_json),
        after_compile=job.after_compile,
        then=[(method, kwargs(args)) for method, args in job.then],
        before_fit=[(method, kwargs(args)) for method, args in job.before_fit],
        inference=None if job.offline_inference is None else {
            "api": job.offline_inference.api,
            "graph_json": path_py(job.offline_inference.graph_json),
            "params": kwargs(job.offline_inference.params),
            "predict": kwargs(job.offline_inference.predict),
            "compare_with": py_str(job.offline_inference.compare_with) if job.offline_inference.compare_with else None,
            "max_mse": py(job.offline_inference.max_mse),
            "then": [(method, kwargs(args)) for method, args in job.offline_inference.then]},
        shapes={k: fmt_shape(v) for k, v in job.graph.tensor_shapes().items()},
        continuous=continuous_context(job),
    )


def render_low_level_py(job: TrainingJob, header: str) -> str:
    """The low-level continuous-training loop of seed 003 (templates/hugectr/model_low_level.py.j2), with its own
    sparse models and save prefix where the spec gives them (continuous_training.low_level)."""
    c = job.continuous
    if c is not None:
        job = replace(job, continuous=replace(c, sparse_models=c.low_sparse_models or c.sparse_models,
                                              save_prefix=c.low_save_prefix or c.save_prefix))
    return render(
        "hugectr/model_low_level.py.j2",
        header=header,
        version_note=f"Target: HugeCTR {job.hugectr_version}. Global batch {job.batchsize} over {job.gpu_count} GPU(s).",
        **build_context(job),
        graph_json=py_str(job.graph_json),
        continuous=continuous_context(job),
    )
