"""The generated Triton repositories, without a server: NVTabular's exporter field by field, ps.json agreement,
``ctrgen validate``, determinism and escaping of hostile names."""

from __future__ import annotations

import json
import shutil
from pathlib import PurePosixPath

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from codegen.pipeline import open_spec, render_spec
from codegen.triton import validate_repository
from codegen.triton.lint.findings import ERROR
from codegen.triton.layout import repository_sources
from codegen.triton.lint.modelconfig import load_config
from tests.conftest import REPO, run_ctrgen
from tests.schema_files import MOVIELENS, write_output_schema

GENERATED = REPO / "generated"
# The clean lint case's config.pbtxt: written by the real NVTabular 23.5.0 export_hugectr_ensemble
# (tests/facts/lint_cases.json, docs/triton_facts.md).
EXPORTER_CONFIG = "movielens/config.pbtxt"
ALL_SPECS = sorted(p.stem for p in (REPO / "specs").glob("*.yaml"))

# What ctrgen writes differently from the exporter, on purpose (README "Triton repository").
IMPROVEMENTS = {
    "config": "served path of the graph JSON under triton.model_root (the exporter copied the caller's string)",
    "hit_rate_threshold": "written (the exporter left it out; the backend then takes ps.json's)",
    "max_nnz": "max nnz_per_slot of the graph (the exporter took the caller's value)",
}


def cfg(name: str, model: str) -> mc.ModelConfig:
    return load_config(GENERATED / name / "triton" / model / "config.pbtxt").config


def test_hugectr_config_field_by_field_against_the_exporter(tmp_path):
    from tests.lint_repos import CLEAN, write_case

    exporter = write_case(CLEAN, tmp_path / "exporter")
    ours, theirs = cfg("movielens", "movielens"), load_config(exporter / EXPORTER_CONFIG).config
    for field in ("name", "max_batch_size", "backend", "input", "output", "instance_group"):
        assert getattr(ours, field) == getattr(theirs, field), field
    ours_p = {k: v.string_value for k, v in ours.parameters.items()}
    theirs_p = {k: v.string_value for k, v in theirs.parameters.items()}
    assert set(ours_p) - set(theirs_p) == {"hit_rate_threshold"}
    assert set(theirs_p) <= set(ours_p)
    differ = {k for k in theirs_p if ours_p[k] != theirs_p[k]}
    assert differ == {"config", "max_nnz"}, {k: (ours_p[k], theirs_p[k]) for k in differ}
    assert set(IMPROVEMENTS) == differ | {"hit_rate_threshold"}
    assert ours_p["config"] == "/model/movielens/1/movielens.json"
    assert ours_p["max_nnz"] == "2"          # seed 000 trains with nnz_per_slot 2; the fixture declared 1


