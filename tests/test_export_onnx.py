"""``ctrgen export RUN_DIR --format onnx`` (issue 45, item 9): the trained model as an ONNX file with named inputs and
outputs and a dynamic batch, checked with onnxruntime against the PyTorch scores before it is written.

The runs are real: the committed generated train_torch.py of movielens (the demo model: one-hot ids, no continuous
column), movielens_genres (a multi-hot column, pooled), wdl (continuous columns, two sparse inputs) and mmoe (two
labels), trained a few steps in this process on small synthetic Parquet data of their features.json's columns
(cardinalities cut to 40: the layout is the script's, the tables small), then exported through the CLI in process
and run with onnxruntime. Every refusal is one line on stderr, exit 2, and writes nothing."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import refused_in_one_line as refused
from conftest import run_ctrgen
from synthetic_runs import ROWS, trained


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    return {name: trained(root, name) for name in ("movielens", "movielens_genres", "wdl", "mmoe")}


def ctrgen_export(path: Path, run: dict, *extra: str, generated: bool = True, data: bool = True):
    args = ["export", str(path), "--format", "onnx", *extra]
    args += ["--generated", str(run["generated"])] if generated else []
    args += ["--data", str(run["valid"])] if data else []
    return run_ctrgen(*args)


def onnx_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".onnx") or ".onnx-" in p.name)


def _model_scores(run: dict, weights: Path, arrays: dict) -> np.ndarray:
    """The PyTorch Model's scores (sigmoid of its logits) of the rows, computed here without codegen.export."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("export_check_train_torch", run["generated"] / "train_torch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.Model(json.loads((weights.parent / "features.json").read_text()))
    model.load_state_dict(torch.load(weights, weights_only=True))
    with torch.no_grad():
        logits = model.eval()(torch.from_numpy(arrays["dense"]), *map(torch.from_numpy, arrays["sparse"]))
    return torch.sigmoid(logits).numpy()


