"""Hostile inputs of the trainer (issue 43, third round): a run folder belongs to one run, every number is
range-checked, labels and continuous values are what the loss takes, every file is read within bounds. Each refusal
is one line naming the flag or file, exit status 2, and nothing written. The trainer runs in this process (the
generated movielens train_torch.py on the demo data), a few steps each."""

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

from codegen.demo.cli import demo_spec_text
from codegen.output import write
from codegen.pipeline import open_spec, render_spec
from codegen.runtime import run_folder, trainer
from codegen.runtime.checks import read_json
from codegen.runtime.data import table_arrays
from codegen.runtime.errors import DataError
from codegen.workflow import read_workflow_features
from conftest import REPO
from demo_data import built_demo

FAST = ("--device", "cpu", "--max-iter", "10", "--batch-size", "128", "--display", "5", "--eval-interval", "10",
        "--snapshot", "5", "--max-eval-batches", "2", "--eval-batch-size", "256", "--threads", "1")


@pytest.fixture(scope="module")
def movielens(tmp_path_factory):
    """The movielens trainer rendered against the demo data, imported (its main() trains in this process)."""
    demo = built_demo()
    spec_dir = demo.root / f"hostile-trainer-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    spec_dir.mkdir(exist_ok=True)
    spec = spec_dir / "movielens.yaml"
    spec.write_text(demo_spec_text((REPO / "specs" / "movielens.yaml").read_text(), spec_name="movielens",
                                   dataset_dir=demo.root / "movielens", spec_dir=spec_dir))
    ctx = open_spec(spec)
    ctx.lock_path.write_text(read_workflow_features(ctx, ctx.workflow_path).lock_text())
    folder = tmp_path_factory.mktemp("hostile-trainer") / "movielens"
    write(folder, render_spec(ctx).files)
    module_spec = importlib.util.spec_from_file_location("hostile_train_torch", folder / "train_torch.py")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    data = demo.root / "movielens"
    return {"main": module.main, "folder": folder, "train": data / "train", "eval": data / "valid"}


def train(movielens, out: Path, *args: str, data: tuple[str, ...] | None = None) -> int:
    data = data or ("--train", str(movielens["train"]), "--eval", str(movielens["eval"]))
    return movielens["main"]([*data, *FAST, "--output-dir", str(out), *args])


def refused(capsys, code: int, *needles: str) -> str:
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), err
    for needle in needles:
        assert needle in err, err
    return err


def steps(out: Path, tag: str = "train/loss") -> list[int]:
    return [p["step"] for p in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if p["tag"] == tag]


# ---- 1. a run folder belongs to one run -----------------------------------------------------------------------------

def test_a_used_run_folder_is_refused_and_force_starts_afresh(movielens, tmp_path, capsys):
    out = tmp_path / "run"
    assert train(movielens, out) == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert {"checkpoint_5.pt", "checkpoint_10.pt", "model.pt"} <= set(before)
    capsys.readouterr()
    refused(capsys, train(movielens, out), f"--output-dir {out}: holds an earlier run", "--force")
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    assert train(movielens, out, "--force", "--snapshot", "0") == 0
    assert not list(out.glob("checkpoint_*.pt")) and steps(out) == [5, 10]