def test_nvt_and_ensemble_configs_follow_the_exporter_layout():
    nvt = cfg("movielens", "movielens_nvt")
    assert nvt.name == "movielens_nvt" and nvt.backend == "python" and nvt.max_batch_size == 64
    assert [(i.name, mc.DataType.Name(i.data_type), list(i.dims)) for i in nvt.input] == [
        ("userId", "TYPE_INT64", [-1]), ("movieId", "TYPE_INT64", [-1])]
    assert [(o.name, mc.DataType.Name(o.data_type)) for o in nvt.output] == [
        ("DES", "TYPE_FP32"), ("CATCOLUMN", "TYPE_INT64"), ("ROWINDEX", "TYPE_INT32")]
    assert nvt.parameters["cats"].string_value == '["userId", "movieId"]'
    assert nvt.parameters["conts"].string_value == "[]"
    assert nvt.parameters["output_model"].string_value == "hugectr"
    # Configurable kind (R11); the exporter hard-coded KIND_CPU.
    assert [mc.ModelInstanceGroup.Kind.Name(g.kind) for g in nvt.instance_group] == ["KIND_CPU"]

    ens = cfg("movielens", "movielens_ens")
    assert ens.platform == "ensemble" and ens.max_batch_size == nvt.max_batch_size
    # The same tensors; only the python model may batch requests of other lengths (the ensemble batches nothing).
    assert all(i.allow_ragged_batch for i in nvt.input) and not any(i.allow_ragged_batch for i in ens.input)
    assert [(i.name, i.data_type, list(i.dims)) for i in ens.input] == [
        (i.name, i.data_type, list(i.dims)) for i in nvt.input]
    assert [o.name for o in ens.output] == ["OUTPUT0"]
    first, second = ens.ensemble_scheduling.step
    assert first.model_name == "movielens_nvt" and second.model_name == "movielens"
    assert dict(first.input_map) == {"userId": "userId", "movieId": "movieId"}
    assert dict(first.output_map) == {x: f"{x}_nvt" for x in ("DES", "CATCOLUMN", "ROWINDEX")}
    assert dict(second.input_map) == {x: f"{x}_nvt" for x in ("DES", "CATCOLUMN", "ROWINDEX")}
    assert dict(second.output_map) == {"OUTPUT0": "OUTPUT0"}
    assert (GENERATED / "movielens" / "triton" / "movielens_ens" / "1").is_dir()


@pytest.mark.parametrize("name", ALL_SPECS)
def test_ps_json_agrees_with_config_and_graph(name):
    triton = GENERATED / name / "triton"
    ps = json.loads((triton / "ps.json").read_text())
    (entry,) = ps["models"]
    config = cfg(name, name)
    params = {k: v.string_value for k, v in config.parameters.items()}
    graph = json.loads((GENERATED / name / f"{name}.json").read_text())
    # generated/ keeps the graph JSON once: the repository's <name>/1/<name>.json is <name>.json (`ctrgen assemble`)
    assert not (triton / name / "1" / f"{name}.json").exists()
    assert repository_sources(GENERATED / name, "triton")[PurePosixPath(name, "1", f"{name}.json")] == \
        GENERATED / name / f"{name}.json"
    embeddings = [layer for layer in graph["layers"] if "sparse_embedding_hparam" in layer]
    data = graph["layers"][0]
    assert entry["model"] == config.name == name
    assert entry["max_batch_size"] == config.max_batch_size
    assert entry["network_file"] == params["config"]
    assert entry["embedding_table_names"] == [e["top"] for e in embeddings]
    assert entry["embedding_vecsize_per_table"] == [e["sparse_embedding_hparam"]["embedding_vec_size"]
                                                    for e in embeddings]
    assert len(entry["sparse_files"]) == len(entry["default_value_for_each_table"]) == len(embeddings)
    assert entry["slot_num"] == int(params["slots"]) == sum(s["slot_num"] for s in data["sparse"])
    assert entry["maxnum_des_feature_per_sample"] == int(params["des_feature_num"]) == data["dense"]["dense_dim"]
    assert sum(entry["maxnum_catfeature_query_per_table_per_sample"]) == int(params["cat_feature_num"])
    assert params["gpucache"] == json.dumps(entry["gpucache"])
    assert float(params["gpucacheper"]) <= entry["gpucacheper"]
    # 64-bit keys from the Parquet locks' int64 ids; the Norm spec (seed 003) trains on 32-bit keys, as its data has.
    long_keys = name != "wdl_continuous"
    assert ps["supportlonglong"] is long_keys and params["embeddingkey_long_type"] == str(long_keys).lower()


