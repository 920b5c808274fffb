"""Categorify as numpy lookups (codegen/runtime/nvt_arrays.py compiles a workflow with them): the categories files
become sorted key arrays (numbers) or dicts (strings, column combinations) with their labels; NVTabular 23.8's
semantics (`nvtabular/ops/categorify.py` `_encode`): 0 padding, 1 null, 2 (or 2 + hash bucket) unseen."""

from itertools import chain, repeat

import numpy as np

from .nvt_values import NULL, OOV, Fallback, Ragged, Unsupported, isnull

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
