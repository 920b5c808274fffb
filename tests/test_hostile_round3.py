"""Hostile inputs, third round (issue 43): the commands other than the trainer. Each refusal is one line naming the
file, exit 2, no traceback, nothing written; each accepted input gives a correct output."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

from conftest import REPO, run_ctrgen

RUN = {"ctrgen": "0.1.0", "name": "m", "spec": "m.yaml", "spec_sha256": "0" * 64, "command": ["python", "t.py"],
       "data": {"--train": ["t.txt"]}, "generated": {"model.py": "1" * 64},
       "graph": {"nodes": [["a", ["input"], "input"], ["b", ["loss"], "loss"]], "edges": [["a", "b"]]},
       "hardware": {"machine": "x86_64", "cpus": 2, "system": "Linux", "python": "3.11", "gpus": []}}
METRICS = {"iterations": 2, "auc": 0.7, "samples_per_second": 10.0, "peak_memory_bytes_per_rank": [1024]}
POINTS = "".join(json.dumps({"step": s, "tag": "train/loss", "value": v}) + "\n" for s, v in ((1, 0.5), (2, 0.4)))


def run_folder(d: Path, run: dict | str = RUN, metrics: dict | str = METRICS, points: str | bytes = POINTS) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(run if isinstance(run, str) else json.dumps(run))
    (d / "metrics.json").write_text(metrics if isinstance(metrics, str) else json.dumps(metrics))
    (d / "metrics.jsonl").write_bytes(points if isinstance(points, bytes) else points.encode())
    return d


def refused(proc, *needles: str) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr
    return proc.stderr


# ---- ctrgen report --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("points, needle", [
    ('{"step": 1e400, "tag": "t", "value": 1}\n', "metrics.jsonl:1: not a point"),
    ("[" * 1000 + "]" * 1000 + "\n", "metrics.jsonl:1: not a JSON point (metrics.jsonl nests more than 64"),
    ("[" * 100_000 + "]" * 100_000 + "\n", "metrics.jsonl:1: line is more than 4096 bytes"),
    (b'{"step": 1, "tag": "t", "value": 1}\n\xff\xfe\n{"step": 2, "tag": "t", "value": 1}\n',
     "metrics.jsonl:2: not UTF-8"),
    (POINTS + "not json\n" + POINTS, "metrics.jsonl:3: not a JSON point"),
    ('{"step": true, "tag": "t", "value": 1}\n', "metrics.jsonl:1: not a point"),
], ids=["step_1e400", "deep", "100000_deep", "not_utf8", "not_json", "step_true"])
def test_report_refuses_a_bad_metrics_line_naming_it(tmp_path, points, needle):
    run = run_folder(tmp_path / "run", points=points)
    refused(run_ctrgen("report", str(run)), needle)
    assert not (run / "report.html").exists()


@pytest.mark.parametrize("run, needle", [
    ({k: v for k, v in RUN.items() if k != "graph"}, "graph: must be an object of nodes and edges, not null"),
    ({**RUN, "command": "python t.py"}, "command: must be a list of strings, not a string"),
    ({**RUN, "name": 7}, "name: must be a string, not a number"),
    ({**RUN, "graph": {"nodes": [], "edges": []}}, "graph.nodes: the model graph has no nodes"),
    ({**RUN, "graph": {"nodes": [["a", "x", "input"]], "edges": []}}, "graph.nodes[0]: must be [id, [label lines]"),
    ("[" * 100_000, "run.json nests more than 64 levels"),
    ('{"x": 1e400}', "past the largest double"),
], ids=["no_graph", "command_text", "name_number", "no_nodes", "node_shape", "deep", "1e400"])
def test_report_refuses_a_bad_run_json_in_one_line(tmp_path, run, needle):
    folder = run_folder(tmp_path / "run", run=run)
    refused(run_ctrgen("report", str(folder)), "run.json", needle)


def test_report_reads_run_json_and_metrics_jsonl_through_the_bounded_reader(tmp_path):
    folder = run_folder(tmp_path / "run")
    (folder / "run.json").write_bytes(b'{"name": "\xff"}')
    refused(run_ctrgen("report", str(folder)), "run.json:1:11: run.json is not UTF-8")
    folder = run_folder(tmp_path / "fifo")
    (folder / "metrics.jsonl").unlink()
    os.mkfifo(folder / "metrics.jsonl")
    refused(run_ctrgen("report", str(folder)), "metrics.jsonl: metrics.jsonl is not a regular file")
    folder = run_folder(tmp_path / "huge")
    with open(folder / "metrics.jsonl", "wb") as fh:
        fh.truncate(2 << 30)        # 2 GiB, a hole: refused by its size, never read
    refused(run_ctrgen("report", str(folder)), "more than the 268435456 a metrics.jsonl may have")
    folder = run_folder(tmp_path / "metrics", metrics={**METRICS, "samples_per_second": "fast"})
    refused(run_ctrgen("report", str(folder)), "metrics.json: samples_per_second: must be a number, not a string")


def test_report_reads_a_cut_last_line_as_the_end_and_draws_only_finite_points(tmp_path):
    points = POINTS + json.dumps({"step": 3, "tag": "train/loss", "value": float("nan")}) + "\n" + \
        json.dumps({"step": 4, "tag": "train/loss", "value": 1e308}) + "\n" + \
        json.dumps({"step": 5, "tag": "train/loss", "value": -1e308}) + "\n" + '{"step": 6, "tag": "tr'
    folder = run_folder(tmp_path / "run", points=points)
    proc = run_ctrgen("report", str(folder))
    assert proc.returncode == 0, proc.stderr
    page = (folder / "report.html").read_text()
    assert "4 points from metrics.jsonl" in page and "1 point(s) not drawn" in page
    assert "The last line of metrics.jsonl was cut off" in page
    coords = [float(c) for pts in re.findall(r'points="([^"]*)"', page) for p in pts.split() for c in p.split(",")]
    assert len(coords) == 2 * 4 and all(math.isfinite(c) for c in coords)


@pytest.mark.parametrize("out, needle", [
    ("folder", "is a folder, not a file"), ("missing/r.html", "its folder missing does not exist"),
    ("link.html", "is a symbolic link"),
])
def test_report_out_must_be_a_file_in_an_existing_folder(tmp_path, out, needle):
    folder = run_folder(tmp_path / "run")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link.html").symlink_to(tmp_path / "elsewhere.html")
    refused(run_ctrgen("report", str(folder), "--out", out, cwd=tmp_path), "--out", needle)
    assert not (tmp_path / "elsewhere.html").exists() and not (tmp_path / "missing").exists()
    assert not list((tmp_path / "folder").iterdir())


# ---- ctrgen etl -----------------------------------------------------------------------------------------------------

ETL = {"inputs": {"train": ["raw/r.csv"], "columns": {"userId": "int64", "movieId": "int64", "rating": "float64"}},
       "split": {"valid_fraction": 0.2},
       "groups": [{"columns": ["userId", "movieId"], "ops": ["Categorify"]},
                  {"columns": ["rating"], "ops": [{"LambdaOp": {"compare": ">", "value": 3, "dtype": "int8"}}]}],
       "output": {"dir": "data", "out_files_per_proc": 1, "shuffle": False}}
ROWS = "userId,movieId,rating\n" + "".join(f"{i % 7},{i % 5},{i % 6}.0\n" for i in range(40))
MODEL = {"version": 1, "name": "movielens", "hugectr_version": "3.3",
         "data": {"format": "parquet", "train": ["data/train/_file_list.txt"], "eval": "data/valid/_file_list.txt"},
         "features": {"label": ["rating"]}, "model": {"preset": "mlp", "units": [8]}, "targets": ["torch"]}


def etl_folder(d: Path, change=lambda etl: None, rows: str = ROWS) -> Path:
    etl = json.loads(json.dumps(ETL))
    change(etl)
    (d / "raw").mkdir(parents=True)
    (d / "raw" / "r.csv").write_text(rows)
    (d / "s.yaml").write_text(json.dumps({**MODEL, "etl": etl}))     # JSON is YAML
    return d


def _set(*path_value):
    def change(etl):
        *path, value = path_value
        node = etl
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


@pytest.mark.parametrize("change, rows, needle", [
    (_set("inputs", "columns", "<b>userId</b>", "int64"), ROWS, "may not hold '/'"),
    (_set("inputs", "columns", "../../../../x", "int64"), ROWS, "may not hold '/'"),
    (_set("split", "seed", 2**64), ROWS, "etl.split.seed: must be less than or equal to 9223372036854775807"),
    (_set("split", "valid_fraction", 1e-300), ROWS, "valid_fraction 1e-300 of the 40 train rows leaves the valid"),
    (_set("output", "part_size", "0MB"), ROWS, "etl.output.part_size: a partition is between 1KB and 64GB"),
    (_set("output", "out_files_per_proc", 1_000_000), ROWS, "(fix: use at most 10000)"),
    (_set("output", "out_files_per_proc", 2**63), ROWS, "(fix: use at most 10000)"),
    (lambda etl: None, ",".join(f"c{i}" for i in range(100_000)) + "\n1\n", "the header has 100000 columns"),
], ids=["html_column", "dotdot_column", "seed_2_64", "fraction_1e-300", "part_size_0", "files_1e6", "files_2_63",
        "100000_columns"])
def test_etl_refuses_hostile_settings_before_writing(tmp_path, change, rows, needle):
    d = etl_folder(tmp_path, change, rows)
    refused(run_ctrgen("etl", "s.yaml", "--out", "gen", cwd=d), needle)
    assert sorted(p.name for p in d.iterdir()) == ["raw", "s.yaml"]


@pytest.mark.parametrize("address, needle", [
    ("tcp://127.0.0.1:1", "cannot reach the Dask scheduler: Connection refused"),
    ("999.1.1.1:8786", "cannot reach the Dask scheduler"), ("tcp://host", "not a Dask scheduler address"),
    ("http://h:1", "not a Dask scheduler address"), ("h:99999", "not a Dask scheduler address"),
])
def test_etl_scheduler_that_is_malformed_or_unreachable_is_one_line(tmp_path, address, needle):
    d = etl_folder(tmp_path)
    refused(run_ctrgen("etl", "s.yaml", "--out", "gen", "--scheduler", address, cwd=d), f"--scheduler: {needle}")
    assert sorted(p.name for p in d.iterdir()) == ["raw", "s.yaml"]


@pytest.mark.slow
def test_etl_reads_tab_separated_files_and_quoted_headers(tmp_path):
    """Two real NVTabular ETL runs (a tab-separated file, quoted headers)."""
    from codegen.runtime.nvt_import import import_nvtabular

    import_nvtabular()      # merlin's import sets PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION once per process, not ctrgen
    tsv = etl_folder(tmp_path / "tsv", _set("inputs", "sep", "\t"), ROWS.replace(",", "\t"))
    quoted = etl_folder(tmp_path / "quoted", rows=ROWS.replace("userId,movieId,rating", '"userId","movieId","rating"'))
    for d in (tsv, quoted):
        proc = run_ctrgen("etl", "s.yaml", "--out", "gen", cwd=d)
        assert proc.returncode == 0, proc.stderr
        lock = json.loads((d / "s.features.lock.json").read_text())
        assert [(c["name"], c["cardinality"]) for c in lock["categorical"]] == [("userId", 10), ("movieId", 8)]


@pytest.mark.slow
def test_etl_refused_after_running_leaves_the_old_output_in_place(tmp_path, monkeypatch):
    """A check on the new output (Norm keys of 32 bits) refuses before the old train/, valid/, workflow/ go."""
    from codegen.errors import UserError
    from codegen.etl import run as etl_run

    d = etl_folder(tmp_path, _set("output", "format", "norm"))
    etl_run.run_etl(d / "s.yaml", out_root=d / "gen")
    before = {p: p.stat().st_ino for p in (d / "data").rglob("*")}

    def refuse(ctx, fresh):
        raise UserError.one(ctx.display, "more than 32-bit Norm keys hold", field="solver.i64_input_key")

    monkeypatch.setattr(etl_run, "_check_norm_keys", refuse)
    with pytest.raises(UserError, match="32-bit"):
        etl_run.run_etl(d / "s.yaml", out_root=d / "gen")
    assert {p: p.stat().st_ino for p in (d / "data").rglob("*")} == before
    assert not [p for p in d.iterdir() if p.name.startswith(".data.tmp")]


# ---- ctrgen port ----------------------------------------------------------------------------------------------------

def port_folder(d: Path, crlf: bool = False, version: str = '"3.3"') -> Path:
    d.mkdir(parents=True, exist_ok=True)
    text = (REPO / "specs" / "movielens.yaml").read_text().replace('hugectr_version: "3.3"', f"hugectr_version: {version}")
    (d / "s.yaml").write_bytes(text.replace("\n", "\r\n").encode() if crlf else text.encode())
    (d / "s.features.lock.json").write_bytes((REPO / "specs" / "movielens.features.lock.json").read_bytes())
    return d


@pytest.mark.parametrize("out, needle", [
    ("missing/o.yaml", "its folder missing does not exist"),
    ("s.features.lock.json", "is a features lock"),
    ("link.yaml", "is a symbolic link"),
    ("folder", "is a folder, not a file"),
])
def test_port_out_never_into_a_missing_folder_over_a_lock_or_through_a_link(tmp_path, out, needle):
    d = port_folder(tmp_path)
    (d / "folder").mkdir()
    (d / "link.yaml").symlink_to(tmp_path / "outside.yaml")
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and not p.is_symlink()}
    refused(run_ctrgen("port", "s.yaml", "--to", "3.4", "--out", out, cwd=d), "--out", needle)
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and not p.is_symlink()} == before
    assert not (tmp_path / "outside.yaml").exists() and not (d / "missing").exists()


def test_port_keeps_the_mode_and_the_line_ends_and_reads_a_str_tag(tmp_path):
    d = port_folder(tmp_path, crlf=True, version="!!str 3.3")
    os.chmod(d / "s.yaml", 0o644)
    os.chmod(d / "s.features.lock.json", 0o640)
    proc = run_ctrgen("port", "s.yaml", "--to", "3.4", "--out", "o.yaml", cwd=d)
    assert proc.returncode == 0, proc.stderr
    data = (d / "o.yaml").read_bytes()
    assert b'hugectr_version: "3.4"\r\n' in data and data.count(b"\n") == data.count(b"\r\n")
    assert (d / "o.yaml").stat().st_mode & 0o777 == 0o644
    assert (d / "o.features.lock.json").stat().st_mode & 0o777 == 0o640
    proc = run_ctrgen("port", "s.yaml", "--to", "3.4", cwd=d)        # in place: 0644 stays 0644
    assert proc.returncode == 0, proc.stderr
    assert (d / "s.yaml").stat().st_mode & 0o777 == 0o644 and (d / "s.yaml").read_bytes() == data
    (d / "t.yaml").write_text((d / "o.yaml").read_text().replace('"3.4"', "!foo 3.3"))
    refused(run_ctrgen("port", "t.yaml", "--to", "3.4", "--out", "u.yaml", cwd=d),
            "hugectr_version: must be a string, not a value tagged !foo")


# ---- ctrgen query and serve -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_query_tolerance_must_be_finite_and_not_negative(tmp_path, value):
    refused(run_ctrgen("query", "http://127.0.0.1:1", "--data", "x.csv", "--tolerance", value, cwd=tmp_path),
            "--tolerance: must be a finite number >= 0")


@pytest.mark.parametrize("url", ["https://127.0.0.1:8000", "ftp://h:1"])
def test_query_refuses_a_url_it_would_not_send_as_asked(tmp_path, url):
    (tmp_path / "x.csv").write_text("a\n1\n")
    refused(run_ctrgen("query", url, "--data", "x.csv", cwd=tmp_path), "ctrgen query speaks plain HTTP only")


def test_serve_names_the_real_cause_of_a_host_it_cannot_bind():
    import socket

    from codegen.errors import UserError
    from codegen.serve.repository import check_ports

    with pytest.raises(UserError, match="--host: not an address of this machine"):
        check_ports("999.1.1.1", {"--http-port": 18090})
    with pytest.raises(UserError, match="--host: cannot listen there"):
        check_ports("192.0.2.1", {"--http-port": 18090})      # TEST-NET-1: no interface of this machine
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(UserError, match=f"--grpc-port: port {s.getsockname()[1]} is in use"):
            check_ports("127.0.0.1", {"--grpc-port": s.getsockname()[1]})


# ---- ctrgen import: a notebook of many %%writefile cells -------------------------------------------------------------

def _writefile_notebook(path: Path, n: int) -> Path:
    cells = []
    for i in range(n):
        cells.append({"cell_type": "code", "source": f"%%writefile f{i}.py\nx = {i}\n", "metadata": {}, "outputs": []})
        cells.append({"cell_type": "code", "source": f"!python f{i}.py --lr 0.1\n", "metadata": {}, "outputs": []})
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_import_reads_a_notebook_of_many_writefile_cells_in_linear_work(tmp_path, monkeypatch):
    """The command lines of each %%writefile file were looked up by reading the whole notebook again (1k / 2k / 4k
    cells: 3.3 / 10.9 / 42.7 s). Counted, not timed: the lines scanned for a command grow as the cells do."""
    from codegen.importer import argv

    scanned = [0]

    class Counting:
        def __init__(self, pattern):
            self.pattern = pattern

        def search(self, line):
            scanned[0] += 1
            return self.pattern.search(line)

    monkeypatch.setattr(argv, "_RUN", Counting(argv._RUN))
    work = {}
    for n in (200, 400, 800):
        scanned[0] = 0
        proc = run_ctrgen("import", str(_writefile_notebook(tmp_path / f"nb{n}.ipynb", n)), "--hugectr-version",
                          "23.06", "--out", str(tmp_path / f"o{n}"))
        assert proc.returncode == 2 and "no hugectr.Model(...) is built here" in proc.stderr, proc.stderr
        work[n] = scanned[0]
    assert work[200] >= 200 and work[400] <= 2 * work[200] + 10 and work[800] <= 2 * work[400] + 10, work


# ---- the generated Vertex AI submit.py ------------------------------------------------------------------------------

def _submit():
    import importlib.util

    spec = importlib.util.spec_from_file_location("submit_vertex", REPO / "generated" / "deepfm_vertex" / "vertex" /
                                                  "submit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Refused:
    """A submit.py refusal: exit status 2 and its one line on stderr (``with _Refused(capsys, needle): ...``)."""

    def __init__(self, capsys, needle: str = ""):
        self.capsys, self.needle = capsys, needle

    def __enter__(self):
        self.capsys.readouterr()
        return self

    def __exit__(self, kind, exc, tb):
        assert kind is SystemExit and exc.code == 2, (kind, exc)
        err = self.capsys.readouterr().err
        assert err.startswith("submit.py: ") and len(err.strip().splitlines()) == 1 and self.needle in err, err
        return True


# submit.py imports the Vertex AI SDK (google-cloud-aiplatform, about 1.2 s of CPU, seconds of wall on a busy worker):
# these tests run on the worker of test_launch.py's tests that import it too (its VERTEX_SDK group).
VERTEX_SDK = pytest.mark.xdist_group("vertex_sdk")


def _job(values: dict, prefix: str = "gs://bucket/runs"):
    from types import SimpleNamespace as NS

    m = _submit()
    trials = [NS(id=tid, state=NS(name="SUCCEEDED"), parameters=[],
                 final_measurement=NS(metrics=[NS(metric_id=m.METRIC, value=v)])) for tid, v in values.items()]
    return m, NS(trials=trials, study_spec=NS(metrics=[NS(goal=NS(name="MAXIMIZE"))]), name="j",
                 trial_job_spec=NS(base_output_directory=NS(output_uri_prefix=prefix)))


@VERTEX_SDK
def test_submit_ranks_a_nan_trial_last():
    m, job = _job({"1": float("nan"), "2": 0.78, "3": 0.7})
    assert m.best_trial(job).id == "2"
    m, job = _job({"1": float("nan")})
    assert m.best_trial(job) is None


@VERTEX_SDK
@pytest.mark.parametrize("prefix, tid", [("gs://b/../../../../x", "1"), ("gs:///etc", "1"), ("/etc/model", "1"),
                                         ("gs://b/runs", "../../x"), ("gs://b/runs", "/etc")])
def test_submit_deploy_refuses_an_unchecked_trial_path(prefix, tid, capsys):
    m, job = _job({tid: 0.7}, prefix)
    with _Refused(capsys):
        m.trial_model_dir(job, job.trials[0], "/gcs")
    m, job = _job({"12": 0.7}, "gs://bucket/runs/a")
    assert m.trial_model_dir(job, job.trials[0], "/gcs") == "/gcs/bucket/runs/a/12/model"


@VERTEX_SDK
def test_submit_trials_save_and_from_json_are_checked_before_reading(tmp_path, capsys):
    """Seconds where it is the worker's first import of submit.py (the Vertex AI SDK, VERTEX_SDK above)."""
    m = _submit()
    (tmp_path / "folder").mkdir()
    for path, needle in ((tmp_path / "missing" / "j.json", "its folder does not exist"),
                         (tmp_path / "folder", "is a folder")):
        with _Refused(capsys, needle):
            m.check_save(str(path))
    fifo = tmp_path / "job.json"
    os.mkfifo(fifo)
    with _Refused(capsys, "not a regular file"):      # no hang waiting for a writer
        m.load_job(type("A", (), {"from_json": str(fifo), "job": None})())
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with _Refused(capsys, "not a tuning job's description"):
        m.load_job(type("A", (), {"from_json": str(tmp_path / "deep.json"), "job": None})())