def test_a_run_folder_another_process_writes_into_is_refused_naming_it(movielens, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c",
                               "import fcntl, sys; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
                               "f.write('pid 4242: python train_torch.py'); f.flush(); print('locked', flush=True); "
                               "sys.stdin.read()", str(out / run_folder.LOCK_FILE)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"          # the other run holds the lock now
        refused(capsys, train(movielens, out), "another run is writing into it (pid 4242: python train_torch.py)")
        assert sorted(p.name for p in out.iterdir()) == [run_folder.LOCK_FILE]
    finally:
        holder.stdin.close()
        holder.wait()
    assert train(movielens, out) == 0          # the lock went with its process


def test_metrics_jsonl_is_on_disk_with_every_checkpoint(movielens, tmp_path, monkeypatch):
    """What kill -9 right after a checkpoint leaves: every point up to it (the file is flushed before the save)."""
    out = tmp_path / "run"
    on_disk: dict[str, list[int]] = {}
    save = trainer.save

    def spy(path: Path, obj) -> None:
        on_disk[path.name] = steps(out)
        save(path, obj)
    monkeypatch.setattr(trainer, "save", spy)
    assert train(movielens, out) == 0
    assert on_disk["checkpoint_5.pt"] == [5] and on_disk["checkpoint_10.pt"] == [5, 10]


def test_a_cut_or_foreign_metrics_line_ends_the_record_on_resume(tmp_path):
    path = tmp_path / "metrics.jsonl"
    point = '{"step": %d, "tag": "train/loss", "value": 0.5}\n'
    path.write_text(point % 5 + point % 10 + '{"step": 15, "tag": "tr')       # kill -9 mid-write
    assert run_folder.kept_points(path, 10) == point % 5 + point % 10
    path.write_text(point % 5 + "not json\n" + point % 10)
    assert run_folder.kept_points(path, 10) == point % 5
    path.write_text(point % 5 + "[" * 100_000 + "\n")
    assert run_folder.kept_points(path, 10) == point % 5
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(DataError, match="not a regular file"):
        run_folder.kept_points(path, 10)


def test_a_refused_run_writes_nothing(movielens, tmp_path, capsys):
    out = tmp_path / "run"
    refused(capsys, train(movielens, out, "--batch-size", "99999999"), "--batch-size 99999999", "fewer than one batch")
    assert not out.exists()


def test_a_refusal_reaches_stderr_in_one_write(movielens, tmp_path, monkeypatch):
    """Every rank of `ctrgen train --ranks N` prints the same refusal into one pipe, which passes each error line on
    once: a line written in parts (print's text, then its newline) could interleave with another rank's and show
    twice."""
    writes: list[str] = []

    class Stderr:
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    monkeypatch.setattr(sys, "stderr", Stderr())
    assert train(movielens, tmp_path / "run", "--batch-size", "99999999") == 2
    assert len(writes) == 1 and writes[0].startswith("error: --batch-size ") and writes[0].endswith("\n"), writes


# ---- 2. numbers range-checked -----------------------------------------------------------------------------------

@pytest.mark.parametrize("flag, value", [
    ("--display", "0"), ("--eval-interval", "0"), ("--snapshot", "-5"), ("--max-iter", "-5"), ("--seed", "-1"),
    ("--seed", str(2**70)), ("--max-eval-batches", "0"), ("--max-eval-batches", "-1"), ("--lr", "nan"),
    ("--lr", "inf"), ("--lr", "-0.1"), ("--epochs", "0"), ("--device", "cuda:x")])
def test_a_number_out_of_range_is_one_line_naming_the_flag(movielens, tmp_path, capsys, flag, value):
    refused(capsys, train(movielens, tmp_path / "run", flag, value), f"error: {flag} ")
    assert not (tmp_path / "run").exists()


def test_an_output_dir_that_is_a_file_or_under_one_is_refused(movielens, tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    refused(capsys, train(movielens, tmp_path / "f"), "--output-dir", "is a file")
    refused(capsys, train(movielens, tmp_path / "f" / "run"), "--output-dir", "which is not a folder")


# ---- 3. labels the loss takes, finite continuous values, evaluation rows ------------------------------------------

def _split_with(tmp_path: Path, source: Path, change, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for f in sorted(source.glob("part_*.parquet")):
        table = pq.read_table(f)
        pq.write_table(change(table) if f.name == "part_0.parquet" else table, folder / f.name)
    return folder


def _label(value: float):
    def change(table: pa.Table) -> pa.Table:
        labels = table.column("rating").to_numpy().astype(np.float32).copy()
        labels[3] = value
        return table.set_column(table.schema.get_field_index("rating"), "rating", pa.array(labels))
    return change


@pytest.mark.parametrize("value, needle", [(5.0, "row 3 has label 5.0, outside [0, 1]"),
                                           (float("nan"), "label column 'rating': row 3 is nan"),
                                           (float("inf"), "label column 'rating': row 3 is inf")])
def test_labels_the_loss_cannot_take_are_refused(movielens, tmp_path, capsys, value, needle):
    data = _split_with(tmp_path, movielens["train"], _label(value), "train")
    refused(capsys, train(movielens, tmp_path / "run", data=("--train", str(data), "--eval", str(movielens["eval"]))),
            needle)
    assert not (tmp_path / "run").exists()


def test_a_non_finite_continuous_value_names_the_column_and_row():
    features = {"labels": [{"name": "y"}], "continuous": [{"name": "price"}], "sparse": []}
    table = pa.table({"y": pa.array([0.0, 1.0, 1.0], pa.float32()), "price": pa.array([1.0, 2.0, float("-inf")])})
    with pytest.raises(DataError, match=r"t\.parquet: continuous column 'price': row 2 is -inf"):
        table_arrays(table, features, Path("t.parquet"))


def test_an_empty_validation_split_is_refused(movielens, tmp_path, capsys):
    data = _split_with(tmp_path, movielens["eval"], lambda t: t.slice(0, 0), "valid")
    for f in data.glob("part_*.parquet"):
        if f.name != "part_0.parquet":
            f.unlink()
    refused(capsys, train(movielens, tmp_path / "run", data=("--train", str(movielens["train"]), "--eval", str(data))),
            "--eval: no evaluation rows")
    assert not (tmp_path / "run").exists()


# ---- 4. every file read within bounds -----------------------------------------------------------------------------

def test_a_fifo_data_file_or_features_file_is_refused(movielens, tmp_path, capsys):
    os.mkfifo(tmp_path / "part_0.parquet")
    refused(capsys, train(movielens, tmp_path / "run", data=("--train", str(tmp_path / "part_0.parquet"), "--eval",
                                                              str(movielens["eval"]))), "not a regular file")
    os.mkfifo(tmp_path / "features.json")
    refused(capsys, train(movielens, tmp_path / "run", "--features", str(tmp_path / "features.json")),
            "features file (not a regular file)")
    refused(capsys, train(movielens, tmp_path / "run", "--features", "/dev/zero"), "not a regular file")
    assert not (tmp_path / "run").exists()


def test_a_huge_deep_or_non_utf8_features_file_is_refused(tmp_path):
    path = tmp_path / "features.json"
    with open(path, "wb") as fh:
        fh.truncate(3 << 30)                 # a hole: reading it whole is what must not happen
    with pytest.raises(DataError, match="over 16 MiB"):
        read_json(path, "features file", "x")
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataError, match="nests more than 64"):
        read_json(path, "features file", "x")
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(DataError, match="not UTF-8"):
        read_json(path, "features file", "x")
    path.write_text('{"a": NaN}')
    with pytest.raises(DataError, match="not JSON"):
        read_json(path, "features file", "x")
