"""The embedded demo: synthetic raw data, the real NVTabular ETL, planted structure, build stamp."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from codegen.demo import criteo, movielens
from codegen.demo.build import DEFAULT_SEED, TOTAL_STEPS, build_demo, demo_is_current
from codegen.demo.metrics import SparseDesign, logistic_baseline_auc, roc_auc
from codegen.workflow import read_features
from demo_data import built_demo, read_parts

pytestmark = pytest.mark.slow      # processes and builds of seconds each: not in `make test-fast`


@pytest.fixture(scope="module")
def built():
    return built_demo()


@pytest.fixture(scope="module")
def demo(built):
    return built.paths


# ---- build mechanics ------------------------------------------------------------------------------------------------

def test_progress_reports_every_step(built):
    done = [d for _, d, _ in built.progress]
    assert done == list(range(TOTAL_STEPS + 1))
    assert {t for _, _, t in built.progress} == {TOTAL_STEPS}
    labels = [label for label, _, _ in built.progress]
    assert labels[0] == "movielens: synthesize" and labels[-1] == "done"
    assert "movielens_genres: fit" in labels and "criteo: save workflow" in labels


def test_etl_leaves_no_categories_in_cwd(built):
    assert built.cwd_categories_after == built.cwd_categories_before


def test_second_build_is_skipped(built):
    pkl = built.paths["movielens"]["workflow"] / "workflow.pkl"
    mtime = pkl.stat().st_mtime_ns
    calls = []
    again = build_demo(built.root, progress=lambda *a: calls.append(a))
    assert again == built.paths and calls == [("up to date", TOTAL_STEPS, TOTAL_STEPS)]
    assert pkl.stat().st_mtime_ns == mtime
    assert demo_is_current(built.root) and not demo_is_current(built.root, seed=DEFAULT_SEED + 1)


def test_layout(demo):
    for name, d in demo.items():
        for split in ("train", "valid"):
            for f in ("_file_list.txt", "_metadata.json", "schema.pbtxt", ".merlin/schema.json"):
                assert (d[split] / f).is_file(), (name, split, f)
            lines = (d[split] / "_file_list.txt").read_text().split()
            assert int(lines[0]) == len(lines) - 1 == 2                       # HugeCTR file-list format
            assert all(Path(p).is_absolute() and Path(p).is_file() for p in lines[1:])
        for f in ("workflow.pkl", "metadata.json", "output_schema.pbtxt", "input_schema.pbtxt"):
            assert (d["workflow"] / f).is_file(), (name, f)
        assert json.loads(d["truth"].read_text())["seed"] == DEFAULT_SEED
    assert demo["movielens_genres"]["raw"] == demo["movielens"]["raw"]


def test_raw_files_are_shaped_like_the_originals(demo):
    raw = demo["movielens"]["raw"]
    assert list(pd.read_csv(raw / "ratings.csv", nrows=1).columns) == ["userId", "movieId", "rating", "timestamp"]
    movies = pd.read_csv(raw / "movies.csv")
    assert list(movies.columns) == ["movieId", "title", "genres"]
    assert set("|".join(movies["genres"]).split("|")) <= set(movielens.GENRES)
    ratings = pd.read_csv(raw / "ratings.csv")
    assert set(np.unique(ratings["rating"])) <= set(np.arange(1, 11) / 2)
    assert not ratings.duplicated(["userId", "movieId"]).any()
    frame = pd.read_parquet(demo["criteo"]["raw"] / "train.parquet")
    assert list(frame.columns) == ["label", *criteo.CONTINUOUS, *criteo.CATEGORICAL]
    assert frame[criteo.CONTINUOUS].isna().any().any() and frame[criteo.CATEGORICAL].isna().any().any()


def test_synthesis_is_deterministic(demo, tmp_path):
    for module, name in ((movielens, "movielens"), (criteo, "criteo")):
        module.write_raw(module.synthesize(DEFAULT_SEED), tmp_path / name, seed=DEFAULT_SEED)
        for f in ("train.parquet", "valid.parquet", "truth.json"):
            assert (tmp_path / name / f).read_bytes() == (demo[name]["raw"] / f).read_bytes(), (name, f)
    a, b = movielens.synthesize(1).ratings, movielens.synthesize(2).ratings
    assert not a.equals(b)


# ---- the ETL output is the notebooks' transformation of the raw data ------------------------------------------------

def decode(series: pd.Series, workflow: Path, col: str) -> pd.Series:
    """Map encoded ids back to raw values with the saved workflow's categories (index = encoded id, env §5.3)."""
    uniques = pd.read_parquet(workflow / "categories" / f"unique.{col}.parquet")
    mapping = dict(zip(uniques.index, uniques[col]))
    return series.map(lambda v: mapping.get(v, "<oov>"))


