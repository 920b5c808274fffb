"""`ctrgen serve` and `ctrgen query` end to end, on data no other test uses: a small synthetic ad log (string, int
and float columns, nulls, two labels) with its own NVTabular workflow -> ctrgen lock -> generate -> train_torch.py
(CPU, a few iterations) -> assemble --checkpoint -> `ctrgen serve` as a real background process -> raw rows through
the ensemble over HTTP -> the offline scores, a column per label (issue 41 item 3) -> SIGTERM -> no process left.

One `ctrgen serve` process for the module (xdist group: one worker); the bad-input tests that need a server of their
own start it only as far as the failure, and `ctrgen query REPO` starts its private one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
import torch

from tests.conftest import REPO, run_ctrgen
from tests.test_torch_target import train

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ctrgen_serve")]     # one worker, one server
NAME = "adlog"
SITES = [f"site{i:02d}" for i in range(12)]
LABELS = ["clicked", "liked"]
DTYPES = {"site": np.int64, "device": np.int64, "hour": np.int64, "price": np.float32, "clicked": np.float32,
          "liked": np.float32}
# A shared layer and a tower per label (tests/test_multilabel.py's MMoE-like spec, smaller).
TWO_LABEL_MODEL = """model:
  preset: layers
  layers:
    - {type: Reshape, bottom: sparse_embedding1, top: r, leading_dim: 24}
    - {type: Concat, bottom: [r, dense], top: x}
    - {type: InnerProduct, bottom: x, top: shared, num_output: 16}
    - {type: ReLU, bottom: shared, top: shared_relu}
    - {type: InnerProduct, bottom: shared_relu, top: a_fc, num_output: 1}
    - {type: InnerProduct, bottom: shared_relu, top: b_fc, num_output: 1}
    - {type: BinaryCrossEntropyLoss, bottom: [a_fc, clicked], top: loss_a}
    - {type: BinaryCrossEntropyLoss, bottom: [b_fc, liked], top: loss_b}
features: {label: [clicked, liked]}
"""


def _synthetic_log(rows: int, rng: np.random.Generator) -> pd.DataFrame:
    """Clicks driven by site, device and price (so training learns), with nulls in price; a second label of its own
    (liked: the hour)."""
    site = rng.integers(0, len(SITES), rows)
    device = rng.integers(0, 7, rows) * 13 + 5
    hour = rng.integers(0, 24, rows)
    price = rng.gamma(2.0, 3.0, rows).astype(np.float32)
    logit = (site % 3 - 1.0) + 0.4 * (device % 2) - 0.15 * (price - 6.0)
    clicked = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    price[rng.random(rows) < 0.05] = np.nan
    return pd.DataFrame({"site": np.array(SITES, dtype=object)[site], "device": device.astype(np.int64),
                         "hour": hour.astype(np.int64), "price": price, "clicked": clicked,
                         "liked": (hour < 12).astype(np.float32)})


def _etl(root: Path) -> dict[str, Path]:
    from codegen.demo import etl

    nvt = etl.import_nvtabular()
    from merlin.schema import Tags

    rng = np.random.default_rng(20261125)
    raw = root / "raw"
    raw.mkdir(parents=True)
    _synthetic_log(3000, rng).to_parquet(raw / "train.parquet")
    _synthetic_log(400, rng).to_parquet(raw / "valid.parquet")
    ops = nvt.ops
    cats = ["site", "device", "hour"] >> ops.Categorify()
    conts = ["price"] >> ops.FillMissing() >> ops.Normalize(out_dtype="float32")
    label = LABELS >> ops.AddMetadata(tags=[Tags.BINARY_CLASSIFICATION.value, "target"])
    workflow = nvt.Workflow(cats + conts + label)
    paths = etl.fit_transform_save(workflow, raw / "train.parquet", raw / "valid.parquet", root / "etl",
                                   cats=["site", "device", "hour"], conts=["price"], labels=LABELS,
                                   dtypes=DTYPES, seed=7)
    return {**paths, "raw": raw}


def spec_text(etl_dir: Path) -> str:
    return f"""version: 1
name: {NAME}
hugectr_version: "23.06"
workflow: etl/workflow
data:
  format: parquet
  train: [{json.dumps(str(etl_dir / 'train' / '_file_list.txt'))}]
  eval: {json.dumps(str(etl_dir / 'valid' / '_file_list.txt'))}
