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

from itertools import chain, repeat

import numpy as np

PAD, NULL, OOV = 0, 1, 2            # NVTabular 23.8's reserved ids (categorify.py PAD_OFFSET, NULL_OFFSET, OOV_OFFSET)


class Unsupported(Exception):
    """The workflow has an operator (or an option of one) that no numpy step reproduces exactly."""


class Fallback(Exception):
    """This request needs the workflow itself (the numpy steps would not map it exactly)."""


class Ragged:
    """A list column: row i is values[offsets[i]:offsets[i + 1]]."""

    __slots__ = ("values", "offsets")

    def __init__(self, values, offsets):
        self.values, self.offsets = values, offsets

    def __len__(self):
        return len(self.offsets) - 1

    @property
    def lengths(self):
        return np.diff(self.offsets)

    def take(self, start, stop):
        offsets = self.offsets[start:stop + 1]
        return Ragged(self.values[offsets[0]:offsets[-1]], offsets - offsets[0])


def isnull(array):
    if array.dtype.kind == "f":
        return np.isnan(array)
    if array.dtype == object:
        return np.array([v is None or v != v for v in array], dtype=bool)
    return np.zeros(len(array), bool)


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


# ---- Categorify ---------------------------------------------------------------------------------------------------

class _Lookup:
    """One categories file: raw value(s) -> label, as `_encode`'s left merge finds them."""

    def __init__(self, path, columns, shift_labels, cpu_read):
        frame = cpu_read(path, columns=columns)
        labels = np.asarray(frame.index, dtype=np.int64)
        if shift_labels and len(labels) and labels[0] < shift_labels:
            labels = labels + shift_labels          # fetch_table_data's cached path (cudf issue 12837)
        self.columns, self.dtypes = columns, [frame[c].dtype for c in columns]
        self.values = [frame[c].to_numpy() for c in columns]
        self.labels = labels
        if len(columns) == 1 and self.dtypes[0] != object:  # noqa: E721 (a numpy dtype)
            keys = self.values[0]
            keep = ~isnull(keys)
            keys, labels = keys[keep], labels[keep]
            order = np.argsort(keys, kind="stable")
            self.sorted, self.sorted_labels = keys[order], labels[order]
            if len(self.sorted) and (np.diff(self.sorted) == 0).any():
                raise Unsupported(f"repeated values in {path}")
            self.table = None
        else:
            self.sorted = None
            self.table = {}
            for i, key in enumerate(zip(*[_canonical(v) for v in self.values])):
                if all(k is None for k in key):
                    continue                # a null (in every column) is NULL whatever the file holds
                self.table.setdefault(key if len(columns) > 1 else key[0], int(labels[i]))

    def find(self, arrays, missing):
        """Labels of the rows: NULL where every column is null, the file's label where it has the value, else
        `missing` (a number, or a function giving one per row, called only when some value is not found)."""
        given = arrays
        arrays = [a if a.dtype == t or t == object else a.astype(t) for a, t in zip(arrays, self.dtypes)]  # noqa: E721
        n = len(arrays[0])
        if self.table is None:
            x = arrays[0]
            if len(self.sorted):
                pos = np.searchsorted(self.sorted, x).clip(0, len(self.sorted) - 1)
                found = self.sorted[pos] == x
                labels = self.sorted_labels[pos]
            else:
                found, labels = np.zeros(n, bool), np.zeros(n, np.int64)
            if not found.all():
                labels = np.where(found, labels, missing() if callable(missing) else missing)
            labels = labels.astype(np.int64)
            nulls = isnull(given[0])
            if nulls.any():
                labels[nulls] = NULL
            return labels
        # Values as they come (bytes from the request, numbers) in one pass; -1: not found as it is.
        get = self.table.get
        keys = arrays[0] if len(arrays) == 1 else zip(*arrays)
        labels = np.fromiter(map(get, keys, repeat(-1, n)), np.int64, n)
        miss = np.flatnonzero(labels < 0)
        if len(miss):                   # nulls, str values and values the file lacks, one by one
            fill = missing() if callable(missing) else None
            for i in miss.tolist():
                key = tuple(_canon1(a[i]) for a in arrays)
                if all(k is None for k in key):
                    labels[i] = NULL
                    continue
                label = get(key if len(arrays) > 1 else key[0])
                labels[i] = label if label is not None else (missing if fill is None else fill[i])
        return labels


def _canon1(v):
    """A lookup key: nulls (None, NaN) match each other, as pandas' merge matches them; a string is its UTF-8 bytes,
    as the request carries it."""
    if v is None or v != v:
        return None
    return v.encode("utf-8") if isinstance(v, str) else v


def _canonical(array):
    return [_canon1(v) for v in array]