# ---- the export -----------------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", ["movielens", "movielens_genres", "wdl", "mmoe"])
def test_the_file_scores_as_the_model_does_with_named_inputs_and_outputs_at_any_batch(runs, name, tmp_path):
    """The file's scores of the validation rows, in batches of 1 and of all of them, equal the PyTorch Model's
    within 1e-5; its inputs and outputs are named as features.json names them, the batch dimension is dynamic, and
    exporting the same weights again writes the same bytes."""
    import onnxruntime

    from codegen.runtime.data import read_split

    run = runs[name]
    result = ctrgen_export(run["run"], run, "--out", str(tmp_path / "a.onnx"))
    assert result.returncode == 0, result.stderr
    features = json.loads((run["run"] / "best" / "features.json").read_text())
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"wrote {tmp_path / 'a.onnx'} (best weights, iteration ")
    assert lines[-1].startswith(f"checked with onnxruntime on {ROWS} validation rows: largest difference from "
                                "PyTorch ")
    assert float(lines[-1].split("PyTorch ")[1].split()[0]) <= 1e-5

    session = onnxruntime.InferenceSession(str(tmp_path / "a.onnx"), providers=["CPUExecutionProvider"])
    dense = ["dense"] if features["continuous"] else []
    assert [i.name for i in session.get_inputs()] == dense + [s["input"] for s in features["sparse"]]
    assert [o.name for o in session.get_outputs()] == [label["name"] for label in features["labels"]]
    assert all(i.shape[0] == "batch" for i in [*session.get_inputs(), *session.get_outputs()])
    shapes = {i.name: (i.type, i.shape[1:]) for i in session.get_inputs()}
    for s in features["sparse"]:
        assert shapes[s["input"]] == ("tensor(int64)", [len(s["columns"]), s["nnz"]])
    if dense:
        assert shapes["dense"] == ("tensor(float)", [len(features["continuous"])])

    arrays = read_split([run["valid"] / "part_0.parquet"], features)
    expected = _model_scores(run, run["run"] / "best" / "model.pt", arrays)
    for rows in (slice(0, 1), slice(1, 8), slice(None)):
        feeds = ({"dense": arrays["dense"][rows]} if dense else {}) | \
            {s["input"]: ids[rows] for s, ids in zip(features["sparse"], arrays["sparse"])}
        got = np.stack(session.run(None, feeds), axis=1)
        assert got.shape == expected[rows].shape
        assert np.max(np.abs(got - expected[rows])) <= 1e-5

    again = ctrgen_export(run["run"], run, "--out", str(tmp_path / "b.onnx"))
    assert again.returncode == 0 and (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
    assert onnx_files(tmp_path) == ["a.onnx", "b.onnx"]          # no temporary file left


@pytest.mark.slow
def test_best_by_default_last_or_a_checkpoint_on_request_each_beside_the_run(runs):
    """The weights are those `ctrgen assemble --checkpoint` chooses; each lands in the run folder under its name."""
    run = runs["movielens"]["run"]
    metrics = json.loads((run / "metrics.json").read_text())
    cases = [(run, "best.onnx", f"best weights, iteration {metrics['best']['iteration']}"),
             (run / "last", "last.onnx", f"last weights, iteration {metrics['iterations']}"),
             (run / "checkpoint_2.pt", "checkpoint_2.onnx", "checkpoint_2.pt weights, iteration 2")]
    try:
        for path, name, says in cases:
            result = ctrgen_export(path, runs["movielens"], "--rows", "50")
            assert result.returncode == 0, result.stderr
            assert result.stdout.splitlines()[0].startswith(f"wrote {run / name} ({says}; ")
            assert "on 50 validation rows" in result.stdout
        assert onnx_files(run) == ["best.onnx", "checkpoint_2.onnx", "last.onnx"]
        assert (run / "last.onnx").read_bytes() != (run / "checkpoint_2.onnx").read_bytes()
    finally:
        for _, name, _ in cases:
            (run / name).unlink(missing_ok=True)


@pytest.mark.slow
def test_run_json_names_the_trainer_and_the_validation_data(runs, tmp_path):
    """A `ctrgen train` run needs no --generated or --data: its run.json's command names both."""
    src = runs["movielens"]
    run = tmp_path / "run"
    shutil.copytree(src["run"], run, ignore=shutil.ignore_patterns("tensorboard", "*.onnx"))
    command = [sys.executable, str(src["generated"] / "train_torch.py"), "--train", "t", "--eval", str(src["valid"])]
    (run / "run.json").write_text(json.dumps({"command": command, "data": {"--eval": [str(src["valid"])]}}))
    result = run_ctrgen("export", str(run))
    assert result.returncode == 0, result.stderr
    assert (run / "best.onnx").is_file()
    # The run.json of a run moved away from its generated folder: one line, with the way out.
    command[1] = str(tmp_path / "gone" / "train_torch.py")
    (run / "run.json").write_text(json.dumps({"command": command}))
    refused(run_ctrgen("export", str(run), "--out", str(tmp_path / "x.onnx")),
            "run.json: command: the train_torch.py it names", "is not found", "--generated")
    assert not (tmp_path / "x.onnx").exists()


@pytest.mark.slow
def test_an_existing_out_file_is_replaced_whole(runs, tmp_path):
    """As `ctrgen report --out` and `ctrgen port --out` do: a file ctrgen writes is replaced in one rename."""
    target = tmp_path / "model.onnx"
    target.write_bytes(b"old")
    result = ctrgen_export(runs["movielens"]["run"], runs["movielens"], "--out", str(target), "--rows", "20")
    assert result.returncode == 0, result.stderr
    assert target.read_bytes()[:2] != b"ol" and onnx_files(tmp_path) == ["model.onnx"]


# ---- refusals: one line, exit 2, nothing written --------------------------------------------------------------------

@pytest.fixture
def copied(runs, tmp_path):
    """A copy of the movielens run to damage (model.pt, features.json, best/, checkpoints)."""
    run = tmp_path / "run"
    shutil.copytree(runs["movielens"]["run"], run, ignore=shutil.ignore_patterns("tensorboard", "*.onnx"))
    return {**runs["movielens"], "run": run}


@pytest.mark.slow
def test_a_missing_run_folder_is_refused(runs, tmp_path):
    refused(ctrgen_export(tmp_path / "nope", runs["movielens"]), f"{tmp_path / 'nope'}: RUN_DIR: checkpoint folder "
            "not found")
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_a_run_folder_without_model_pt_is_refused(copied):
    shutil.rmtree(copied["run"] / "best")
    (copied["run"] / "model.pt").unlink()
    refused(ctrgen_export(copied["run"], copied), f"{copied['run'] / 'model.pt'}: RUN_DIR: not found",
            "train_torch.py writes model.pt")
    assert onnx_files(copied["run"]) == []


@pytest.mark.slow
def test_a_model_pt_that_is_no_checkpoint_is_refused(copied):
    (copied["run"] / "best" / "model.pt").write_bytes(b"not a zip archive")
    refused(ctrgen_export(copied["run"], copied), "best/model.pt: RUN_DIR: not a PyTorch checkpoint")
    assert onnx_files(copied["run"]) == []


class _Runs:
    """Unpickled, calls os.system(command): what a hostile checkpoint holds."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


@pytest.mark.slow
def test_a_checkpoint_whose_pickle_runs_code_is_refused_and_nothing_runs(copied, tmp_path):
    """Weights are loaded with torch.load(weights_only=True): a pickle that names os.system is refused unrun, in
    model.pt and in a checkpoint_<iter>.pt."""
    import torch

    marker = tmp_path / "ran"
    torch.save({"weight": _Runs(f"touch {marker}")}, copied["run"] / "best" / "model.pt")
    refused(ctrgen_export(copied["run"], copied), "best/model.pt: RUN_DIR: cannot read the checkpoint "
            "(UnpicklingError: ")
    torch.save({"model": _Runs(f"touch {marker}"), "iteration": 2}, copied["run"] / "checkpoint_2.pt")
    refused(ctrgen_export(copied["run"] / "checkpoint_2.pt", copied), "checkpoint_2.pt: RUN_DIR: does not open as a "
            "checkpoint (UnpicklingError: ")
    assert not marker.exists() and onnx_files(copied["run"]) == []


@pytest.mark.slow
def test_weights_that_do_not_fit_the_model_are_refused(copied, runs):
    """A run of another model: its features.json is not the script's layout; weights of other table sizes do not
    load into the Model."""
    refused(ctrgen_export(copied["run"], runs["wdl"], data=False), "best/features.json: RUN_DIR: its columns are not "
            "the ones", "wdl/train_torch.py")
    features = json.loads((copied["run"] / "best" / "features.json").read_text())
    features["sparse"][0]["columns"][0]["cardinality"] = 41
    (copied["run"] / "best" / "features.json").write_text(json.dumps(features))
    refused(ctrgen_export(copied["run"], copied), "best/model.pt: RUN_DIR: the weights do not fit the Model of",
            "size mismatch")
    assert onnx_files(copied["run"]) == []


@pytest.mark.slow
def test_a_run_without_run_json_needs_generated_and_data(copied):
    refused(ctrgen_export(copied["run"], copied, generated=False), "RUN_DIR: no run.json naming the train_torch.py",
            "pass --generated DIR")
    refused(ctrgen_export(copied["run"], copied, data=False), "RUN_DIR: no run.json naming the run's validation data",
            "pass --data PATH")
    refused(ctrgen_export(copied["run"], {**copied, "generated": copied["run"]}),
            f"{copied['run'] / 'train_torch.py'}: --generated: not found")
    assert onnx_files(copied["run"]) == []


@pytest.mark.slow
def test_validation_data_of_other_columns_is_refused(copied, runs, tmp_path):
    refused(ctrgen_export(copied["run"], {**copied, "valid": runs["wdl"]["valid"]}), "--data: ",
            "column 'rating' is missing")
    empty = tmp_path / "empty.parquet"
    pq.write_table(pq.read_table(copied["valid"] / "part_0.parquet").slice(0, 0), empty)
    refused(ctrgen_export(copied["run"], {**copied, "valid": empty}), "--data: holds no rows")
    assert onnx_files(copied["run"]) == []


@pytest.mark.slow
@pytest.mark.parametrize("out,says", [
    ("/proc/model.onnx", "--out: is under /proc, /sys or /dev"),
    ("{tmp}/missing/model.onnx", "--out: its folder {tmp}/missing does not exist"),
    ("{tmp}", "--out: is a folder, not a file"),
    ("", "--out: the output path is empty"),
])
def test_an_out_path_that_cannot_be_written_is_refused(copied, tmp_path, out, says):
    refused(ctrgen_export(copied["run"], copied, "--out", out.format(tmp=tmp_path)), says.format(tmp=tmp_path))
    assert onnx_files(tmp_path) == []


@pytest.mark.slow
def test_scores_that_differ_beyond_the_tolerance_are_refused_and_nothing_written(copied, monkeypatch):
    import codegen.export.onnx as exported

    monkeypatch.setattr(exported, "TOLERANCE", 1e-12)       # float32 sums differ in their last bits
    line = refused(ctrgen_export(copied["run"], copied), "run: onnx: onnxruntime's scores differ from "
                   "PyTorch's by up to ", f"over {ROWS} validation rows (at most 1e-12 accepted); nothing written")
    assert float(line.split("up to ")[1].split()[0]) > 1e-12
    assert onnx_files(copied["run"]) == []


def test_without_onnxruntime_the_fix_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)      # find_spec answers None: not installed
    refused(run_ctrgen("export", str(tmp_path)), "onnx: onnxruntime not installed", "-e '.[onnx]'")


# ---- the pieces -----------------------------------------------------------------------------------------------------

def test_a_label_named_as_an_input_is_refused():
    from codegen.errors import UserError
    from codegen.export.onnx import signature

    features = {"labels": [{"name": "data1"}], "continuous": [], "sparse": [{"input": "data1"}]}
    with pytest.raises(UserError, match="the name 'data1' would name two of the ONNX file's inputs and outputs"):
        signature(features)
    assert signature({**features, "labels": [{"name": "click"}]}).outputs == ["click"]


@pytest.mark.parametrize("combiner", ["sum", "mean"])
def test_the_exported_pooling_is_embedding_bags_with_its_padding(combiner):
    """SparseEmbedding pools a multi-hot slot with embedding_bag, which ONNX lacks (with a padding row); under export
    it gathers and masks instead: the same vectors, an all-padding slot zero."""
    import torch
    import torch.nn.functional as F

    from codegen.runtime.layers import SparseEmbedding

    torch.manual_seed(0)
    table = SparseEmbedding([5, 7], vec_size=4, combiner=combiner, name="t")
    ids = torch.tensor([[[1, 2, -1], [6, -1, -1]], [[-1, -1, -1], [0, 3, 4]]])
    keys = torch.where(ids >= 0, ids + table.slot_offsets[:, None], table.padding_row)
    with torch.no_grad():
        assert torch.allclose(table.pooled(F.embedding(keys, table.weight), ids >= 0), table(ids), atol=1e-7)
        assert not table.pooled(F.embedding(keys, table.weight), ids >= 0)[1, 0].any()


def test_an_exported_file_belongs_to_its_run(tmp_path):
    """A new run into the folder is refused while best.onnx is there; `--force` removes it with the run's files."""
    from codegen.runtime import run_folder

    (tmp_path / "best.onnx").write_bytes(b"onnx")
    assert run_folder.earlier_run(tmp_path) == ["best.onnx"]
