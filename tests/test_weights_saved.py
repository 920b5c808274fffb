"""The generated model.py leaves what serving needs (issue 15 item 4), run on the HugeCTR stand-in: the weight
files ps.json names even when fit writes no snapshot (snapshot 0, or beyond max_iter), the graph JSON in a folder
that did not exist (HugeCTR's ofstream would write nothing there), and mpi4py imported for several nodes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO
from hugectr_run import calls_named, run_with_standin

from codegen.output import write
from codegen.pipeline import open_spec, render_spec


def _generate(tmp_path: Path, edit) -> Path:
    """specs/wdl.yaml (two tables) with ``edit`` applied, its lock beside it, generated into tmp_path/out."""
    text = (REPO / "specs" / "wdl.yaml").read_text()
    text = "\n".join(line for line in text.splitlines() if not line.startswith("workflow:"))
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = tmp_path / "wdl.yaml"
    spec.write_text(edit(text) + "\n")
    shutil.copy(REPO / "specs" / "criteo.features.lock.json", tmp_path / "criteo.features.lock.json")
    rendered = render_spec(open_spec(spec))
    out = tmp_path / "out"
    write(out, rendered.files)
    return out


def _ps_files(out: Path) -> list[str]:
    model = json.loads((out / "triton" / "ps.json").read_text())["models"][0]
    return [Path(p).name for p in (model["dense_file"], *model["sparse_files"])]


@pytest.mark.parametrize("snapshot", ["snapshot: 1000000", "snapshot: 0"])
def test_model_py_saves_the_weights_ps_json_names_when_fit_writes_no_snapshot(tmp_path, snapshot):
    out = _generate(tmp_path, lambda t: t.replace("snapshot: 1000000", snapshot)
                    .replace("max_iter: 2300", "max_iter: 2300\n  graph_json: graphs/new/wdl.json"))
    run = tmp_path / "run"
    run.mkdir()
    result = run_with_standin(out / "model.py", "23.06", cwd=run, env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert result.returncode == 0, result.stderr
    assert [c["kwargs"] for c in calls_named(result, "Model.save_params_to_files")] == [{"iter": 2300}]
    names = _ps_files(out)
    assert names == ["_dense_2300.model", "0_sparse_2300.model", "1_sparse_2300.model"]
    for name in names:
        assert (run / name).exists(), name
    assert (run / "graphs" / "new" / "wdl.json").read_bytes() == (out / "wdl.json").read_bytes()


def test_model_py_relies_on_fit_when_it_writes_the_snapshot_ps_json_names(tmp_path):
    out = _generate(tmp_path, lambda t: t.replace("snapshot: 1000000", "snapshot: 1000"))
    text = (out / "model.py").read_text()
    assert "save_params_to_files" not in text and "import os" not in text
    run = tmp_path / "run"
    run.mkdir()
    result = run_with_standin(out / "model.py", "23.06", cwd=run, env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert result.returncode == 0, result.stderr
    assert _ps_files(out)[0] == "_dense_2000.model" and (run / "_dense_2000.model").is_file()


def test_model_py_imports_mpi4py_for_several_nodes_only(tmp_path):
    one = (_generate(tmp_path / "one", lambda t: t) / "model.py").read_text()
    two = (_generate(tmp_path / "two", lambda t: t.replace("vvgpu: [[0]]", "vvgpu: [[0], [0]]"))
           / "model.py").read_text()
    assert "mpi4py" not in one
    lines = two.splitlines()
    assert lines.index("from mpi4py import MPI  # noqa: F401  2 nodes: HugeCTR runs one process per node and talks "
                       "over MPI") == lines.index("import hugectr") + 1
