"""Rules for one ``backend: "hugectr"`` model: config.pbtxt on its own (triton.md §2.1), against its ps.json entry
(§2.2, §4, §5) and against the training side, i.e. the graph JSON (§5) or, without one, the features lock.

The per-table lists of ps.json are in rules_pstables.py, the weight files in rules_files.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from .context import Context
from .findings import ERROR, WARNING
from .graphjson import Graph, GraphError, load_graph
from .modelconfig import ConfigFile, dtype_name, kind_name
from .psentry import PsEntry
from .psjson import BadValue, as_bool, as_float, as_int, as_list, brief, show

# triton.md §2.1 (hugectr_backend@v4.3:src/hugectr.cc ValidateModelConfig): input name -> accepted data types.
HUGECTR_INPUTS: dict[str, tuple[str, ...]] = {
    "DES": ("TYPE_FP32",),
    "CATCOLUMN": ("TYPE_INT64", "TYPE_UINT32"),
    "ROWINDEX": ("TYPE_INT32",),
}
HUGECTR_OUTPUT_DTYPE = "TYPE_FP32"
# embeddingkey_long_type / supportlonglong -> the CATCOLUMN data type that carries such keys (triton.md §5, R6).
KEY_DTYPE = {True: "TYPE_INT64", False: "TYPE_UINT32"}
LONG_KEY_COLUMN_DTYPES = ("int64", "uint64")
PS_DEFAULT_WORKER_BUFFERS = 1  # triton.md §4: num_of_worker_buffer_in_pool default
PS_DEFAULT_GPUCACHE = True


@dataclass(frozen=True)
class Param:
    """A config.pbtxt parameter (triton.md §2.2): how to read its string, and the ps.json key used when absent."""

    key: str
    read: Callable[[str], Any]
    ps_key: str | None = None


PARAMS = (
    Param("config", str, "network_file"),
    Param("slots", as_int, "slot_num"),
    Param("des_feature_num", as_int, "maxnum_des_feature_per_sample"),
    Param("cat_feature_num", as_int),          # absent: Σ maxnum_catfeature_query_per_table_per_sample
    Param("max_nnz", as_int),
    Param("embedding_vector_size", as_int),    # absent: Σ embedding_vecsize_per_table
    Param("label_dim", as_int, "label_dim"),
    Param("embeddingkey_long_type", as_bool, "supportlonglong"),
    Param("gpucache", as_bool, "gpucache"),
    Param("gpucacheper", as_float, "gpucacheper"),
    Param("hit_rate_threshold", as_float, "hit_rate_threshold"),
    Param("dense_file", str, "dense_file"),
    Param("sparse_files", str, "sparse_files"),
    Param("refresh_interval", as_int),
    Param("refresh_delay", as_int),
    Param("freeze_sparse", as_bool),
    Param("mixed_precision", as_bool),
)


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


@dataclass(frozen=True)
class Truth:
    """The training side's counts: from the graph JSON, else from the features lock."""

    source: str
    slots: int
    dense_dim: int
    label_dim: int


@dataclass(frozen=True)
class KeyEvidence:
    """Whether requests carry several keys in a slot: known from the lock, declared by cat_feature_num > slots,
    or unknown (then values between the one-hot and the graph's bound depend on the data)."""

    kind: str  # "multi", "one_hot" or "unknown"
    reason: str = ""


class Params(dict):
    """Typed config.pbtxt parameters: key -> value (absent keys and unreadable strings are missing); ``raw`` holds
    the strings as written, for messages."""

    def __init__(self) -> None:
        super().__init__()
        self.raw: dict[str, str] = {}


def cfg_add(ctx: Context, cfg: ConfigFile, field: str, message: str, fix: str = "", *, param: bool = False,
            line: int | None = None, **kw: Any) -> None:
    if line is None:
        line = cfg.line_of_param(field) if param else cfg.line_of_field(field.split(".")[0])
    ctx.add(cfg.path, field, message, fix, line=line, **kw)


def read_params(ctx: Context, cfg: ConfigFile) -> Params:
    params = Params()
    for p in PARAMS:
        raw = cfg.string_param(p.key)
        if raw is None:
            continue
        params.raw[p.key] = raw
        try:
            params[p.key] = p.read(raw)
        except BadValue as exc:
            cfg_add(ctx, cfg, p.key, f"{exc} (triton.md §2.2)", "every parameter is a string_value: a decimal string, "
                    "or \"true\"/\"false\" (triton.md §2.2)", param=True, actual=raw)
    return params


