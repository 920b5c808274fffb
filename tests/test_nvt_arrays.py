"""The preprocessing model's numpy path (the runtime's nvt_arrays) against real NVTabular, without a server.

``codegen.runtime.nvt_arrays`` (which every generated preprocessing model imports) compiles each demo workflow (MovieLens
one-hot, MovieLens genres through JoinExternal, Criteo with strings, a column combination and FillMissing >> Clip >>
Normalize) and a workflow fitted here with every Categorify option ctrgen's workflows may use (freq_threshold,
max_size, num_buckets hashing, combo hashing) and LogOp / FillMedian. On raw rows with unseen values and nulls, the
compiled plan must give exactly what ``workflow.transform`` gives: the same values and dtypes.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from codegen.runtime.nvt_check import probe_columns, self_check
from tests.demo_data import built_demo

pytestmark = pytest.mark.slow

def load_arrays():
    from codegen.runtime import nvt_arrays

    return nvt_arrays


@pytest.fixture(scope="module")
def arrays():
    return load_arrays()


def offline(workflow, frame: pd.DataFrame) -> pd.DataFrame:
    """The workflow's transform of a frame, as training's ETL runs it (a CPU Dataset)."""
    import nvtabular as nvt

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return workflow.transform(nvt.Dataset(frame, cpu=True)).to_ddf().compute().reset_index(drop=True)


def served(arrays, workflow, frame: pd.DataFrame) -> dict:
    plan = arrays.compile_workflow(workflow)
    columns = {}
    for name in workflow.input_schema.column_names:
        values = frame[name]
        if len(values) and isinstance(values.iloc[0], (list, np.ndarray)):
            lengths = np.array([len(v) for v in values])
            columns[name] = arrays.Ragged(np.concatenate(values.to_list()), np.concatenate([[0], np.cumsum(lengths)]))
        else:
            columns[name] = values.to_numpy()
    return plan.transform(columns)


def assert_same(arrays, want: pd.DataFrame, got: dict) -> None:
    assert list(got) == list(want.columns)
    for name in want.columns:
        have = got[name]
        if isinstance(have, arrays.Ragged):
            rows = [list(have.values[have.offsets[i]:have.offsets[i + 1]]) for i in range(len(have))]
            assert rows == [list(v) for v in want[name]], name
        else:
            expected = want[name].to_numpy()
            assert have.dtype == expected.dtype, (name, have.dtype, expected.dtype)
            assert np.array_equal(have, expected, equal_nan=expected.dtype.kind == "f"), name


def load_workflow(path, labels):
    import nvtabular as nvt

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        workflow = nvt.Workflow.load(str(path))
    workflow.remove_inputs([c for c in labels if c in workflow.input_schema.column_names])
    return workflow


@pytest.mark.parametrize("dataset, labels", [("movielens", ["rating"]), ("movielens_genres", ["rating"]),
                                             ("criteo", ["label"])])
def test_demo_workflows_serve_what_they_transform(arrays, dataset, labels):
    demo = built_demo()
    workflow = load_workflow(demo.paths[dataset]["workflow"], labels)
    raw = pd.read_parquet(demo.paths[dataset]["raw"] / "valid.parquet")
    frame = raw[workflow.input_schema.column_names].head(300).reset_index(drop=True)
    # Values the workflow never saw, in every categorical input the request carries.
    unseen = frame.head(3).copy()
    for name in unseen.columns:
        if name == "movieId" and dataset == "movielens_genres":
            continue                      # a join key must exist in the external table (else: the workflow itself)
        if unseen[name].dtype == object:
            unseen[name] = ["never-seen-1", "never-seen-2", None]
        elif unseen[name].dtype.kind in "iu":
            unseen[name] = unseen[name].max() + 10_000_000
    frame = pd.concat([frame, unseen], ignore_index=True)
    if dataset == "criteo":
        assert frame["I1"].isna().any() and frame["C3"].isna().any()     # nulls in both kinds of columns
    want = offline(workflow, frame)
    got = served(arrays, workflow, frame)
    assert_same(arrays, want, got)
    if dataset != "movielens_genres":
        assert any((got[c] == 2).any() for c in got if c not in ("I1",) and got[c].dtype.kind == "i")  # unseen -> 2


def test_categorify_options_match_nvtabular(arrays, tmp_path, monkeypatch):
    """freq_threshold, max_size, hashing buckets (one column and a combination), nulls, unseen; LogOp, FillMedian."""
    import nvtabular as nvt
    from nvtabular import ops

    monkeypatch.chdir(tmp_path)                  # Categorify writes ./categories
    rng = np.random.default_rng(0)
    n = 3000
    letters = np.array([f"s{i}" for i in range(40)], dtype=object)
    train = pd.DataFrame({
        "a": rng.zipf(1.6, n).clip(0, 500).astype(np.int64),
        "b": letters[rng.integers(0, 40, n) ** 2 % 40],
        "c": rng.integers(0, 30, n).astype(np.int64),
        "d": letters[rng.integers(0, 12, n)],
        "e": rng.integers(0, 9, n).astype(np.int64),
        "x": np.where(rng.random(n) < 0.1, np.nan, rng.exponential(3.0, n)),
        "y": rng.normal(0, 2, n),
    })
    train.loc[rng.random(n) < 0.05, "b"] = None
    features = (
        (["a"] >> ops.Categorify(freq_threshold=3))
        + (["b"] >> ops.Categorify(max_size=12))
        + (["c"] >> ops.Categorify(num_buckets=7, freq_threshold=40))
        + ([["d", "e"]] >> ops.Categorify(encode_type="combo"))
        + ([["c", "e"]] >> ops.Categorify(encode_type="combo", num_buckets=5, freq_threshold=30))
        + (["x"] >> ops.FillMedian() >> ops.LogOp())
        + (["y"] >> ops.Clip(min_value=-1.0, max_value=3.0) >> ops.Normalize())
    )
    workflow = nvt.Workflow(features)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        workflow.fit(nvt.Dataset(train, cpu=True))
        workflow.save(str(tmp_path / "workflow"))
        workflow = nvt.Workflow.load(str(tmp_path / "workflow"))
    test = train.sample(200, random_state=1).reset_index(drop=True)
    test.loc[:9, "a"] = 10_000 + np.arange(10)            # unseen integers
    test.loc[10:14, "b"] = "never"                        # unseen strings
    test.loc[15:19, "c"] = 99 + np.arange(5)              # unseen -> a hash bucket
    test.loc[20:24, "d"] = None                           # a null in a combination
    test.loc[25:29, "x"] = np.nan
    want = offline(workflow, test)
    got = served(arrays, workflow, test)
    assert_same(arrays, want, got)
    assert len(set(got["c"][15:20])) > 1                 # unseen values spread over several buckets
    assert (got["b"][10:15] == 2).all() and (got["a"][:10] == 2).all()


def test_load_check_refuses_arrays_that_disagree(arrays):
    """self_check: the probe rows catch a lookup that is off by one (e.g. a categories file of another fit)."""
    demo = built_demo()
    workflow = load_workflow(demo.paths["criteo"]["workflow"], ["label"])
    request = [(c, "object" if c.startswith("C") else "float64", False) for c in workflow.input_schema.column_names]
    plan = arrays.compile_workflow(workflow)
    assert self_check(workflow, plan, probe_columns(workflow, plan, request)) is None
    lookup = next(s.lookups["C2"] for s in plan.steps.values() if "C2" in getattr(s, "lookups", {}))
    lookup.table = {k: v + 1 for k, v in lookup.table.items()}
    problem = self_check(workflow, plan, probe_columns(workflow, plan, request))
    assert problem and "differs from the workflow's transform" in problem


def test_an_operator_without_a_numpy_step_is_reported(arrays, tmp_path, monkeypatch):
    import nvtabular as nvt
    from nvtabular import ops

    monkeypatch.chdir(tmp_path)
    frame = pd.DataFrame({"a": np.arange(20, dtype=np.int64)})
    workflow = nvt.Workflow(["a"] >> ops.LambdaOp(lambda col: col * 2) >> ops.Categorify())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        workflow.fit(nvt.Dataset(frame, cpu=True))
    with pytest.raises(arrays.Unsupported, match="operator UDF"):
        arrays.compile_workflow(workflow)


def as_request(frame: pd.DataFrame) -> pd.DataFrame:
    """String columns as a BYTES tensor delivers them (UTF-8 bytes; nulls stay None)."""
    out = frame.copy()
    for name in out.columns:
        if out[name].dtype == object:
            out[name] = [v.encode("utf-8") if isinstance(v, str) else v for v in out[name]]
    return out


@pytest.mark.parametrize("dataset, labels", [("criteo", ["label"]), ("movielens_genres", ["rating"])])
def test_bytes_from_the_request_map_like_the_workflows_strings(arrays, dataset, labels):
    """The served path: strings stay bytes (no decoding per request) and map to what the workflow gives the str."""
    demo = built_demo()
    workflow = load_workflow(demo.paths[dataset]["workflow"], labels)
    raw = pd.read_parquet(demo.paths[dataset]["raw"] / "valid.parquet")
    frame = raw[workflow.input_schema.column_names].head(200).reset_index(drop=True)
    strings = [c for c in frame.columns if frame[c].dtype == object]
    if dataset == "criteo":
        assert len(strings) == 26
        frame.loc[:2, "C1"] = ["never-seen", None, "ünïcode"]          # unseen, null, non-ASCII
    want = offline(workflow, frame)
    assert_same(arrays, want, served(arrays, workflow, as_request(frame)))
    plan = arrays.compile_workflow(workflow)
    lookups = [lk for s in plan.steps.values() for lk in getattr(s, "lookups", {}).values() if lk.table is not None]
    assert all(isinstance(k, (bytes, tuple, int, float)) for lk in lookups for k in list(lk.table)[:50])


def test_one_pass_lookup_and_stacked_columns_match_column_by_column(arrays):
    """The Criteo plan takes the one-pass path for C1-C26 and the stacked path for I1-I13 (asserted through the
    views they return); its answers equal the workflow's, on batches of 1 and 64 rows as requests carry them."""
    demo = built_demo()
    workflow = load_workflow(demo.paths["criteo"]["workflow"], ["label"])
    raw = pd.read_parquet(demo.paths["criteo"]["raw"] / "valid.parquet")
    frame = as_request(raw[workflow.input_schema.column_names].head(64).reset_index(drop=True))
    plan = arrays.compile_workflow(workflow)
    want = offline(workflow, raw[workflow.input_schema.column_names].head(64).reset_index(drop=True))
    for rows in (1, 64):
        part = frame.head(rows)
        got = plan.transform({c: part[c].to_numpy() for c in part.columns})
        assert got["C1"].base is not None and got["C1"].base is got["C2"].base      # one (26, rows) matrix
        assert got["I1"].base is not None and got["I1"].base is got["I13"].base     # one (rows, 13) matrix
        assert_same(arrays, want.head(rows), got)


