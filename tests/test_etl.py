"""ctrgen etl: the generated etl.py against NVTabular run directly, ruff, worker-count determinism (with the spec's
cluster settings and nvtabular imported without torch), the seeds' cardinalities, and bad input (one line, exit 2,
nothing written)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from codegen.cli import main
from codegen.etl.run import etl_plan, render_for, run_etl
from codegen.pipeline import open_spec
from codegen.runtime.nvt_import import import_nvtabular

from specfactory import write_spec

REPO = Path(__file__).resolve().parents[1]
MODEL = {"version": 1, "name": "etltest", "hugectr_version": "23.06",
         "data": {"format": "parquet", "train": ["/data/train/_file_list.txt"], "eval": "/data/valid/_file_list.txt"},
         "model": {"preset": "mlp", "units": [8]}}


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    i1 = rng.lognormal(1.0, 1.0, n).round()
    i1[rng.random(n) < 0.2] = np.nan
    tags = ["|".join(rng.choice(["a", "b", "c", "d"], size=rng.integers(0, 3), replace=False)) for _ in range(n)]
    return pd.DataFrame({
        "C1": rng.choice([f"x{k}" for k in range(12)], n, p=np.arange(12, 0, -1) / 78),
        "C2": rng.choice(["p", "q", "r", "s", "t"], n),
        "C3": rng.integers(0, 8, n).astype("int64"),
        "I1": i1,
        "I2": rng.normal(2.0, 3.0, n),
        "tags": tags,
        "y": rng.integers(0, 3, n).astype("int64"),
        "extra": rng.integers(0, 100, n),
    })


COLUMNS = {"C1": "str", "C2": "str", "C3": "int64", "I1": "float64", "I2": "float64", "tags": "str", "y": "int64",
           "extra": "int64"}
# Two ETLs: NVTabular 23.8 cannot hash (HashedCross) and categorify lists in one CPU workflow (see plan.py).
ETL = {
    "inputs": {"train": ["raw/train.parquet"], "valid": ["raw/valid.parquet"], "columns": COLUMNS},
    "drop": ["extra", "tags"],
    "groups": [
        {"columns": ["C1"], "ops": [{"Categorify": {"freq_threshold": 20}}]},
        {"columns": ["C2"], "ops": [{"Categorify": {"max_size": 3}}]},
        {"columns": ["C3"], "ops": ["Categorify"]},
        {"columns": ["I1"], "ops": ["FillMissing", {"Clip": {"min_value": 0}}, "LogOp", "Normalize"]},
        {"columns": ["I2"], "ops": [{"FillMissing": {"fill_val": 1.0}}, {"Clip": {"max_value": 5}}]},
        {"columns": ["y"], "ops": [{"LambdaOp": {"compare": ">=", "value": 1, "dtype": "int8"}}]},
    ],
    "cross": [{"columns": ["C1", "C2"]}, {"columns": ["C2", "C3"], "num_buckets": 11}],
    "output": {"dir": "out", "out_files_per_proc": 1, "shuffle": False},
}
LISTS = {
    "inputs": {"train": ["raw/train.parquet"], "valid": ["raw/valid.parquet"], "columns": COLUMNS,
               "multi_hot": {"tags": "|"}},
    "join": {"path": "raw/side.csv", "on": ["C3"], "columns": {"C3": "int64", "grp": "str"}},
    "drop": ["extra", "C1", "C2", "I1", "I2"],
    "groups": [
        {"columns": ["C3", "grp"], "ops": ["Categorify"]},
        {"columns": ["tags"], "ops": [{"Categorify": {"freq_threshold": 2}}]},
        {"columns": ["y"], "ops": [{"LambdaOp": {"compare": "<", "value": 2}}]},
    ],
    "output": {"dir": "out", "out_files_per_proc": 2, "shuffle": False, "reader": "torch"},
}


def _raw(folder: Path) -> None:
    (folder / "raw").mkdir(parents=True, exist_ok=True)
    _frame(400, 1).to_parquet(folder / "raw/train.parquet", index=False)
    _frame(100, 2).to_parquet(folder / "raw/valid.parquet", index=False)
    pd.DataFrame({"C3": range(8), "grp": [f"g{k % 3}" for k in range(8)]}).to_csv(folder / "raw/side.csv",
                                                                                 index=False)


def _spec(folder: Path, etl: dict, name: str = "etltest") -> Path:
    return write_spec(folder, {**MODEL, "name": name, "etl": etl}, name=name)


def _direct(folder: Path, lists: bool) -> dict[str, pd.DataFrame]:
    """The same workflow written by hand with NVTabular, run on pandas frames in this process: fitted on train,
    each split transformed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import nvtabular as nvt
    ops = nvt.ops
    side = pd.read_csv(folder / "raw/side.csv")

    def prep(path: Path) -> pd.DataFrame:
        df = pd.read_parquet(path).drop(columns=["extra"])
        if lists:
            df["tags"] = df["tags"].str.split("|").map(lambda items: [s for s in items if s])
            return df
        # A constant index, as etl.py sets it (NVTabular 23.8 hashes pandas rows with their index).
        return df.set_axis(np.zeros(len(df), dtype=np.int64), axis=0)

    cat_dir = str(folder / "direct")
    if lists:
        joined = ["C3"] >> ops.JoinExternal(side, on=["C3"], columns_ext=["C3", "grp"])
        output = ((joined[["C3", "grp"]] >> ops.Categorify(out_path=cat_dir))
                  + (["tags"] >> ops.Categorify(freq_threshold=2, out_path=cat_dir))
                  + (["y"] >> ops.LambdaOp(lambda col: (col < 2).astype("int8"))))
    else:
        output = (([["C1", "C2"]] >> ops.Categorify(encode_type="combo", out_path=cat_dir))
                  + (["C2", "C3"] >> ops.HashedCross(11))
                  + (["C1"] >> ops.Categorify(freq_threshold=20, out_path=cat_dir))
                  + (["C2"] >> ops.Categorify(max_size=3, out_path=cat_dir))
                  + (["C3"] >> ops.Categorify(out_path=cat_dir))
                  + (["I1"] >> ops.FillMissing() >> ops.Clip(min_value=0) >> ops.LogOp() >> ops.Normalize())
                  + (["I2"] >> ops.FillMissing(fill_val=1.0) >> ops.Clip(max_value=5))
                  + (["y"] >> ops.LambdaOp(lambda col: (col >= 1).astype("int8"))))
    wf = nvt.Workflow(output)
    import dask

    with warnings.catch_warnings(), dask.config.set(scheduler="synchronous"):
        warnings.simplefilter("ignore")
        wf.fit(nvt.Dataset(prep(folder / "raw/train.parquet"), cpu=True))
        return {split: wf.transform(nvt.Dataset(prep(folder / f"raw/{split}.parquet"), cpu=True)).to_ddf().compute()
                for split in ("train", "valid")}


