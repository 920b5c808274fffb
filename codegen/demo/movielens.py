"""A small MovieLens-shaped dataset with planted structure, and the notebooks' NVTabular ETL run on it for real.

ml-25m cannot be downloaded here, so :func:`synthesize` draws users, movies (with ml-25m's 20 genre names) and
ratings from a known model:

    s(u, m)  = a_u + b_m + t_u · g_m + e,   e ~ N(0, NOISE_SD²)
    rating   = clip(3 + ceil(2 s) / 2, 0.5, 5.0)          so that   rating > 3  ⇔  s > 0

with a user bias ``a_u``, a movie bias ``b_m`` (mean of its genres' biases plus its own), a user taste vector ``t_u``
and the mean latent vector ``g_m`` of the movie's genres. The label of the notebooks, ``rating > 3``, is therefore
``signal + e > 0`` with ``signal = a_u + b_m + t_u · g_m``: P(label = 1) = Φ(signal / NOISE_SD). Ranking the
validation rows by ``signal`` is Bayes-optimal; its AUC (``oracle_auc_valid`` in ``truth.json``) is the ceiling a
model can reach up to sampling noise, and ``baseline_auc_valid`` is what logistic regression on the one-hot ids
reaches (see metrics.py). With the default sizes: oracle ≈ 0.86-0.89, baseline ≈ 0.77 (measured values are in
``truth.json``).

:func:`write_raw` then follows the notebooks' steps (seed 000 / 001): ``ratings.csv`` and ``movies.csv`` as ml-25m
ships them, ``movies_converted.parquet`` (genres split on "|"), timestamp dropped, shuffled, last 20 % as validation,
``train.parquet`` / ``valid.parquet``. :func:`run_etl` runs the ETL: Categorify userId/movieId (plus genres joined
from the movies with JoinExternal for the multi-hot variant, seed 001/002), ``rating > 3`` as an int8 LambdaOp, fit on
train, transform train and valid with ``to_parquet(cats=..., labels=..., dtypes=...)``, save the workflow.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from .metrics import SparseDesign, logistic_baseline_auc, roc_auc, suggested_min_auc

# ml-25m's genre vocabulary (movies.csv), "(no genres listed)" included.
GENRES = ("Action", "Adventure", "Animation", "Children", "Comedy", "Crime", "Documentary", "Drama", "Fantasy",
          "Film-Noir", "Horror", "IMAX", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western",
          "(no genres listed)")
NO_GENRE = "(no genres listed)"
NOISE_SD = 1.0
LATENT_DIM = 4
VALID_FRACTION = 0.2          # the notebooks' num_valid = int(len(ratings) * 0.2)

CATEGORICAL = ["userId", "movieId"]
CATEGORICAL_GENRES = ["userId", "movieId", "genres"]
LABELS = ["rating"]


@dataclass(frozen=True)
class Sizes:
    n_users: int = 600
    n_movies: int = 400
    n_ratings: int = 10_000


@dataclass(frozen=True)
class Planted:
    """The ground truth behind the ratings (aligned with ``MovielensRaw.ratings`` rows)."""

    signal: np.ndarray          # a_u + b_m + t_u·g_m per rating; label = signal + noise > 0
    user_bias: dict[int, float]
    movie_bias: dict[int, float]
    noise_sd: float = NOISE_SD


@dataclass(frozen=True)
class MovielensRaw:
    ratings: pd.DataFrame       # userId, movieId, rating, timestamp (ml-25m ratings.csv)
    movies: pd.DataFrame        # movieId, title, genres "A|B" (ml-25m movies.csv)
    planted: Planted


def synthesize(seed: int, sizes: Sizes = Sizes()) -> MovielensRaw:
    rng = np.random.default_rng([seed, 0x4D4C])   # stream "ML"
    n_genres = len(GENRES)

    # Movies: sparse ml-style ids, 1-3 genres each (Drama/Comedy most common), a few with none.
    movie_ids = np.sort(rng.choice(np.arange(1, 210_000), size=sizes.n_movies, replace=False))
    genre_weight = rng.gamma(1.0, 1.0, n_genres - 1)
    genre_weight[[GENRES.index("Drama"), GENRES.index("Comedy")]] *= 4
    genre_weight /= genre_weight.sum()
    movie_genres: list[list[int]] = []
    for _ in movie_ids:
        if rng.random() < 0.02:
            movie_genres.append([n_genres - 1])
        else:
            k = int(rng.choice([1, 2, 3], p=[0.35, 0.4, 0.25]))
            movie_genres.append(sorted(rng.choice(n_genres - 1, size=k, replace=False, p=genre_weight).tolist()))
    years = rng.integers(1930, 2020, sizes.n_movies)
    movies = pd.DataFrame({
        "movieId": movie_ids,
        "title": [f"Movie {m} ({y})" for m, y in zip(movie_ids, years)],
        "genres": ["|".join(GENRES[g] for g in gs) for gs in movie_genres],
    })

    # Latent structure.
    genre_vec = rng.normal(0.0, 1.0, (n_genres, LATENT_DIM))
    genre_bias = rng.normal(0.0, 0.5, n_genres)
    movie_vec = np.stack([genre_vec[gs].mean(axis=0) for gs in movie_genres])
    movie_bias = np.array([genre_bias[gs].mean() for gs in movie_genres]) + rng.normal(0.0, 0.6, sizes.n_movies)
    user_ids = np.arange(1, sizes.n_users + 1)
    user_bias = rng.normal(0.0, 0.7, sizes.n_users)
    user_taste = rng.normal(0.0, 0.45, (sizes.n_users, LATENT_DIM))

    # Ratings: skewed user activity and movie popularity, one rating per (user, movie).
    user_p = rng.lognormal(0.0, 0.8, sizes.n_users); user_p /= user_p.sum()
    movie_p = rng.lognormal(0.0, 1.0, sizes.n_movies); movie_p /= movie_p.sum()
    draw = int(sizes.n_ratings * 1.3)
    pairs = pd.DataFrame({"u": rng.choice(sizes.n_users, draw, p=user_p),
                          "m": rng.choice(sizes.n_movies, draw, p=movie_p)})
    pairs = pairs.drop_duplicates().iloc[: sizes.n_ratings]
    u, m = pairs["u"].to_numpy(), pairs["m"].to_numpy()
    signal = user_bias[u] + movie_bias[m] + np.einsum("ij,ij->i", user_taste[u], movie_vec[m])
    s = signal + rng.normal(0.0, NOISE_SD, len(u))
    rating = np.clip(3.0 + np.ceil(2.0 * s) / 2.0, 0.5, 5.0)
    ratings = pd.DataFrame({
        "userId": user_ids[u].astype(np.int64),
        "movieId": movie_ids[m].astype(np.int64),
        "rating": rating.astype(np.float64),
        "timestamp": np.sort(rng.integers(1_000_000_000, 1_570_000_000, len(u))).astype(np.int64),
    })
    planted = Planted(signal=signal,
                      user_bias={int(i): float(b) for i, b in zip(user_ids, user_bias)},
                      movie_bias={int(i): float(b) for i, b in zip(movie_ids, movie_bias)})
    return MovielensRaw(ratings=ratings, movies=movies, planted=planted)


def write_raw(raw: MovielensRaw, raw_dir: Path, *, seed: int) -> dict[str, Path]:
    """The notebooks' preparation steps; writes the raw files and ``truth.json``."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: raw_dir / name for name in ("ratings.csv", "movies.csv", "movies_converted.parquet",
                                               "train.parquet", "valid.parquet", "truth.json")}
    raw.ratings.to_csv(paths["ratings.csv"], index=False)
    raw.movies.to_csv(paths["movies.csv"], index=False)

    movies = raw.movies.drop("title", axis=1)
    movies["genres"] = movies["genres"].str.split("|")
    movies.to_parquet(paths["movies_converted.parquet"], index=False)

    ratings = raw.ratings.drop("timestamp", axis=1)
    ratings = ratings.sample(len(ratings), replace=False, random_state=seed)
    num_valid = int(len(ratings) * VALID_FRACTION)
    train, valid = ratings[:-num_valid], ratings[-num_valid:]
    train.to_parquet(paths["train.parquet"], index=False)
    valid.to_parquet(paths["valid.parquet"], index=False)

    truth = planted_truth(raw, train.index.to_numpy(), valid.index.to_numpy(), seed=seed)
    paths["truth.json"].write_text(json.dumps(truth, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return paths


def planted_truth(raw: MovielensRaw, train_rows: np.ndarray, valid_rows: np.ndarray, *, seed: int) -> dict:
    """Oracle and baseline AUCs on the validation split (see the module docstring)."""
    r = raw.ratings
    y = (r["rating"].to_numpy() > 3).astype(np.float64)
    genre_lists = _genre_codes(raw.movies)

    def design(rows: np.ndarray, with_genres: bool, vocab: dict[str, dict[int, int]]) -> SparseDesign:
        d = SparseDesign(len(rows))
        for col in ("userId", "movieId"):
            ids = r[col].to_numpy()[rows]
            d.add_onehot(np.array([vocab[col].get(int(i), 0) for i in ids]), len(vocab[col]) + 1)  # 0 = unseen
        if with_genres:
            d.add_multihot([genre_lists[int(mv)] for mv in r["movieId"].to_numpy()[rows]], len(GENRES))
        return d

    vocab = {col: {int(v): i + 1 for i, v in enumerate(np.unique(r[col].to_numpy()[train_rows]))}
             for col in ("userId", "movieId")}
    baseline = {}
    for name, with_genres in (("onehot", False), ("genres", True)):
        baseline[name] = round(logistic_baseline_auc(design(train_rows, with_genres, vocab), y[train_rows],
                                                     design(valid_rows, with_genres, vocab), y[valid_rows]), 4)
    oracle = roc_auc(y[valid_rows], raw.planted.signal[valid_rows])
    return {
        "dataset": "movielens (synthetic, ml-25m shaped)",
        "seed": seed,
        "model": "label = rating > 3 = [a_u + b_m + t_u . g_m + N(0, noise_sd^2) > 0]",
        "noise_sd": NOISE_SD,
        "rows": {"train": int(len(train_rows)), "valid": int(len(valid_rows))},
        "positive_rate": {"train": round(float(y[train_rows].mean()), 4),
                          "valid": round(float(y[valid_rows].mean()), 4)},
        "oracle_auc_valid": round(oracle, 4),
        "baseline_auc_valid": baseline,
        "suggested_min_auc": suggested_min_auc(baseline["onehot"]),
    }


def _genre_codes(movies: pd.DataFrame) -> dict[int, list[int]]:
    return {int(m): [GENRES.index(g) for g in gs.split("|")] for m, gs in zip(movies["movieId"], movies["genres"])}


def run_etl(raw_dir: Path, out_dir: Path, *, multi_hot: bool, seed: int,
            step: Callable[[str], None] | None = None) -> dict[str, Path]:
    """Seed 000's ETL (one-hot userId, movieId) or seed 001/002's (plus multi-hot genres joined from movies.csv), as an
    ``etl:`` section run by ctrgen's generated etl.py (the sections of specs/movielens*.yaml, on the demo's split)."""
    from . import etl

    section = {
        "inputs": {"train": [str(raw_dir / "train.parquet")], "valid": [str(raw_dir / "valid.parquet")],
                   "columns": {"userId": "int64", "movieId": "int64", "rating": "float64"}},
        "groups": [{"columns": CATEGORICAL_GENRES if multi_hot else CATEGORICAL, "ops": ["Categorify"]},
                   {"columns": LABELS, "ops": [{"LambdaOp": {"compare": ">", "value": 3, "dtype": "int8"}}]}],
        # HugeCTR wants int64 categories and a float32 label (reader: hugectr).
        "output": {"dir": str(out_dir), "out_files_per_proc": etl.OUT_FILES_PER_PROC, "shuffle": True, "seed": seed,
                   "reader": "hugectr"},
    }
    if multi_hot:
        section["join"] = {"path": str(raw_dir / "movies.csv"), "on": ["movieId"],
                           "columns": {"movieId": "int64", "genres": "str"}, "multi_hot": {"genres": "|"}}
    return etl.run_section("movielens_genres" if multi_hot else "movielens", section, raw_dir, step=step)
