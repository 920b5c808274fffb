"""The saved NVTabular workflow compiled to numpy lookups, for the Triton preprocessing model (no pandas per request).

`compile_workflow(workflow)` walks the loaded workflow's graph once, as merlin's LocalExecutor does, and turns each
operator into a numpy step with the values the workflow fitted: Categorify's categories files become sorted key
arrays (numbers) or dicts (strings, column combinations) with their labels; FillMissing, FillMedian, Clip, Normalize,
NormalizeMinmax and LogOp keep their fitted constants; JoinExternal becomes a key -> row index. The semantics are
NVTabular 23.8's (`nvtabular/ops/categorify.py` `_encode`): 0 padding, 1 null, 2 (or 2 + hash bucket with
num_buckets) unseen, categories from the stored labels; freq_threshold and max_size act when fitting, so the files
already hold what they kept. An operator without a numpy step raises `Unsupported` (the model then runs the workflow
itself); a request the numpy steps would not map exactly as the workflow does (a join key the external table lacks,
a null list) raises `Fallback` for that request only.

Strings arrive as the request carries them, UTF-8 `bytes` (BYTES tensors), and are looked up without decoding: the
lookups hold each string category as its UTF-8 bytes, a `str` value is encoded when it is not found as it is. A
chain of element-wise operators over several columns of one dtype (FillMissing >> Clip >> LogOp >> Normalize on
Criteo's I1-I13) runs on the columns stacked into one matrix: one numpy call per operator, not one per column.

`nvt_check.self_check(workflow, plan, columns)` transforms probe rows (values of every categories file, unseen values, nulls
in float columns) with both the workflow and the plan and returns the first difference: the model refuses to load
on one, so the workflow stays the source of truth.

Columns are 1-D numpy arrays; a list column is a `Ragged` (flat values, row offsets).
"""

import numpy as np

from .nvt_categorify import _categorify, text  # noqa: F401  (text: part of this module's interface)
from .nvt_values import NULL, OOV, PAD, Fallback, Ragged, Unsupported, isnull  # noqa: F401

# ---- compiling the graph ------------------------------------------------------------------------------------------

class Plan:
    """The compiled workflow: `transform({input column: array}, index)` -> {output column: array or Ragged}."""

    def __init__(self, order, steps, outputs):
        self.order, self.steps, self.outputs = order, steps, outputs

    def transform(self, columns, index=None):
        n = len(next(iter(columns.values())))
        index = np.arange(n) if index is None else index
        results = {}
        for key, parents, roots, step in self.order:       # parents before children
            merged = {}
            for parent in parents:       # a column that several parents produce comes from the last one
                merged.update(results[parent])
            for name in roots:
                merged[name] = columns[name]
            results[key] = merged if step is None else step(merged, index)
        out = results[self.order[-1][0]]
        return {name: out[name] for name in self.outputs}


def compile_workflow(workflow):
    """merlin.dag.executors.LocalExecutor._execute_node, planned once: per node its parents, the input columns it
    reads from the request (those no parent produces) and its numpy step."""
    order, steps = [], {}
    _compile(workflow.output_node, order, steps)
    return Plan(order, steps, list(workflow.output_schema.column_names))


def _compile(node, order, steps):
    if id(node) in steps:
        return
    parents = []
    for parent in node.parents_with_dependencies:
        _compile(parent, order, steps)
        if parent.output_schema.column_names:        # LocalExecutor skips empty outputs
            parents.append(id(parent))
    produced = set()
    for parent in node.parents_with_dependencies:
        produced |= _produced(parent)
    wanted = set(node.input_schema.column_names) | set(node.dependency_columns.names)
    steps[id(node)] = _step(node)
    order.append((id(node), tuple(parents), tuple(sorted(wanted - produced)), steps[id(node)]))


def _produced(node):
    """The columns a node's transform returns: its output schema (ops return at least those columns)."""
    return set(node.output_schema.column_names)