@pytest.mark.parametrize("dataset", ["movielens", "movielens_genres"])
def test_movielens_valid_is_the_encoded_raw_valid(demo, dataset):
    d = demo[dataset]
    raw = pd.read_parquet(d["raw"] / "valid.parquet")
    out = read_parts(d["valid"])
    got = pd.DataFrame({"userId": decode(out["userId"], d["workflow"], "userId"),
                        "movieId": decode(out["movieId"], d["workflow"], "movieId"),
                        "label": out["rating"]})
    train = pd.read_parquet(d["raw"] / "train.parquet")
    expected = pd.DataFrame({"userId": raw["userId"].where(raw["userId"].isin(train["userId"]), "<oov>"),
                             "movieId": raw["movieId"].where(raw["movieId"].isin(train["movieId"]), "<oov>"),
                             "label": (raw["rating"] > 3).astype("float32")})
    key = ["userId", "movieId", "label"]
    sort = lambda df: df.astype(str).sort_values(key).reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(sort(got), sort(expected))
    assert (out.loc[got["userId"] == "<oov>", "userId"] == 2).all()          # unseen -> id 2 (env §4)
    if dataset == "movielens_genres":
        movies = pd.read_parquet(d["raw"] / "movies_converted.parquet").set_index("movieId")["genres"]
        uniques = pd.read_parquet(d["workflow"] / "categories" / "unique.genres.parquet")["genres"]
        genre_of = dict(zip(uniques.index, uniques))
        decoded_movie = decode(out["movieId"], d["workflow"], "movieId")
        for ids, movie in zip(out["genres"], decoded_movie):
            if movie != "<oov>":
                assert sorted(genre_of[i] for i in ids) == sorted(movies[movie])


def test_criteo_continuous_are_filled_clipped_normalized(demo):
    train = read_parts(demo["criteo"]["train"])
    conts = train[criteo.CONTINUOUS]
    assert not conts.isna().any().any()
    assert np.allclose(conts.mean(), 0.0, atol=1e-3) and np.allclose(conts.std(ddof=0), 1.0, atol=1e-3)
    assert set(np.unique(train["label"])) == {0.0, 1.0}


def test_saved_workflow_runs_without_ctrgen(demo, tmp_path):
    """workflow.pkl (JoinExternal + the label lambda) loads and transforms in a process without ctrgen importable."""
    d = demo["movielens_genres"]
    code = f"""
import json, sys, warnings
sys.modules["codegen"] = None        # not importable (the venv may hold an editable install of ctrgen)
warnings.simplefilter("ignore")
import nvtabular as nvt, pandas as pd
wf = nvt.Workflow.load({str(d["workflow"])!r})
out = wf.transform(pd.read_parquet({str(d["raw"] / "valid.parquet")!r}))
print(json.dumps({{"columns": list(out.columns), "dtypes": [str(t) for t in out.dtypes],
                  "rows": sorted(map(str, zip(out["userId"], out["movieId"], out["genres"].map(list),
                                             out["rating"])))}}))
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["columns"] == ["userId", "movieId", "genres", "rating"]
    assert result["dtypes"][-1] == "int8"                                     # the LambdaOp's dtype (env §2.5)
    parquet = read_parts(d["valid"])
    expected = sorted(map(str, zip(parquet["userId"], parquet["movieId"], parquet["genres"].map(list),
                                   parquet["rating"].astype("int8"))))
    assert result["rows"] == expected


# ---- planted structure: what a model can learn ----------------------------------------------------------------------

def encoded_design(frame: pd.DataFrame, feats) -> SparseDesign:
    d = SparseDesign(len(frame))
    for col in feats.categorical:
        if col.multi_hot:
            d.add_multihot(list(frame[col.name]), col.cardinality)
        else:
            d.add_onehot(frame[col.name].to_numpy(), col.cardinality)
    if feats.continuous:
        d.add_dense(frame[[c.name for c in feats.continuous]].to_numpy())
    return d


@pytest.mark.parametrize("dataset", ["movielens", "movielens_genres", "criteo"])
def test_etl_output_carries_the_planted_signal(demo, dataset):
    """Logistic regression on the *transformed* parquet beats the truth's suggested threshold; oracle is above."""
    d = demo[dataset]
    truth = json.loads(d["truth"].read_text())
    feats = read_features(d["train"])
    train, valid = read_parts(d["train"]), read_parts(d["valid"])
    label = feats.labels[0].name
    auc = logistic_baseline_auc(encoded_design(train, feats), train[label], encoded_design(valid, feats),
                                valid[label])
    assert 0.5 < truth["suggested_min_auc"] < auc < truth["oracle_auc_valid"] + 0.02
    # The number recorded in truth.json came from the raw ids; the encoded data give the same model up to ordering.
    key = "genres" if dataset == "movielens_genres" else "onehot"
    assert abs(auc - truth["baseline_auc_valid"][key]) < 0.02
    assert truth["baseline_auc_valid"][key] < truth["oracle_auc_valid"]
    assert truth["rows"] == {"train": len(train), "valid": len(valid)}


def test_movielens_labels_follow_the_planted_model():
    """P(rating > 3) = Phi(signal / noise_sd): check calibration per signal quartile on a fresh sample."""
    from math import erf, sqrt

    raw = movielens.synthesize(7, movielens.Sizes(n_users=300, n_movies=200, n_ratings=4000))
    y = (raw.ratings["rating"] > 3).to_numpy()
    signal = raw.planted.signal
    p = np.array([0.5 * (1 + erf(s / (raw.planted.noise_sd * sqrt(2)))) for s in signal])
    quartile = np.searchsorted(np.quantile(signal, [0.25, 0.5, 0.75]), signal)
    for q in range(4):
        assert abs(y[quartile == q].mean() - p[quartile == q].mean()) < 0.06, q
    assert roc_auc(y, signal) > 0.75
    assert roc_auc(y, signal + np.random.default_rng(0).normal(0, 5.0, len(y))) < roc_auc(y, signal) - 0.1


def test_roc_auc_matches_pair_counting():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300)
    s = rng.integers(0, 20, 300).astype(float)         # many ties
    pos, neg = s[y == 1], s[y == 0]
    pairs = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert roc_auc(y, s) == pytest.approx(pairs / (len(pos) * len(neg)))