@pytest.mark.parametrize("name", ALL_SPECS)
def test_validate_passes_the_generated_repository(name):
    # --spec checks against the spec's own columns of its lock (the Criteo specs share one lock and may use a subset).
    result = run_ctrgen("validate", str(GENERATED / name / "triton"), "--spec", f"specs/{name}.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 errors" in result.stdout
    # With /model mapped onto the repository, only the trained files that `ctrgen assemble` adds are missing.
    mapped = validate_repository(GENERATED / name / "triton", root_map={"/model": GENERATED / name / "triton"})
    assert {f.field for f in mapped if f.severity == ERROR} == {"dense_file", "sparse_files"}


def test_validate_with_the_whole_shared_lock_reports_the_columns_a_spec_leaves_out():
    # deepfm_vertex trains on C1..C26 of the Criteo lock's 27 columns: the whole lock disagrees, the spec does not.
    whole = run_ctrgen("validate", str(GENERATED / "deepfm_vertex" / "triton"),
                       "--features-lock", "specs/criteo.features.lock.json")
    assert whole.returncode == 1
    # (the repository's own graph JSON stands for /model/... without --root-map)
    assert "slot_num: Σ slot_num 26" in whole.stdout and "!= the 27 categorical columns" in whole.stdout
    spec = run_ctrgen("validate", str(GENERATED / "deepfm_vertex" / "triton"), "--spec", "specs/deepfm_vertex.yaml")
    assert spec.returncode == 0, spec.stdout + spec.stderr
    # Another spec's columns (wdl has the C1_C2 cross first) are reported against its repository.
    other = run_ctrgen("validate", str(GENERATED / "wdl" / "triton"), "--spec", "specs/deepfm_vertex.yaml")
    assert other.returncode == 1 and "slot_num: Σ slot_num 27" in other.stdout
    assert "!= the 26 categorical columns" in other.stdout


def test_validate_refuses_both_training_sides():
    r = run_ctrgen("validate", str(GENERATED / "wdl" / "triton"), "--spec", "specs/wdl.yaml",
                   "--features-lock", "specs/criteo.features.lock.json")
    assert r.returncode == 2
    assert "--features-lock and --spec both name the training side" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_generation_is_deterministic_across_hash_seeds(tmp_path):
    """Two specs in one process per hash seed (a process each: the seed is read at interpreter start): every file
    byte-identical, the Triton repositories among them; wdl's PyTorch repository equal to the committed one too."""
    outs = []
    for seed in ("0", "12345"):
        out = tmp_path / seed
        r = run_ctrgen("generate", "specs/movielens_genres.yaml", "specs/wdl.yaml", "--out", str(out),
                       env={"PYTHONHASHSEED": seed, "LC_ALL": "C"})
        assert r.returncode == 0, r.stderr
        outs.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outs[0] == outs[1]
    assert any(str(p).startswith("movielens_genres/triton/") for p in outs[0])
    torch_repo = PurePosixPath("wdl", "triton_torch")
    committed = GENERATED / "wdl" / "triton_torch"   # (bytecode of tests that import its models is not ours)
    assert {str(p.relative_to(torch_repo)): b for p, b in outs[0].items() if p.is_relative_to(torch_repo)} == \
        {str(p.relative_to(committed)): p.read_bytes() for p in sorted(committed.rglob("*"))
         if p.is_file() and "__pycache__" not in p.parts}


def test_hostile_names_are_escaped(tmp_path):
    """Column names from a lock reach config.pbtxt, ps.json and model.py only through protobuf / JSON / repr."""
    hostile = 'x"\n} input { name: "evil" } #\'"""'
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "m.yaml").write_text((REPO / "specs" / "movielens.yaml").read_text())
    lock = json.loads((REPO / "specs" / "movielens.features.lock.json").read_text())
    lock["categorical"][0]["name"] = hostile
    lock["inputs"] = [{"name": hostile, "dtype": "int64"}, {"name": "movieId", "dtype": "int64"}]
    (specs / "m.features.lock.json").write_text(json.dumps(lock))
    rendered = render_spec(open_spec(specs / "m.yaml"))
    files = {str(k): v for k, v in rendered.files.items()}
    nvt = text_format.Parse(files["triton/movielens_nvt/config.pbtxt"], mc.ModelConfig())
    assert [i.name for i in nvt.input] == [hostile, "movieId"]
    assert json.loads(nvt.parameters["cats"].string_value) == [hostile, "movieId"]
    ens = text_format.Parse(files["triton/movielens_ens/config.pbtxt"], mc.ModelConfig())
    assert hostile in dict(ens.ensemble_scheduling.step[0].input_map)
    source = files["triton/movielens_nvt/1/model.py"]
    compile(source, "model.py", "exec")
    namespace: dict = {}
    exec(compile(source.split("import triton_python_backend_utils")[0] + "\n", "head", "exec"), namespace)  # header
    assert repr(hostile) in source and "evil" not in source.replace(repr(hostile), "")