def _read(split_dir: Path) -> pd.DataFrame:
    files = sorted(split_dir.glob("part_*.parquet"))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


@pytest.fixture(scope="module")
def lists_etl(tmp_path_factory):
    """The LISTS spec's ETL, run once for the module: (folder, its spec, run_etl's result). Tests copy the folder
    before changing anything in it."""
    folder = tmp_path_factory.mktemp("lists")
    _raw(folder)
    spec = _spec(folder, LISTS)
    return folder, spec, run_etl(spec, out_root=folder / "generated")


@pytest.mark.slow
@pytest.mark.parametrize("lists", [False, True], ids=["hashing", "lists"])
def test_every_operator_matches_nvtabular_run_directly(tmp_path, lists, request):
    if lists:
        folder, _, result = request.getfixturevalue("lists_etl")
        shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    else:
        _raw(tmp_path)
        result = run_etl(_spec(tmp_path, ETL), out_root=tmp_path / "generated")
    assert result.rows_in == 500 and result.rows_out == {"train": 400, "valid": 100}
    columns = ["C3", "grp", "tags", "y"] if lists else ["C1_C2", "C2_X_C3", "C1", "C2", "C3", "I1", "I2", "y"]
    direct = _direct(tmp_path, lists)
    for split in ("train", "valid"):
        got = _read(tmp_path / "out" / split)
        want = direct[split].reset_index(drop=True)
        assert list(got.columns) == columns
        for col in got.columns:
            if col == "tags":
                assert [list(v) for v in got[col]] == [list(v) for v in want[col]], col
            else:
                np.testing.assert_allclose(got[col].to_numpy(np.float64), want[col].to_numpy(np.float64),
                                           rtol=1e-6, err_msg=col)
    got = _read(tmp_path / "out/train")
    lock = json.loads((tmp_path / "etltest.features.lock.json").read_text())
    if lists:
        assert [c["name"] for c in lock["categorical"]] == ["C3", "grp", "tags"]
        assert [c.get("multi_hot", False) for c in lock["categorical"]] == [False, False, True]
        assert got["C3"].dtype == np.int64 and got["y"].dtype == np.float32
        return
    # HugeCTR's dtypes: int64 ids, float32 continuous columns and label.
    assert got["C1"].dtype == np.int64 and got["I1"].dtype == np.float32 and got["y"].dtype == np.float32
    # Options took effect: freq_threshold folds rare C1 values into one id, max_size keeps 3 of C2's 5 values.
    assert got["C1"].nunique() < 12 and got["C2"].nunique() <= 4
    # The hashed cross buckets by value: equal pairs share a bucket.
    raw = pd.read_parquet(tmp_path / "raw/train.parquet")
    pairs = raw["C2"] + "/" + raw["C3"].astype(str)
    assert (pd.DataFrame({"k": pairs, "v": got["C2_X_C3"]}).groupby("k")["v"].nunique() == 1).all()
    assert [c["name"] for c in lock["categorical"]] == ["C1_C2", "C2_X_C3", "C1", "C2", "C3"]
    assert [c["name"] for c in lock["continuous"]] == ["I1", "I2"] and [c["name"] for c in lock["labels"]] == ["y"]