solver: {{vvgpu: [[0]], batchsize: 256, batchsize_eval: 256, max_eval_batches: 2, lr: 0.001}}
optimizer: {{type: Adam}}
input:
  sparse:
    - {{name: data1, nnz_per_slot: 1, is_fixed_length: true}}
embeddings:
  - {{name: sparse_embedding1, input: data1, embedding_vec_size: 8, workspace_size_per_gpu_in_mb: 0,
      slot_size_array: true}}
{TWO_LABEL_MODEL}training: {{max_iter: 60, display: 60, eval_interval: 60, snapshot: 1000}}
targets: [hugectr, torch]
triton:
  preprocessing:
    instance: {{count: 1}}           # one backend process (tests/test_demo_serve.py serves the default two)
  torch:
    instance: {{kind: KIND_CPU}}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


@contextlib.contextmanager
def serve_process(repo: Path, *extra: str, ports: tuple[int, int, int] | None = None):
    """`ctrgen serve REPO` as a background process; yields (process, http port, stdout file)."""
    http, grpc, metrics = ports or (_free_port(), _free_port(), _free_port())
    out = tempfile.NamedTemporaryFile(prefix="ctrgen-serve-out-", delete=False)
    proc = subprocess.Popen([sys.executable, "-m", "codegen", "serve", str(repo), "--http-port", str(http),
                             "--grpc-port", str(grpc), "--metrics-port", str(metrics), *extra],
                            stdout=out, stderr=subprocess.STDOUT, env=_env(), cwd=REPO)
    try:
        yield proc, http, Path(out.name)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out.close()
        os.unlink(out.name)


