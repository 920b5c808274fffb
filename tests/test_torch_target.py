"""The PyTorch target: train_torch.py for every example spec, trained for real on the CPU on the demo's NVTabular output.

The scripts are rendered the way `ctrgen demo` renders them (the committed spec pointed at the demo dataset, its lock
recorded from the demo's saved workflow), then run as subprocesses with small iteration counts. MovieLens must reach
close to what logistic regression on the same ids reaches (truth.json: the planted structure); every other spec must
learn (AUC clearly above chance). Bad data stops with one line naming file and column, exit status 2.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from codegen.demo.cli import DEMO_SPECS, demo_spec_text
from codegen.demo.metrics import roc_auc
from codegen.errors import UserError
from codegen.output import write
from codegen.pipeline import open_spec, render_spec
from codegen.runtime.data import data_files, read_split
from codegen.runtime.evaluation import roc_auc as runtime_auc
from codegen.workflow import read_workflow_features
from conftest import REPO
from demo_data import built_demo
from test_presets_families import SPANS
from specfactory import MOVIELENS_LOCK, write_spec
from warm_python import run_job
from warm_python import run as run_warm

pytestmark = pytest.mark.slow

# Iterations and batch per spec: the fewest that learn the planted signal with a margin (AUC 0.03 or more above
# 0.5 + LEARNS_MARGIN: the Criteo specs reach 0.60-0.62 in 15 steps, the MovieLens ones 0.70 or more).
RUNS = {"movielens": (120, 256), "movielens_genres": (40, 256), "movielens_seed001": (20, 256), "wdl": (15, 256),
        "dcn": (15, 256), "dlrm": (40, 128), "deepfm": (15, 256), "deepfm_vertex": (15, 256),
        "deepfm_multinode": (15, 256), "wdl_continuous_etc": (15, 256)}
# DLRM's lr warms up over the spec's 300 steps: 150 steps at the spec's lr ended 0.006 above the bar. From HugeCTR's
# initial weights 40 steps of 128 at a peak lr of 16 learn it (30 steps of 96 at lr 24 ended at 0.548, below it).
EXTRA = {"dlrm": ("--lr", "16")}
# Every example spec -> the demo dataset it trains on (the launch specs are DeepFM on the Criteo workflow).
# Example specs without the torch target (the CreateMOS one; wdl_continuous_etc has it, demo copy: one pass;
# the passes themselves are tests/test_torch_continuous.py).
CONTINUOUS = {"wdl_continuous"}
SPECS = {k: v for k, v in {**DEMO_SPECS, "deepfm_vertex": "criteo", "deepfm_multinode": "criteo"}.items()
         if k not in CONTINUOUS}
# The sample families' specs (tests/test_presets_families.py) have no demo data set; MMoE and shared-bottom train
# two labels (their training: tests/test_multilabel.py; their serving: tests/test_triton_outputs.py).
FAMILIES = tuple(SPANS)
HUGECTR_ONLY: set[str] = set()
LEARNS_MARGIN = 0.05


@pytest.fixture(scope="module")
def demo():
    return built_demo()


class _Rendered(dict):
    """generated/<name>/ folders rendered against the demo datasets (as `ctrgen demo` does), each on first use: the
    tests of a module are spread over the xdist workers, and a worker renders only the specs its tests train."""

    def __init__(self, demo, out: Path, spec_dir: Path):
        super().__init__()
        self.demo, self.out, self.spec_dir = demo, out, spec_dir

    def __missing__(self, name: str) -> Path:
        spec = self.spec_dir / f"{name}.yaml"
        spec.write_text(demo_spec_text((REPO / "specs" / f"{name}.yaml").read_text(), spec_name=name,
                                       dataset_dir=self.demo.root / SPECS[name], spec_dir=self.spec_dir))
        ctx = open_spec(spec)
        ctx.lock_path.write_text(read_workflow_features(ctx, ctx.workflow_path).lock_text())
        write(self.out / name, render_spec(ctx).files)
        self[name] = self.out / name
        return self[name]


@pytest.fixture(scope="module")
def scripts(demo, tmp_path_factory) -> dict[str, Path]:
    """generated/<name>/ folders rendered against the demo datasets (as `ctrgen demo` does), on first use."""
    # Beside the datasets (demo specs name them relative to their folder); one folder per xdist worker.
    spec_dir = demo.root / f"torch-specs-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    spec_dir.mkdir(exist_ok=True)
    return _Rendered(demo, tmp_path_factory.mktemp("torch-demo"), spec_dir)


def run_script(folder: Path, *args: str, ranks: int = 0, timeout: int = 600,
               omp: str | None = "1") -> subprocess.CompletedProcess:
    """The script in a process forked from a warm Python; with ranks=N as N ranks with torchrun's environment, forked
    (stdout and stderr of every rank, the worst exit status; the real launcher's start is test_train_command.py's).
    The suite runs several trainers side by side, one thread each (omp=None: the trainer's own default)."""
    env = {**os.environ, "OMP_NUM_THREADS": omp or "", "PYTHONHASHSEED": "0"}
    if omp is None:
        del env["OMP_NUM_THREADS"]
    env["PYTHONPATH"] = str(REPO)   # codegen.runtime of this checkout; besides it torch, numpy, pyarrow only
    if ranks:
        return run_job([sys.executable, str(folder / "train_torch.py"), "--device", "cpu", *args], cwd=folder,
                       env=env, ranks=ranks, timeout=timeout)
    cmd = [sys.executable, str(folder / "train_torch.py"), "--device", "cpu", *args]
    return run_warm(cmd, cwd=folder, env=env, timeout=timeout)     # a process forked from a warm Python


def train(folder: Path, out: Path, iters: int, batch: int, *extra: str, ranks: int = 0) -> dict:
    proc = run_script(folder, "--max-iter", str(iters), "--batch-size", str(batch), "--display", str(iters),
                      "--eval-interval", str(iters), "--output-dir", str(out), *extra, ranks=ranks)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads((out / "metrics.json").read_text())


def truth(demo, dataset: str) -> dict:
    return json.loads(demo.paths[dataset]["truth"].read_text())


# ---- rendering -----------------------------------------------------------------------------------------------------

def test_every_example_spec_renders_the_torch_target():
    rendered = [*SPECS, *FAMILIES]
    assert sorted(rendered) == sorted(p.stem for p in (REPO / "specs").glob("*.yaml")
                                      if p.stem not in CONTINUOUS | HUGECTR_ONLY)
    for name in rendered:
        folder = REPO / "generated" / name
        assert {"train_torch.py", "features.json", "model.py"} <= {p.name for p in folder.iterdir()}, name
        text = (folder / "train_torch.py").read_text()
        assert "import nvtabular" not in text and 'if __name__ == "__main__":' in text
        compile(text, str(folder / "train_torch.py"), "exec")
        features = json.loads((folder / "features.json").read_text())
        ctx = open_spec(REPO / "specs" / f"{name}.yaml")
        lock = {c["name"]: c for c in json.loads(ctx.lock_path.read_text())["categorical"]}
        wanted = ctx.spec.features.categorical or list(lock)
        slots = [c["name"] for s in features["sparse"] for c in s["columns"]]
        assert slots == wanted                                                         # slot order of the lock
        assert [c["cardinality"] for s in features["sparse"] for c in s["columns"]] == \
            [lock[c]["cardinality"] for c in wanted]


def test_targets_select_the_outputs(tmp_path):
    spec = (REPO / "specs" / "movielens.yaml").read_text()
    path = write_spec(tmp_path, spec, MOVIELENS_LOCK, name="movielens")
    files = {str(p) for p in render_spec(open_spec(path)).files}
    assert {"train_torch.py", "features.json", "model.py", "movielens.json"} <= files
    path = write_spec(tmp_path, spec.replace("targets: [hugectr, torch]", "targets: [hugectr]"), name="movielens")
    files = {str(p) for p in render_spec(open_spec(path)).files}
    assert "train_torch.py" not in files and "features.json" not in files and "model.py" in files


def test_untranslatable_optimizer_is_a_spec_error(tmp_path):
    spec = (REPO / "specs" / "movielens.yaml").read_text().replace("type: Adam", "type: Ftrl")
    spec = spec.replace('hugectr_version: "3.3"', 'hugectr_version: "23.06"')
    path = write_spec(tmp_path, spec, MOVIELENS_LOCK, name="movielens")
    with pytest.raises(UserError) as exc:
        render_spec(open_spec(path))
    text = exc.value.format()
    assert "movielens.yaml:" in text and "optimizer.type" in text and "fix:" in text
    # sparse_optimizer.cu's update_params has no Ftrl case (an embedding collection's tables do: test_torch_ftrl.py)
    assert "HugeCTR's SparseEmbedding has no Ftrl update" in text


# ---- training on the demo data -------------------------------------------------------------------------------------

def test_movielens_reaches_the_planted_structure(demo, scripts, tmp_path):
    """Seconds as the module's first trainer test: the demo's datasets, the first rendering, then 120 steps."""
    t = truth(demo, "movielens")
    iters, batch = RUNS["movielens"]
    metrics = train(scripts["movielens"], tmp_path / "out", iters, batch)
    # Logistic regression on the same ids is what this MLP should match; the oracle bounds it from above.
    assert t["baseline_auc_valid"]["onehot"] - 0.03 < metrics["auc"] < t["oracle_auc_valid"] + 0.02
    assert metrics["iterations"] == iters and metrics["world_size"] == 1 and not metrics["cuda_graph"]
    assert metrics["threads"] == 1                              # OMP_NUM_THREADS=1 (run_script), the user's choice


def test_the_trainer_takes_the_usable_cores_by_default(scripts, tmp_path):
    """Without OMP_NUM_THREADS or --threads: the cores this process may use, shared by the ranks on this machine
    (torch's own default is the machine's core count, which oversubscribes a container with a CPU quota)."""
    from codegen.runtime.threads import usable_cores

    cores = usable_cores()
    proc = run_script(scripts["movielens"], "--max-iter", "2", "--batch-size", "64", "--display", "1",
                      "--eval-interval", "2", "--max-eval-batches", "1", "--snapshot", "0", "--output-dir",
                      str(tmp_path / "out"), omp=None)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"CPU threads: {cores} a rank ({cores} usable core(s) / 1 rank(s) on this machine)\n" in proc.stdout
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["threads"] == cores
    proc = run_script(scripts["movielens"], "--max-iter", "1", "--threads", "0", "--output-dir", str(tmp_path / "x"))
    assert proc.returncode == 2 and "--threads 0: between 1 and 1024" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("name", [n for n in SPECS if n != "movielens"])
def test_every_spec_trains_and_learns(demo, scripts, tmp_path, name):
    """Each example spec's generated trainer runs until it learns the demo data's planted signal."""
    iters, batch = RUNS[name]
    metrics = train(scripts[name], tmp_path / "out", iters, batch, *EXTRA.get(name, ()))
    assert metrics["auc"] > 0.5 + LEARNS_MARGIN, metrics
    assert metrics["auc"] < truth(demo, SPECS[name])["oracle_auc_valid"] + 0.02


def test_checkpoint_loads_into_the_importable_model(demo, scripts, tmp_path):
    """model.pt + features.json rebuild the model in another process (the serving path) with the same AUC."""
    folder = scripts["movielens_genres"]
    out = tmp_path / "out"
    metrics = train(folder, out, 30, 256, "--snapshot", "20")
    assert (out / "checkpoint_20.pt").is_file()
    ckpt = torch.load(out / "checkpoint_20.pt", weights_only=False)
    assert ckpt["iteration"] == 20 and set(ckpt) == {"model", "optimizer", "iteration", "rng", "features"}
    spec = importlib.util.spec_from_file_location("train_torch_under_test", folder / "train_torch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)                      # no training on import
    features = json.loads((out / "features.json").read_text())
    model = module.Model(features)
    model.load_state_dict(torch.load(out / "model.pt"))
    model.eval()
    arrays = read_split(data_files(str(demo.paths["movielens_genres"]["valid"])), features, max_rows=160 * 2048)
    with torch.no_grad():
        scores = model(torch.from_numpy(arrays["dense"]), torch.from_numpy(arrays["sparse"][0]))[:, 0]
    assert roc_auc(arrays["labels"][:, 0], scores.numpy()) == pytest.approx(metrics["auc"], abs=1e-5)
    assert arrays["sparse"][0].shape[1:] == (3, 10) and (arrays["sparse"][0][:, 2] >= 0).sum(axis=1).max() > 1


def test_two_ranks_over_gloo(demo, scripts, tmp_path):
    """Two ranks over gloo (forked with torchrun's environment; the real launcher's start is
    test_train_command.py's `ctrgen train --ranks 2`): each rank reads one of the two part files, lr scaled by 2,
    metrics reduced across ranks."""
    iters, batch = RUNS["movielens"]
    iters //= 2         # two ranks at twice the lr: 60 steps reach AUC 0.775 (the bar: 0.746)
    metrics = train(scripts["movielens"], tmp_path / "out", iters, batch // 2, ranks=2)
    assert metrics["world_size"] == 2 and metrics["global_batch_size"] == batch
    assert metrics["auc"] > truth(demo, "movielens")["baseline_auc_valid"]["onehot"] - 0.03
    # the table (Global Adam: replicated, updated whole) takes its gradient from the ranks' looked-up rows, fewer
    # bytes than the whole table's gradient
    assert metrics["table_gradients"] == {"sparse_embedding1": "all_gather of looked-up rows"}


def test_ranks_with_uneven_data_run_the_same_steps_an_epoch(demo, scripts, tmp_path):
    """Seed 001 lets a rank with fewer batches wait (hvd.join); ctrgen's ranks all run the fewest batches any rank
    holds (an all_reduce MIN). Three files over two ranks (the first and third on rank 0): one epoch is rank 1's
    batches, fewer than rank 0's, and both ranks stop there."""
    import pyarrow.parquet as pq

    train = sorted(demo.paths["movielens"]["train"].glob("part_*.parquet"))[:2]
    files = [*train, sorted(demo.paths["movielens"]["valid"].glob("part_*.parquet"))[0]]
    rows = [pq.ParquetFile(f).metadata.num_rows for f in files]
    batch = 64
    mine = [(rows[0] + rows[2]) // batch, rows[1] // batch]
    assert mine[1] < mine[0]
    proc = run_script(scripts["movielens"], "--train", *map(str, files), "--batch-size", str(batch), "--epochs", "1",
                      "--display", "100000", "--eval-interval", "100000", "--output-dir", str(tmp_path / "out"),
                      ranks=2)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    log = proc.stdout + proc.stderr
    assert f"{rows[0] + rows[2]} training rows on rank 0, batch {batch} per rank, {mine[1]} iterations " \
           f"({mine[1]} per epoch)" in log, log[-2000:]


def test_fewer_files_than_ranks_says_so(demo, scripts, tmp_path):
    part = sorted(demo.paths["movielens"]["train"].glob("part_*.parquet"))[0]
    proc = run_script(scripts["movielens"], "--train", str(part), "--max-iter", "2", "--output-dir",
                      str(tmp_path / "out"), ranks=2)
    assert proc.returncode != 0
    assert "1 training file(s) for 2 ranks" in proc.stderr and "fix:" in proc.stderr


def test_nccl_without_gpus_says_so(scripts, tmp_path):
    proc = run_script(scripts["movielens"], "--dist-backend", "nccl", "--max-iter", "2", "--output-dir",
                      str(tmp_path / "out"), ranks=2)
    assert proc.returncode != 0
    assert "error: --dist-backend nccl needs CUDA GPUs (fix: --dist-backend gloo for the CPU)" in proc.stderr
    assert not (tmp_path / "out").exists()


# ---- bad data ------------------------------------------------------------------------------------------------------

def _broken_copy(src: Path, dest: Path, change) -> Path:
    dest.mkdir(parents=True)
    for f in sorted(src.glob("part_*.parquet")):
        table = pq.read_table(f)
        pq.write_table(change(table) if f.name == "part_1.parquet" else table, dest / f.name)
    return dest / "part_1.parquet"


def _replace(table: pa.Table, name: str, column) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, column)


def _too_big(table: pa.Table) -> pa.Table:
    ids = table.column("userId").to_numpy().copy()
    ids[7] = 10_000_000
    return _replace(table, "userId", pa.array(ids))


@pytest.mark.parametrize("case,change,expected", [
    ("missing", lambda t: t.drop(["movieId"]), "column 'movieId' is missing"),
    ("dtype", lambda t: _replace(t, "userId", t.column("userId").cast(pa.float64())),
     "column 'userId': type double, expected ids"),
    ("range", _too_big, "column 'userId': id 10000000 is outside [0, "),
])
def test_bad_data_stops_with_one_line(demo, scripts, tmp_path, case, change, expected):
    bad = _broken_copy(demo.paths["movielens"]["train"], tmp_path / "train", change)
    proc = run_script(scripts["movielens"], "--train", str(tmp_path / "train"), "--max-iter", "2",
                      "--output-dir", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"error: {bad}: ") and expected in lines[0]
    assert not (tmp_path / "out" / "model.pt").exists()


def test_features_file_must_match_the_script(scripts, tmp_path):
    features = json.loads((scripts["movielens"] / "features.json").read_text())
    features["sparse"][0]["columns"].reverse()
    path = tmp_path / "features.json"
    path.write_text(json.dumps(features))
    proc = run_script(scripts["movielens"], "--features", str(path), "--max-iter", "1")
    assert proc.returncode == 2 and "not the ones this script was generated for" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_multi_hot_lists_longer_than_nnz_are_refused(demo, scripts, tmp_path):
    def longer(table: pa.Table) -> pa.Table:
        lists = table.column("genres").to_pylist()
        lists[3] = list(range(3, 15))
        return _replace(table, "genres", pa.array(lists, type=pa.list_(pa.int64())))

    bad = _broken_copy(demo.paths["movielens_genres"]["train"], tmp_path / "train", longer)
    proc = run_script(scripts["movielens_genres"], "--train", str(tmp_path / "train"), "--max-iter", "1")
    assert proc.returncode == 2
    assert f"{bad}: column 'genres': row 3 lists 12 ids, more than nnz_per_slot 10" in proc.stderr


def test_roc_auc_of_the_runtime_matches_the_reference():
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 500)
    s = rng.integers(0, 30, 500).astype(np.float32)        # many ties
    assert runtime_auc(torch.from_numpy(y), torch.from_numpy(s)) == pytest.approx(roc_auc(y, s), abs=1e-12)


def test_collectives_keep_their_work_until_the_main_thread_releases_it():
    """A gloo worker thread that drops the last reference of a collective's tensors takes the GIL; at interpreter exit
    that aborts the rank ("terminate called without an active exception", seen about once in ten two-rank runs under
    CPU load). Every collective on a tensor of ours goes through collective(), which keeps the work handle."""
    import re

    runtime = REPO / "codegen" / "runtime"
    for path in sorted(runtime.glob("*.py")):
        text = path.read_text()
        assert re.findall(r"\bdist\.(all_reduce|all_gather|broadcast|reduce_scatter|all_to_all)\(", text) == [], path
    text = (runtime / "distributed.py").read_text()
    assert "RECENT_WORK.append(work)" in text and "collective(dist.all_gather, parts, padded)" in text