def test_a_held_out_split_keeps_each_rows_own_list(tmp_path):
    """The raw CSV with a multi-hot column and no validation file (issue 45's walk): the split keeps rows with gaps
    in the index, and NVTabular 23.8's list Categorify put the lists back by position: the kept rows took other
    rows' lists or nulls (4 in 5 of the validation rows were null). Each row must keep its own list."""
    _raw(tmp_path)
    _frame(400, 1).to_csv(tmp_path / "raw/train.csv", index=False)
    etl = {**LISTS, "inputs": {"train": ["raw/train.csv"], "columns": COLUMNS, "multi_hot": {"tags": "|"}},
           "split": {"valid_fraction": 0.25}}
    result = run_etl(_spec(tmp_path, etl), out_root=tmp_path / "generated")
    assert result.rows_out["valid"] > 50
    ids = {c: pd.read_parquet(tmp_path / f"out/workflow/categories/unique.{c}.parquet")[c] for c in ("C3", "tags")}
    got = [(int(ids["C3"][c3]), tuple(sorted(ids["tags"][t] for t in tags)), int(y))
           for split in ("train", "valid") for c3, tags, y in _read(tmp_path / "out" / split)[["C3", "tags", "y"]]
           .itertuples(index=False)]
    raw = _frame(400, 1)
    want = [(c3, tuple(sorted(t for t in tags.split("|") if t)), int(y < 2)) for c3, tags, y in
            raw[["C3", "tags", "y"]].itertuples(index=False)]
    assert sorted(got) == sorted(want)


def test_generated_etl_py_is_valid_python_that_ruff_accepts(tmp_path):
    specs = [REPO / "specs/movielens.yaml", REPO / "specs/movielens_genres.yaml", _spec(tmp_path, ETL),
             _spec(tmp_path, LISTS, name="lists")]
    from codegen.etl.run import etl_plan, render_for

    targets = []
    for spec in specs:
        ctx = open_spec(spec)
        text = render_for(ctx, etl_plan(ctx))
        compile(text, str(spec), "exec")
        targets.append(tmp_path / f"{spec.stem}_etl.py")
        targets[-1].write_text(text)
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--line-length", "120",
                           "--extend-select", "E,W,F,B,I", *map(str, targets)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr       # one run: ruff names the file of any finding


