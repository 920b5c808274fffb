"""A script whose HugeCTR reader reads Norm files imports with the torch target, and `ctrgen train` takes the same
columns as Parquet with --train/--eval: without them it refuses in one line (the trainer reads Parquet, not Norm
files), as it does --train without --eval and a missing --train path."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import refused_in_one_line, run_ctrgen
from test_rows_from_data import SCRIPT, write_data

NORM = SCRIPT.replace("DataReaderType_t.Parquet", "DataReaderType_t.Norm") \
    .replace('"./data/train/_file_list.txt"', '"./norm/train.txt"').replace('"./data/valid/_file_list.txt"',
                                                                           '"./norm/valid.txt"')


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    (tmp_path / "norm.py").write_text(NORM)
    proc = run_ctrgen("import", "norm.py", "--hugectr-version", "23.06", "--out", "specs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "the reader reads HugeCTR norm files, so pass the same columns as Parquet: ctrgen train SPEC --train " \
           "PATH --eval PATH" in proc.stdout + proc.stderr
    spec = tmp_path / "specs" / "norm.yaml"
    assert "targets: [hugectr, torch]" in spec.read_text()
    return spec


def test_a_norm_reader_s_spec_is_refused_without_parquet_and_writes_nothing(imported: Path):
    root = imported.parents[1]
    line = refused_in_one_line(run_ctrgen("train", str(imported), "--device", "cpu", cwd=root),
                               "data.format: the PyTorch trainer reads Parquet, not the HugeCTR Norm files data.train "
                               "names", "--train PATH --eval PATH")
    assert line.startswith(str(imported))
    assert not (root / "generated").exists() and not (root / "runs").exists()


def test_train_and_eval_go_together_and_must_exist(imported: Path):
    root = imported.parents[1]
    refused_in_one_line(run_ctrgen("train", str(imported), "--train", "data/train", cwd=root),
                        "--train and --eval go together")
    refused_in_one_line(run_ctrgen("train", str(imported), "--train", "nowhere", "--eval", "nowhere", cwd=root),
                        "nowhere", "train data not found")
    assert not (root / "generated").exists()


def test_the_columns_as_parquet_are_what_the_trainer_reads(imported: Path, monkeypatch):
    """The trainer's command line as `ctrgen train --train --eval` plans it: the given Parquet, not data.train."""
    from codegen.pipeline import open_spec
    from codegen.train.launch import plan_launch

    root = imported.parents[1]
    write_data(root)
    monkeypatch.chdir(root)
    argv = plan_launch(open_spec(imported), root / "generated" / "norm", root / "run", ranks=1, device="cpu",
                       max_iter=2, resume=False, extra=(), continuous=False,
                       given=(["data/train/_file_list.txt"], "data/valid/_file_list.txt")).argv
    assert argv[2:6] == ["--train", "data/train/_file_list.txt", "--eval", "data/valid/_file_list.txt"]
