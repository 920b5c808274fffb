"""Spec paths under the home folder (issue 24): ``~/...`` in data.train, data.eval and training.graph_json means what
``os.path.expanduser`` gives on the machine that runs the job. model.py keeps it as that expression, the PyTorch
runtime and ``ctrgen train`` expand it where they read the data, and every other place a ``~`` would reach as it is
(HugeCTR does not expand it) is refused with its spec line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from codegen.errors import UserError
from codegen.pipeline import open_spec, render_spec
from conftest import REPO, run_ctrgen
from hugectr_run import calls_named, run_with_standin
from test_facts import MOVIELENS_LOCK, movielens, render, write_project

HOME = {"data__train": ["~/ml/train/_file_list.txt"], "data__eval": "~/ml/valid/_file_list.txt",
        "training__graph_json": "~/ml/model/1/movielens.json"}


def test_model_py_writes_home_paths_as_expanduser(tmp_path: Path):
    model_py = render(tmp_path, movielens(**HOME))["model.py"]
    lines = model_py.splitlines()
    assert "import os" in lines
    assert '    source=[os.path.expanduser("~/ml/train/_file_list.txt")],' in lines
    assert '    eval_source=os.path.expanduser("~/ml/valid/_file_list.txt"),' in lines
    assert 'os.makedirs(os.path.expanduser("~/ml/model/1"), exist_ok=True)' in lines
    assert 'model.graph_to_json(graph_config_file=os.path.expanduser("~/ml/model/1/movielens.json"))' in lines
    assert '"~' not in model_py.replace('expanduser("~', "")      # no other literal starting with ~


def test_os_is_imported_only_when_used(tmp_path: Path):
    plain = render(tmp_path / "a", movielens(training__graph_json="m.json"))["model.py"]
    assert "import os" not in plain.splitlines()
    home = render(tmp_path / "b", movielens(training__graph_json="m.json", data__eval="~/v.txt"))["model.py"]
    assert "import os" in home.splitlines() and 'eval_source=os.path.expanduser("~/v.txt"),' in home


def test_a_hostile_home_path_is_escaped(tmp_path: Path):
    path = '~/a"b\\c\')\nimport x'
    model_py = render(tmp_path, movielens(data__eval=path))["model.py"]
    assert f"    eval_source=os.path.expanduser({path!r})," in model_py.splitlines()
    compile(model_py, "model.py", "exec")


def test_model_py_expands_them_where_it_runs(tmp_path: Path):
    """The generated script, run with HOME set, passes HugeCTR the paths under that home folder and writes the graph
    JSON there (the stand-in records every call)."""
    files = render(tmp_path, movielens(**HOME))
    script = tmp_path / "model.py"
    script.write_text(files["model.py"], encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    result = run_with_standin(script, "3.3", cwd=tmp_path,
                              env={"HOME": str(home) + "/", "CTRGEN_STANDIN_SKIP_DATA": "1", "CTRGEN_FORCE_STANDIN": "1"})
    assert result.returncode == 0, result.stderr
    (reader,) = calls_named(result, "hugectr.DataReaderParams")
    assert reader["kwargs"]["source"] == [f"{home}/ml/train/_file_list.txt"]
    assert reader["kwargs"]["eval_source"] == f"{home}/ml/valid/_file_list.txt"
    (graph,) = calls_named(result, "Model.graph_to_json")
    assert graph["kwargs"]["graph_config_file"] == f"{home}/ml/model/1/movielens.json"
    assert not (tmp_path / "~").exists()


def test_the_torch_trainer_reads_them_under_the_home_folder(tmp_path: Path, monkeypatch):
    from codegen.runtime.data import data_files

    files = render(tmp_path, movielens(**HOME))
    assert '    "train": ["~/ml/train/_file_list.txt"],' in files["train_torch.py"].splitlines()
    home = tmp_path / "home"
    (home / "ml" / "train").mkdir(parents=True)
    (home / "ml" / "train" / "part_0.parquet").write_bytes(b"")
    (home / "ml" / "train" / "_file_list.txt").write_text("1\npart_0.parquet\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    assert data_files("~/ml/train/_file_list.txt") == [home / "ml" / "train" / "part_0.parquet"]
    assert data_files("~/ml/train") == [home / "ml" / "train" / "part_0.parquet"]


def test_ctrgen_train_passes_them_expanded(tmp_path: Path, monkeypatch):
    from codegen.train.launch import spec_data

    spec = movielens(**HOME)
    spec.pop("etl")
    monkeypatch.setenv("HOME", "/home/someone")
    data, source = spec_data(open_spec(write_project(tmp_path, spec, MOVIELENS_LOCK)))
    assert source == "data"
    assert data == {"--train": ["/home/someone/ml/train/_file_list.txt"],
                    "--eval": ["/home/someone/ml/valid/_file_list.txt"]}


REFUSED = {
    "another-users-home": ({"data__train": ["~ml/train/_file_list.txt"]}, "data.train[0]", "'~name' forms"),
    "snapshot-prefix": ({"training__snapshot_prefix": "~/snap/m"}, "training.snapshot_prefix",
                        "only data.train, data.eval and training.graph_json are expanded"),
    "reader-args": ({"data__args": {"num_samples": 10, "keyset": ["~/k"]}}, "data.args.keyset[0]",
                    "which HugeCTR does not expand"),
    "inference-graph": ({"offline_inference": {"graph_json": "~/m.json", "params": {"model_name": "m"},
                                               "predict": {"num_batches": 1}}},
                        "offline_inference.graph_json", "passed on as it is here"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_tilde_that_would_reach_a_consumer_unexpanded_is_refused(name: str, tmp_path: Path):
    changes, field, why = REFUSED[name]
    spec = movielens(**changes)
    path = write_project(tmp_path, spec, MOVIELENS_LOCK)
    with pytest.raises(UserError) as err:
        render_spec(open_spec(path))
    message = err.value.format()
    assert f"{path}:" in message and field in message and why in message and "fix:" in message, message
    proc = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and why in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("spec_name,field,why", [
    ("deepfm_vertex", "eval", "Vertex AI's task.py and submit.py"),
    ("wdl_continuous", "eval", "continuous training's passes"),
    ("wdl_continuous", "train", "continuous training's passes"),
])
def test_a_home_data_path_is_refused_where_a_section_passes_it_on(spec_name: str, field: str, why: str,
                                                                   tmp_path: Path):
    spec = yaml.safe_load((REPO / "specs" / f"{spec_name}.yaml").read_text())
    spec["data"][field] = "~/d/_file_list.txt" if field == "eval" else ["~/d/_file_list.txt"]
    lock = json.loads((REPO / "specs" / "criteo.features.lock.json").read_text())
    path = write_project(tmp_path, spec, lock)
    with pytest.raises(UserError) as err:
        render_spec(open_spec(path))
    message = err.value.format()
    assert f"data.{field}" in message and why in message and "fix: write the absolute path" in message, message


def test_the_spec_form_survives_the_yaml_writer(tmp_path: Path):
    """A bare ``~`` is YAML's null: the writer quotes it, and a ~/ path reads back as the same string."""
    from codegen.specfile.load import load_spec
    from codegen.specfile.write import write_spec

    spec = load_spec(write_project(tmp_path, movielens(**{**HOME, "data__eval": "~"}), MOVIELENS_LOCK)).spec
    again = tmp_path / "again.yaml"
    again.write_text(write_spec(spec), encoding="utf-8")
    assert load_spec(again).spec == spec and spec.data.eval == "~"