def test_column_names_never_become_code(tmp_path):
    """A hostile column name reaches etl.py as a string literal only."""
    from codegen.etl.run import etl_plan, render_for

    evil = 'x"); import os; os.system("echo pwned'
    etl = {"inputs": {"train": ["raw/a.parquet"], "columns": {evil: "int64", "y": "float64"}},
           "groups": [{"columns": [evil], "ops": ["Categorify"]},
                      {"columns": ["y"], "ops": [{"LambdaOp": {"compare": ">", "value": 3}}]}],
           "output": {"dir": "out"}}
    ctx = open_spec(_spec(tmp_path, etl))
    text = render_for(ctx, etl_plan(ctx))
    compile(text, "etl.py", "exec")
    assert repr(evil) in text and "\nimport os; os.system" not in text and 'os.system("echo' not in text.replace(
        repr(evil), "")


def _hashes(out: Path) -> dict[str, str]:
    files = [p for p in out.rglob("*") if p.is_file() and (p.suffix == ".parquet" or p.name in (
        "_metadata.json", "schema.pbtxt", "output_schema.pbtxt"))]
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _movielens_raw(folder: Path) -> Path:
    from codegen.demo import movielens

    raw = folder / "data/ml-25m"
    movielens.write_raw(movielens.synthesize(5, movielens.Sizes(n_users=200, n_movies=120, n_ratings=3000)), raw,
                        seed=5)
    return raw


def _committed_spec(path: Path):
    from ruamel.yaml import YAML

    return YAML().load(path.read_text())


def _committed_spec_copy(folder: Path, name: str, specs: str = "specs", **etl_changes) -> Path:
    """specs/<name>.yaml with its lock, in folder/<specs> (so that ../data is folder/data)."""
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load((REPO / "specs" / f"{name}.yaml").read_text())
    for key, value in etl_changes.items():
        doc["etl"][key] = value
    dest = folder / specs / f"{name}.yaml"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with dest.open("w") as fh:
        yaml.dump(doc, fh)
    shutil.copy(REPO / "specs" / f"{name}.features.lock.json", dest.parent)
    return dest


# etl.py's own main() in a fresh interpreter (torch not imported yet), which owns the Dask cluster it starts
# (multiprocessing's resource tracker lives as long as the process that started the workers). Its start_client is
# wrapped to record what the real cluster says about itself.
ON_ITS_OWN = """
import json, runpy, sys

assert "torch" not in sys.modules
from codegen.runtime.nvt_import import import_nvtabular
nvt = import_nvtabular()
assert "torch" not in sys.modules and nvt.Workflow, sorted(k for k in sys.modules if k.startswith("torch"))[:5]
from codegen.runtime import nvt_model          # the Triton preprocessing model imports ctrgen's function
assert nvt_model.import_nvtabular is import_nvtabular

etl_py, root, out = sys.argv[1:]
etl = runpy.run_path(etl_py, run_name="ctrgen_etl")
assert etl["import_nvtabular"]() is nvt        # etl.py's copy of it (templates/_macros.j2)
module, seen = etl["main"].__globals__, {}
real_start_client = module["start_client"]


def start_client(*args, **kwargs):
    client = real_start_client(*args, **kwargs)
    workers = client.scheduler_info()["workers"]
    modules = client.run(lambda: sorted(k for k in sys.modules if k in ("torch", "nvtabular")))
    seen.update(nthreads=sorted(w["nthreads"] for w in workers.values()), address=client.scheduler.address,
                dirs=sorted(client.run(lambda dask_worker: dask_worker.local_directory).values()),
                memory=sorted(client.run(lambda dask_worker: [
                    dask_worker.memory_manager.memory_limit, dask_worker.memory_manager.memory_target_fraction,
                    dask_worker.memory_manager.memory_spill_fraction]).values()),
                worker_modules=sorted(modules.values()))
    return client


module["start_client"] = start_client
assert etl["main"](["--root", root, "--out", out]) == 0      # no --workers: the spec's etl.cluster.workers
assert "torch" not in sys.modules
import torch
assert float(torch.ones(2).sum()) == 2.0
print(json.dumps(seen))
"""


