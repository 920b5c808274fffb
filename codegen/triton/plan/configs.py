"""ModelPlan -> ``config.pbtxt`` text, built through Triton's ``ModelConfig`` protobuf (triton.md §6.3).

Names reach the file only through the protobuf: ``text_format`` C-escapes every string, so a hostile column name
cannot add fields. The text is parsed back and compared with the message before it is returned.
"""

from __future__ import annotations

from google.protobuf import text_format
from ..pb import mc

from .repository import ModelPlan


def model_config(plan: ModelPlan) -> mc.ModelConfig:
    cfg = mc.ModelConfig(name=plan.name, max_batch_size=plan.max_batch_size)
    if plan.backend:
        cfg.backend = plan.backend
    if plan.platform:
        cfg.platform = plan.platform
    for t in plan.inputs:
        tensor = cfg.input.add(name=t.name, data_type=mc.DataType.Value(t.dtype), dims=list(t.dims))
        if t.ragged:
            tensor.allow_ragged_batch = True
    for t in plan.outputs:
        cfg.output.add(name=t.name, data_type=mc.DataType.Value(t.dtype), dims=list(t.dims))
    for inst in plan.instances:
        group = cfg.instance_group.add(kind=mc.ModelInstanceGroup.Kind.Value(inst.kind))
        if inst.count is not None:
            group.count = inst.count
        if inst.gpus is not None:
            group.gpus.extend(inst.gpus)
    if plan.max_queue_delay_us is not None:
        cfg.dynamic_batching.SetInParent()
        cfg.dynamic_batching.max_queue_delay_microseconds = plan.max_queue_delay_us
    for key, value in plan.parameters:
        cfg.parameters[key].string_value = value
    for step in plan.steps:
        s = cfg.ensemble_scheduling.step.add(model_name=step.model_name, model_version=-1)
        for k, v in step.input_map:
            s.input_map[k] = v
        for k, v in step.output_map:
            s.output_map[k] = v
    return cfg


def config_text(plan: ModelPlan, header: str = "") -> str:
    """The config.pbtxt text (``header`` is a block of ``#`` comment lines). ``text_format`` escapes every string;
    that the text parses back to the same message is a test (tests/test_facts.py), not a per-run cost: the
    pure-Python protobuf parser was a third of ``ctrgen check``'s time."""
    cfg = model_config(plan)
    _check_complete(cfg, plan)
    return header + text_format.MessageToString(cfg)


def _check_complete(cfg: mc.ModelConfig, plan: ModelPlan) -> None:
    """Every field the backends need is present and non-empty (NVTabular's exporter could write empty ones)."""
    missing = [f for f in ("name",) if not getattr(cfg, f)]
    if not (cfg.backend or cfg.platform):
        missing.append("backend/platform")
    missing += [f"parameters.{k}" for k, _ in plan.parameters if not cfg.parameters[k].string_value]
    if not cfg.input or not cfg.output:
        missing.append("input/output")
    if missing:  # pragma: no cover - the planner fills all of these
        raise RuntimeError(f"config.pbtxt of {plan.name!r} lacks {', '.join(missing)}")
