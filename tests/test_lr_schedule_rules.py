"""CreateSolver's warmup_steps / decay_steps: 0 is refused up to 23.02 (the schedulers throw "warmup_steps < 1 ||
decay_steps < 1") and accepted from 23.04 (only negative values are refused, which a size_t cannot be)."""

from __future__ import annotations

import pytest

from codegen.errors import UserError
from test_facts import movielens, render


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