def text(array):
    """An object column with its bytes decoded (UTF-8), as the workflow itself reads strings."""
    if array.dtype != object or not any(isinstance(v, bytes) for v in array):
        return array
    out = np.empty(len(array), dtype=object)
    out[:] = [v.decode("utf-8") if isinstance(v, bytes) else v for v in array]
    return out


def _categorify(op, selection):
    import pandas as pd          # at load only: reading the categories files

    if op.search_sorted or op.single_table:
        raise Unsupported("Categorify(search_sorted=True or single_table=True)")
    mapping = op.column_mapping(selection)
    buckets = op.num_buckets
    if isinstance(buckets, int):
        buckets = {name: buckets for name in mapping}
    encoders = []
    for name, group in mapping.items():
        use = group[0] if len(group) == 1 else list(group)
        if use != name or op.encode_type == "joint":
            storage = op.storage_name.get(name, name)
        else:
            storage = name
        split_out = op.split_out.get(storage, 1) if isinstance(op.split_out, dict) else op.split_out
        if split_out != 1:
            raise Unsupported("Categorify(split_out > 1)")
        if isinstance(use, list) and op.encode_type != "combo":
            raise Unsupported("Categorify of a joint column group")
        names = use if isinstance(use, list) else [use]
        file_columns = names if isinstance(use, list) else [storage]
        n_buckets = buckets.get(storage) if buckets else None
        shift = OOV + (n_buckets or 1) if op.cat_cache is not None else 0
        lookup = _Lookup(op.categories[storage], file_columns, shift, pd.read_parquet)
        encoders.append((name, names, lookup, n_buckets))
    dtype = op.output_dtype
    # One-column string lookups without hash buckets (Criteo's C1-C26): all columns in one pass.
    together = [(name, names[0], lookup) for name, names, lookup, n_buckets in encoders
                if len(names) == 1 and lookup.table is not None and not n_buckets]
    alone = [e for e in encoders if (e[0], e[1][0], e[2]) not in together] if len(together) > 1 else encoders

    def step(df, index):
        out = dict(df)
        if alone is not encoders:
            columns = [df[column] for _, column, _ in together]
            n = len(columns[0])
            if all(type(c) is np.ndarray and c.ndim == 1 and len(c) == n for c in columns):
                keys = chain.from_iterable(map(lookup.table.get, c, repeat(-1, n))
                                           for (_, _, lookup), c in zip(together, columns))
                labels = np.fromiter(keys, np.int64, n * len(together)).reshape(len(together), n)
                if (labels < 0).any():          # nulls, str values, values the files lack: column by column
                    for j, ((_, _, lookup), c) in enumerate(zip(together, columns)):
                        if (labels[j] < 0).any():
                            labels[j] = lookup.find([c], OOV)
                labels = labels.astype(dtype, copy=False)
                for j, (name, _, _) in enumerate(together):
                    out[name] = labels[j]
                pending = alone
            else:
                pending = encoders
        else:
            pending = encoders
        for name, names, lookup, n_buckets in pending:
            arrays = [df[c] for c in names]
            ragged = isinstance(arrays[0], Ragged)
            if ragged:
                if len(arrays) > 1 or n_buckets:
                    raise Fallback("a list column in a column group or with hash buckets")
                if isnull(arrays[0].values).any():
                    raise Fallback("a null inside a list")
                flat = [arrays[0].values]
            else:
                if any(isinstance(a, Ragged) for a in arrays):
                    raise Fallback("a list column in a column group")
                flat = arrays
            if n_buckets:
                def missing(flat=flat, n_buckets=n_buckets):
                    return OOV + _hash_buckets(op.encode_type, [text(a) for a in flat], n_buckets, index)
            else:
                missing = OOV
            labels = lookup.find(flat, missing).astype(dtype, copy=False)
            out[name] = Ragged(labels, arrays[0].offsets) if ragged else labels
        return out
    step.pools = [(names, lookup.values) for _name, names, lookup, _buckets in encoders]
    step.lookups = {name: lookup for name, _names, lookup, _buckets in encoders}
    return step


def _hash_buckets(encode_type, arrays, n_buckets, index):
    """categorify.py `_hash_bucket`: pandas' row hash (merlin's hash_series hashes the row index too)."""
    import pandas as pd

    idx = pd.Index(index)
    if encode_type == "joint":
        hashed = pd.util.hash_pandas_object(pd.Series(arrays[0], index=idx), index=True).to_numpy()
    else:
        hashed = np.zeros(len(index), np.uint64)
        for a in arrays:
            hashed ^= pd.util.hash_pandas_object(pd.Series(a, index=idx), index=True).to_numpy()
    return (hashed % np.uint64(n_buckets)).astype(np.int64)


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
