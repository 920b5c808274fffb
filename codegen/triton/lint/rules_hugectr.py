"""Rules for one ``backend: "hugectr"`` model: config.pbtxt on its own (triton.md §2.1), against its ps.json entry
(§2.2, §4, §5) and against the training side, i.e. the graph JSON (§5) or, without one, the features lock.

Parameters are read in params.py, the graph JSON located in training_side.py; keys are checked in rules_keys.py, the
per-table lists of ps.json in rules_pstables.py, the weight files in rules_files.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import Located
from ...hugectr.backend import CATCOLUMN, INPUTS as HUGECTR_INPUTS, OUTPUT_DTYPE as HUGECTR_OUTPUT_DTYPE
from .context import Context
from .findings import WARNING
from .modelconfig import ConfigFile, dtype_name, kind_name
from .params import Params
from .psentry import PsEntry
from .psjson import as_bool, as_float, as_int, as_list, show
from .training_side import Truth

PS_DEFAULT_WORKER_BUFFERS = 1  # triton.md §4: num_of_worker_buffer_in_pool default
PS_DEFAULT_GPUCACHE = True


@dataclass(frozen=True)
class Count:
    """A count that config.pbtxt, ps.json and training must agree on (triton.md §5)."""

    param: str
    ps_key: str
    truth: str                  # attribute of Truth
    what: str                   # how the training side calls it
    ps_default: int | None      # what the backend uses when both files leave it out


COUNTS = (
    Count("slots", "slot_num", "slots", "Σ slot_num of the sparse inputs", None),
    Count("des_feature_num", "maxnum_des_feature_per_sample", "dense_dim", "dense_dim", 26),
    Count("label_dim", "label_dim", "label_dim", "label_dim", None),
)


# ---- config.pbtxt on its own ----------------------------------------------------------------------------------
def check_tensors(ctx: Context, cfg: ConfigFile) -> str | None:
    """Inputs and output (triton.md §2.1). Returns the CATCOLUMN data type when it is an accepted one."""
    model = cfg.config
    names = [i.name for i in model.input]
    if len(names) != len(HUGECTR_INPUTS) or set(names) != set(HUGECTR_INPUTS):
        ctx.add_cfg(cfg, "input", f"{names}: the backend expects 3 inputs named DES, CATCOLUMN and ROWINDEX "
                f"(\"expect 3 input, got {len(names)}\" / \"expected input name as DES,CATCOLUMN and ROWINDEX\")",
                "declare exactly DES (TYPE_FP32), CATCOLUMN (TYPE_INT64) and ROWINDEX (TYPE_INT32), dims [-1]",
                actual=names, expected=list(HUGECTR_INPUTS))
    catcol = None
    for tensor in model.input:
        allowed = HUGECTR_INPUTS.get(tensor.name)
        if allowed is None:
            continue
        dtype = dtype_name(tensor.data_type)
        line = cfg.line_of_tensor(tensor.name)
        if dtype not in allowed:
            ctx.add_cfg(cfg, f"input.{tensor.name}.data_type", f"{dtype} is not accepted for {tensor.name}; "
                    f"the backend expects {' or '.join(allowed)} (triton.md §2.1)",
                    f"set data_type: {allowed[0]}", line=line, actual=dtype, expected=allowed[0])
        elif tensor.name == CATCOLUMN:
            catcol = dtype
        _check_dims(ctx, cfg, f"input.{tensor.name}.dims", list(tensor.dims), line)
    if len(model.output) != 1:
        ctx.add_cfg(cfg, "output", f"{len(model.output)} outputs: backend v4.3 serves exactly one "
                f"(\"expect 1 output, got {len(model.output)}\", triton.md §2.1)",
                "declare one output (OUTPUT0, TYPE_FP32, dims [-1])", actual=[o.name for o in model.output])
    for tensor in model.output:
        line = cfg.line_of_tensor(tensor.name)
        dtype = dtype_name(tensor.data_type)
        if dtype != HUGECTR_OUTPUT_DTYPE:
            ctx.add_cfg(cfg, f"output.{tensor.name}.data_type", f"{dtype}: the backend expects "
                    f"{HUGECTR_OUTPUT_DTYPE} (triton.md §2.1)", f"set data_type: {HUGECTR_OUTPUT_DTYPE}",
                    line=line, actual=dtype, expected=HUGECTR_OUTPUT_DTYPE)
        _check_dims(ctx, cfg, f"output.{tensor.name}.dims", list(tensor.dims), line)
    return catcol


def _check_dims(ctx: Context, cfg: ConfigFile, field: str, dims: list[int], line: int | None) -> None:
    if not dims or dims[0] != -1:
        ctx.add_cfg(cfg, field, f"{dims}: the backend expects the first dim to be -1 "
                f"(\"expected input shape equal -1\", triton.md §2.1)", "set dims: [ -1 ]", line=line,
                actual=dims, expected=[-1])


def check_instances(ctx: Context, cfg: ConfigFile, ps: PsEntry | None) -> None:
    """instance_group: KIND_GPU, count <= num_of_worker_buffer_in_pool, gpus within deployed_device_list (§2.1, §5)."""
    groups = list(cfg.config.instance_group)
    if not groups:
        ctx.add_cfg(cfg, "instance_group", "absent: the backend expects at least one instance group "
                "(triton.md §2.1)", "add instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]")
    workers = ps.value("num_of_worker_buffer_in_pool", as_int) if ps else None
    devices = _device_list(ps) if ps else None
    for i, g in enumerate(groups):
        kind = kind_name(g.kind)
        if kind not in ("KIND_GPU", "KIND_AUTO"):
            ctx.add_cfg(cfg, "instance_group.kind", f"instance group {i} has {kind}: the backend expects "
                    "KIND_GPU (\"expect GPU kind instance in instance group\", triton.md §2.1)",
                    "set kind: KIND_GPU", actual=kind, expected="KIND_GPU")
        count = g.count or 1
        if ps is not None:
            limit = workers if workers is not None else PS_DEFAULT_WORKER_BUFFERS
            if count > limit:
                origin = "" if ps.has("num_of_worker_buffer_in_pool") else " (default; ps.json leaves it out)"
                ctx.add_cfg(cfg, "instance_group.count", f"{count} instances in group {i} > "
                        f"num_of_worker_buffer_in_pool {limit}{origin} of {ps.where()} (triton.md §2.1)",
                        f"lower count to {limit} or raise num_of_worker_buffer_in_pool to {count}",
                        actual=count, expected=limit)
        extra = sorted(set(g.gpus) - set(devices)) if devices is not None else []
        if extra:
            ctx.add_cfg(cfg, "instance_group.gpus", f"{list(g.gpus)} names GPU {extra} that ps.json "
                    f"deployed_device_list {devices} does not (triton.md §5)",
                    "list the same GPUs in both files", actual=list(g.gpus), expected=devices)


def _device_list(ps: PsEntry) -> list[int] | None:
    raw = ps.value("deployed_device_list", as_list)
    if raw is None:
        return None
    try:
        return [as_int(v) for v in raw]
    except Located as exc:
        ps.add("deployed_device_list", f"{show(raw)}: {exc}", "list GPU ids as integers", actual=raw)
        return None


# ---- config.pbtxt against ps.json -----------------------------------------------------------------------------
# Keys backend v4.3 requires in every models[] entry (triton.md §4); per-table lists are in rules_pstables.py.
PS_REQUIRED = ("network_file", "dense_file", "max_batch_size", "deployed_device_list")


def check_against_ps(ctx: Context, cfg: ConfigFile, params: Params, ps: PsEntry) -> None:
    for key in PS_REQUIRED:
        if not ps.has(key):
            ps.add(key, f"absent from {ps.where()}: hugectr_backend v4.3 requires it (triton.md §4)",
                   f"add \"{key}\"")
    if not ps.has("supportlonglong", top_level=True):
        ps.add("supportlonglong", "absent: hugectr_backend v4.3 requires the top-level key (triton.md §4)",
               "add \"supportlonglong\": true for int64 keys", top_level=True)
    elif not isinstance(ps.raw("supportlonglong", top_level=True), bool):
        raw = ps.raw("supportlonglong", top_level=True)
        ps.add("supportlonglong", f"{show(raw)} is not a JSON boolean: hugectr_backend v4.3 accepts the string, "
               "HugeCTR's own parser (HPS, json.get<bool>) does not (triton.md §4, §7)",
               f"write \"supportlonglong\": {str(ps.value('supportlonglong', as_bool, top_level=True)).lower()}",
               severity=WARNING, top_level=True, actual=raw)

    mbs = ps.value("max_batch_size", as_int)
    if mbs is not None and cfg.config.max_batch_size != mbs:
        ctx.add_cfg(cfg, "max_batch_size", f"{cfg.config.max_batch_size} != max_batch_size {mbs} of "
                f"{ps.where()} (\"expected max_batch_size should equal to {mbs}\", triton.md §2.1, R16)",
                "make both equal: the largest number of samples in one request",
                actual=cfg.config.max_batch_size, expected=mbs)

    gpucache = ps.value("gpucache", as_bool)
    ps_gpucache = PS_DEFAULT_GPUCACHE if gpucache is None else gpucache
    if "gpucache" in params and params["gpucache"] != ps_gpucache:
        ctx.add_cfg(cfg, "gpucache", f"{show(params.raw['gpucache'])} != gpucache {str(ps_gpucache).lower()} of "
                f"{ps.where()} (the backend requires them equal, triton.md §2.2)",
                "use the same value in both files", param=True, actual=params.raw["gpucache"],
                expected=str(ps_gpucache).lower())
    if ps_gpucache:
        for key in ("gpucacheper", "hit_rate_threshold"):
            if not ps.has(key):
                ps.add(key, f"absent from {ps.where()}: required when gpucache is on (triton.md §4)",
                       f"add \"{key}\"")
    for key in ("gpucacheper", "hit_rate_threshold"):
        ps_value = ps.value(key, as_float)
        if key in params and ps_value is not None and params[key] > ps_value:
            ctx.add_cfg(cfg, key, f"{show(params.raw[key])} > {key} {ps_value:g} of {ps.where()}: the backend "
                    "accepts at most the ps.json value (triton.md §2.2)",
                    f"lower it to {ps_value:g} or raise the ps.json value", param=True,
                    actual=params.raw[key], expected=ps_value)

def check_counts(ctx: Context, cfg: ConfigFile, params: Params, ps: PsEntry | None, truth: Truth) -> None:
    """slots, des_feature_num, label_dim in both files == training (triton.md §5)."""
    for c in COUNTS:
        want = getattr(truth, c.truth)
        if c.param in params and params[c.param] != want:
            ctx.add_cfg(cfg, c.param, f"{show(params.raw[c.param])} != {want} ({c.what} in {truth.source}; "
                    "triton.md §5)", f"set {c.param} to \"{want}\"", param=True,
                    actual=params.raw[c.param], expected=str(want))
        ps_value = ps.value(c.ps_key, as_int) if ps else None
        if ps_value is not None and ps_value != want:
            ps.add(c.ps_key, f"{show(ps.raw(c.ps_key))} != {want} ({c.what} in {truth.source}; triton.md §4, §5)",
                   f"set \"{c.ps_key}\": {want}", actual=ps.raw(c.ps_key), expected=want)
        if c.param in params or (ps is not None and ps.has(c.ps_key)):
            continue
        if c.ps_default is None and c.param == "slots":
            ctx.add_cfg(cfg, c.param, f"absent from config.pbtxt and ps.json ({c.ps_key}): the backend cannot "
                    f"split ROWINDEX without it (triton.md §2.2, §3); {c.what} is {want}",
                    f"add parameters {{ key: \"{c.param}\" value {{ string_value: \"{want}\" }} }}",
                    expected=str(want))
        elif c.ps_default is not None and c.ps_default != want and ps is not None:
            ps.add(c.ps_key, f"absent here and {c.param} absent from config.pbtxt: the backend uses the default "
                   f"{c.ps_default}, but {c.what} is {want} (triton.md §2.2)", f"set \"{c.ps_key}\": {want}",
                   expected=want)
