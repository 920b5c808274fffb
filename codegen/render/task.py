"""TrainingJob -> task.py (templates/hugectr/task.py.j2): model.py's graph behind seed 004's command-line arguments.

The building calls come from the same template and context as model.py (render.script.build_context); TaskBindings
puts ``args.*`` expressions where seed 004's arguments override a value. Argument names, short flags and types are
seed 004's (``task.py`` of the Vertex AI sample); defaults are the spec's.
"""

from __future__ import annotations

import posixpath

import json
from dataclasses import dataclass

from ..graph.ir import Layer, TrainingJob
from .env import render
from .literals import Code, py, py_str
from .script import Bindings, build_context

# task.py's "not given" for --max_iter (not HugeCTR's default: see task_defaults' max_iter)
TASK_NOT_GIVEN = 0


def _uniform(values: list) -> tuple[bool, object]:
    distinct = {json.dumps(v) for v in values}
    return len(distinct) == 1, (values[0] if values else None)


class TaskBindings(Bindings):
    def __init__(self, job: TrainingJob):
        self.job = job
        g = job.graph
        self.dropouts = [layer.values["dropout_rate"] for layer in g.layers if layer.type == "Dropout"]
        self.dropout_uniform, self.dropout = _uniform(self.dropouts)
        self.workspaces = [e.workspace_in_effect for e in g.embeddings]
        self.ws_uniform, self.ws = _uniform(self.workspaces)
        nnz = [s.nnz_arg if isinstance(s.nnz_arg, int) else list(s.nnz_arg) for s in g.sparse]
        self.nnz_uniform, self.nnz = _uniform(nnz)
        if not isinstance(self.nnz, int):
            self.nnz_uniform = False
        self.eval_is_train = job.settings.batchsize_eval == job.settings.batchsize

    def solver(self, key, value):
        bound = {"vvgpu": "gpus", "batchsize": "batchsize", "max_eval_batches": "args.max_eval_batches",
                 "lr": "args.lr", "repeat_dataset": "repeat_dataset"}
        if key == "batchsize_eval" and self.eval_is_train:
            return Code("batchsize")
        return Code(bound[key]) if key in bound else value

    def reader(self, key, value):
        bound = {"source": "args.train_data", "eval_source": "args.valid_data",
                 "slot_size_array": "slot_size_array", "num_workers": "args.num_workers"}
        return Code(bound[key]) if key in bound else value

    def sparse_nnz(self, sparse, value):
        return Code("args.nnz_per_slot") if self.nnz_uniform else Code(f"pick(args.nnz_per_slot, {py(value)})")

    def embedding(self, e, args):
        ws = e.workspace_in_effect
        expr = Code("args.workspace_size_per_gpu") if self.ws_uniform else Code(f"pick(args.workspace_size_per_gpu, {py(ws)})")
        out = []
        for k, v in args:
            if k == "workspace_size_per_gpu_in_mb":
                v = expr
            elif k == "slot_size_array":
                v = Code(f"slot_sizes({py_str(e.bottom)})")
            out.append((k, v))
        if not any(k == "workspace_size_per_gpu_in_mb" for k, _ in args):
            out.insert(1, ("workspace_size_per_gpu_in_mb", expr))
        return out

    def layer(self, layer: Layer, args):
        if layer.type != "Dropout":
            return args
        rate = layer.values["dropout_rate"]
        expr = Code("args.dropout_rate") if self.dropout_uniform else Code(f"pick(args.dropout_rate, {py(rate)})")
        out = [(k, v) for k, v in args if k != "dropout_rate"]
        return [*out, ("dropout_rate", expr)]

    def reader_comments(self, slot_cols):
        return ["slot_size_array: cardinalities of ALL_SLOTS (the features lock, or --schema)"]


@dataclass(frozen=True)
class TaskDefaults:
    """What task.py's arguments default to (also what the Vertex job passes)."""

    per_gpu_batch_size: int
    gpus: str
    lr: float
    dropout_rate: float | None
    max_iter: int
    num_epochs: int
    max_eval_batches: int
    eval_batches: int
    eval_interval: int
    display_interval: int
    snapshot_interval: int
    num_workers: int
    workspace_size_per_gpu: int | None
    nnz_per_slot: int | None
    num_dense_features: int
    num_sparse_features: int


def task_defaults(job: TrainingJob, eval_batches: int | None = None) -> TaskDefaults:
    b = TaskBindings(job)
    solver, fit = job.settings, job.fit_plan
    return TaskDefaults(
        per_gpu_batch_size=job.batchsize // job.gpu_count,
        gpus=json.dumps(solver.vvgpu, separators=(",", ":")),
        lr=solver.schedule.lr,
        dropout_rate=(float(b.dropout) if b.dropouts and b.dropout_uniform else None),
        # In epoch mode fit has no max_iter: 0 is task.py's "not given" (not HugeCTR's 2000), so --num_epochs=0
        # without --max_iter is refused rather than run for a number of iterations nobody chose.
        max_iter=fit.max_iter if fit.max_iter is not None else TASK_NOT_GIVEN,
        num_epochs=fit.num_epochs,
        max_eval_batches=solver.max_eval_batches,
        eval_batches=int(eval_batches or solver.max_eval_batches),
        eval_interval=fit.eval_interval, display_interval=fit.display,
        snapshot_interval=fit.snapshot,
        num_workers=job.reader_plan.num_workers,
        workspace_size_per_gpu=b.ws if b.ws_uniform else None,
        nnz_per_slot=b.nnz if b.nnz_uniform else None,
        num_dense_features=job.graph.dense_dim,
        num_sparse_features=sum(s.slot_num for s in job.graph.sparse),
    )


