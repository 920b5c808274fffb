"""`ctrgen train` and `ctrgen report` on the demo's MovieLens data, for real on the CPU (tiny runs): the command it
prints and runs, resume, two ranks over gloo, refusals (a stale generated folder, missing data), the progress bar
(only on a terminal), metrics.jsonl against the TensorBoard event files, and the report's inline-SVG curves against
metrics.jsonl."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import warm_python
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from codegen.demo.cli import demo_spec_text
from codegen.output import compare, write
from codegen.pipeline import open_spec, render_spec
from codegen.train.launch import plan_launch
from codegen.workflow import read_workflow_features
from conftest import REPO, run_ctrgen
from demo_data import built_demo

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("train_command")]

# Tiny runs: display every 10 iterations, evaluate every 20, a checkpoint every 20; a small evaluation split.
TRAINER_FLAGS = ("--", "--batch-size", "128", "--display", "10", "--eval-interval", "20", "--snapshot", "20",
                 "--max-eval-batches", "4", "--eval-batch-size", "256")
ENV = {"OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project folder beside the demo data: the demo copy of specs/movielens.yaml, its lock and generated/."""
    demo = built_demo()
    root = demo.root / f"train-project-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    spec = root / "movielens.yaml"
    root.mkdir(exist_ok=True)
    spec.write_text(demo_spec_text((REPO / "specs" / "movielens.yaml").read_text(), spec_name="movielens",
                                   dataset_dir=demo.root / "movielens", spec_dir=root))
    ctx = open_spec(spec)
    ctx.lock_path.write_text(read_workflow_features(ctx, ctx.workflow_path).lock_text())
    write(root / "generated" / "movielens", render_spec(ctx).files, force=True)
    return {"root": root, "spec": spec, "data": demo.root / "movielens"}


@contextlib.contextmanager
def on_a_terminal():
    """fd 1 of this process (which the trainer `ctrgen train` starts inherits) on a pseudo-terminal while in the block
    (COLUMNS=160 for the bar, ENV as the trainers have it); what was drawn on it, in the yielded list once the block
    has ended."""
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def read() -> None:            # drained as it comes: a full terminal buffer would block the trainer
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:        # every writer closed its end
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    saved = os.dup(1)
    try:
        with pytest.MonkeyPatch.context() as mp:      # the trainer's environment: this process's
            for key, value in {**ENV, "COLUMNS": "160"}.items():
                mp.setenv(key, value)
            os.dup2(slave, 1)
            try:
                yield chunks
            finally:
                os.dup2(saved, 1)
    finally:
        os.close(saved)
        os.close(slave)
        reader.join(timeout=120)
        os.close(master)


def train_here(project, *args: str, out: Path):
    """`ctrgen train` in this process: its checks and plan, then the real trainer process (or torchrun and its ranks).
    The trainer's stdout is this process's fd 1 (capfd reads it)."""
    return run_ctrgen("train", str(project["spec"]), "--device", "cpu", "--out", str(out), *args, cwd=project["root"])


def trainer_env() -> dict:
    """The trainer tests' environment (tests/test_torch_*.py): forks of the warm Python they have started."""
    return {**os.environ, **ENV}


def run_trainer_script(project, *args: str, out: Path):
    """The generated train_torch.py on the spec's data, forked from the warm Python (tests/warm_python.py): for what
    the trainer does, where `ctrgen train` only starts it (the command it runs is tested above)."""
    script = project["root"] / "generated" / "movielens" / "train_torch.py"
    return warm_python.run([sys.executable, str(script), "--device", "cpu", "--train", str(project["data"] / "train"),
                            "--eval", str(project["data"] / "valid"), "--output-dir", str(out), *args],
                           cwd=project["root"], env=trainer_env(), timeout=300)