def _step(node):
    op = node.op
    if op is None:
        return None
    kind = type(op).__name__
    selection = node.input_columns.resolve(node.input_schema) if kind != "ConcatColumns" else None
    if kind in ("ConcatColumns", "SelectionOp", "SubtractionOp", "SubsetColumns"):
        names = list(node.output_schema.column_names)
        return lambda df, index: {name: df[name] for name in names}
    if kind in ("AddMetadata", "AddTags", "AddProperties"):
        return lambda df, index: df
    if kind == "Rename":
        mapping = op.column_mapping(selection)
        return lambda df, index: {new: df[old[0]] for new, old in mapping.items()}
    if kind == "Categorify":
        return _categorify(op, selection)
    if kind in ("FillMissing", "FillMedian"):
        return _fill(op, selection, kind)
    if kind == "Clip":
        def clip(x, name):
            return _clip(x, op.min_value, op.max_value)
        return _elementwise(selection.names, clip, block=lambda m, names: clip(m, None))
    if kind == "Normalize":
        def normalize(x, name):
            mean, std = op.means[name], op.stds[name]
            return ((x - mean) / std if std > 0 else x - mean).astype(op.output_dtype)
        return _elementwise(selection.names, normalize, replace=True,
                            block=_per_column_block(normalize, lambda name: (op.means[name], op.stds[name]),
                                                    op.output_dtype))
    if kind == "NormalizeMinmax":
        def minmax(x, name):
            dif = op.maxs[name] - op.mins[name]
            if dif == 0:
                raise Unsupported("NormalizeMinmax of a constant column")
            return ((x - op.mins[name]) / dif).astype(op.output_dtype)
        return _elementwise(selection.names, minmax, replace=True)
    if kind == "LogOp":
        def log(x, name):
            return np.log(x.astype(op.output_dtype) + 1)
        return _elementwise(selection.names, log, block=lambda m, names: log(m, None))
    if kind == "JoinExternal":
        return _join(op)
    raise Unsupported(f"operator {kind}")


def _elementwise(names, fn, replace=False, block=None):
    """One function per column; list columns through their flat values. `replace`: the op returns only its columns.
    `block(matrix, names)`: the same function on the columns stacked (used when they are 1-D arrays of one dtype)."""
    def step(df, index):
        out = {} if replace else dict(df)
        matrix = _stacked(df, names) if block is not None else None
        if matrix is not None:
            result = block(matrix, names)
            if result is not None:
                out.update(zip(names, result.T))            # the columns, as views
                return out
        for name in names:
            x = df[name]
            if isinstance(x, Ragged):
                out[name] = Ragged(fn(x.values, name), x.offsets)
            else:
                out[name] = fn(x, name)
        return out
    return step


def _stacked(df, names):
    """The columns as one (rows, columns) matrix (a copy, column-major), or None when they are not all 1-D numeric
    arrays of one dtype and length."""
    if len(names) < 2:
        return None
    columns = [df[name] for name in names]
    dtype = getattr(columns[0], "dtype", None)
    if dtype is None or dtype.kind not in "biuf":
        return None
    rows = len(columns[0])
    for c in columns:
        if type(c) is not np.ndarray or c.dtype != dtype or c.ndim != 1 or len(c) != rows:
            return None
    return np.array(columns).T


def _per_column_block(fn, constants, output_dtype):
    """The block form of `x - a, / b` style steps with per-column constants: exact only when every column computes in
    one dtype (numpy casts a scalar constant by its value), which is checked per input dtype and remembered."""
    plans = {}

    def block(matrix, names):
        key = (matrix.dtype, tuple(names))
        if key not in plans:
            probe = np.zeros(1, matrix.dtype)
            kinds = set()
            for name in names:
                a, b = constants(name)
                diff = probe - a
                kinds.add((diff.dtype, (diff / b).dtype if b > 0 else diff.dtype))
            if len(kinds) != 1:
                plans[key] = None
            else:
                sub_dtype, div_dtype = kinds.pop()
                a = np.array([constants(name)[0] for name in names], dtype=sub_dtype)
                b = np.array([constants(name)[1] if constants(name)[1] > 0 else 1 for name in names], dtype=div_dtype)
                plans[key] = (a, b)
        plan = plans[key]
        if plan is None:
            return None
        a, b = plan
        return ((matrix - a) / b).astype(output_dtype)
    return block


def _clip(x, low, high):
    if x.dtype == object:
        raise Fallback("Clip of a string column")
    x = x.copy()
    if low is not None:
        x[x < low] = low
    if high is not None:
        x[x > high] = high
    return x