def wait_for_line(proc: subprocess.Popen, out: Path, needle: str, timeout: float = 240.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = out.read_text(errors="replace")
        if needle in text or proc.poll() is not None:
            return text
        time.sleep(0.2)
    return out.read_text(errors="replace")


@pytest.fixture(scope="module")
def deployed():
    root = Path(tempfile.mkdtemp(prefix="ctrgen-serve-test-"))
    try:
        paths = _etl(root)
        spec = root / f"{NAME}.yaml"
        spec.write_text(spec_text(paths["train"].parent))
        for args in (("lock", str(spec)), ("generate", str(spec), "--out", str(root / "generated"))):
            result = run_ctrgen(*args)
            assert result.returncode == 0, result.stderr
        generated = root / "generated" / NAME
        checkpoint = root / "checkpoint"
        metrics = train(generated, checkpoint, 60, 128)
        repo = root / "repo"
        result = run_ctrgen("assemble", str(spec), "--workflow", str(paths["workflow"]), "--checkpoint",
                            str(checkpoint), "--generated", str(generated), "--out", str(repo))
        assert result.returncode == 0, result.stderr
        with serve_process(repo) as (proc, http, out):
            text = wait_for_line(proc, out, "Serving ")
            assert proc.poll() is None, text
            yield {"root": root, "repo": repo, "checkpoint": checkpoint, "raw": paths["raw"], "proc": proc,
                   "http": http, "out": out, "metrics": metrics, "spec": spec, "workflow": paths["workflow"]}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _request_rows(raw: Path) -> pd.DataFrame:
    """Validation rows plus rows the workflow never saw: an unknown site and device, and null prices."""
    rows = pd.read_parquet(raw / "valid.parquet").head(120).reset_index(drop=True)
    odd = rows.head(4).copy()
    odd.loc[0, "site"] = "site-never-seen"
    odd.loc[1, "device"] = 987654
    odd.loc[2, "price"] = np.nan
    odd.loc[3, ["site", "price"]] = ["another-new-site", np.nan]
    return pd.concat([rows, odd], ignore_index=True)


def test_the_ready_line_names_the_urls_and_models(deployed):
    """Seconds in its setup: the module's `ctrgen serve` process (ETL, training, assembly, a real Triton server)
    starts here."""
    text = deployed["out"].read_text()
    line = next(line for line in text.splitlines() if line.startswith("Serving "))
    assert f"http://127.0.0.1:{deployed['http']}" in line
    for model in (f"{NAME}_ens", f"{NAME}_nvt", NAME):
        assert model in line
    with urllib_get(f"http://127.0.0.1:{deployed['http']}/v2/health/ready") as status:
        assert status == 200


@contextlib.contextmanager
def urllib_get(url: str):
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as r:
        yield r.status


def test_raw_rows_score_like_the_offline_model(deployed, tmp_path):
    frame = _request_rows(deployed["raw"])
    assert frame["price"].isna().sum() >= 2 and (frame["site"] == "site-never-seen").any()
    data = tmp_path / "rows.parquet"
    frame.to_parquet(data)
    result = run_ctrgen("query", f"http://127.0.0.1:{deployed['http']}", "--data", str(data), "--batch-size", "16",
                        "--compare", str(deployed["checkpoint"]), "--repo", str(deployed["repo"]))
    assert result.returncode == 0, result.stderr
    lines = [line.split("\t") for line in result.stdout.splitlines() if "\t" in line]
    assert lines[0] == ["row", *LABELS]                  # a column per label, named
    assert [int(i) for i, *_ in lines[1:]] == list(range(len(frame)))
    served = np.array([[float(s) for s in scores] for _, *scores in lines[1:]])
    assert served.shape == (len(frame), 2)
    assert np.isfinite(served).all() and ((served > 0) & (served < 1)).all()
    assert not np.allclose(served[:, 0], served[:, 1])             # two towers, two different scores
    assert [line.split(":")[0] for line in result.stdout.splitlines()[-2:]] == [
        f"served = offline ({label})" for label in LABELS]

    # The same comparison computed here: the workflow in this process, the trained Model, a sigmoid.
    from codegen.serve.offline import offline_scores

    offline = offline_scores(deployed["repo"], f"{NAME}_ens", deployed["checkpoint"], frame[["site", "device",
                                                                                             "hour", "price"]])
    assert offline.shape == (len(frame), 2)
    assert np.abs(offline - served).max() < 1e-6    # printed with 8 significant digits
    # Rows with an unseen category or a null are scored, and differently from the row they were copied from.
    assert served[-4, 0] != served[0, 0] and served[-2, 0] != served[2, 0]


def test_query_of_a_csv_file(deployed, tmp_path):
    """CSV input (typed by the ensemble's inputs; an empty price is a null). A repository folder instead of a URL
    (a private server for the query): test_query_of_a_repository_folder_starts_and_stops_a_private_server."""
    frame = pd.read_parquet(deployed["raw"] / "valid.parquet").head(10)
    frame.loc[3, "price"] = np.nan
    data = tmp_path / "rows.csv"
    frame.to_csv(data, index=False)
    assert ",," in data.read_text()
    result = run_ctrgen("query", f"http://127.0.0.1:{deployed['http']}", "--data", str(data), "--compare",
                        str(deployed["checkpoint"]), "--repo", str(deployed["repo"]), "-q")
    assert result.returncode == 0, result.stderr
    assert "served = offline (clicked)" in result.stdout and "served = offline (liked)" in result.stdout
    assert "10 row(s) scored" in result.stderr


def test_query_of_a_repository_folder_starts_and_stops_a_private_server(deployed, tmp_path):
    """Seconds: `ctrgen query REPO --compare` starts a Triton server of its own on free ports (its two python-backend
    processes import NVTabular and torch) for the query and stops it: a column per label, each equal offline (issue
    41 item 3: several labels served); CSV rows; the private server and its python stubs gone afterwards."""
    rows = tmp_path / "rows.csv"
    pd.read_parquet(deployed["raw"] / "valid.parquet").head(60).to_csv(rows, index=False)
    result = run_ctrgen("query", str(deployed["repo"]), "--data", str(rows), "--rows", "50", "--batch-size", "16",
                        "--compare", str(deployed["checkpoint"]))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "50 row(s) scored" in result.stderr
    # The private server and its python stubs (their command lines name the repository) are gone; the module's
    # server (started from the same repository) is still serving.
    module = {deployed["proc"].pid, *(p.pid for p in psutil.Process(deployed["proc"].pid).children(recursive=True))}
    left = [p for p in psutil.process_iter() if str(deployed["repo"]) in " ".join(_cmd(p)) and p.pid not in module]
    assert not left, [(p.pid, _cmd(p)) for p in left]
    lines = result.stdout.splitlines()
    assert lines[0] == "row\tclicked\tliked"
    scores = np.array([[float(x) for x in line.split("\t")[1:]] for line in lines[1:51]])
    assert scores.shape == (50, 2) and ((scores > 0) & (scores < 1)).all()
    assert not np.allclose(scores[:, 0], scores[:, 1])
    assert [line.split(":")[0] for line in lines[51:]] == ["served = offline (clicked)", "served = offline (liked)"]


def still_running(procs: list) -> list:
    """Those of ``procs`` not ended within 2 s. A killed python stub whose server ended first is reaped by init, on
    init's schedule: as a zombie it runs nothing and holds no memory, and counts as ended."""
    _, alive = psutil.wait_procs(procs, timeout=2)
    out = []
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            if proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
    return out


def _cmd(proc) -> list[str]:
    with contextlib.suppress(psutil.Error):
        return proc.cmdline()
    return []


def test_a_query_file_missing_a_column_is_one_line(deployed, tmp_path):
    data = tmp_path / "rows.parquet"
    pd.read_parquet(deployed["raw"] / "valid.parquet").drop(columns=["hour"]).head(5).to_parquet(data)
    result = run_ctrgen("query", f"http://127.0.0.1:{deployed['http']}", "--data", str(data))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert str(data) in result.stderr and "'hour'" in result.stderr and "fix:" in result.stderr


def test_a_null_in_an_integer_column_is_one_line_naming_the_row(deployed, tmp_path):
    """INT64 tensors cannot carry a null (a float column can: NaN, as the null prices above)."""
    frame = pd.read_parquet(deployed["raw"] / "valid.parquet").head(6)
    frame["device"] = frame["device"].astype("Int64")
    frame.loc[4, "device"] = pd.NA
    data = tmp_path / "rows.parquet"
    frame.to_parquet(data)
    result = run_ctrgen("query", f"http://127.0.0.1:{deployed['http']}", "--data", str(data))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"{data}: device: row 4 is null, and an input of type INT64 cannot carry a null")


