"""bench/threads.py (issue 45's thread measurement): the settings it tries, its verdict, and one real trainer run
reporting the rate and the threads it took."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_threads", REPO / "bench" / "threads.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_threads"] = module
    spec.loader.exec_module(module)
    return module


def test_settings_double_up_to_the_cores_and_the_verdict_flags_a_slow_default():
    bench = _bench()
    assert bench.settings(16) == [1, 2, 4, 8, 16]
    assert bench.settings(6) == [1, 2, 4, 6]
    assert bench.settings(1) == [1]
    rows = [{"model": "m", "ranks": 1, "asked": "default", "threads": 2, "rate": 70.0, "of_best": 0.7},
            {"model": "m", "ranks": 1, "asked": "1", "threads": 1, "rate": 100.0, "of_best": 1.0},
            {"model": "n", "ranks": 1, "asked": "default", "threads": 2, "rate": 90.0, "of_best": 0.9}]
    text = bench.table(rows, 2)
    assert "m, 1 rank(s): the default is 1.43x the best's time: SLOWER than 1.2x the best" in text
    assert "n, 1 rank(s): the default is 1.11x the best's time: ok" in text


def test_a_run_reports_the_trainers_rate_and_its_threads(tmp_path):
    """Seconds: one trainer process (movielens, 512 rows, 4 steps, --threads 1)."""
    bench = _bench()
    features = json.loads((REPO / "generated" / "movielens" / "features.json").read_text())
    bench.synthesize(features, 512, tmp_path / "data" / "train", files=1, seed=7)
    bench.synthesize(features, 256, tmp_path / "data" / "valid", files=1, seed=7)
    args = argparse.Namespace(iters=4, batch=128)
    result = bench.run("movielens", tmp_path / "data", 1, 1, args, tmp_path)
    assert result["threads"] == 1 and result["rate"] > 0
