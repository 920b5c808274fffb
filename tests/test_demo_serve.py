"""`ctrgen demo --serve` (what `make demo` runs): the whole job on the CPU, on a private copy of the demo data."""

from __future__ import annotations

import psutil
import pytest

from conftest import REPO, run_ctrgen
from demo_data import private_demo

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("demo_serve")]


def test_demo_serve_trains_serves_queries_and_compares():
    """Seconds: the README's `make demo` path itself (train, assemble, a real Triton server with the default two
    preprocessing instances, 1,000 raw rows queried and compared)."""
    demo = private_demo("serve")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    proc = run_ctrgen("demo", "--root", str(demo.root), "--specs", str(REPO / "specs"), "--only", "movielens",
                      "--serve")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = proc.stdout[proc.stdout.index("Served demo (movielens"):]
    assert "1000 raw validation rows through movielens_ens: served = offline" in report
    auc = float(report.split("AUC", 1)[1].split()[0])
    assert 0.6 < auc <= 1.0
    assert "latency      batch 1: p50" in report
    for name in ("model.pt", "features.json", "metrics.jsonl", "run.json", "report.html"):
        assert (demo.root / "train" / "movielens" / name).is_file()
    run = demo.root / "train" / "movielens"            # trained by `ctrgen train`, its page by `ctrgen report`
    assert f"  report       {run / 'report.html'}" in report
    assert f"  tensorboard  tensorboard --logdir {run / 'tensorboard'}" in report
    assert '"step": 300, "tag": "eval/auc"' in (run / "metrics.jsonl").read_text()
    repo = demo.root / "serve" / "movielens"
    # the three models, one copy of ctrgen's runtime and the manifest recording its version
    assert sorted(p.name for p in repo.iterdir()) == ["MANIFEST.json", "codegen", "movielens", "movielens_ens",
                                                      "movielens_nvt"]
    assert (repo / "movielens" / "1" / "model.pt").is_file() and (repo / "movielens_nvt" / "1" / "workflow").is_dir()
    log = (demo.root / "serve" / "movielens.tritonserver.log").read_text()
    assert "successfully loaded 'movielens_ens'" in log
    # The server ran as a `ctrgen serve` process and stopped: nothing it started is left.
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