def test_opt_out_and_settings(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(REPO / "specs" / "movielens.features.lock.json", specs / "m.features.lock.json")
    base = (REPO / "specs" / "movielens.yaml").read_text()
    (specs / "m.yaml").write_text(base + "triton: {enabled: false}\n")
    assert not any(str(p).startswith("triton/") for p in render_spec(open_spec(specs / "m.yaml")).files)
    (specs / "m.yaml").write_text(base + """triton:
  max_batch_size: 512
  model_root: /srv/models
  preprocessing: {instance: {kind: KIND_GPU, gpus: [1]}}
  hugectr: {gpus: [0, 1], count: 2, gpucache: false, output_name: score}
""")
    r = render_spec(open_spec(specs / "m.yaml"))
    files = {str(k): v for k, v in r.files.items()}
    hug = text_format.Parse(files["triton/movielens/config.pbtxt"], mc.ModelConfig())
    assert hug.max_batch_size == 512 and list(hug.instance_group[0].gpus) == [0, 1] and hug.instance_group[0].count == 2
    assert hug.parameters["config"].string_value == "/srv/models/movielens/1/movielens.json"
    assert hug.parameters["gpucache"].string_value == "false" and hug.output[0].name == "score"
    nvt = text_format.Parse(files["triton/movielens_nvt/config.pbtxt"], mc.ModelConfig())
    assert mc.ModelInstanceGroup.Kind.Name(nvt.instance_group[0].kind) == "KIND_GPU"
    entry = json.loads(files["triton/ps.json"])["models"][0]
    assert entry["deployed_device_list"] == [0, 1] and entry["num_of_worker_buffer_in_pool"] == 2
    assert entry["gpucache"] is False and entry["max_batch_size"] == 512


def test_bad_triton_settings_are_user_errors(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(REPO / "specs" / "movielens.features.lock.json", specs / "m.features.lock.json")
    (specs / "m.yaml").write_text((REPO / "specs" / "movielens.yaml").read_text()
                                  + "triton: {hugectr: {count: 3, num_of_worker_buffer_in_pool: 2}}\n")
    r = run_ctrgen("generate", str(specs / "m.yaml"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "num_of_worker_buffer_in_pool" in r.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_assemble_names_the_missing_file(tmp_path):
    """Each refusal in turn, down to a workflow.pkl that does not load with NVTabular (assemble proves it in a process
    of its own), then a real workflow passes."""
    from codegen.demo.etl import import_nvtabular

    import_nvtabular()      # here, not in the in-process ctrgen below: its first import sets an environment variable
    wf = tmp_path / "wf"
    wf.mkdir()
    (wf / "workflow.pkl").write_bytes(b"")
    weights = tmp_path / "weights"
    weights.mkdir()
    r = run_ctrgen("assemble", "specs/movielens.yaml", "--workflow", str(wf), "--weights", str(weights),
                   "--out", str(tmp_path / "repo"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert str(weights / "_dense_1900.model") in r.stderr and "/model/movielens/1/_dense_1900.model" in r.stderr
    assert not (tmp_path / "repo").exists()
    (weights / "_dense_1900.model").write_bytes(b"\0" * 8)
    r = run_ctrgen("assemble", "specs/movielens.yaml", "--workflow", str(wf), "--weights", str(weights),
                   "--out", str(tmp_path / "repo"))
    assert r.returncode == 2 and "0_sparse_1900.model" in r.stderr
    (weights / "0_sparse_1900.model").mkdir()
    for part in ("key", "emb_vector"):
        (weights / "0_sparse_1900.model" / part).write_bytes(b"")
    # The files are there; the workflow is checked against the lock last: an unreadable one is refused ...
    r = run_ctrgen("assemble", "specs/movielens.yaml", "--workflow", str(wf), "--weights", str(weights),
                   "--out", str(tmp_path / "repo"))
    assert r.returncode == 2 and str(wf) in r.stderr and not (tmp_path / "repo").exists()
    # ... one whose saved schema (the output_schema.pbtxt ctrgen's ETL helpers write) has the lock's columns, but
    # whose workflow.pkl does not load, is refused too (assemble proves the preprocessing model can load it) ...
    write_output_schema(wf, MOVIELENS, label="rating")
    r = run_ctrgen("assemble", "specs/movielens.yaml", "--workflow", str(wf), "--weights", str(weights),
                   "--out", str(tmp_path / "repo"))
    assert r.returncode == 2 and f"{wf / 'workflow.pkl'}: --workflow: does not load with NVTabular" in r.stderr
    # ... and a real one passes (the demo's saved workflow, its schema with the lock's cardinalities).
    from tests.test_triton_torch_repo import locked_movielens_workflow

    r = run_ctrgen("assemble", "specs/movielens.yaml", "--workflow", str(locked_movielens_workflow()), "--weights",
                   str(weights), "--out", str(tmp_path / "repo"))
    assert r.returncode == 0, r.stderr
    assert "tritonserver --model-repository=/model --backend-config=hugectr,ps=/model/ps.json" in r.stdout
    repo = tmp_path / "repo"
    assert (repo / "movielens_nvt" / "1" / "workflow" / "workflow.pkl").is_file()
    assert (repo / "movielens_ens" / "1").is_dir()
    findings = validate_repository(repo, root_map={"/model": repo})
    # (a warning may remain: seed 000 declares nnz_per_slot 2 for one-hot columns; cat_feature_num covers the data)
    assert [f for f in findings if f.severity == ERROR] == []
    help_text = run_ctrgen("assemble", "--help").stdout
    assert "Examples:" in help_text


def test_unplannable_repositories_name_the_field(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    lock = json.loads((REPO / "specs" / "movielens.features.lock.json").read_text())
    (specs / "m.features.lock.json").write_text(json.dumps(lock))
    text = (REPO / "specs" / "movielens.yaml").read_text()
    (specs / "m.yaml").write_text(text.replace("  max_iter: 2000", "  num_epochs: 1")
                                  .replace("  repeat_dataset: true", "  repeat_dataset: false"))
    r = run_ctrgen("generate", str(specs / "m.yaml"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "triton.hugectr.snapshot_iteration" in r.stderr and "Traceback" not in r.stderr
    (specs / "m.yaml").write_text(text)
    lock["inputs"] = [{"name": "userId", "dtype": "complex128"}]
    (specs / "m.features.lock.json").write_text(json.dumps(lock))
    r = run_ctrgen("generate", str(specs / "m.yaml"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "m.features.lock.json: inputs[0]:" in r.stderr and "complex128" in r.stderr
    assert not (tmp_path / "out").exists()


def test_check_covers_the_triton_repository(tmp_path):
    out = tmp_path / "gen"
    assert run_ctrgen("generate", "specs/movielens.yaml", "--out", str(out)).returncode == 0
    assert run_ctrgen("check", "specs/movielens.yaml", "--out", str(out)).returncode == 0
    ps = out / "movielens" / "triton" / "ps.json"
    ps.write_text(ps.read_text().replace('"max_batch_size": 64', '"max_batch_size": 32'))
    r = run_ctrgen("check", "specs/movielens.yaml", "--out", str(out))
    assert r.returncode == 1 and "triton/ps.json" in r.stdout
