"""``ctrgen weights import`` / ``export`` as a team moving a trained model uses them (issue 47): the HugeCTR stand-in
runs the generated model.py, loads exported files (checking their sizes) and saves them again, and those files import
to the same weights; an imported run folder scores validation rows as the weights it came from, resumes training in
train_torch.py, and exports back to the same bytes; every bad file is one line, exit 2, nothing written.
Small models (tests/weights_cases.py), in this process except the stand-in's run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from conftest import REPO, run_ctrgen
from conftest import refused_in_one_line as refused
from hugectr_run import run_with_standin
from synthetic_runs import FAST, columns
from weights_cases import seeded, tiny_spec

from codegen.output import write
from codegen.weights.run import _template, export_names, export_weights, open_model

REPO_SPECS = REPO / "specs"


def _exported(root: Path, name: str, seed: int) -> dict:
    path = tiny_spec(root / "specs", name)
    spec = open_model(path)
    _, template = _template(spec)
    state = seeded(template, seed, [t.key for t in spec.layout.tables])
    (root / "hugectr").mkdir(exist_ok=True)
    dense, sparse = export_names(spec, 7, None)
    export_weights(spec, state, name, root / "hugectr" / name, dense, sparse, force=False)
    write(root / "generated" / name, spec.files)
    return {"path": path, "spec": spec, "state": state, "folder": root / "hugectr" / name,
            "generated": root / "generated" / name}


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    root = tmp_path_factory.mktemp("weights_cli")
    return {name: _exported(root, name, i) for i, name in enumerate(("dlrm", "movielens_seed001"))}


def _same(state: dict, path: Path) -> None:
    back = torch.load(path, weights_only=True)
    assert all(torch.equal(back[k], v) for k, v in state.items() if not k.endswith("num_batches_tracked"))


@pytest.mark.parametrize("name", ["dlrm", "movielens_seed001"])
def test_the_standin_loads_exported_files_and_saves_them_in_the_same_layout(cases, tmp_path, name):
    """The generated model.py run by the stand-in, then load_dense_weights / load_sparse_weights of the exported
    files and save_params_to_files: what it saves imports to the exported weights (a localized table's slot_id,
    BatchNorm's .ntp.json). Its own placeholders (zeros, no keys) import too: every row zero."""
    case = cases[name]
    spec = case["spec"]
    script = tmp_path / "model.py"
    tables = [str(case["folder"] / f"{t.index}_sparse_7.model") for t in spec.layout.tables]
    script.write_text((case["generated"] / "model.py").read_text()
                      + f"\nmodel.load_dense_weights({str(case['folder'] / '_dense_7.model')!r})\n"
                      + f"model.load_sparse_weights({tables!r})\nmodel.save_params_to_files('re', iter=9)\n")
    run = tmp_path / "run"
    run.mkdir()
    result = run_with_standin(script, spec.model.job.hugectr_version, cwd=run, env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert result.returncode == 0, result.stderr
    assert run_ctrgen("weights", "import", str(case["path"]), "--hugectr", str(run), "--iter", "9",
                      "--out", str(tmp_path / "again")).returncode == 0
    _same(case["state"], tmp_path / "again" / "model.pt")
    (placeholder,) = [p.name for p in run.glob("_dense_*.model")]           # what fit / save_params_to_files left
    iteration = placeholder.split("_")[-1].split(".")[0]
    done = run_ctrgen("weights", "import", str(case["path"]), "--hugectr", str(run), "--iter", iteration,
                      "--out", str(tmp_path / "zeros"))
    assert done.returncode == 0, done.stderr
    zeros = torch.load(tmp_path / "zeros" / "model.pt", weights_only=True)
    assert all(not v.any() for k, v in zeros.items() if "running_var" not in k)
    assert "rows without a key, zero: " in done.stdout


def test_a_short_dense_file_is_refused_by_the_standin_too(cases, tmp_path):
    case = cases["dlrm"]
    short = tmp_path / "short.model"
    short.write_bytes((case["folder"] / "_dense_7.model").read_bytes()[:-4])
    script = tmp_path / "model.py"
    script.write_text((case["generated"] / "model.py").read_text() + f"\nmodel.load_dense_weights({str(short)!r})\n")
    (tmp_path / "run").mkdir()
    result = run_with_standin(script, case["spec"].model.job.hugectr_version, cwd=tmp_path / "run",
                              env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert result.returncode != 0 and "the model's dense layers take" in result.stderr


def test_an_import_scores_resumes_and_exports_back_to_the_same_bytes(cases, tmp_path):
    case = cases["movielens_seed001"]
    run = tmp_path / "imported"
    done = run_ctrgen("weights", "import", str(case["path"]), "--hugectr", str(case["folder"]), "--out", str(run))
    assert done.returncode == 0, done.stderr
    # scored by the Model through ctrgen export's loader (the weights ctrgen assemble --checkpoint would deploy)
    from codegen.export.trained import trained_model
    from codegen.runtime.data import read_split

    features = json.loads((run / "features.json").read_text())
    (tmp_path / "valid").mkdir()
    pq.write_table(pa.table(columns(features, np.random.default_rng(0), 64)), tmp_path / "valid" / "part.parquet")
    arrays = read_split([tmp_path / "valid" / "part.parquet"], features)
    with trained_model(run, case["generated"]) as trained:
        inputs = [torch.from_numpy(arrays["dense"])] + [torch.from_numpy(a) for a in arrays["sparse"]]
        scores = trained.model(*inputs).detach()
        original = type(trained.model)(features)
        original.load_state_dict(case["state"])
        assert torch.equal(scores, original.eval()(*inputs).detach())
    # back to HugeCTR's files: the same bytes as the first export (the spec from weights.json)
    again = run_ctrgen("weights", "export", str(run / "last"), "--hugectr", str(tmp_path / "hc"), "--iter", "7")
    assert again.returncode == 0, again.stderr
    for path in sorted(case["folder"].rglob("*")):
        if path.is_file():
            assert (tmp_path / "hc" / path.relative_to(case["folder"])).read_bytes() == path.read_bytes(), path
    # fine-tuned from the imported checkpoint (a fresh optimizer), a few steps: the checkpoint ctrgen train --resume
    # picks, run by the generated train_torch.py as ctrgen train runs it
    from codegen.serve.offline import load_script
    from codegen.train.cli import check_no_earlier_run
    from codegen.train.launch import latest_checkpoint

    check_no_earlier_run(run, resume=True, force=False)
    assert latest_checkpoint(run) == (7, run / "checkpoint_7.pt")

    (tmp_path / "train").mkdir()
    pq.write_table(pa.table(columns(features, np.random.default_rng(1), 256)), tmp_path / "train" / "part.parquet")
    script = load_script(case["generated"] / "train_torch.py")
    argv = ["--train", str(tmp_path / "train"), "--eval", str(tmp_path / "valid"), *FAST, "--output-dir", str(run),
            "--resume", str(run / "checkpoint_7.pt")]
    assert script.main(argv) == 0
    tuned = torch.load(run / "model.pt", weights_only=True)
    assert any(not torch.equal(tuned[k], v) for k, v in case["state"].items() if k.endswith(".weight"))
    assert json.loads((run / "metrics.json").read_text())["iterations"] == 7 + 4


@pytest.mark.parametrize(("damage", "needles"), [
    ("dense", ("_dense_7.model", "this spec's dense layers have")),
    ("emb_vector", ("emb_vector", "keys of embedding_vec_size")),
    ("key_outside", ("fall in no slot of table", "the first: 1000000")),
    ("key_twice", ("is stored 2 times",)),
    ("slot_id", ("has slot_id 1", "lies in slot 0")),
    ("no_table", ("sparse model folder not found",)),
    ("two_iterations", ("several dense files", "--iter")),
])
def test_a_bad_file_is_one_line_and_nothing_is_written(cases, tmp_path, damage, needles):
    case = cases["dlrm"]
    folder = tmp_path / "hc"
    shutil.copytree(case["folder"], folder)
    table = folder / "0_sparse_7.model"
    keys = np.fromfile(table / "key", dtype="<i8")
    if damage == "dense":
        (folder / "_dense_7.model").write_bytes((folder / "_dense_7.model").read_bytes()[:-4])
    elif damage == "emb_vector":
        (table / "emb_vector").write_bytes((table / "emb_vector").read_bytes()[:-4])
    elif damage == "key_outside":
        keys[-1] = 10 ** 6
        keys.tofile(table / "key")
    elif damage == "key_twice":
        keys[1] = keys[0]
        keys.tofile(table / "key")
    elif damage == "slot_id":
        slots = np.fromfile(table / "slot_id", dtype="<u8")
        slots[0] = 1
        slots.tofile(table / "slot_id")
    elif damage == "no_table":
        shutil.rmtree(table)
    elif damage == "two_iterations":
        shutil.copy(folder / "_dense_7.model", folder / "_dense_8.model")
    result = run_ctrgen("weights", "import", str(case["path"]), "--hugectr", str(folder), "--out",
                        str(tmp_path / "out"))
    refused(result, *needles)
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == ["hc"]


def test_a_layer_whose_place_in_the_files_is_unknown_is_refused_naming_it(tmp_path):
    """DCN v2's MultiCross: HugeCTR's graph JSON drops projection_dim, so its files do not say which form they hold."""
    path = tiny_spec(tmp_path, "dcn")
    path.write_text(path.read_text().replace("  cross_layers: 6\n", "  cross_layers: 6\n  projection_dim: 4\n"))
    (tmp_path / "hc").mkdir()
    result = run_ctrgen("weights", "import", str(path), "--hugectr", str(tmp_path / "hc"), "--out",
                        str(tmp_path / "out"))
    refused(result, "layer 'multicross1'", "projection_dim")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("damage", "needles"), [
    ("missing", ("BatchNorm statistics file (.ntp.json) not found",)),
    ("short", ("layers[0].mean", "'mean' of BatchNorm")),
])
def test_a_batchnorm_model_needs_its_running_statistics(cases, tmp_path, damage, needles):
    case = cases["movielens_seed001"]
    folder = tmp_path / "hc"
    shutil.copytree(case["folder"], folder)
    ntp = folder / "_dense_7.model.ntp.json"
    if damage == "missing":
        ntp.unlink()
    else:
        document = json.loads(ntp.read_text())
        document["layers"][0]["mean"].pop()
        ntp.write_text(json.dumps(document))
    result = run_ctrgen("weights", "import", str(case["path"]), "--hugectr", str(folder), "--out",
                        str(tmp_path / "out"))
    refused(result, *needles)
    assert not (tmp_path / "out").exists()


def test_an_export_of_another_models_weights_is_one_line_and_writes_nothing(cases, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    torch.save(cases["dlrm"]["state"], run / "model.pt")
    (run / "features.json").write_text((cases["dlrm"]["generated"] / "features.json").read_text())
    refused(run_ctrgen("weights", "export", str(run), "--hugectr", str(tmp_path / "out")),
            "no run.json or weights.json naming the spec", "--spec")
    other = run_ctrgen("weights", "export", str(run), "--spec", str(cases["movielens_seed001"]["path"]),
                       "--hugectr", str(tmp_path / "out"))
    lines = other.stderr.splitlines()            # one line per tensor of another shape, or missing
    assert other.returncode == 2 and lines and "Traceback" not in other.stderr
    assert all(line.startswith(str(run / "model.pt")) and ("has shape" in line or "has no tensor" in line)
               for line in lines), lines
    assert not (tmp_path / "out").exists()
    # an output folder whose parent is missing is named by the option the user wrote (--hugectr), not its value's name
    refused(run_ctrgen("weights", "export", str(run), "--spec", str(cases["dlrm"]["path"]), "--hugectr",
                       str(tmp_path / "missing" / "out")), "--hugectr: folder not found")


def test_a_continuous_runs_files_import_under_the_names_its_ps_json_gives(tmp_path):
    """Continuous training saves the dense file of iteration 0 and keeps the tables in its cache's folders
    (wdl_0_sparse_model, ...): an export writes those names and an import finds them without --iter."""
    path = tiny_spec(tmp_path / "specs", "wdl_continuous_etc")
    spec = open_model(path)
    _, template = _template(spec)
    state = seeded(template, 5, [t.key for t in spec.layout.tables])
    dense, sparse = export_names(spec, None, None)
    assert dense == "wdl_etc_dense_0.model" and all("_sparse_" in s and not s.endswith(".model") for s in sparse)
    export_weights(spec, state, "state", tmp_path / "hc", dense, sparse, force=False)
    done = run_ctrgen("weights", "import", str(path), "--hugectr", str(tmp_path / "hc"), "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    _same(state, tmp_path / "run" / "model.pt")
