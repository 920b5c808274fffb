"""The preprocessing model's load-time check: probe rows transformed by the saved workflow and by the numpy plan
(nvt_arrays.compile_workflow) must agree before the model reports ready, so the workflow stays the source of truth."""

import numpy as np

from .nvt_arrays import Fallback, Ragged, isnull, text


def probe_columns(workflow, plan, request, rows=512, seed=0):
    """Probe rows for `self_check`: per request column (name, numpy dtype, is list) values spread over its categories
    files (or the join's keys), then unseen values and, in float columns, nulls. Strings are UTF-8 bytes, as requests
    carry them."""
    rng = np.random.default_rng(seed)
    pools, joined = {}, set()
    for step in plan.steps.values():
        for names, arrays in getattr(step, "pools", ()):
            for column, values in zip(names, arrays):
                pools.setdefault(column, []).append(values)
        if getattr(step, "join_key", None):
            joined.add(step.join_key)
            pools[step.join_key] = [step.pools[0][1][0]]      # only keys the external table has
    columns = {}
    for name, dtype, is_list in request:
        pool = np.concatenate(pools[name]) if name in pools else None
        if pool is not None:
            pool = pool[~isnull(pool)] if len(pool) else pool
        if pool is None or not len(pool):
            pool = np.array(["a", "b"], dtype=object) if dtype == "object" else np.arange(5).astype(dtype)
        picked = pool[rng.integers(0, len(pool), rows)].astype(dtype if dtype != "object" else object)
        if dtype == "object":
            unseen = np.array(["\x00unseen"] * 4, dtype=object)
        elif np.dtype(dtype).kind in "iu":
            unseen = (np.full(4, pool.max()) + np.arange(1, 5)).astype(dtype)
        else:
            unseen = np.array([np.nan, np.nan, float(np.max(pool)) + 1.5, -1.0e9], dtype=dtype)
        values = np.concatenate([picked, picked[:4] if name in joined else unseen])
        if dtype == "object":
            encoded = np.empty(len(values), dtype=object)
            encoded[:] = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
            values = encoded
        if is_list:
            lengths = rng.integers(0, 4, len(values))
            flat = values[rng.integers(0, len(values), int(lengths.sum()))]
            columns[name] = Ragged(flat, np.concatenate([[0], np.cumsum(lengths)]))
        else:
            columns[name] = values
    return columns


def self_check(workflow, plan, columns):
    """The first output column where the plan differs from the workflow on `columns`, as one line, or None."""
    import pandas as pd
    from merlin.dag.executors import LocalExecutor

    n = len(next(iter(columns.values())))
    frame = pd.DataFrame({name: (_lists(Ragged(text(c.values), c.offsets)) if isinstance(c, Ragged) else text(c))
                          for name, c in columns.items()})
    for start in range(0, n, 64):        # requests of up to 64 rows, each with its own index, as served
        stop = min(n, start + 64)
        part = frame.iloc[start:stop].reset_index(drop=True)
        expected = LocalExecutor().transform(part, [workflow.output_node])
        try:
            got = plan.transform({k: (c.take(start, stop) if isinstance(c, Ragged) else c[start:stop])
                                  for k, c in columns.items()})
        except Fallback:
            continue
        for name in plan.outputs:
            want, have = expected[name], got[name]
            if isinstance(have, Ragged):
                same = [list(a) for a in want] == [list(b) for b in _lists(have)]
            else:
                w = want.to_numpy()
                same = w.dtype == have.dtype and np.array_equal(w, have, equal_nan=w.dtype.kind == "f")
            if not same:
                return f"column {name!r} differs from the workflow's transform on rows {start}..{stop - 1}"
    return None


def _lists(column):
    values, offsets = column.values, column.offsets
    return [values[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