@pytest.mark.slow
def test_etl_py_on_its_own_on_the_specs_cluster_writes_what_one_process_writes(tmp_path):
    """Seconds: a real local Dask cluster of two worker processes (each imports NVTabular). ctrgen etl runs a spec in
    one process; the etl.py of the same spec with its etl.cluster section (seed 001's: two devices, so two workers on
    this CPU, its local_directory; here with 2 threads each and each worker's host memory and spill shares) runs on
    its own, its main() in a fresh interpreter, over several partitions: the same parquet, categories and
    schemas (the output does not depend on the cluster); the cluster has the spec's settings; nvtabular is imported
    without torch by ctrgen, the Triton preprocessing model and each Dask worker (etl.py is its preload), and torch
    stays importable."""
    raw = _movielens_raw(tmp_path)
    # Partitions of 16KB: the 3,000 ratings (75KB of CSV) are five, so that both workers get some.
    output = {"dir": "../data/movielens_genres", "out_files_per_proc": 4, "shuffle": True, "shuffle_valid": True,
              "reader": "hugectr", "part_size": "16KB"}
    spec = _committed_spec_copy(tmp_path, "movielens_genres", output=output, cluster={})
    res = CliRunner().invoke(main, ["etl", str(spec), "--out", str(tmp_path / "generated")])
    assert res.exit_code == 0, res.output
    assert "(cpu, 1 process)" in res.output and "genres (" in res.output
    one = _hashes(tmp_path / "data/movielens_genres")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # "Initializing an NVTabular Dataset in CPU mode"
        dataset = import_nvtabular().Dataset(str(raw / "ratings.csv"), engine="csv", part_size="16KB", cpu=True)
    assert dataset.to_ddf().npartitions >= 2

    seeds = dict(_committed_spec(REPO / "specs/movielens_genres.yaml")["etl"]["cluster"])
    assert seeds == {"protocol": "tcp", "devices": [0, 1], "device_memory_limit": 0.5,
                     "local_directory": "../data/dask_workdir"}
    clustered = _committed_spec_copy(tmp_path, "movielens_genres", specs="clustered", output=output, cluster={
        **seeds, "threads_per_worker": 2, "memory_limit": "1GiB", "memory_target_fraction": 0.4,
        "memory_spill_fraction": 0.5})
    ctx = open_spec(clustered)
    etl_py = tmp_path / "clustered_etl.py"
    etl_py.write_text(render_for(ctx, etl_plan(ctx)))
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-c", ON_ITS_OWN, str(etl_py), str(clustered.parent), str(tmp_path / "two")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert f"etl: {len(pd.read_csv(raw / 'ratings.csv'))} rows read on the cpu" in proc.stdout
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["nthreads"] == [2, 2] and got["address"].startswith("tcp://")
    assert got["memory"] == [[1 << 30, 0.4, 0.5]] * 2, got
    scratch = (tmp_path / "data/dask_workdir").resolve()
    assert len(got["dirs"]) == 2 and all(Path(d).resolve().is_relative_to(scratch) for d in got["dirs"]), got
    assert got["worker_modules"] == [["nvtabular"], ["nvtabular"]], got       # each worker: nvtabular, no torch
    # Categorify's ./categories where it ran (ctrgen moves only train/, valid/ and workflow/ into place).
    two = {k: v for k, v in _hashes(tmp_path / "two").items() if not k.startswith("categories/")}
    assert len(one) >= 10 and any(k.startswith("workflow/categories/") for k in one)
    assert one == two


