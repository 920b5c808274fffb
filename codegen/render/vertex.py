"""Vertex AI job specs (seed 004): a CustomJobSpec, a HyperparameterTuningJob and a small submit.py.

The JSON files are google.cloud.aiplatform.v1 messages in proto JSON form (snake_case field names, as the SDK's
``worker_pool_specs`` dicts): ``vertex/custom_job_spec.json`` is a ``CustomJobSpec``; ``vertex/hyperparameter_tuning_job.json``
is a ``HyperparameterTuningJob`` whose ``trial_job_spec`` is the same worker pool without the tuned arguments (the
service appends ``--<parameter>=<value>`` per trial). ``{project}``, ``{region}`` and ``{bucket}`` in any string are
filled in by submit.py. Checks (exit 2, naming the spec field): the vertex target needs the task target and one node;
every tuned parameter must be a task.py argument of a matching type with a well-formed range.
"""

from __future__ import annotations

import json

from ..graph.ir import TrainingJob
from ..spec.load import LoadedSpec
from .env import render
from .literals import py
from .task import TaskDefaults, task_defaults

SCALES = {"linear": "UNIT_LINEAR_SCALE", "log": "UNIT_LOG_SCALE", "reverse_log": "UNIT_REVERSE_LOG_SCALE"}
ALGORITHMS = {"grid": "GRID_SEARCH", "random": "RANDOM_SEARCH"}
# task.py arguments a study may tune, by the kind of value they take.
FLOAT_ARGS = {"lr", "dropout_rate"}
# The training container's cloudml-hypertune, as requirements/constraints.txt pins it (a test keeps them equal).
HYPERTUNE_VERSION = "0.1.0.dev6"
# image_uri placeholders and the Cloud Build substitutions that fill them when the image is built.
CLOUD_BUILD_NAMES = {"{project}": "$PROJECT_ID", "{region}": "$LOCATION"}
INT_ARGS = {"per_gpu_batch_size", "max_iter", "num_epochs", "max_eval_batches", "eval_batches", "eval_interval",
            "num_workers", "workspace_size_per_gpu", "nnz_per_slot"}


def _json(doc: object) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def worker_args(job: TrainingJob, d: TaskDefaults, loaded: LoadedSpec, skip: set[str] = frozenset()) -> list[str]:
    """task.py's arguments, in seed 004's order, as the worker pool passes them."""
    v = loaded.spec.vertex
    train = v.train_data or list(dict(job.reader)["source"])
    valid = v.valid_data or dict(job.reader)["eval_source"]
    pairs: list[tuple[str, object]] = [
        ("per_gpu_batch_size", d.per_gpu_batch_size), ("model_name", job.name),
        ("train_data", train), ("valid_data", valid), ("schema", v.schema_path), ("max_iter", d.max_iter),
        ("max_eval_batches", d.max_eval_batches), ("eval_batches", d.eval_batches),
        ("dropout_rate", d.dropout_rate), ("lr", d.lr), ("num_workers", d.num_workers),
        ("num_epochs", d.num_epochs), ("eval_interval", d.eval_interval), ("snapshot", d.snapshot_interval),
        ("display_interval", d.display_interval), ("gpus", d.gpus),
    ]
    out: list[str] = []
    for name, value in pairs:
        if value is None or name in skip:
            continue
        if isinstance(value, list):
            if len(value) == 1:
                out.append(f"--{name}={value[0]}")
            else:
                out += [f"--{name}", *value]
        else:
            out.append(f"--{name}={value}")
    return out


def _worker_pool(job: TrainingJob, d: TaskDefaults, loaded: LoadedSpec, skip: set[str] = frozenset()) -> list[dict]:
    v = loaded.spec.vertex
    return [{
        "machine_spec": {"machine_type": v.machine_type, "accelerator_type": v.accelerator_type,
                         "accelerator_count": job.gpu_count},
        "replica_count": 1,
        "container_spec": {"image_uri": v.image_uri, "command": list(v.command),
                           "args": worker_args(job, d, loaded, skip)},
    }]