@pytest.fixture(scope="module")
def run(project, tmp_path_factory):
    """One finished run of 40 iterations (its output kept for the tests below): the command `ctrgen train` plans for
    it, run by the trainer forked from the warm Python (what `ctrgen train` does around it: the `trained` run)."""
    out = tmp_path_factory.mktemp("train-run") / "run"
    argv = plan_launch(open_spec(project["spec"]), project["root"] / "generated" / "movielens", out, ranks=1,
                       device="cpu", max_iter=40, resume=False, extra=TRAINER_FLAGS[1:], continuous=False).argv
    proc = warm_python.run(argv, cwd=project["root"], env=trainer_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {"out": out, "proc": proc}


@pytest.fixture(scope="module")
def trained(project, run, tmp_path_factory):
    """One `ctrgen train --ranks 2` run (its checks and plan in this process; the real torchrun launcher and two rank
    processes, their stdout a pseudo-terminal) for the tests of what `ctrgen train` does around the trainer: the
    command it prints and runs and the run.json it writes, two ranks over gloo, --regenerate of a stale generated
    folder (a copy of the spec changed since `ctrgen generate`), --force into the folder of an earlier run (a copy of
    the module's `run`: checkpoints at 20 and 40, points to 40), the bar on a terminal, and the report of its folder.
    20 iterations, an evaluation every 10, no checkpoint."""
    out = tmp_path_factory.mktemp("trained") / "run"
    subprocess.run(["cp", "-r", str(run["out"]), str(out)], check=True)
    assert {"checkpoint_20.pt", "checkpoint_40.pt", "tensorboard"} <= {p.name for p in out.iterdir()}
    spec = variant(project, "regen2", project["spec"].read_text())
    assert run_ctrgen("generate", str(spec), cwd=project["root"]).returncode == 0
    spec.write_text(spec.read_text() + "# changed after generate\n")
    with on_a_terminal() as chunks:
        proc = run_ctrgen("train", str(spec), "--regenerate", "--force", "--device", "cpu", "--ranks", "2",
                          "--max-iter", "20", "--out", str(out), "--", "--batch-size", "64", "--display", "10",
                          "--eval-interval", "10", "--snapshot", "0", "--threads", "1", "--max-eval-batches", "4",
                          "--eval-batch-size", "256", cwd=project["root"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {"proc": proc, "out": out, "spec": spec, "screen": b"".join(chunks).decode()}


def points(out: Path) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = {}
    for line in (out / "metrics.jsonl").read_text().splitlines():
        p = json.loads(line)
        series.setdefault(p["tag"], []).append((p["step"], p["value"]))
    return series


def tensorboard_points(out: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(out / "tensorboard"))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def assert_same_points(out: Path) -> None:
    jsonl, board = points(out), tensorboard_points(out)
    assert sorted(jsonl) == sorted(board) == ["eval/auc", "eval/calibration", "eval/loss", "eval/normalized_entropy",
                                             "eval/pr_auc", "train/loss", "train/lr", "train/samples_per_second"]
    for tag in jsonl:
        assert [s for s, _ in board[tag]] == [s for s, _ in jsonl[tag]], tag
        assert [v for _, v in board[tag]] == pytest.approx([v for _, v in jsonl[tag]], rel=1e-6), tag  # float32


def test_train_prints_and_runs_the_command_with_the_spec_data(project, trained, run):
    """Seconds in its setup: the module's `trained` run (`ctrgen train --ranks 2`: torchrun and two rank processes)
    and its `run` (a trainer forked from the warm Python)."""
    proc = trained["proc"]
    command = proc.stderr.splitlines()[1]            # after the line of --regenerate
    assert command.startswith("$ PYTHONPATH=")
    argv = command.split()
    assert str(project["root"] / "generated" / "regen2" / "train_torch.py") in argv
    data = project["data"]
    assert argv[argv.index("--train") + 1] == str(data / "train" / "_file_list.txt")
    assert argv[argv.index("--eval") + 1] == str(data / "valid" / "_file_list.txt")
    assert argv[argv.index("--max-iter") + 1] == "20" and argv[-1] == "256"
    metrics = json.loads((trained["out"] / "metrics.json").read_text())
    assert metrics["iterations"] == 20 and metrics["batch_size"] == 64
    recorded = json.loads((trained["out"] / "run.json").read_text())
    assert recorded["command"] == argv[2:] and recorded["name"] == "regen2"
    assert set(recorded["generated"]) >= {"train_torch.py", "features.json", "model.py"}
    assert f"TensorBoard  tensorboard --logdir {trained['out'] / 'tensorboard'}" in proc.stderr
    # what the trainer learnt in the module's run of 40 iterations
    assert json.loads((run["out"] / "metrics.json").read_text())["auc"] > 0.55


def test_metrics_jsonl_and_tensorboard_agree(run):
    series = points(run["out"])
    assert [s for s, _ in series["train/loss"]] == [10, 20, 30, 40]
    assert [s for s, _ in series["eval/auc"]] == [20, 40]
    metrics = json.loads((run["out"] / "metrics.json").read_text())
    assert series["eval/auc"][-1][1] == pytest.approx(metrics["auc"], abs=1e-6)
    assert series["train/loss"][-1][1] == pytest.approx(metrics["train_loss"], abs=1e-6)
    assert_same_points(run["out"])
    for tag in ("normalized_entropy", "calibration", "pr_auc"):
        assert series[f"eval/{tag}"][-1][1] == pytest.approx(metrics[tag], abs=1e-6)
    assert 0 < metrics["normalized_entropy"] < 1.5 and 0.5 < metrics["calibration"] < 2 and 0 < metrics["pr_auc"] < 1
    assert "NE " in run["proc"].stdout and ", PR-AUC " in run["proc"].stdout


def test_best_weights_kept_beside_the_last(run):
    metrics = json.loads((run["out"] / "metrics.json").read_text())
    aucs = points(run["out"])["eval/auc"]
    step, value = max(aucs, key=lambda p: p[1])
    assert metrics["best"] == {"metric": "auc", "iteration": step, "value": pytest.approx(value, abs=1e-6),
                               "folder": "best"}
    assert metrics["stopped_early"] is False and metrics["early_stop"] is None
    assert (run["out"] / "best" / "model.pt").is_file()
    assert (run["out"] / "best" / "features.json").read_text() == (run["out"] / "features.json").read_text()


def test_early_stop(project, tmp_path):
    """With a learning rate of 0 the AUC never improves on the first evaluation: patience 1 stops at the second."""
    out = tmp_path / "out"
    proc = run_trainer_script(project, "--max-iter", "200", *TRAINER_FLAGS[1:], "--lr", "0", "--early-stop", "auc:1",
                              "--no-tensorboard", out=out)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["iterations"] == 40 and metrics["stopped_early"] is True and metrics["early_stop"] == "auc:1"
    assert metrics["best"]["iteration"] == 20
    assert "stopped early; best" in proc.stdout
    assert [s for s, _ in points(out)["eval/auc"]] == [20, 40]
    assert not (out / "tensorboard").exists()                 # --no-tensorboard


def test_no_bar_without_a_terminal(run):
    out = run["proc"].stdout
    assert "iter 40: eval AUC" in out                      # the plain lines of a log
    assert "\r" not in out and "\x1b" not in out and " ETA" not in out


def test_bar_on_a_terminal(trained):
    """`ctrgen train` passes the trainer's terminal through: the bar (and an evaluation bar) drawn in place (the
    module's `trained` run, its stdout a pseudo-terminal)."""
    text = trained["screen"]
    assert re.search(r"\r\x1b\[Ktrain \[#+\.*\] \d+/20, [\d,]+ samples/s.*ETA", text), text[-1500:]
    assert re.search(r"\r\x1b\[Keval  \[#+\.*\] \d+/\d+", text), text[-1500:]
    assert "iter 10: eval AUC" in text and "iter 20: eval AUC" in text
    assert [json.loads(line)["step"] for line in (trained["out"] / "metrics.jsonl").read_text().splitlines()
            if '"eval/auc"' in line] == [10, 20]


def test_resume_keeps_the_points_up_to_its_checkpoint(project, run, tmp_path):
    """A run resumed from checkpoint_20.pt (its checkpoint_40.pt lost) records 30 and 40 once, in both files: the
    command `ctrgen train --resume` plans (its latest checkpoint), run by the trainer forked from the warm Python."""
    out = tmp_path / "run"
    subprocess.run(["cp", "-r", str(run["out"]), str(out)], check=True)
    (out / "checkpoint_40.pt").unlink()
    generated = project["root"] / "generated" / "movielens"
    argv = plan_launch(open_spec(project["spec"]), generated, out, ranks=1, device="cpu", max_iter=20, resume=True,
                       extra=TRAINER_FLAGS[1:], continuous=False).argv
    assert argv[argv.index("--resume") + 1] == str(out / "checkpoint_20.pt")
    proc = warm_python.run(argv, cwd=project["root"], env=trainer_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "resumed from" in proc.stdout and "iteration 20" in proc.stdout
    assert json.loads((out / "metrics.json").read_text())["iterations"] == 40
    assert [s for s, _ in points(out)["train/loss"]] == [10, 20, 30, 40]
    assert_same_points(out)
    assert compare(generated, render_spec(open_spec(project["spec"])).files, "generated/movielens").clean


def test_resume_without_a_checkpoint_is_one_line(project, tmp_path):
    proc = train_here(project, "--resume", out=tmp_path / "empty")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "--resume: no checkpoint_<iteration>.pt" in proc.stderr and "Traceback" not in proc.stderr
    assert "--resume: --resume" not in proc.stderr                  # the field named once


def test_two_ranks_on_the_cpu(trained):
    """`ctrgen train --ranks 2` through the real torchrun launcher and two rank processes (the module's `trained`
    run)."""
    assert "-m codegen.train.torchrun --standalone --nproc_per_node=2 " in trained["proc"].stderr.splitlines()[1]
    metrics = json.loads((trained["out"] / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["global_batch_size"] == 128 and metrics["iterations"] == 20
    assert [s for s, _ in points(trained["out"])["eval/auc"]] == [10, 20]     # rank 0 alone records
    # ... and alone writes TensorBoard's events (every rank would write identical metrics.jsonl bytes over each
    # other, but each its own events file)
    assert len(list((trained["out"] / "tensorboard").glob("events.out.tfevents.*"))) == 1


def variant(project, name: str, text: str) -> Path:
    """A spec beside the project's, named ``name`` (its own generated/<name>/), with the same lock."""
    spec = project["root"] / f"{name}.yaml"
    spec.write_text(text.replace("name: movielens", f"name: {name}"))
    (project["root"] / f"{name}.features.lock.json").write_text(
        (project["root"] / "movielens.features.lock.json").read_text())
    return spec


def test_stale_generated_folder_is_refused_or_regenerated(project, trained, tmp_path):
    trainer = project["root"] / "generated" / "movielens" / "train_torch.py"
    original = trainer.read_text()
    trainer.write_text(original + "# edited\n")
    try:
        proc = run_ctrgen("train", str(project["spec"]), "--device", "cpu", "--out", str(tmp_path / "run"),
                          cwd=project["root"])
    finally:
        trainer.write_text(original)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "generated/movielens: out of date with its spec" in proc.stderr
    assert "fix: run 'ctrgen generate movielens.yaml', or pass --regenerate" in proc.stderr
    assert not (tmp_path / "run").exists()
    # A refusal of the spec's data writes nothing, not even a never generated folder (issue 43: nothing written)
    spec = variant(project, "regen", project["spec"].read_text().replace(str(project["data"] / "train"),
                                                                         str(tmp_path / "nothing")))
    proc = run_ctrgen("train", str(spec), "--regenerate", "--device", "cpu", "--out", str(tmp_path / "run"),
                      cwd=project["root"])
    folder = project["root"] / "generated" / "regen"
    assert proc.returncode == 2 and "data.train" in proc.stderr and not folder.exists(), proc.stderr
    # --regenerate writes a stale folder (its spec changed since `ctrgen generate`), then trains from it (the
    # module's `trained` run)
    folder = project["root"] / "generated" / "regen2"
    proc = trained["proc"]
    assert proc.returncode == 0 and f"regenerated {folder} (it was stale)" in proc.stderr, proc.stderr[-2000:]
    assert str(folder / "train_torch.py") in proc.stderr.splitlines()[1].split()     # the command it ran
    assert compare(folder, render_spec(open_spec(trained["spec"])).files, "regen2").clean


def test_missing_data_is_one_line(project, tmp_path):
    spec = variant(project, "missing", project["spec"].read_text().replace(str(project["data"] / "train"),
                                                                           str(tmp_path / "nothing")))
    assert run_ctrgen("generate", str(spec), cwd=project["root"]).returncode == 0
    proc = run_ctrgen("train", str(spec), "--device", "cpu", "--out", str(tmp_path / "run"), cwd=project["root"])
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    line = proc.stderr.strip()
    assert re.match(r".*missing\.yaml:\d+:\d+: data\.train: train data '.*nothing/_file_list\.txt' not found "
                    r"\(fix: ", line), line
    assert not (tmp_path / "run").exists()


def test_missing_etl_output_names_the_etl_command(project, tmp_path):
    etl = (REPO / "specs" / "movielens.yaml").read_text().split("\netl:", 1)[1]
    spec = variant(project, "with_etl", project["spec"].read_text() + "etl:" + etl)
    assert run_ctrgen("generate", str(spec), cwd=project["root"]).returncode == 0
    proc = run_ctrgen("train", str(spec), "--device", "cpu", "--out", str(tmp_path / "run"), cwd=project["root"])
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "with_etl.yaml:" in proc.stderr and "etl.output.dir: train data" in proc.stderr
    assert "fix: run 'ctrgen etl with_etl.yaml' first" in proc.stderr


class _Svg(HTMLParser):
    def __init__(self):
        super().__init__()
        self.charts: list[dict] = []
        self.constants: dict[str, int] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg" and "data-x0" in a:
            self.charts.append({**a, "curves": {}})
        elif tag == "polyline" and self.charts:
            self.charts[-1]["curves"][a["data-tag"]] = [tuple(map(float, p.split(","))) for p in a["points"].split()]
        elif tag == "span" and a.get("class") == "constant":
            self.constants[a["data-tag"]] = int(a["data-points"])


def test_report_draws_every_point_of_metrics_jsonl(project, trained, tmp_path):
    """The report of the module's `trained` run (the folder `ctrgen train` wrote)."""
    run = trained
    proc = run_ctrgen("report", str(trained["out"]), "--out", str(tmp_path / "report.html"))
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "report.html").read_text()
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page and " src=" not in page                  # nothing to fetch: self-contained
    parser = _Svg()
    parser.feed(page)
    series = points(trained["out"])
    drawn = {}
    for c in parser.charts:
        x0, x1, y0, y1 = (float(c[k]) for k in ("data-x0", "data-x1", "data-y0", "data-y1"))
        left, top, w, h = (float(c[k]) for k in ("data-left", "data-top", "data-plot-w", "data-plot-h"))
        for tag, pts in c["curves"].items():
            drawn[tag] = [(x0 + (x - left) / w * (x1 - x0), y1 - (y - top) / h * (y1 - y0)) for x, y in pts]
            tolerance = 0.006 / h * (y1 - y0)     # coordinates are rounded to 0.01 px
            want = series[tag]
            assert [round(s) for s, _ in drawn[tag]] == [s for s, _ in want], tag
            assert [v for _, v in drawn[tag]] == pytest.approx([v for _, v in want], abs=tolerance), tag
    # Every series is a curve, or held one value throughout (a constant learning rate): a summary line instead.
    assert sorted([*drawn, *parser.constants]) == sorted(series)
    for tag, count in parser.constants.items():
        assert count == len(series[tag]) and len({v for _, v in series[tag]}) == 1, tag
    metrics = json.loads((run["out"] / "metrics.json").read_text())
    rows = metrics["data"]["train_rows"]
    assert rows == sum(pq.ParquetFile(f).metadata.num_rows for f in sorted((project["data"] / "train").glob("*.parquet")))
    assert metrics["data"]["steps_per_epoch"] == rows // 128          # two ranks of --batch-size 64
    for text in ("regen2: training run", "train_torch.py", "sha256", "Model graph", "peak memory per rank",
                 "Eval PR-AUC", "best evaluation", f"{rows:,} / {metrics['data']['eval_rows']:,}",
                 f"{metrics['optimizer']}, {metrics['lr']:g}", "label mean (CTR)"):
        assert text in page
    # Deterministic: the same run folder gives the same bytes.
    assert run_ctrgen("report", str(trained["out"]), "--out", str(tmp_path / "again.html")).returncode == 0
    assert (tmp_path / "again.html").read_bytes() == page.encode()


def test_report_of_a_folder_without_a_run_is_one_line(tmp_path):
    proc = run_ctrgen("report", str(tmp_path))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and "run.json: not found" in proc.stderr


def test_more_gpus_than_the_machine_has_is_one_line(project, tmp_path):
    from codegen.train.launch import gpu_count

    found = gpu_count()
    proc = run_ctrgen("train", str(project["spec"]), "--gpus", str(found + 1), "--out", str(tmp_path / "run"),
                      cwd=project["root"])
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert f"--gpus: {found + 1} GPU(s) asked, this machine has {found}" in proc.stderr
    proc = run_ctrgen("train", str(project["spec"]), "--gpus", "1", "--device", "cpu", cwd=project["root"])
    assert proc.returncode == 2 and "--gpus and --device cpu exclude each other" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_resume_runs_what_is_left_of_the_spec_run(project, tmp_path):
    """Without --max-iter a resumed run goes on to the spec's training.max_iter (2000): the trainer is told the rest."""
    from codegen.errors import UserError
    from codegen.train.launch import plan_launch

    ctx = open_spec(project["spec"])
    folder = project["root"] / "generated" / "movielens"
    assert ctx.spec.training.max_iter == 2000
    for n in (20, 1990):
        (tmp_path / f"checkpoint_{n}.pt").write_bytes(b"")
    argv = plan_launch(ctx, folder, tmp_path, ranks=1, device="cpu", max_iter=None, resume=True, extra=(),
                       continuous=False).argv
    assert argv[argv.index("--max-iter") + 1] == "10"
    assert argv[argv.index("--resume") + 1] == str(tmp_path / "checkpoint_1990.pt")
    argv = plan_launch(ctx, folder, tmp_path, ranks=1, device="cpu", max_iter=5, resume=True, extra=(),
                       continuous=False).argv
    assert argv[argv.index("--max-iter") + 1] == "5"
    (tmp_path / "checkpoint_2000.pt").write_bytes(b"")
    with pytest.raises(UserError) as exc:
        plan_launch(ctx, folder, tmp_path, ranks=1, device="cpu", max_iter=None, resume=True, extra=(),
                    continuous=False)
    assert "the run is at iteration 2000, the spec's training.max_iter is 2000" in exc.value.format()


# ---- hostile inputs (issue 43, third round) ------------------------------------------------------------------------

def test_more_ranks_than_files_is_one_line_before_any_rank_starts(project, tmp_path):
    """`ctrgen train` counts the training files itself: no command is run (torchrun and each rank would import torch
    only to refuse), nothing is written."""
    proc = train_here(project, "--ranks", "3", "--max-iter", "5", out=tmp_path / "run")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert re.match(r".*movielens\.yaml:\d+:\d+: data\.train: 2 training file\(s\) for 3 ranks; each rank reads whole "
                    r"files \(fix: write at least 3 files", proc.stderr), proc.stderr
    assert not (tmp_path / "run").exists()


def test_more_ranks_than_files_is_every_ranks_same_line(project, tmp_path):
    """The ranks keep their own check (a job started without ctrgen): three ranks of the generated trainer, as torchrun
    starts them (forked from the warm Python), each refuse with the same one line and write nothing."""
    script = project["root"] / "generated" / "movielens" / "train_torch.py"
    ranks = warm_python.run_ranks([sys.executable, str(script), "--device", "cpu", "--train",
                                   str(project["data"] / "train"), "--eval", str(project["data"] / "valid"),
                                   "--output-dir", str(tmp_path / "run"), "--batch-size", "64"],   # 2048 / 3 ranks
                                  cwd=project["root"], envs=warm_python.rank_envs(trainer_env(), 3), timeout=300)
    assert [p.returncode for p in ranks] == [2, 2, 2], [p.stderr[-2000:] for p in ranks]
    assert len({p.stderr for p in ranks}) == 1 and len(ranks[0].stderr.splitlines()) == 1, ranks[0].stderr
    assert ranks[0].stderr.startswith("error: ") and "2 training file(s) for 3 ranks" in ranks[0].stderr
    assert not (tmp_path / "run").exists()


def test_a_rank_refusal_through_torchrun_is_its_one_line(tmp_path, capsys):
    """What ctrgen runs for ranks (codegen.train.torchrun, then ctrgen's reading of their stderr) shows a refusing
    rank's line once with its exit status 2: no ChildFailedError traceback, no log record of torchrun's agent. The two
    ranks are a script that refuses at once (the real ranks' refusal is the test above)."""
    from codegen.train.child import run_trainer
    from codegen.train.launch import launcher

    rank = tmp_path / "rank.py"
    rank.write_text("import sys\nsys.stderr.write('error: --x 1: refused (fix: --x 2)\\n')\nsys.exit(2)\n")
    code = run_trainer([*launcher(2), str(rank)], {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
    err = capsys.readouterr().err
    assert code == 2 and err == "error: --x 1: refused (fix: --x 2)\n", err


def test_an_out_that_is_a_file_or_under_one_is_one_line(project, tmp_path):
    (tmp_path / "f").write_text("x")
    for out, needle in ((tmp_path / "f", "is a file"), (tmp_path / "f" / "run", "which is not a folder")):
        proc = run_ctrgen("train", str(project["spec"]), "--out", str(out), cwd=project["root"])
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and needle in proc.stderr, proc.stderr
    assert (tmp_path / "f").read_text() == "x"


def test_a_second_run_into_a_used_folder_is_refused_and_force_starts_afresh(project, run, trained, tmp_path):
    """A run into the folder of an earlier one is refused by `ctrgen train` itself (before the trainer starts: nothing
    in the folder changes); with --force the trainer starts afresh there (the module's `trained` run)."""
    out = tmp_path / "run"
    subprocess.run(["cp", "-r", str(run["out"]), str(out)], check=True)
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    proc = train_here(project, "--max-iter", "10", out=out)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert f"{out}: --out: holds an earlier run (model.pt, metrics.json" in proc.stderr and "--force" in proc.stderr
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    assert trained["proc"].returncode == 0
    assert not list(trained["out"].glob("checkpoint_*.pt")) and [s for s, _ in points(trained["out"])["train/loss"]] \
        == [10, 20]
    assert_same_points(trained["out"])                   # the earlier run's TensorBoard points (to 40) are gone too


def test_ctrl_c_is_one_line_and_130(project, tmp_path):
    """Seconds: Ctrl-C (SIGINT to the foreground group: the real ctrgen process, torchrun, two ranks) once training
    runs: no traceback. The ranks are the trainer one process runs without --ranks, under the same run_trainer."""
    argv = [sys.executable, "-m", "codegen", "train", str(project["spec"]), "--device", "cpu", "--max-iter", "100000",
            "--out", str(tmp_path / "run"), "--ranks", "2", "--", "--batch-size", "64",
            "--display", "1", "--snapshot", "0", "--eval-interval", "100000"]
    # Python's own SIGINT handler in the child, also where this process ignores SIGINT (a background job).
    launcher = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    env = {**os.environ, **ENV, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", launcher, *argv], cwd=project["root"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    for line in proc.stdout:                 # training has started: its first log line of a step
        if line.startswith(b"iter "):
            break
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = err.decode().splitlines()
    assert proc.returncode == 130 and lines[1:] == ["ctrgen: interrupted"], err.decode()[-3000:]


def test_a_run_ctrgen_train_wrote_moves_to_hugectrs_files_is_assembled_validated_and_comes_back_bit_for_bit(
        project, trained, tmp_path):
    """Issue 47: the weights of the module's `ctrgen train --ranks 2` run (its model.pt) exported to HugeCTR's dense and
    sparse files (the spec read from its run.json, the files named as its ps.json names them), assembled into the
    HugeCTR Triton repository (`ctrgen assemble --weights`) and validated, and imported back: every tensor equal bit
    for bit."""
    import torch

    from codegen.triton import validate_repository
    from codegen.triton.lint.findings import ERROR

    hugectr = tmp_path / "hugectr"
    done = run_ctrgen("weights", "export", str(trained["out"]), "--hugectr", str(hugectr), cwd=project["root"])
    assert done.returncode == 0, done.stderr
    files = sorted(p.name for p in hugectr.iterdir())
    assert len(files) == 2 and files[0].startswith("0_sparse_") and files[1].startswith("_dense_"), files
    repo = tmp_path / "repo"
    done = run_ctrgen("assemble", str(trained["spec"]), "--workflow", str(project["data"] / "workflow"), "--weights",
                      str(hugectr), "--out", str(repo), cwd=project["root"])
    assert done.returncode == 0, done.stderr
    findings = validate_repository(repo, root_map={"/model": repo})
    assert [f for f in findings if f.severity == ERROR] == []
    served = repo / trained["spec"].stem / "1"          # the model the spec names (its copy: regen2)
    assert [(served / f).exists() for f in files] == [True, True]
    assert (served / files[1]).read_bytes() == (hugectr / files[1]).read_bytes()
    back = tmp_path / "back"
    done = run_ctrgen("weights", "import", str(trained["spec"]), "--hugectr", str(hugectr), "--out", str(back),
                      cwd=project["root"])
    assert done.returncode == 0, done.stderr
    before = torch.load(trained["out"] / "model.pt", weights_only=True)
    after = torch.load(back / "model.pt", weights_only=True)
    keys = [k for k in before if not k.endswith("num_batches_tracked")]
    assert keys and all(torch.equal(before[k], after[k]) for k in keys)
