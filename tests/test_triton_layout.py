"""Where generated/<name>/ keeps each Triton repository's files (codegen/triton/layout.py, issue 23): a file the
model folder already holds is written once and mapped in MANIFEST.json; `ctrgen assemble` and `ctrgen validate`
compose the whole repository from the folder and the map."""

from __future__ import annotations

import json
import shutil
from pathlib import PurePosixPath

import pytest

from codegen.pipeline import open_spec, render_spec
from codegen.render.triton import render_triton
from codegen.triton import validate_repository
from codegen.triton.layout import rendered_repository, repository_sources
from tests.conftest import REPO, run_ctrgen
from tests.specfactory import MOVIELENS_LOCK, write_spec

GENERATED = REPO / "generated"
BASE = (REPO / "specs" / "movielens.yaml").read_text()


def _whole(rendered, plan) -> dict[PurePosixPath, str]:
    """The repository as one render writes it, nothing shared."""
    prov = rendered.model.provenance
    graph_json = rendered.files.get(PurePosixPath(f"{rendered.name}.json"), "")
    return render_triton(plan, graph_json=graph_json, spec_display=prov.spec, digest=prov.digest,
                         nvtabular_note=prov.nvtabular_note)[1]


@pytest.mark.parametrize("name", ["movielens", "dcn", "wdl_continuous"])
def test_the_composed_repositories_are_the_whole_ones(name):
    rendered = render_spec(open_spec(REPO / "specs" / f"{name}.yaml"))
    for folder, plan in (("triton", rendered.triton), ("triton_torch", rendered.triton_torch)):
        if plan is None:
            continue
        whole = _whole(rendered, plan)
        assert rendered_repository(rendered.files, folder) == dict(sorted(whole.items()))
        # and on disk: the committed folder composes to the same bytes
        on_disk = repository_sources(GENERATED / name, folder)
        assert sorted(on_disk) == sorted(whole)
        assert all(on_disk[rel].read_text() == text for rel, text in whole.items())
    manifest = json.loads(rendered.files[PurePosixPath("MANIFEST.json")])
    assert manifest["repositories"]["triton"] == {f"{name}/1/{name}.json": f"{name}.json"}


def test_only_equal_bytes_are_shared(tmp_path):
    """Another output name for the PyTorch step gives it another ensemble: triton_torch/ keeps its own, and still
    shares the preprocessing model."""
    spec = write_spec(tmp_path, BASE + "triton:\n  torch:\n    output_name: SCORE\n", MOVIELENS_LOCK, name="movielens")
    rendered = render_spec(open_spec(spec))
    shared = json.loads(rendered.files[PurePosixPath("MANIFEST.json")])["repositories"]["triton_torch"]
    assert "movielens_ens/config.pbtxt" not in shared and "movielens_nvt/config.pbtxt" in shared
    assert "SCORE" in rendered.files[PurePosixPath("triton_torch/movielens_ens/config.pbtxt")]
    assert rendered_repository(rendered.files, "triton_torch") == dict(sorted(_whole(rendered,
                                                                                      rendered.triton_torch).items()))


def test_validate_checks_the_shared_files_where_they_lie(tmp_path):
    shutil.copytree(GENERATED / "movielens", tmp_path / "movielens")
    model = tmp_path / "movielens"
    assert validate_repository(model / "triton_torch") == []
    ens = model / "triton" / "movielens_ens" / "config.pbtxt"
    ens.write_text(ens.read_text().replace("TYPE_FP32", "TYPE_FP64", 1))
    result = run_ctrgen("validate", str(model / "triton_torch"))
    assert result.returncode == 1
    assert f"{ens}:" in result.stdout and "'OUTPUT0' is TYPE_FP64" in result.stdout
    # the HugeCTR model's graph JSON is <name>.json: a broken one is found through the repository's config
    graph = model / "movielens.json"
    graph.write_text(graph.read_text().replace('"slot_num": 2', '"slot_num": 3', 1))
    result = run_ctrgen("validate", str(model / "triton"))
    # the shared graph reader names the field by its path and line in the file
    assert result.returncode == 1 and f"{graph}:15:27: error: layers[0].sparse[0].nnz_per_slot: data1: 2 values for " \
        "slot_num 3" in result.stdout, result.stdout


def test_a_manifest_path_outside_the_model_folder_is_not_followed(tmp_path):
    shutil.copytree(GENERATED / "movielens", tmp_path / "movielens")
    model = tmp_path / "movielens"
    (tmp_path / "evil.json").write_text("{}")
    doc = json.loads((model / "MANIFEST.json").read_text())
    doc["repositories"]["triton"] = {"movielens/1/movielens.json": "../evil.json", "/etc/x": "movielens.json"}
    (model / "MANIFEST.json").write_text(json.dumps(doc))
    assert PurePosixPath("movielens/1/movielens.json") not in repository_sources(model, "triton")
    assert not any(str(rel).startswith("/") for rel in repository_sources(model, "triton"))


def test_assemble_names_the_model_folder_when_given_a_repository_folder(tmp_path):
    """--generated is generated/<name>/ (the repositories share files); the folder of one repository is refused with
    one line that says so, before anything else is read."""
    result = run_ctrgen("assemble", "specs/movielens.yaml", "--workflow", str(tmp_path / "w"), "--checkpoint",
                        str(tmp_path / "c"), "--generated", str(GENERATED / "movielens" / "triton_torch"),
                        "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "generated Triton repository not found (--generated names the model's generated folder" in result.stderr
    assert not (tmp_path / "out").exists()