@pytest.mark.slow
@pytest.mark.parametrize("name,multi_hot", [("movielens", False), ("movielens_genres", True)])
def test_movielens_specs_reproduce_the_seeds_etl(tmp_path, name, multi_hot):
    """On the notebooks' own train/valid split, the spec's ETL gives the hand-written ETL's columns,
    cardinalities and rows (seed 000's / 001's workflow, written out here as the notebooks have it). Seed 000 writes
    the validation rows in order, seed 001 shuffles them (Shuffle.PER_WORKER): the spec of each says the same
    (output.shuffle_valid). In one process (the cluster is the next test's)."""
    from codegen.demo.etl import fit_transform_save, import_nvtabular
    from codegen.workflow import read_features

    raw = _movielens_raw(tmp_path)
    inputs = {"train": ["../data/ml-25m/train.parquet"], "valid": ["../data/ml-25m/valid.parquet"],
              "columns": {"userId": "int64", "movieId": "int64", "rating": "float64"}}
    spec = _committed_spec_copy(tmp_path, name, inputs=inputs, drop=[], cluster={})
    result = run_etl(spec, out_root=tmp_path / "generated")
    nvt = import_nvtabular()
    cats = ["userId", "movieId"]
    if multi_hot:
        movies = pd.read_parquet(raw / "movies_converted.parquet")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            joined = ["userId", "movieId"] >> nvt.ops.JoinExternal(movies, on=["movieId"])
        cat_features = joined >> nvt.ops.Categorify()
        cats = cats + ["genres"]
    else:
        cat_features = ["userId", "movieId"] >> nvt.ops.Categorify()
    ratings = nvt.ColumnSelector(["rating"]) >> nvt.ops.LambdaOp(lambda col: (col > 3).astype("int8"))
    seed = fit_transform_save(nvt.Workflow(cat_features + ratings), raw / "train.parquet", raw / "valid.parquet",
                              tmp_path / "seed", cats=cats, conts=[], labels=["rating"],
                              dtypes={"userId": np.int64, "movieId": np.int64, "rating": np.float32}, seed=5)
    want = read_features(seed["workflow"], labels=["rating"])
    assert result.features.same_columns(want), (result.features, want)
    got_cols = list(_read(tmp_path / f"data/{name}/valid").columns)
    assert got_cols == list(_read(seed["valid"]).columns)
    # The same rows (to_parquet spreads each partition's rows over its files, so compare them sorted).
    for split in ("train", "valid"):
        ours, theirs = (_read(d).assign(genres=lambda f: f.get("genres", pd.Series(dtype=object)).map(tuple))
                        .sort_values(["userId", "movieId", "rating"], ignore_index=True)
                        for d in (tmp_path / f"data/{name}/{split}", seed[split]))
        pd.testing.assert_frame_equal(ours, theirs)
    # In file order: each file's validation rows in the hand-written ETL's order (seed 000) or shuffled (seed 001).
    where = {pair: i for i, pair in enumerate(zip(*_read(seed["valid"])[["userId", "movieId"]].to_numpy().T))}
    in_order = [pd.Series([where[p] for p in zip(f.userId, f.movieId)]).is_monotonic_increasing
                for f in map(pd.read_parquet, sorted((tmp_path / f"data/{name}/valid").glob("part_*.parquet")))]
    assert len(in_order) >= 2 and all(in_order) == (name == "movielens") and any(in_order) == (name == "movielens")


