"""The launch settings of the cluster and vertex targets, checked against the spec (exit 2 naming the field)."""

from __future__ import annotations


from ..graph.ir import TrainingJob
from ..specfile.load import LoadedSpec
from ..specfile.launch import ClusterSpec, StudySpec
from .types import ClusterLaunch, Study, StudyParameter, VertexLaunch

# task.py arguments a study may tune, by the kind of value they take.
FLOAT_ARGS = {"lr", "dropout_rate"}
INT_ARGS = {"per_gpu_batch_size", "max_iter", "num_epochs", "max_eval_batches", "eval_batches", "eval_interval",
            "num_workers", "workspace_size_per_gpu", "nnz_per_slot"}


def cluster_launch(loaded: LoadedSpec) -> ClusterLaunch:
    """The launchers' settings: every node runs the same GPUs (one vvgpu row per node)."""
    s = loaded.spec
    c = s.cluster or ClusterSpec.model_validate({})
    rows = s.solver.vvgpu
    widths = sorted({len(r) for r in rows})
    if len(widths) != 1:
        raise loaded.error(("solver", "vvgpu"), f"rows of {widths} GPUs: the launchers start the same number of GPUs "
                                                "on every node", fix="give every node the same GPUs")
    per_node = widths[0]
    if c.gpus_per_node is not None and c.gpus_per_node != per_node:
        raise loaded.error(("cluster", "gpus_per_node"), f"{c.gpus_per_node}, but each solver.vvgpu row lists "
                                                         f"{per_node} GPU(s)",
                           fix=f"set it to {per_node} or remove it (it defaults to the vvgpu rows)")
    for i, row in enumerate(rows):
        if len(set(row)) != len(row):
            raise loaded.error(("solver", "vvgpu", i), f"GPU listed twice in {row}", fix="list each GPU once")
    if c.hosts is not None and len(c.hosts) != len(rows):
        raise loaded.error(("cluster", "hosts"), f"{len(c.hosts)} host(s) for {len(rows)} node(s) in solver.vvgpu "
                                                 "(one vvgpu row per node)",
                           fix="list one host per vvgpu row")
    sbatch = tuple((k, v) for k, v in (("partition", c.slurm.partition), ("account", c.slurm.account),
                                       ("time", c.slurm.time)) if v)
    return ClusterLaunch(nodes=len(rows), gpus_per_node=per_node, python=c.python, hosts=tuple(c.hosts or ()),
                         sbatch=sbatch, rdzv_backend=c.rdzv_backend, rdzv_endpoint=c.rdzv_endpoint)


def vertex_launch(loaded: LoadedSpec, job: TrainingJob) -> VertexLaunch:
    """The Vertex AI job: task.py in a container on one node; every tuned parameter is a task.py argument of a
    matching type with a well-formed range."""
    s = loaded.spec
    if s.vertex is None:
        raise loaded.error(("targets",), "the vertex target needs a vertex: section (image_uri, machine_type, ...)",
                           fix="add vertex: {image_uri: ..., machine_type: a2-highgpu-4g} or drop 'vertex'")
    if "task" not in s.targets:
        raise loaded.error(("targets",), "the vertex target runs task.py in the container: add the task target",
                           fix="targets: [hugectr, task, vertex]")
    if len(s.solver.vvgpu) != 1:
        raise loaded.error(("solver", "vvgpu"), f"{len(s.solver.vvgpu)} nodes: a Vertex AI custom job runs HugeCTR on "
                                                "one node (seed 004)", fix="use one vvgpu row, or the cluster target")
    v, reader = s.vertex, job.reader_plan
    if not v.image_uri.isprintable() or any(c.isspace() for c in v.image_uri):
        raise loaded.error(("vertex", "image_uri"), "an image reference has no spaces or control characters",
                           fix='e.g. "gcr.io/{project}/hugectr-training"')
    study = None
    if v.study is not None:
        st = v.study
        _check_study(loaded, st, job)
        study = Study(metric=st.metric, goal=st.goal, max_trial_count=st.max_trial_count,
                      parallel_trial_count=st.parallel_trial_count, max_failed_trial_count=st.max_failed_trial_count,
                      algorithm=st.algorithm, parameters=tuple(
                          StudyParameter(name=p.name, type=p.type, min=p.min, max=p.max, scale=p.scale,
                                         values=tuple(p.values) if p.values is not None else None)
                          for p in st.parameters))
    return VertexLaunch(display_name=v.display_name or f"hugectr-{job.name}", image_uri=v.image_uri,
                        base_image=v.base_image,
                        machine_type=v.machine_type, accelerator_type=v.accelerator_type, command=tuple(v.command),
                        train_data=tuple(v.train_data or reader.source),
                        valid_data=v.valid_data or reader.eval_source, schema_path=v.schema_path,
                        eval_batches=v.eval_batches, study=study)