def _arg(flags: tuple[str, ...], type_: str | None, default: object, help_: str, **extra: object) -> dict:
    rest = []
    if type_:
        rest.append(f"type={type_}")
    for k, v in extra.items():
        rest.append(f"{k}={py(v)}")
    rest.append(f"default={py(default)}")
    rest.append(f"help={py_str(help_ + ' (default: %(default)s)')}")
    return {"flags": ", ".join(py_str(f) for f in flags), "rest": ", ".join(rest)}


def _arguments(job: TrainingJob, d: TaskDefaults) -> list[dict]:
    train = list(job.reader_plan.source)
    varied = "per-layer spec values"
    return [
        _arg(("--model_name",), "str", job.name, "model name: prefix of the saved model files"),
        _arg(("-t", "--train_data"), "str", train, "training file list(s) (_file_list.txt)", nargs="+"),
        _arg(("-v", "--valid_data"), "str", job.reader_plan.eval_source, "validation file list (_file_list.txt)"),
        _arg(("--schema",), "str", None, "the transformed dataset's schema.pbtxt (or .merlin/schema.json): "
                                         "cardinalities by column name instead of the features lock's"),
        _arg(("--dropout_rate",), "float", d.dropout_rate,
             "dropout rate of the Dropout layers" + ("" if d.dropout_rate is not None or not _has_dropout(job)
                                                      else f"; unset: the {varied}")),
        _arg(("--num_dense_features",), "int", d.num_dense_features, "number of dense features (fixed by the graph)"),
        _arg(("--num_sparse_features",), "int", d.num_sparse_features,
             "number of categorical slots (fixed by the graph)"),
        _arg(("--nnz_per_slot",), "int", d.nnz_per_slot,
             "max keys per slot of the sparse input(s)" + ("" if d.nnz_per_slot is not None else f"; unset: the {varied}")),
        _arg(("--lr",), "float", d.lr, "base learning rate"),
        _arg(("-i", "--max_iter"), "int", d.max_iter, "training iterations (iteration mode, --num_epochs=0)"),
        _arg(("--max_eval_batches",), "int", d.max_eval_batches, "evaluation batches during fit()"),
        _arg(("--eval_batches",), "int", d.eval_batches, "batches of the final evaluation (its AUC is reported)"),
        _arg(("--num_epochs",), "int", d.num_epochs, "training epochs; > 0 selects epoch mode (--max_iter ignored)"),
        _arg(("-b", "--per_gpu_batch_size"), "int", d.per_gpu_batch_size,
             "batch size per GPU; the global batch is this times the GPUs in --gpus"),
        _arg(("-s", "--snapshot_interval", "--snapshot"), "int", d.snapshot_interval,
             "save a snapshot every N iterations (0: never)", dest="snapshot_interval"),
        _arg(("--gpus",), "str", d.gpus, "GPUs as JSON, one list per node (vvgpu), e.g. [[0,1,2,3]]"),
        _arg(("-r", "--eval_interval"), "int", d.eval_interval, "evaluate every N iterations"),
        _arg(("--display_interval",), "int", d.display_interval, "show progress every N iterations"),
        _arg(("--workspace_size_per_gpu",), "int", d.workspace_size_per_gpu,
             "embedding workspace per GPU in MB" + ("" if d.workspace_size_per_gpu is not None
                                                    else f"; unset: the {varied}")),
        _arg(("--num_workers",), "int", d.num_workers, "data reader workers"),
        _arg(("--model_dir",), "str", ".", "where the model is saved when AIP_MODEL_DIR is not set"),
    ]


def _has_dropout(job: TrainingJob) -> bool:
    return any(layer.type == "Dropout" for layer in job.graph.layers)


def _inference_session(job: TrainingJob) -> bool:
    """Whether the final evaluation can reload the exported files into HugeCTR's offline inference session
    (CreateInferenceSession + InferenceSession.evaluate, seed 004's way); releases without it evaluate the training
    model itself (eval() + get_eval_metrics(), in every supported release)."""
    return all(job.profile.missing_function(f) is None for f in (
        "inference.CreateInferenceSession", "inference.InferenceSession.evaluate", "inference.InferenceParams"))


def render_task_py(job: TrainingJob, header: str, *, lock: str, eval_batches: int | None = None) -> str:
    d = task_defaults(job, eval_batches)
    g = job.graph
    slots = {s.name: list(s.columns) for s in g.sparse}
    cards = {c: n for s in g.sparse for c, n in zip(s.columns, s.cardinalities)}
    prefix = job.fit_plan.snapshot_prefix
    return render(
        "hugectr/task.py.j2",
        header=header,
        name_comment=f"HugeCTR {job.hugectr_version} model {job.name!r}".replace('"', "'"),
        metric=py_str("AUC"),
        dense_dim=g.dense_dim,
        slots=py(slots),
        lock_comment=lock if lock.isprintable() else repr(lock),
        cardinalities=py(cards),
        arguments=_arguments(job, d),
        has_dropout=_has_dropout(job),
        inference_session=_inference_session(job),
        version=job.hugectr_version,
        model_name=py_str(job.name),
        sparse_files=len(g.embeddings),
        i64_input_key=py(job.i64_input_key),
        reader_type=py(job.reader_plan.data_reader_type),
        check_type=py(job.reader_plan.check_type),
        reader_slot_sizes=job.reader_plan.slot_sizes,
        snapshot_prefix=py(prefix),
        weights_prefix=py_str(posixpath.basename(prefix)),
        weights_iteration=job.weights_iteration or 0,
        **build_context(job, TaskBindings(job)),
    )