def _wheel_deserializer():
    import importlib.util

    from codegen.serve.server import pytriton_dir

    path = pytriton_dir() / "backends" / "python" / "triton_python_backend_utils.py"
    spec = importlib.util.spec_from_file_location("wheel_triton_python_backend_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("values", [
    [b"%08x" % i for i in range(64)],                      # Criteo's hashed ids: one width, the numpy path
    [b"a", b"bb", b"ccc"] * 20,                            # lengths differ
    [b"ab\x00"] * 40 + [b"cd\x00"],                        # trailing NUL bytes (numpy's fixed width drops them)
    [b"\x00abc"] * 40,                                     # leading NULs are kept
    [b""] * 50,                                            # empty strings
    ["é".encode() * 4] * 30,                               # multi-byte UTF-8
    [b"abcdefgh"] * 3,                                     # short: the original loop
    [],
])
def test_fast_bytes_deserializer_returns_what_the_backend_returns(arrays, values):
    utils = _wheel_deserializer()
    fast = arrays.fast_bytes_deserializer(utils.deserialize_bytes_tensor)
    encoded = utils.serialize_byte_tensor(np.array(values, dtype=object)) if values else b""
    encoded = encoded.item() if hasattr(encoded, "item") else encoded
    for buffer in (np.frombuffer(encoded, dtype=np.int8), encoded):     # the stub passes an int8 array
        want, got = utils.deserialize_bytes_tensor(buffer), fast(buffer)
        assert got.dtype == want.dtype == object and got.shape == want.shape
        assert [type(v) for v in got] == [type(v) for v in want] and list(got) == list(want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_stacked_normalize_matches_nvtabular(arrays, tmp_path, monkeypatch, dtype):
    """FillMissing >> Clip >> LogOp >> Normalize over several columns runs on one matrix (per-column means and stds,
    one with std 0) and gives what NVTabular gives, in float32 and float64 inputs."""
    import nvtabular as nvt
    from nvtabular import ops

    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(1)
    n = 500
    train = pd.DataFrame({f"x{i}": rng.exponential(3.0 * (i + 1), n).astype(dtype) for i in range(4)})
    train["x3"] = np.asarray(7.0, dtype=dtype)                                   # a constant: std 0
    train.loc[rng.random(n) < 0.1, "x0"] = np.nan
    names = list(train.columns)
    workflow = nvt.Workflow(names >> ops.FillMissing(0) >> ops.Clip(min_value=0) >> ops.LogOp() >> ops.Normalize())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        workflow.fit(nvt.Dataset(train, cpu=True))
    test = train.sample(100, random_state=2).reset_index(drop=True)
    test.loc[:4, "x1"] = -5.0                                                    # clipped
    got = served(arrays, workflow, test)
    assert got["x0"].base is not None and got["x0"].base is got["x3"].base      # one matrix
    assert_same(arrays, offline(workflow, test), got)
    # One column: the per-column steps (no matrix), with an upper clip.
    single = nvt.Workflow(["x1"] >> ops.Clip(max_value=8.0) >> ops.Normalize())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        single.fit(nvt.Dataset(train[["x1"]], cpu=True))
    assert (test["x1"] > 8.0).any()
    assert_same(arrays, offline(single, test[["x1"]]), served(arrays, single, test[["x1"]]))