@pytest.mark.parametrize("case,expect", [
    ("missing_column", "raw/train.parquet: etl.inputs.columns.C9: column 'C9' is missing"),
    ("uncastable", "raw/bad.csv: etl.inputs.columns.C3: column 'C3' has a value that cannot be read as int64"),
    ("empty", "raw/empty.parquet: etl.inputs.train: the file has no rows"),
    ("empty_id", "raw/bad.csv: etl.inputs.columns.C3: column 'C3' has an empty or NaN value in data row 8"),
    ("nan_id", "raw/bad.csv: etl.inputs.columns.C3: column 'C3' has an empty or NaN value in data row 3"),
    ("null_id_parquet", "raw/bad.parquet: etl.inputs.columns.C3: column 'C3' has an empty or NaN value"),
    ("output_is_a_file", "etl.output.dir: "),
    ("nan_continuous", "raw/train.parquet: etl.groups.3.ops: continuous column 'I1' has "
                       f"{int(_frame(400, 1)['I1'].isna().sum())} missing value(s) (empty or NaN) and no FillMissing"),
    ("empty_continuous_csv", "raw/bad.csv: etl.groups.3.ops: continuous column 'I1' has 2 missing value(s)"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, case, expect):
    _raw(tmp_path)
    etl = json.loads(json.dumps(ETL))
    if case == "missing_column":
        etl["inputs"]["columns"]["C9"] = "int64"
        etl["drop"].append("C9")
    elif case == "uncastable":
        frame = _frame(50, 3)
        frame["C3"] = frame["C3"].astype(str)
        frame.loc[7, "C3"] = "seven"
        frame.to_csv(tmp_path / "raw/bad.csv", index=False)
        etl["inputs"]["train"] = ["raw/bad.csv"]
        etl["inputs"]["valid"] = ["raw/bad.csv"]
    elif case in ("empty_id", "nan_id"):
        text = _frame(50, 3).to_csv(index=False).splitlines()
        row = 8 if case == "empty_id" else 3      # C3 is the third field: emptied, or NaN as pandas writes it
        fields = text[row].split(",")
        fields[2] = "" if case == "empty_id" else "NaN"
        text[row] = ",".join(fields)
        (tmp_path / "raw/bad.csv").write_text("\n".join(text) + "\n")
        etl["inputs"]["train"] = etl["inputs"]["valid"] = ["raw/bad.csv"]
    elif case == "null_id_parquet":
        frame = _frame(50, 3)
        frame["C3"] = frame["C3"].astype("Int64")
        frame.loc[4, "C3"] = None
        frame.to_parquet(tmp_path / "raw/bad.parquet", index=False)
        etl["inputs"]["train"] = etl["inputs"]["valid"] = ["raw/bad.parquet"]
    elif case in ("nan_continuous", "empty_continuous_csv"):
        etl["groups"][3] = {"columns": ["I1"], "ops": ["LogOp", "Normalize"]}       # no FillMissing
        if case == "empty_continuous_csv":
            frame = _frame(50, 3).assign(I1=1.0)
            frame.loc[[4, 9], "I1"] = np.nan        # written as empty fields
            frame.to_csv(tmp_path / "raw/bad.csv", index=False)
            etl["inputs"]["train"] = etl["inputs"]["valid"] = ["raw/bad.csv"]
    elif case == "output_is_a_file":
        (tmp_path / "out").write_text("a file where etl.output.dir names a folder\n")
    else:
        _frame(10, 3).iloc[:0].to_parquet(tmp_path / "raw/empty.parquet", index=False)
        etl["inputs"]["train"] = ["raw/empty.parquet"]
    spec = _spec(tmp_path, etl)
    res = CliRunner().invoke(main, ["etl", str(spec), "--out", str(tmp_path / "generated")])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]       # no lone "etl" progress line
    assert len(lines) == 1 and expect in lines[0], res.output
    assert not (tmp_path / "out").is_dir() and not (tmp_path / "generated").exists()
    assert not (tmp_path / "etltest.features.lock.json").exists()


def test_output_that_would_replace_an_input_is_refused(tmp_path):
    _raw(tmp_path)
    (tmp_path / "raw/train").mkdir()
    (tmp_path / "raw/train.parquet").rename(tmp_path / "raw/train/a.parquet")
    etl = json.loads(json.dumps(ETL))
    etl["inputs"]["train"] = ["raw/train/a.parquet"]
    etl["output"]["dir"] = "raw"
    res = CliRunner().invoke(main, ["etl", str(_spec(tmp_path, etl))])
    assert res.exit_code == 2 and "etl.output.dir: the output would replace the input" in res.output, res.output
    assert (tmp_path / "raw/train/a.parquet").is_file()


@pytest.mark.parametrize("change,expect", [
    (lambda e: e["groups"][0]["columns"].append("nope"), "etl.groups[0].columns[1]: column 'nope' is not an input"),
    (lambda e: e["groups"][3]["ops"].insert(0, "Categorify"), "Categorify is the only operator of its group"),
    (lambda e: e["drop"].remove("extra"), "etl.inputs.columns.extra: input column 'extra' is neither transformed "
     "nor dropped"),
    (lambda e: e["groups"][1]["columns"].append("C1"), "column 'C1' is already transformed by another group"),
    (lambda e: e["groups"][5]["ops"].__setitem__(0, {"LambdaOp": {"compare": "in", "value": 1}}), "LambdaOp"),
    (lambda e: e["groups"][4]["columns"].append("C2"), "text column 'C2' needs Categorify"),
    (lambda e: e["inputs"].__setitem__("multi_hot", {"tags": "|"}) or e["drop"].remove("tags")
     or e["groups"].append({"columns": ["tags"], "ops": ["Categorify"]}), "cannot be combined"),
])
def test_spec_problems_name_the_line(tmp_path, change, expect):
    etl = json.loads(json.dumps(ETL))
    change(etl)
    spec = _spec(tmp_path, etl)
    res = CliRunner().invoke(main, ["etl", str(spec)])
    assert res.exit_code == 2, res.output
    line = res.output.strip().splitlines()[-1]
    assert line.startswith(f"{spec}:") and line.split(":")[1].isdigit() and expect in line, res.output


def test_spec_writer_round_trips_the_etl_section(tmp_path):
    from codegen.specfile.load import load_spec
    from codegen.specfile.write import write_spec as dump_spec

    for etl in (ETL, LISTS):
        spec = load_spec(_spec(tmp_path, etl)).spec
        again = tmp_path / "again.yaml"
        again.write_text(dump_spec(spec), encoding="utf-8")
        assert load_spec(again).spec == spec
        assert "{Categorify: {freq_threshold:" in again.read_text()


@pytest.mark.slow
def test_check_lock_reports_drift_with_exit_1(tmp_path, lists_etl):
    folder, spec, _ = lists_etl                                           # its run_etl wrote the lock
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    spec = tmp_path / spec.relative_to(folder)
    lock_path = tmp_path / "etltest.features.lock.json"
    lock = json.loads(lock_path.read_text())
    lock["categorical"][0]["cardinality"] += 1
    lock_path.write_text(json.dumps(lock))
    res = CliRunner().invoke(main, ["etl", str(spec), "--check-lock", "--out", str(tmp_path / "generated")])
    assert res.exit_code == 1, res.output
    assert "lock: stale" in res.output and "categorical.C3" in res.output
    assert json.loads(lock_path.read_text()) == lock                      # checked, not rewritten


def test_data_defaults_to_the_etl_output(tmp_path):
    """Without data:, a spec with etl: trains on etl.output.dir's file lists; without either, data is required."""
    from codegen.errors import UserError
    from codegen.specfile.load import load_spec

    model = {k: v for k, v in MODEL.items() if k != "data"}
    spec = load_spec(tmp_path / "s.yaml", json.dumps({**model, "etl": ETL})).spec
    assert spec.data.train == ["out/train/_file_list.txt"] and spec.data.eval == "out/valid/_file_list.txt"
    given = load_spec(tmp_path / "s.yaml", json.dumps({**MODEL, "etl": ETL})).spec
    assert given.data == load_spec(tmp_path / "s.yaml", json.dumps(MODEL)).spec.data     # data: as written wins
    with pytest.raises(UserError, match="data: field required"):
        load_spec(tmp_path / "s.yaml", json.dumps(model))


@pytest.mark.parametrize("where,key,expect", [
    (("etl", "cross", 0), "freq_treshold", "did you mean 'freq_threshold'? (fields here: columns, freq_threshold, "
                                           "num_buckets)"),
    (("model",), "unitz", "did you mean 'units'? (fields here: batch_norm, dropout, preset, units)"),
    ((), "solvr", "did you mean 'solver'?"),
])
def test_unknown_spec_key_names_the_closest(tmp_path, where, key, expect):
    from codegen.errors import UserError
    from codegen.specfile.load import load_spec

    doc = json.loads(json.dumps({**MODEL, "etl": ETL}))
    node = doc
    for part in where:
        node = node[part]
    node[key] = 1
    with pytest.raises(UserError) as err:
        load_spec(tmp_path / "s.yaml", json.dumps(doc))
    assert f"{key}: unknown field (fix: {expect}" in str(err.value)