def test_a_corrupt_checkpoint_for_compare_is_one_line(deployed, tmp_path):
    bad = tmp_path / "checkpoint"
    shutil.copytree(deployed["checkpoint"], bad)
    (bad / "model.pt").write_bytes(b"PK\x03\x04 not really a zip" * 10)
    data = tmp_path / "rows.parquet"
    pd.read_parquet(deployed["raw"] / "valid.parquet").head(5).to_parquet(data)
    result = run_ctrgen("query", f"http://127.0.0.1:{deployed['http']}", "--data", str(data), "--compare", str(bad),
                        "--repo", str(deployed["repo"]), "-q")
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if "model.pt" in line]
    assert len(errors) == 1 and "--compare" in errors[0] and "Traceback" not in result.stderr


def test_a_busy_port_is_refused_before_starting(deployed):
    result = run_ctrgen("serve", str(deployed["repo"]), "--http-port", str(deployed["http"]), "--grpc-port",
                        str(_free_port()), "--metrics-port", str(_free_port()))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"127.0.0.1:{deployed['http']}: --http-port: port {deployed['http']} is in use "
                                     "(fix: stop what listens there, or pass --http-port with a free port)")


def test_a_server_binary_missing_from_the_wheel_is_one_line(deployed, tmp_path):
    """A pytriton install without its tritonserver binary (found first on the path): named, exit 2."""
    broken = tmp_path / "site" / "pytriton"
    (broken / "tritonserver" / "bin").mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path / "site")])}
    result = subprocess.run([sys.executable, "-m", "codegen", "serve", str(deployed["repo"]), "--http-port",
                             str(_free_port()), "--grpc-port", str(_free_port()), "--metrics-port", str(_free_port())],
                            capture_output=True, text=True, env={**os.environ, **env}, cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert str(broken / "tritonserver" / "bin" / "tritonserver") in result.stderr
    assert "missing or not executable" in result.stderr and "nvidia-pytriton==0.7.0" in result.stderr


def test_a_repository_that_fails_validation_is_refused_with_the_findings(deployed, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(deployed["repo"], repo, ignore=shutil.ignore_patterns("model.pt", "workflow"))
    config = repo / f"{NAME}_ens" / "config.pbtxt"
    text = config.read_text()
    assert 'model_name: "adlog"' in text
    config.write_text(text.replace('model_name: "adlog"', 'model_name: "adlog_missing"'))
    result = run_ctrgen("serve", str(repo), "--http-port", str(_free_port()))
    assert result.returncode == 2
    assert "adlog_missing" in result.stderr and "ctrgen validate" in result.stderr
    assert "Traceback" not in result.stderr and "Serving" not in result.stdout


def test_a_checkpoint_that_fails_to_load_names_the_model_and_the_servers_message(deployed, tmp_path):
    """Seconds: a real Triton server of its own must start and fail to load the model, to read the server's own
    message (`ctrgen serve` in this process: its exit status and output are under test, not its process). The
    repository holds the PyTorch model alone (with the runtime it imports): no preprocessing backend process. The
    message is the runtime's, through the server: model.pt does not fit the Model (a strict load_state_dict, which
    names the keys); assemble cannot see inside model.pt, so this is where such a checkpoint is caught."""
    repo = tmp_path / "repo"
    for part in (NAME, "codegen"):
        shutil.copytree(deployed["repo"] / part, repo / part)
    shutil.copy(deployed["repo"] / "MANIFEST.json", repo / "MANIFEST.json")
    torch.save({"fc1.weight": torch.zeros(3, 3)}, repo / NAME / "1" / "model.pt")
    result = run_ctrgen("serve", str(repo), "--http-port", str(_free_port()), "--grpc-port", str(_free_port()),
                        "--metrics-port", str(_free_port()))
    text = result.stdout + result.stderr
    assert result.returncode == 2, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in text
    assert f"model '{NAME}' failed to load" in lines[0] and "tritonserver" in lines[0]
    assert f"{NAME}: model.pt does not fit the Model of train_torch.py" in lines[0], lines[0]
    assert "sparse_embedding1.weight" in lines[0] and "fc1.weight" in lines[0], lines[0]


def test_assemble_refuses_a_workflow_that_disagrees_with_the_lock(deployed, tmp_path):
    """The same ETL fitted on part of the data: fewer sites, so 'site' has another cardinality than the lock."""
    from codegen.demo import etl

    nvt = etl.import_nvtabular()
    raw = tmp_path / "raw"
    raw.mkdir()
    train = pd.read_parquet(deployed["raw"] / "train.parquet")
    train[train["site"].isin(SITES[:5])].to_parquet(raw / "train.parquet")
    shutil.copy(deployed["raw"] / "valid.parquet", raw / "valid.parquet")
    ops = nvt.ops
    workflow = nvt.Workflow((["site", "device", "hour"] >> ops.Categorify())
                            + (["price"] >> ops.FillMissing() >> ops.Normalize(out_dtype="float32"))
                            + (LABELS >> ops.AddMetadata(tags=["binary_classification", "target"])))
    other = etl.fit_transform_save(workflow, raw / "train.parquet", raw / "valid.parquet", tmp_path / "etl",
                                   cats=["site", "device", "hour"], conts=["price"], labels=LABELS,
                                   dtypes=DTYPES, seed=7)["workflow"]
    out = tmp_path / "repo"
    result = run_ctrgen("assemble", str(deployed["spec"]), "--workflow", str(other), "--checkpoint",
                        str(deployed["checkpoint"]), "--generated",
                        str(deployed["root"] / "generated" / NAME), "--out", str(out))
    assert result.returncode == 2
    assert result.stderr.startswith(f"{other}: site: column 'site' has cardinality ")
    assert "in the workflow, " in result.stderr and "adlog.features.lock.json" in result.stderr
    assert result.stderr.count("\n") == 1 and not out.exists()


# A python model that loads at once (it imports nothing): the second server of the Ctrl-C test is about the signal.
IDLE_MODEL = {"idle/config.pbtxt": 'name: "idle"\nbackend: "python"\nmax_batch_size: 8\n'
                                   'input [{name: "X", data_type: TYPE_FP32, dims: [1]}]\n'
                                   'output [{name: "Y", data_type: TYPE_FP32, dims: [1]}]\n'
                                   'instance_group [{kind: KIND_CPU, count: 1}]\n',
              "idle/1/model.py": "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"}


def test_ctrl_c_stops_a_second_server_on_other_ports(deployed, tmp_path):
    """SIGINT (Ctrl-C) like SIGTERM; two servers side by side on their own ports. The second serves a python model
    that imports nothing (one backend process that starts at once): what SIGINT must stop is the server and its
    backend processes, whatever they run; the module's server stops a real repository's (torch, NVTabular) on
    SIGTERM below, through the same stop."""
    repo = tmp_path / "repo"
    for rel, text in IDLE_MODEL.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    with serve_process(repo) as (proc, http, out):
        text = wait_for_line(proc, out, "Serving ")
        assert "Serving " in text and f":{http}" in text and http != deployed["http"] and "models: idle" in text
        tree = psutil.Process(proc.pid).children(recursive=True)
        assert any("triton_python_backend_stub" in " ".join(_cmd(p)) for p in tree)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0, out.read_text()
        assert not still_running(tree)


def test_sigterm_stops_the_server_and_leaves_nothing_running(deployed):
    proc = deployed["proc"]
    assert proc.poll() is None
    tree = psutil.Process(proc.pid).children(recursive=True)
    assert any("tritonserver" in " ".join(_cmd(p)) for p in tree)
    assert any("triton_python_backend_stub" in " ".join(_cmd(p)) for p in tree)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, deployed["out"].read_text()        # bounded, not timed: no load-dependent limit
    alive = still_running(tree)
    assert not alive, [(p.pid, _cmd(p)) for p in alive]
    assert "Server stopped." in deployed["out"].read_text()


# A python model whose request is in flight until the test lets it go: it writes STARTED, then waits for RELEASE.
SLOW_MODEL = {"slow/config.pbtxt": 'name: "slow"\nbackend: "python"\nmax_batch_size: 8\n'
                                   'input [{name: "X", data_type: TYPE_FP32, dims: [1]}]\n'
                                   'output [{name: "Y", data_type: TYPE_FP32, dims: [1]}]\n'
                                   'instance_group [{kind: KIND_CPU, count: 1}]\n',
              "slow/1/model.py": "import os, time\n"
                                 "import triton_python_backend_utils as pb\n\n\n"
                                 "class TritonPythonModel:\n"
                                 "    def execute(self, requests):\n"
                                 "        here = os.path.dirname(__file__)\n"
                                 "        open(os.path.join(here, 'STARTED'), 'w').close()\n"
                                 "        while not os.path.exists(os.path.join(here, 'RELEASE')):\n"
                                 "            time.sleep(0.01)\n"
                                 "        out = []\n"
                                 "        for r in requests:\n"
                                 "            x = pb.get_input_tensor_by_name(r, 'X').as_numpy()\n"
                                 "            out.append(pb.InferenceResponse([pb.Tensor('Y', x * 2)]))\n"
                                 "        return out\n"}


def test_stop_lets_a_request_in_flight_finish_then_ends_the_server_and_its_stubs(tmp_path):
    """Server.stop (what `ctrgen serve` runs on Ctrl-C or SIGTERM) waits for a request in flight, then ends the
    server and its python stubs without their unload (ctrgen's models keep nothing), and removes their shared
    memory. The request is held in the model until the server has been told to stop (a handshake by files)."""
    import threading

    import tritonclient.http as client

    from tests.triton_server import SHM_GLOB, Server

    repo = tmp_path / "repo"
    for rel, text in SLOW_MODEL.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    version = repo / "slow" / "1"
    server = Server(repos=[repo], scratch=tmp_path / "scratch")
    server.start(load=["slow"])
    tree = psutil.Process(server.proc.pid).children(recursive=True)
    regions = {m.path for p in tree for m in p.memory_maps(grouped=True) if m.path.startswith(SHM_GLOB[:-1])}
    assert any("triton_python_backend_stub" in " ".join(_cmd(p)) for p in tree) and regions
    answer: dict = {}

    def ask() -> None:
        with server.http() as conn:
            x = client.InferInput("X", [1, 1], "FP32")
            x.set_data_from_numpy(np.array([[21.0]], np.float32))
            answer["y"] = conn.infer("slow", [x]).as_numpy("Y")

    asking = threading.Thread(target=ask)
    asking.start()
    deadline = time.monotonic() + 60
    while not (version / "STARTED").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (version / "STARTED").exists()
    stopping = threading.Thread(target=server.stop)
    stopping.start()
    while "Timeout" not in server.log_text() and time.monotonic() < deadline:     # the server counts in-flight requests
        time.sleep(0.01)
    (version / "RELEASE").touch()
    asking.join(timeout=60)
    stopping.join(timeout=60)
    assert answer["y"].tolist() == [[42.0]]
    assert server.proc.poll() is not None and not still_running(tree)
    assert "successfully unloaded" not in server.log_text()        # ended, not unloaded
    assert not any(os.path.exists(r) for r in regions)