# ---- config.pbtxt on its own ----------------------------------------------------------------------------------
def check_tensors(ctx: Context, cfg: ConfigFile) -> str | None:
    """Inputs and output (triton.md §2.1). Returns the CATCOLUMN data type when it is an accepted one."""
    model = cfg.config
    names = [i.name for i in model.input]
    if len(names) != len(HUGECTR_INPUTS) or set(names) != set(HUGECTR_INPUTS):
        cfg_add(ctx, cfg, "input", f"{names}: the backend expects 3 inputs named DES, CATCOLUMN and ROWINDEX "
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
            cfg_add(ctx, cfg, f"input.{tensor.name}.data_type", f"{dtype} is not accepted for {tensor.name}; "
                    f"the backend expects {' or '.join(allowed)} (triton.md §2.1)",
                    f"set data_type: {allowed[0]}", line=line, actual=dtype, expected=allowed[0])
        elif tensor.name == "CATCOLUMN":
            catcol = dtype
        _check_dims(ctx, cfg, f"input.{tensor.name}.dims", list(tensor.dims), line)
    if len(model.output) != 1:
        cfg_add(ctx, cfg, "output", f"{len(model.output)} outputs: backend v4.3 serves exactly one "
                f"(\"expect 1 output, got {len(model.output)}\", triton.md §2.1)",
                "declare one output (OUTPUT0, TYPE_FP32, dims [-1])", actual=[o.name for o in model.output])
    for tensor in model.output:
        line = cfg.line_of_tensor(tensor.name)
        dtype = dtype_name(tensor.data_type)
        if dtype != HUGECTR_OUTPUT_DTYPE:
            cfg_add(ctx, cfg, f"output.{tensor.name}.data_type", f"{dtype}: the backend expects "
                    f"{HUGECTR_OUTPUT_DTYPE} (triton.md §2.1)", f"set data_type: {HUGECTR_OUTPUT_DTYPE}",
                    line=line, actual=dtype, expected=HUGECTR_OUTPUT_DTYPE)
        _check_dims(ctx, cfg, f"output.{tensor.name}.dims", list(tensor.dims), line)
    return catcol


def _check_dims(ctx: Context, cfg: ConfigFile, field: str, dims: list[int], line: int | None) -> None:
    if not dims or dims[0] != -1:
        cfg_add(ctx, cfg, field, f"{dims}: the backend expects the first dim to be -1 "
                f"(\"expected input shape equal -1\", triton.md §2.1)", "set dims: [ -1 ]", line=line,
                actual=dims, expected=[-1])


def check_instances(ctx: Context, cfg: ConfigFile, ps: PsEntry | None) -> None:
    """instance_group: KIND_GPU, count <= num_of_worker_buffer_in_pool, gpus within deployed_device_list (§2.1, §5)."""
    groups = list(cfg.config.instance_group)
    if not groups:
        cfg_add(ctx, cfg, "instance_group", "absent: the backend expects at least one instance group "
                "(triton.md §2.1)", "add instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]")
    workers = ps.value("num_of_worker_buffer_in_pool", as_int) if ps else None
    devices = _device_list(ps) if ps else None
    for i, g in enumerate(groups):
        kind = kind_name(g.kind)
        if kind not in ("KIND_GPU", "KIND_AUTO"):
            cfg_add(ctx, cfg, "instance_group.kind", f"instance group {i} has {kind}: the backend expects "
                    "KIND_GPU (\"expect GPU kind instance in instance group\", triton.md §2.1)",
                    "set kind: KIND_GPU", actual=kind, expected="KIND_GPU")
        count = g.count or 1
        if ps is not None:
            limit = workers if workers is not None else PS_DEFAULT_WORKER_BUFFERS
            if count > limit:
                origin = "" if ps.has("num_of_worker_buffer_in_pool") else " (default; ps.json leaves it out)"
                cfg_add(ctx, cfg, "instance_group.count", f"{count} instances in group {i} > "
                        f"num_of_worker_buffer_in_pool {limit}{origin} of {ps.where()} (triton.md §2.1)",
                        f"lower count to {limit} or raise num_of_worker_buffer_in_pool to {count}",
                        actual=count, expected=limit)
        extra = sorted(set(g.gpus) - set(devices)) if devices is not None else []
        if extra:
            cfg_add(ctx, cfg, "instance_group.gpus", f"{list(g.gpus)} names GPU {extra} that ps.json "
                    f"deployed_device_list {devices} does not (triton.md §5)",
                    "list the same GPUs in both files", actual=list(g.gpus), expected=devices)


def _device_list(ps: PsEntry) -> list[int] | None:
    raw = ps.value("deployed_device_list", as_list)
    if raw is None:
        return None
    try:
        return [as_int(v) for v in raw]
    except BadValue as exc:
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
        cfg_add(ctx, cfg, "max_batch_size", f"{cfg.config.max_batch_size} != max_batch_size {mbs} of "
                f"{ps.where()} (\"expected max_batch_size should equal to {mbs}\", triton.md §2.1, R16)",
                "make both equal: the largest number of samples in one request",
                actual=cfg.config.max_batch_size, expected=mbs)

    gpucache = ps.value("gpucache", as_bool)
    ps_gpucache = PS_DEFAULT_GPUCACHE if gpucache is None else gpucache
    if "gpucache" in params and params["gpucache"] != ps_gpucache:
        cfg_add(ctx, cfg, "gpucache", f"{show(params.raw['gpucache'])} != gpucache {str(ps_gpucache).lower()} of "
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
            cfg_add(ctx, cfg, key, f"{show(params.raw[key])} > {key} {ps_value:g} of {ps.where()}: the backend "
                    "accepts at most the ps.json value (triton.md §2.2)",
                    f"lower it to {ps_value:g} or raise the ps.json value", param=True,
                    actual=params.raw[key], expected=ps_value)


# ---- the graph JSON -------------------------------------------------------------------------------------------
def locate_graph(ctx: Context, cfg: ConfigFile, params: Params, ps: PsEntry | None) -> Graph | None:
    """The graph JSON named by the ``config`` parameter or ps.json ``network_file`` (triton.md §2.2, §5)."""
    found = []
    if "config" in params:
        r = resolve_named(ctx, "config", params["config"], [cfg.repo_root, ctx.root], cfg=cfg)
        if r is not None:
            found.append(("config", r))
    if ps is not None and isinstance(ps.raw("network_file"), str):
        r = resolve_named(ctx, "network_file", ps.raw("network_file"),
                          [cfg.repo_root, ctx.root, ps.file.path.parent], ps=ps)
        if r is not None:
            found.append(("network_file", r))
    if len(found) == 2 and found[0][1].resolve() != found[1][1].resolve():
        cfg_add(ctx, cfg, "config", f"{show(params['config'])} names {ctx.show_path(found[0][1])} but "
                f"network_file of {ps.where()} names {ctx.show_path(found[1][1])} (triton.md §5: config == "
                "network_file)", "point both at the same graph JSON", param=True,
                actual=params["config"], expected=ps.raw("network_file"))
    if not found:
        return None
    path = found[0][1]
    try:
        return load_graph(path)
    except GraphError as exc:
        ctx.add(path, exc.field, exc.message, "regenerate it with Model.graph_to_json (hugectr.md §2)",
                line=exc.line, col=exc.col)
    except OSError as exc:
        ctx.add(path, "config", f"cannot read the graph JSON: {exc.strerror}")
    return None


def resolve_named(ctx: Context, field: str, given: str, bases: list[Path], *, cfg: ConfigFile | None = None,
                  ps: PsEntry | None = None) -> Path | None:
    """Resolve a path that config.pbtxt (cfg) or ps.json (ps) names; report it when it is empty, missing or cannot
    be checked here. Returns the local path when it exists."""
    def add(message: str, fix: str, severity: str = ERROR) -> None:
        if cfg is not None:
            cfg_add(ctx, cfg, field, message, fix, param=True, severity=severity, actual=given)
        else:
            ps.add(field, message, fix, severity=severity, actual=given)

    if not given:
        add("empty path", "name the file (a path as the server sees it)")
        return None
    r = ctx.resolver.resolve(given, bases)
    if r.unmapped:
        add(f"{show(given)} is an absolute path that is not on this machine; it was not checked",
            f"pass --root-map /{given.split('/')[1]}=<local folder> to check it", WARNING)
        return None
    if not r.exists:
        add(f"{show(given)} not found (looked for {r.path})",
            "fix the path or --root-map (triton.md §4, R17)" if PurePosixPath(given).is_absolute() else
            "fix the path: relative paths are read from the repository root (triton.md §5, R17)")
        return None
    return r.path


def truth_of(ctx: Context, graph: Graph | None) -> Truth | None:
    if graph is not None:
        return Truth(f"the graph {ctx.show_path(graph.path)}", graph.slots, graph.dense_dim, graph.label_dim)
    if ctx.lock is not None:
        lock = ctx.lock
        return Truth(f"the features lock {ctx.show_path(ctx.lock_path)}", len(lock.categorical),
                     len(lock.continuous), len(lock.labels))
    return None


def check_counts(ctx: Context, cfg: ConfigFile, params: Params, ps: PsEntry | None, truth: Truth) -> None:
    """slots, des_feature_num, label_dim in both files == training (triton.md §5)."""
    for c in COUNTS:
        want = getattr(truth, c.truth)
        if c.param in params and params[c.param] != want:
            cfg_add(ctx, cfg, c.param, f"{show(params.raw[c.param])} != {want} ({c.what} in {truth.source}; "
                    "triton.md §5)", f"set {c.param} to \"{want}\"", param=True,
                    actual=params.raw[c.param], expected=str(want))
        ps_value = ps.value(c.ps_key, as_int) if ps else None
        if ps_value is not None and ps_value != want:
            ps.add(c.ps_key, f"{show(ps.raw(c.ps_key))} != {want} ({c.what} in {truth.source}; triton.md §4, §5)",
                   f"set \"{c.ps_key}\": {want}", actual=ps.raw(c.ps_key), expected=want)
        if c.param in params or (ps is not None and ps.has(c.ps_key)):
            continue
        if c.ps_default is None and c.param == "slots":
            cfg_add(ctx, cfg, c.param, f"absent from config.pbtxt and ps.json ({c.ps_key}): the backend cannot "
                    f"split ROWINDEX without it (triton.md §2.2, §3); {c.what} is {want}",
                    f"add parameters {{ key: \"{c.param}\" value {{ string_value: \"{want}\" }} }}",
                    expected=str(want))
        elif c.ps_default is not None and c.ps_default != want and ps is not None:
            ps.add(c.ps_key, f"absent here and {c.param} absent from config.pbtxt: the backend uses the default "
                   f"{c.ps_default}, but {c.what} is {want} (triton.md §2.2)", f"set \"{c.ps_key}\": {want}",
                   expected=want)


def key_evidence(params: Params, graph: Graph, ctx: Context) -> KeyEvidence:
    if ctx.lock is not None:
        multi = [c.name for c in ctx.lock.categorical if c.multi_hot]
        if multi:
            return KeyEvidence("multi", f"the features lock marks {', '.join(multi)} multi-hot")
        return KeyEvidence("one_hot", "the features lock has only one-hot columns")
    if params.get("cat_feature_num", 0) > graph.slots:
        return KeyEvidence("multi", f"cat_feature_num {params['cat_feature_num']} > slots {graph.slots} "
                                    "declares rows with several keys in a slot")
    return KeyEvidence("unknown")


def check_key_buffers(ctx: Context, cfg: ConfigFile, params: Params, graph: Graph, ev: KeyEvidence) -> None:
    """cat_feature_num covers the keys of one sample, max_nnz the keys of one slot (triton.md §2.2, §5, R15)."""
    slots, keys = graph.slots, graph.keys_per_sample
    fix = (f"set cat_feature_num to \"{keys}\" (Σ nnz_per_slot; the backend sizes its key buffer as "
           "max_batch_size × cat_feature_num, triton.md §2.2, R15)")
    if "cat_feature_num" in params:
        have, raw = params["cat_feature_num"], params.raw["cat_feature_num"]
        multi = [s for s in graph.sparse if not s.one_hot]
        shape = "; ".join(f"{s.top} is {'declared multi-hot' if not s.one_hot else 'one-hot'} ({s.slot_num} slots, "
                          f"nnz_per_slot {brief(list(s.nnz_per_slot))}, is_fixed_length "
                          f"{str(s.is_fixed_length).lower()})" for s in (multi or graph.sparse))
        if have <= 0:
            cfg_add(ctx, cfg, "cat_feature_num", f"{show(raw)}: the backend expects at least one categorical "
                    "feature (triton.md §2.2)", fix, param=True, actual=raw, expected=str(keys))
        elif have < slots:
            cfg_add(ctx, cfg, "cat_feature_num", f"{show(raw)} is below the {slots} slots of the graph: every slot "
                    f"sends at least one key per sample ({shape})", fix, param=True, actual=raw,
                    expected=str(keys))
        elif have < keys and ev.kind == "multi":
            cfg_add(ctx, cfg, "cat_feature_num", f"{show(raw)} is below the keys per sample: {shape}: up to "
                    f"{keys} keys per sample, and {ev.reason}", fix, param=True, actual=raw, expected=str(keys))
        elif have < keys and ev.kind == "unknown":
            cfg_add(ctx, cfg, "cat_feature_num", f"{show(raw)} covers one key per slot, but {shape}: up to {keys} "
                    "keys per sample; enough only if requests are one-hot (depends on the data)", fix,
                    param=True, severity=WARNING, actual=raw, expected=str(keys))
    if "max_nnz" in params and params["max_nnz"] < graph.max_nnz and ev.kind != "one_hot":
        widest = max(graph.sparse, key=lambda s: s.max_nnz)
        cfg_add(ctx, cfg, "max_nnz", f"{show(params.raw['max_nnz'])} < nnz_per_slot {widest.max_nnz} of "
                f"{widest.top}: one slot may carry that many keys (triton.md §5, R15)",
                f"set max_nnz to \"{graph.max_nnz}\"", param=True, actual=params.raw["max_nnz"],
                expected=str(graph.max_nnz))
    # A buffer hint: Σ over the tables (the backend's default) or the widest table's (lint fixtures README).
    if "embedding_vector_size" in params and params["embedding_vector_size"] not in (sum(graph.vec_sizes),
                                                                                     max(graph.vec_sizes, default=0)):
        cfg_add(ctx, cfg, "embedding_vector_size", f"{show(params.raw['embedding_vector_size'])} != Σ "
                f"embedding_vec_size {sum(graph.vec_sizes)} of {graph.describe_tables()} {graph.vec_sizes} "
                "(triton.md §2.2)", f"set embedding_vector_size to \"{sum(graph.vec_sizes)}\"", param=True,
                actual=params.raw["embedding_vector_size"], expected=str(sum(graph.vec_sizes)))


def check_key_width(ctx: Context, cfg: ConfigFile, params: Params, ps: PsEntry | None, catcol: str | None) -> None:
    """One key width everywhere: embeddingkey_long_type, supportlonglong, CATCOLUMN, lock dtypes (§5, R6)."""
    param = params.get("embeddingkey_long_type")
    sll = ps.value("supportlonglong", as_bool, top_level=True) if ps else None
    if param is not None:
        if catcol is not None and KEY_DTYPE[param] != catcol:
            cfg_add(ctx, cfg, "embeddingkey_long_type", f"{show(params.raw['embeddingkey_long_type'])} means "
                    f"{KEY_DTYPE[param]} keys, but CATCOLUMN is {catcol} (triton.md §5, R6)",
                    "use one key width everywhere (int64 keys: \"true\" and TYPE_INT64)", param=True,
                    actual=params.raw["embeddingkey_long_type"], expected=str(catcol == "TYPE_INT64").lower())
        if sll is not None and sll != param:
            ps.add("supportlonglong", f"{str(sll).lower()} but embeddingkey_long_type of "
                   f"{ctx.show_path(cfg.path)} is {show(params.raw['embeddingkey_long_type'])} (triton.md §5, R6)",
                   "use one key width everywhere", top_level=True, actual=ps.raw("supportlonglong", top_level=True),
                   expected=param)
        effective, where = param, ("config", "embeddingkey_long_type")
    elif sll is not None:
        if catcol is not None and KEY_DTYPE[sll] != catcol:
            ps.add("supportlonglong", f"{str(sll).lower()} means {KEY_DTYPE[sll]} keys, but CATCOLUMN of "
                   f"{ctx.show_path(cfg.path)} is {catcol} (triton.md §5, R6)", "use one key width everywhere",
                   top_level=True, actual=ps.raw("supportlonglong", top_level=True), expected=catcol == "TYPE_INT64")
        effective, where = sll, ("ps", "supportlonglong")
    else:
        return
    if ctx.lock is not None and ctx.lock.categorical:
        lock_long = any(c.dtype in LONG_KEY_COLUMN_DTYPES for c in ctx.lock.categorical)
        if lock_long != effective:
            dtypes = sorted({c.dtype for c in ctx.lock.categorical})
            message = (f"{str(effective).lower()} ({'64' if effective else '32'}-bit keys), but the features lock "
                       f"{ctx.show_path(ctx.lock_path)} has categorical dtypes {dtypes} (triton.md §5, R5, R6)")
            fix = f"use {'64' if lock_long else '32'}-bit keys, as training did (i64_input_key={lock_long})"
            if where[0] == "config":
                cfg_add(ctx, cfg, where[1], message, fix, param=True, expected=str(lock_long).lower())
            else:
                ps.add(where[1], message, fix, top_level=True, expected=lock_long)