def check_vertex(loaded: LoadedSpec, job: TrainingJob) -> None:
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
    image = s.vertex.image_uri
    if not image.isprintable() or any(c.isspace() for c in image):
        raise loaded.error(("vertex", "image_uri"), "an image reference has no spaces or control characters",
                           fix='e.g. "gcr.io/{project}/hugectr-training"')
    study = s.vertex.study
    if study is None:
        return
    d = task_defaults(job)
    seen = set()
    for i, p in enumerate(study.parameters):
        loc = ("vertex", "study", "parameters", i)
        if p.name in seen:
            raise loaded.error((*loc, "name"), f"{p.name!r} is tuned twice", fix="list each parameter once")
        seen.add(p.name)
        if p.name not in FLOAT_ARGS | INT_ARGS:
            raise loaded.error((*loc, "name"), f"{p.name!r} is not a tunable task.py argument",
                               fix=f"use one of {sorted(FLOAT_ARGS | INT_ARGS)}")
        if p.name == "dropout_rate" and d.dropout_rate is None and not any(
                layer.type == "Dropout" for layer in job.graph.layers):
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
            if not p.values or p.min is not None or p.max is not None:
                raise loaded.error((*loc, "values"), f"a {p.type} parameter takes values (no min/max)",
                                   fix="e.g. values: [0.4, 0.5, 0.6]")
            numeric = all(isinstance(x, float) for x in p.values)
            if p.type == "discrete" and (not numeric or list(p.values) != sorted(set(p.values))):
                raise loaded.error((*loc, "values"), "discrete values must be distinct numbers in increasing order")
            if p.type == "categorical":
                if p.scale is not None:
                    raise loaded.error((*loc, "scale"), "a categorical parameter has no scale", fix="remove scale")
                convert = int if p.name in INT_ARGS else float
                bad = [x for x in p.values if not _parses(convert, x)]
                if bad or len(set(p.values)) != len(p.values):
                    raise loaded.error((*loc, "values"), f"categorical values reach task.py as --{p.name}=<value>: "
                                       f"they must be distinct {convert.__name__} strings" + (f", not {bad}" if bad else ""),
                                       fix='e.g. values: ["0.001", "0.01"]')
        if p.name in INT_ARGS and p.type == "double":
            raise loaded.error((*loc, "type"), f"task.py argument {p.name!r} is an integer",
                               fix="use type: integer or discrete")
        if p.name in INT_ARGS and p.type == "discrete" and not all(float(x).is_integer() for x in p.values):
            raise loaded.error((*loc, "values"), f"task.py argument {p.name!r} is an integer: whole numbers only")
        if p.name in FLOAT_ARGS and p.type == "integer":
            raise loaded.error((*loc, "type"), f"task.py argument {p.name!r} takes a float", fix="use type: double")


def _parses(convert, value) -> bool:
    try:
        convert(value)
    except (TypeError, ValueError):
        return False
    return isinstance(value, str)


def _parameter(p) -> dict:
    doc: dict = {"parameter_id": p.name}
    if p.type == "double":
        doc["double_value_spec"] = {"min_value": p.min, "max_value": p.max}
    elif p.type == "integer":
        doc["integer_value_spec"] = {"min_value": int(p.min), "max_value": int(p.max)}
    elif p.type == "discrete":
        doc["discrete_value_spec"] = {"values": list(p.values)}
    else:
        doc["categorical_value_spec"] = {"values": list(p.values)}
    if p.scale is not None:
        doc["scale_type"] = SCALES[p.scale]
    return doc


def render_vertex(loaded: LoadedSpec, job: TrainingJob, header: str, spec_path: str = "") -> dict[str, str]:
    """{path under vertex/: text}."""
    check_vertex(loaded, job)
    v = loaded.spec.vertex
    d = task_defaults(job, v.eval_batches)
    display = v.display_name or f"hugectr-{job.name}"
    files = {"custom_job_spec.json": _json({"worker_pool_specs": _worker_pool(job, d, loaded)})}
    if v.study is not None:
        st = v.study
        study: dict = {
            "metrics": [{"metric_id": st.metric, "goal": st.goal.upper()}],
            "parameters": [_parameter(p) for p in st.parameters],
        }
        if st.algorithm:
            study["algorithm"] = ALGORITHMS[st.algorithm]
        tuned = {p.name for p in st.parameters}
        hp: dict = {
            "display_name": f"{display}-tuning",
            "study_spec": study,
            "max_trial_count": st.max_trial_count,
            "parallel_trial_count": st.parallel_trial_count,
        }
        if st.max_failed_trial_count is not None:
            hp["max_failed_trial_count"] = st.max_failed_trial_count
        hp["trial_job_spec"] = {"worker_pool_specs": _worker_pool(job, d, loaded, skip=tuned)}
        files["hyperparameter_tuning_job.json"] = _json(hp)
    files["submit.py"] = render("vertex/submit.py.j2", header=header, display_name=py(display),
                                has_study=v.study is not None, spec_path=py(spec_path),
                                metric=v.study.metric if v.study else "", metric_py=py(v.study.metric if v.study else ""))
    files["Dockerfile"] = render("vertex/Dockerfile.j2", header=header, base_image=v.base_image,
                                 hypertune=HYPERTUNE_VERSION, command=" ".join(v.command)[:200].encode(
                                     "unicode_escape").decode("ascii"), image_comment=json.dumps(v.image_uri))
    built = v.image_uri
    for placeholder, substitution in CLOUD_BUILD_NAMES.items():
        built = built.replace(placeholder, substitution)
    files["cloudbuild.yaml"] = render("vertex/cloudbuild.yaml.j2", header=header, image=json.dumps(built))
    return files