def _check_study(loaded: LoadedSpec, study: StudySpec, job: TrainingJob) -> None:
    seen = set()
    for i, p in enumerate(study.parameters):
        loc = ("vertex", "study", "parameters", i)
        values: list = list(p.values or ())
        if p.name in seen:
            raise loaded.error((*loc, "name"), f"{p.name!r} is tuned twice", fix="list each parameter once")
        seen.add(p.name)
        if p.name not in FLOAT_ARGS | INT_ARGS:
            raise loaded.error((*loc, "name"), f"{p.name!r} is not a tunable task.py argument",
                               fix=f"use one of {sorted(FLOAT_ARGS | INT_ARGS)}")
        # task.py's --dropout_rate exists when the graph has a Dropout layer (uniform rates or not).
        if p.name == "dropout_rate" and not any(layer.type == "Dropout" for layer in job.graph.layers):
            raise loaded.error((*loc, "name"), "the graph has no Dropout layer to tune", fix="remove this parameter")
        if p.type in ("double", "integer"):
            if p.min is None or p.max is None or p.values is not None:
                raise loaded.error((*loc, "type"), f"a {p.type} parameter takes min and max (no values)",
                                   fix="e.g. {min: 0.001, max: 0.01}")
            if not p.min < p.max:
                raise loaded.error((*loc, "max"), f"max {p.max:g} must be greater than min {p.min:g}")
            if p.scale in ("log", "reverse_log") and p.min <= 0:
                raise loaded.error((*loc, "min"), "a log scale needs min > 0")
            if p.type == "integer" and not (float(p.min).is_integer() and float(p.max).is_integer()):
                raise loaded.error((*loc, "min"), "an integer parameter takes whole-number bounds")
        else:
            if not values or p.min is not None or p.max is not None:
                raise loaded.error((*loc, "values"), f"a {p.type} parameter takes values (no min/max)",
                                   fix="e.g. values: [0.4, 0.5, 0.6]")
            numeric = all(isinstance(x, float) for x in values)
            if p.type == "discrete" and (not numeric or list(values) != sorted(set(values))):
                raise loaded.error((*loc, "values"), "discrete values must be distinct numbers in increasing order")
            if p.type == "categorical":
                if p.scale is not None:
                    raise loaded.error((*loc, "scale"), "a categorical parameter has no scale", fix="remove scale")
                convert = int if p.name in INT_ARGS else float
                bad = [x for x in values if not _parses(convert, x)]
                if bad or len(set(values)) != len(values):
                    raise loaded.error((*loc, "values"), f"categorical values reach task.py as --{p.name}=<value>: "
                                       f"they must be distinct {convert.__name__} strings" + (f", not {bad}" if bad else ""),
                                       fix='e.g. values: ["0.001", "0.01"]')
        if p.name in INT_ARGS and p.type == "double":
            raise loaded.error((*loc, "type"), f"task.py argument {p.name!r} is an integer",
                               fix="use type: integer or discrete")
        if p.name in INT_ARGS and p.type == "discrete" and not all(float(x).is_integer() for x in values):
            raise loaded.error((*loc, "values"), f"task.py argument {p.name!r} is an integer: whole numbers only")
        if p.name in FLOAT_ARGS and p.type == "integer":
            raise loaded.error((*loc, "type"), f"task.py argument {p.name!r} takes a float", fix="use type: double")


def _parses(convert, value) -> bool:
    try:
        convert(value)
    except (TypeError, ValueError):
        return False
    return isinstance(value, str)
