"""Ensembles (triton.md §5 "Ensemble tensor wiring", §6.3): every ``input_map``/``output_map`` key is a tensor of the
step's model, every consumed tensor is an ensemble input or produced by a step, dtypes agree along each edge, and
the ensemble's outputs are produced. NVTabular's exporter names the steps ``<name>_nvt`` and ``<name>``."""

from __future__ import annotations

from dataclasses import dataclass

from .context import Context
from .findings import WARNING
from .modelconfig import ConfigFile, dtype_name

NVT_SUFFIX, ENS_SUFFIX = "_nvt", "_ens"


@dataclass(frozen=True)
class Tensor:
    dtype: str
    origin: str        # "ensemble input" or "output X of model M"
    producer: ConfigFile | None


def _add(ctx: Context, ens: ConfigFile, field: str, message: str, fix: str = "", **kw) -> None:
    ctx.add(ens.path, field, message, fix, line=ens.line_of_field(field), **kw)


def check_ensemble(ctx: Context, ens: ConfigFile, models: dict[str, ConfigFile]) -> list[tuple[ConfigFile, ConfigFile]]:
    """Check one ensemble; returns (producer, consumer) model pairs joined by a tensor, for the NVT rules."""
    steps = list(ens.config.ensemble_scheduling.step)
    if not steps:
        _add(ctx, ens, "ensemble_scheduling", "no steps: an ensemble runs at least one model",
             "add ensemble_scheduling { step [ ... ] }")
        return []
    tensors: dict[str, Tensor] = {t.name: Tensor(dtype_name(t.data_type), "ensemble input", None)
                                  for t in ens.config.input}
    members: list[ConfigFile | None] = []
    for i, step in enumerate(steps):
        member = models.get(step.model_name)
        members.append(member)
        if member is None:
            _add(ctx, ens, "model_name", f"step {i} runs {step.model_name!r}, which is not a model of this "
                 f"repository ({', '.join(sorted(models)) or 'none'})", "name a model folder of the repository",
                 actual=step.model_name)
            continue
        outputs = {t.name: dtype_name(t.data_type) for t in member.config.output}
        for key, tensor in sorted(step.output_map.items()):
            if key not in outputs:
                _add(ctx, ens, "output_map", f"step {i} ({member.name}): {key!r} is not an output of "
                     f"{member.name} ({', '.join(outputs)})", "map the model's own output names", actual=key)
            elif tensor in tensors:
                _add(ctx, ens, "output_map", f"step {i} ({member.name}): tensor {tensor!r} is already "
                     f"{tensors[tensor].origin}", "give every produced tensor its own name", actual=tensor)
            else:
                tensors[tensor] = Tensor(outputs[key], f"output {key} of {member.name}", member)
    edges: list[tuple[ConfigFile, ConfigFile]] = []
    for i, (step, member) in enumerate(zip(steps, members)):
        if member is None:
            continue
        inputs = {t.name: t for t in member.config.input}
        for key, tensor in sorted(step.input_map.items()):
            if key not in inputs:
                _add(ctx, ens, "input_map", f"step {i} ({member.name}): {key!r} is not an input of {member.name} "
                     f"({', '.join(inputs)})", "map the model's own input names", actual=key)
            elif tensor not in tensors:
                _add(ctx, ens, "input_map", f"step {i} ({member.name}): input {key} reads {tensor!r}, which is "
                     "neither an ensemble input nor an output_map value of a step",
                     "wire it to an ensemble input or a step output", actual=tensor)
            else:
                want = dtype_name(inputs[key].data_type)
                if tensors[tensor].dtype != want:
                    _add(ctx, ens, "input_map", f"step {i} ({member.name}): {tensor!r} is {tensors[tensor].dtype} "
                         f"({tensors[tensor].origin}), but input {key} of {member.name} is {want} (triton.md §5)",
                         "make both data types equal", actual=tensors[tensor].dtype, expected=want)
                producer = tensors[tensor].producer
                if producer is not None and (producer, member) not in edges:
                    edges.append((producer, member))
        for name, tensor in sorted(inputs.items()):
            if name not in step.input_map and not tensor.optional:
                _add(ctx, ens, "input_map", f"step {i} ({member.name}): input {name} of {member.name} is not "
                     "mapped", f"add input_map {{ key: \"{name}\" value: \"...\" }}", expected=name)
        if member.config.max_batch_size < ens.config.max_batch_size:
            _add(ctx, ens, "max_batch_size", f"{ens.config.max_batch_size} > max_batch_size "
                 f"{member.config.max_batch_size} of step {i} ({member.name})",
                 "an ensemble batch must fit every step", actual=ens.config.max_batch_size,
                 expected=member.config.max_batch_size)
    for out in ens.config.output:
        got = tensors.get(out.name)
        if got is None or got.producer is None:
            _add(ctx, ens, "output", f"{out.name!r} is not produced by any step", "map a step output to it",
                 actual=out.name)
        elif got.dtype != dtype_name(out.data_type):
            _add(ctx, ens, "output", f"{out.name!r} is {dtype_name(out.data_type)}, but it is {got.origin}, "
                 f"{got.dtype}", "make both data types equal", actual=dtype_name(out.data_type), expected=got.dtype)
    _check_names(ctx, ens, edges)
    return edges


def _check_names(ctx: Context, ens: ConfigFile, edges: list[tuple[ConfigFile, ConfigFile]]) -> None:
    """NVTabular's exporter (and ctrgen) name the three models <name>_nvt, <name>, <name>_ens (triton.md §6.3)."""
    for producer, consumer in edges:
        if consumer.config.backend != "hugectr" or producer.config.platform == "ensemble":
            continue
        base = consumer.name
        if producer.name != base + NVT_SUFFIX:
            _add(ctx, ens, "model_name", f"the step feeding hugectr model {base!r} is {producer.name!r}; the "
                 f"exporter names it {base + NVT_SUFFIX!r} (triton.md §6.3)", "rename the preprocessing model",
                 severity=WARNING, actual=producer.name, expected=base + NVT_SUFFIX)
        if ens.name != base + ENS_SUFFIX:
            _add(ctx, ens, "name", f"{ens.name!r} serves hugectr model {base!r}; the exporter names the ensemble "
                 f"{base + ENS_SUFFIX!r} (triton.md §6.3)", "rename the ensemble", severity=WARNING,
                 actual=ens.name, expected=base + ENS_SUFFIX)
