"""CreateSolver's warmup_steps / decay_steps: 0 is refused up to 23.02 (the schedulers throw "warmup_steps < 1 ||
decay_steps < 1") and accepted from 23.04 (only negative values are refused, which a size_t cannot be)."""

from __future__ import annotations

import pytest

from codegen.errors import UserError
from codegen.hugectr import api as A
from codegen.pipeline import open_spec, render_spec
from test_facts import MOVIELENS_LOCK, movielens, render, write_project


@pytest.mark.parametrize("field", ["warmup_steps", "decay_steps"])
@pytest.mark.parametrize("release,value,ok", [
    ("23.02", 1, True), ("23.02", 0, False), ("23.04", 0, True), ("25.03", 0, True), ("3.2", 0, False)])
def test_zero_lr_steps_follow_the_release(tmp_path, field, release, value, ok):
    spec = movielens(hugectr_version=release, **{f"solver__{field}": value})
    if ok:
        assert f"{field}={value}," in render(tmp_path, spec)["model.py"].replace(" ", "")
    else:
        with pytest.raises(UserError) as err:
            render(tmp_path, spec)
        msg = err.value.format()
        assert f"solver.{field}" in msg and f"HugeCTR {release} requires {field} >= 1" in msg and "23.04" in msg


def test_negative_lr_steps_are_refused_by_type(tmp_path):
    with pytest.raises(UserError, match="warmup_steps"):
        render(tmp_path, movielens(hugectr_version="25.03", solver__warmup_steps=-1))


def test_torch_schedule_without_decay_steps_keeps_the_base_rate(tmp_path):
    files = render(tmp_path, movielens(hugectr_version="25.03", solver__decay_start=5, solver__decay_steps=0))
    src = files["train_torch.py"]
    assert '"decay_steps": 0' in src
    from codegen.runtime.job import learning_rate    # the runtime's schedule with the generated SCHEDULE (no torch)

    sched = src[src.index("SCHEDULE = "):]
    namespace: dict = {}
    exec(sched[:sched.index("}\n") + 2], namespace)      # SCHEDULE = {...}
    assert learning_rate(namespace["SCHEDULE"], 100, namespace["SCHEDULE"]["lr"]) == namespace["SCHEDULE"]["lr"]


def _schedule(train_torch: str) -> dict:
    sched = train_torch[train_torch.index("SCHEDULE = "):]
    namespace: dict = {}
    exec(sched[:sched.index("}\n") + 2], namespace)      # SCHEDULE = {...}
    return namespace["SCHEDULE"]


def test_what_the_spec_leaves_out_is_hugectrs_default(tmp_path):
    """A spec that sets none of the schedule, the reader's workers or fit's snapshot gets HugeCTR's own defaults
    (hugectr.md §1: CreateSolver lr=0.001, warmup_steps=1, decay_start=0, decay_steps=1, decay_power=2.0,
    end_lr=0.0; DataReaderParams num_workers=12; Model.fit snapshot=10000), read from the API table in train_torch.py's
    SCHEDULE and in task.py's defaults alike. train_torch.py said warmup_steps 0, which HugeCTR 23.02 refuses."""
    from codegen.render.task import task_defaults
    from codegen.runtime.job import learning_rate

    spec = movielens(hugectr_version="23.02")
    del spec["training"]["snapshot"]
    rendered = render_spec(open_spec(write_project(tmp_path, spec, MOVIELENS_LOCK)))
    job = rendered.job
    assert not {"lr", "warmup_steps", "decay_start", "decay_steps", "decay_power", "end_lr"} & set(dict(job.solver))
    assert "num_workers" not in dict(job.reader) and "snapshot" not in dict(job.fit)
    sched = _schedule(rendered.files[next(k for k in rendered.files if k.name == "train_torch.py")])
    assert sched == {"lr": 0.001, "warmup_steps": 1, "decay_start": 0, "decay_steps": 1, "decay_power": 2.0,
                     "end_lr": 0.0}
    assert sched == {k: A.default("CreateSolver", k, "23.02") for k in sched}
    assert learning_rate(sched, 0, 0.001) == 0.001            # HugeCTR's first step: 1 * lr / warmup_steps
    d = task_defaults(job)
    assert (d.lr, d.num_workers, d.snapshot_interval) == (0.001, 12, 10000)


def test_an_api_default_is_exact_or_refused():
    """api.default never guesses: a release without the argument, or an argument without a plain default, is an
    ApiError."""
    assert A.default("CreateSolver", "warmup_steps", "25.03") == 1
    with pytest.raises(A.ApiError, match="no argument 'model_name' in HugeCTR 3.2"):
        A.default("CreateSolver", "model_name", "3.2")
    with pytest.raises(A.ApiError, match="no plain default"):
        A.default("Input", "label_dim", "25.03")
