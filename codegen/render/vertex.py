"""Vertex AI job specs (seed 004): a CustomJobSpec, a HyperparameterTuningJob and a small submit.py.

The JSON files are google.cloud.aiplatform.v1 messages in proto JSON form (snake_case field names, as the SDK's
``worker_pool_specs`` dicts): ``vertex/custom_job_spec.json`` is a ``CustomJobSpec``; ``vertex/hyperparameter_tuning_job.json``
is a ``HyperparameterTuningJob`` whose ``trial_job_spec`` is the same worker pool without the tuned arguments (the
service appends ``--<parameter>=<value>`` per trial). ``{project}``, ``{region}`` and ``{bucket}`` in any string are
filled in by submit.py. The settings and their checks: codegen.model.launch.
"""

from __future__ import annotations

import json

from ..graph.ir import TrainingJob
from ..model.types import Model, StudyParameter, VertexLaunch
from .env import render
from .literals import py
from .task import TaskDefaults, task_defaults

SCALES = {"linear": "UNIT_LINEAR_SCALE", "log": "UNIT_LOG_SCALE", "reverse_log": "UNIT_REVERSE_LOG_SCALE"}
ALGORITHMS = {"grid": "GRID_SEARCH", "random": "RANDOM_SEARCH"}
# The training container's cloudml-hypertune, as requirements/constraints.txt pins it (a test keeps them equal).
HYPERTUNE_VERSION = "0.1.0.dev6"
# image_uri placeholders and the Cloud Build substitutions that fill them when the image is built.
CLOUD_BUILD_NAMES = {"{project}": "$PROJECT_ID", "{region}": "$LOCATION"}


def _json(doc: object) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def worker_args(job: TrainingJob, d: TaskDefaults, v: VertexLaunch, skip: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """task.py's arguments, in seed 004's order, as the worker pool passes them."""
    train, valid = list(v.train_data), v.valid_data
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


def _worker_pool(job: TrainingJob, d: TaskDefaults, v: VertexLaunch, skip: frozenset[str] | set[str] = frozenset()) -> list[dict]:
    return [{
        "machine_spec": {"machine_type": v.machine_type, "accelerator_type": v.accelerator_type,
                         "accelerator_count": job.gpu_count},
        "replica_count": 1,
        "container_spec": {"image_uri": v.image_uri, "command": list(v.command),
                           "args": worker_args(job, d, v, skip)},
    }]


def _parameter(p: StudyParameter) -> dict:
    doc: dict = {"parameter_id": p.name}
    if p.type == "double":
        doc["double_value_spec"] = {"min_value": p.min, "max_value": p.max}
    elif p.type == "integer":
        assert p.min is not None and p.max is not None     # codegen.model.launch checks the bounds
        doc["integer_value_spec"] = {"min_value": int(p.min), "max_value": int(p.max)}
    elif p.type == "discrete":
        doc["discrete_value_spec"] = {"values": list(p.values or ())}
    else:
        doc["categorical_value_spec"] = {"values": list(p.values or ())}
    if p.scale is not None:
        doc["scale_type"] = SCALES[p.scale]
    return doc


def render_vertex(model: Model, header: str) -> dict[str, str]:
    """{path under vertex/: text}."""
    job, v = model.job, model.vertex
    assert v is not None, "the vertex target is on"
    d = task_defaults(job, v.eval_batches)
    display = v.display_name
    files = {"custom_job_spec.json": _json({"worker_pool_specs": _worker_pool(job, d, v)})}
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
        hp["trial_job_spec"] = {"worker_pool_specs": _worker_pool(job, d, v, skip=tuned)}
        files["hyperparameter_tuning_job.json"] = _json(hp)
    files["submit.py"] = render("vertex/submit.py.j2", header=header, display_name=py(display),
                                has_study=v.study is not None, spec_path=py(model.provenance.spec),
                                metric=v.study.metric if v.study else "", metric_py=py(v.study.metric if v.study else ""))
    files["Dockerfile"] = render("vertex/Dockerfile.j2", header=header, base_image=v.base_image,
                                 hypertune=HYPERTUNE_VERSION, command=" ".join(v.command)[:200].encode(
                                     "unicode_escape").decode("ascii"), image_comment=json.dumps(v.image_uri))
    built = v.image_uri
    for placeholder, substitution in CLOUD_BUILD_NAMES.items():
        built = built.replace(placeholder, substitution)
    files["cloudbuild.yaml"] = render("vertex/cloudbuild.yaml.j2", header=header, image=json.dumps(built))
    return files