# ---- an environment variable's path (seed 002's INPUT_DATA_DIR): read where the job runs, as the script reads it --

ENV = {"data__train": ["${ML_DATA-/srv/ml/}train/_file_list.txt"], "data__eval": "${ML_DATA-/srv/ml/}valid/_file_list.txt",
       "training__graph_json": "${ML_MODEL-~/models}/1/movielens.json"}


def test_model_py_reads_environment_paths_with_os_environ_get(tmp_path: Path):
    """``${NAME-DEFAULT}rest`` is os.environ.get(NAME, DEFAULT) + rest, ``${NAME-DEFAULT}/rest`` its os.path.join
    with rest (a ~ default expanded there): run with ML_DATA set and ML_MODEL unset, the generated script passes
    HugeCTR the set value's paths and writes the graph JSON under the default's home folder (stand-in)."""
    model_py = render(tmp_path, movielens(**ENV))["model.py"]
    lines = model_py.splitlines()
    assert '    source=[os.environ.get("ML_DATA", "/srv/ml/") + "train/_file_list.txt"],' in lines
    assert ('model.graph_to_json(graph_config_file=os.path.join(os.environ.get("ML_MODEL", '
            'os.path.expanduser("~/models")), "1/movielens.json"))') in lines
    script = tmp_path / "model.py"
    script.write_text(model_py, encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    result = run_with_standin(script, "3.3", cwd=tmp_path,
                              env={"HOME": str(home), "ML_DATA": "/e/", "CTRGEN_STANDIN_SKIP_DATA": "1",
                                   "CTRGEN_FORCE_STANDIN": "1"})
    assert result.returncode == 0, result.stderr
    (reader,) = calls_named(result, "hugectr.DataReaderParams")
    assert reader["kwargs"]["source"] == ["/e/train/_file_list.txt"]
    assert reader["kwargs"]["eval_source"] == "/e/valid/_file_list.txt"
    (graph,) = calls_named(result, "Model.graph_to_json")
    assert graph["kwargs"]["graph_config_file"] == f"{home}/models/1/movielens.json"


def test_the_trainer_and_ctrgen_train_read_environment_paths(tmp_path: Path, monkeypatch):
    from codegen.runtime.contract import local_path
    from codegen.runtime.data import data_files
    from codegen.train.launch import spec_data

    (tmp_path / "e" / "train").mkdir(parents=True)
    (tmp_path / "e" / "train" / "part_0.parquet").write_bytes(b"")
    monkeypatch.setenv("ML_DATA", f"{tmp_path}/e/")
    assert data_files("${ML_DATA-/nowhere/}train") == [tmp_path / "e" / "train" / "part_0.parquet"]
    monkeypatch.setenv("ML_DATA", f"{tmp_path}/e")         # no trailing "/": appended as the script appends
    assert local_path("${ML_DATA-/d/}train") == f"{tmp_path}/etrain"
    assert local_path("${ML_DATA-/d/}/train") == f"{tmp_path}/e/train"
    monkeypatch.delenv("ML_DATA")
    monkeypatch.setenv("HOME", "/home/someone")
    spec = movielens(**ENV)
    spec.pop("etl")
    data, _ = spec_data(open_spec(write_project(tmp_path / "p", spec, MOVIELENS_LOCK)))
    assert data == {"--train": ["/srv/ml/train/_file_list.txt"], "--eval": ["/srv/ml/valid/_file_list.txt"]}
    assert local_path("${ML_MODEL-~/models}/1/m.json") == "/home/someone/models/1/m.json"


ENV_REFUSED = {
    "no-default": ({"data__eval": "${ML_DATA}valid/_file_list.txt"}, "data.eval", "not an environment variable's"),
    "join-absolute": ({"data__eval": "${ML_DATA-/d/}//v.txt"}, "data.eval", "not an environment variable's"),
    "two-defaults": ({"data__eval": "${ML_DATA-/other/}valid/_file_list.txt"}, "data.eval",
                     "has the default '/srv/ml/' in another path"),
    "another-users-home": ({"data__eval": "${ML_DATA-~ml/}v.txt"}, "data.eval", "the default of ${ML_DATA} is a path"),
    "snapshot-prefix": ({"training__snapshot_prefix": "${SNAP-/s/}m"}, "training.snapshot_prefix",
                        "passed on as it is here"),
}


@pytest.mark.parametrize("name", sorted(ENV_REFUSED))
def test_an_environment_path_that_would_not_be_read_as_written_is_refused(name: str, tmp_path: Path):
    changes, field, why = ENV_REFUSED[name]
    spec = movielens(**{**ENV, **changes})
    path = write_project(tmp_path, spec, MOVIELENS_LOCK)
    with pytest.raises(UserError) as err:
        render_spec(open_spec(path))
    message = err.value.format()
    assert len(message.splitlines()) == 1 and f"{path}:" in message and field in message and why in message \
        and "fix:" in message, message


def test_a_hostile_environment_path_is_escaped(tmp_path: Path):
    """The default and the rest reach model.py as string literals only (the variable's name is letters, digits, _):
    the script compiles, adds no statement, and its eval_source is os.environ.get(NAME, DEFAULT) + REST exactly."""
    import ast

    default, rest = '/a"b\\c\')\nimport x/', 'v\'")\nimport y'
    model_py = render(tmp_path, movielens(data__eval=f"${{ML_DATA-{default}}}{rest}"))["model.py"]
    tree = ast.parse(model_py)
    assert not any(isinstance(n, ast.Import) and n.names[0].name in ("x", "y") for n in ast.walk(tree))
    (value,) = [k.value for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords
                if k.arg == "eval_source"]
    assert isinstance(value, ast.BinOp) and ast.literal_eval(value.right) == rest
    assert ast.unparse(value.left.func) == "os.environ.get"
    assert [ast.literal_eval(a) for a in value.left.args] == ["ML_DATA", default]