# ---- issue 43, fourth round: the defects its cases found ------------------------------------------------------------

@pytest.mark.parametrize("value", [float("nan"), float("inf"), 0.0, -1.0])
def test_serve_timeout_must_be_finite_and_positive(value):
    """nan, 0 and -1 started the server and reported 'not ready after nans'; inf waited until a signal."""
    from codegen.errors import UserError
    from codegen.serve.cli_serve import _timeout

    with pytest.raises(UserError, match="finite number of seconds > 0"):
        _timeout(None, None, value)
    assert _timeout(None, None, 300.0) == 300.0


@pytest.mark.parametrize("host, kind", [("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
                                        ("255.255.255.255", "broadcast"), ("240.0.0.1", "reserved")])
def test_serve_host_refuses_addresses_no_client_reaches(host, kind):
    from codegen.errors import UserError
    from codegen.serve.repository import _check_unicast

    with pytest.raises(UserError, match=kind):
        _check_unicast(host)
    _check_unicast("127.0.0.1")
    _check_unicast("localhost")


def test_submit_tune_image_uri_without_worker_pools_is_one_line(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace as NS

    m = _submit()
    (tmp_path / "hyperparameter_tuning_job.json").write_text(json.dumps({"trial_job_spec": {}}))
    monkeypatch.setattr(m, "HERE", str(tmp_path))
    args = NS(kind="tune", project="p", region="r", bucket="b", job_id="1", display_name="d", service_account=None,
              image_uri="x")
    with _Refused(capsys, "no worker_pool_specs"):
        m.build_request(args)
    (tmp_path / "hyperparameter_tuning_job.json").write_text("[" * 100_000)
    with _Refused(capsys, "nested too deep"):
        m.build_request(args)
    os.unlink(tmp_path / "hyperparameter_tuning_job.json")
    os.mkfifo(tmp_path / "hyperparameter_tuning_job.json")
    with _Refused(capsys, "not a regular file"):
        m.build_request(args)


def test_trainer_eval_batch_size_past_a_c_long_is_refused(capsys):
    """--eval-batch-size 2**63 was an OverflowError traceback in torch."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("t4", REPO / "generated" / "movielens" / "train_torch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as exc:
        module.main(["--eval-batch-size", str(2**63), "--device", "cpu"])
    assert exc.value.code == 2
    assert "at most 2147483647" in capsys.readouterr().err


def test_report_and_validate_say_what_an_existing_wrong_path_is(tmp_path):
    from codegen.errors import UserError
    from codegen.train.report import render_report
    from codegen.triton.lint.validate import validate_repository

    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="not a folder"):
        render_report(tmp_path / "f")
    os.mkfifo(tmp_path / "ps")
    with pytest.raises(UserError, match="not a regular file"):
        validate_repository(REPO / "generated" / "movielens" / "triton", ps=tmp_path / "ps")