def _fill(op, selection, kind):
    if getattr(op, "add_binary_cols", False):
        raise Unsupported(f"{kind}(add_binary_cols=True)")

    names = selection.names

    def step(df, index):
        out = dict(df)
        matrix = _stacked(df, names) if kind == "FillMissing" else None
        if matrix is not None:          # one fill value for every column
            missing = np.isnan(matrix) if matrix.dtype.kind == "f" else None
            if missing is not None and missing.any():
                matrix[missing] = op.fill_val
            out.update(zip(names, matrix.T))
            return out
        for name in names:
            x = df[name]
            if isinstance(x, Ragged):
                raise Fallback(f"{kind} of a list column")
            missing = isnull(x)
            if missing.any():
                x = x.copy()
                x[missing] = op.fill_val if kind == "FillMissing" else op.medians[name]
            out[name] = x
        return out
    return step


def _join(op):
    on, on_ext = ([op.on] if isinstance(op.on, str) else list(op.on)), \
        ([op.on_ext] if isinstance(op.on_ext, str) else list(op.on_ext))
    if op.how != "left" or len(on) != 1 or len(on_ext) != 1:
        raise Unsupported("JoinExternal other than a left join on one column")
    on, on_ext = on[0], on_ext[0]
    ext = op._ext
    if hasattr(ext, "compute"):
        ext = ext.compute()
    keys = ext[on_ext].to_numpy()
    if len(np.unique(keys)) != len(keys) or isnull(keys).any():
        raise Unsupported("JoinExternal with repeated or null keys in the external table")
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    added = {}
    for name in ext.columns:
        if name == on_ext:
            continue
        values = ext[name].to_numpy()
        if values.dtype == object and len(values) and isinstance(values[0], (list, np.ndarray)):
            lengths = np.array([len(v) for v in values], dtype=np.int64)
            flat = np.concatenate([np.asarray(v) for v in values]) if lengths.sum() else np.zeros(0, np.int64)
            added[name] = (flat, np.concatenate([[0], np.cumsum(lengths)]))
        else:
            added[name] = values

    def step(df, index):
        x = df[on]
        if x.dtype == object:
            x = text(x)
        if x.dtype != sorted_keys.dtype:
            x = x.astype(sorted_keys.dtype)
        pos = np.searchsorted(sorted_keys, x).clip(0, len(sorted_keys) - 1)
        if not (sorted_keys[pos] == x).all():
            raise Fallback("a join key the external table does not have")
        rows = order[pos]
        out = dict(df)
        for name, values in added.items():
            if isinstance(values, tuple):
                flat, offsets = values
                starts, lengths = offsets[rows], offsets[rows + 1] - offsets[rows]
                new_offsets = np.concatenate([[0], np.cumsum(lengths)])
                take = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
                out[name] = Ragged(flat[take], new_offsets)
            else:
                out[name] = values[rows]
        return out
    step.pools = [([on], [sorted_keys])]
    step.join_key = on
    return step


# ---- BYTES inputs -------------------------------------------------------------------------------------------------

FAST_BYTES_MIN = 96         # bytes: about 8 elements of 8 characters, where the numpy calls start to pay


def fast_bytes_deserializer(original):
    """A drop-in for triton_python_backend_utils.deserialize_bytes_tensor, which the python backend's stub calls on
    every BYTES input (a Python loop: 0.55 ms for 26 columns x 64 rows). When every element has one length and none
    ends with a NUL byte (numpy's fixed-width bytes drop trailing NULs), the elements are cut out of the buffer in
    one numpy call; the result is the same 1-D object array of bytes. Any other buffer, and a short one (where the
    loop is quicker than the numpy calls), goes to `original`."""
    def deserialize(encoded):
        if len(encoded) < FAST_BYTES_MIN:
            return original(encoded)
        buffer = np.frombuffer(encoded, dtype=np.uint8)
        if buffer.size > 4:
            width = int.from_bytes(buffer[:4].tobytes(), "little")
            count = buffer.size // (width + 4)
            if width and count * (width + 4) == buffer.size:
                rows = buffer.reshape(count, width + 4)
                if (rows[:, :4] == buffer[:4]).all() and rows[:, -1].all():
                    return np.ascontiguousarray(rows[:, 4:]).view(f"S{width}").reshape(count).astype(object)
        return original(encoded)
    deserialize.original = original
    return deserialize
