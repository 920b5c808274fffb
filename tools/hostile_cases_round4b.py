"""The hostile inputs of issue 43 (fourth round), part two: every numeric flag given 0, -1, 2**63, nan and inf;
`serve --host` on addresses this machine cannot listen on; `demo --only`; the trainer's flags; the generated Vertex AI
submit.py run as a process with --dry-run on tampered job files and saved job descriptions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from hostile_cases import REPO, add, big_sparse, spec_folder
from hostile_cases_round3 import _trainer
from hostile_outcomes import Run

NUMBERS = {"0": "0", "minus1": "-1", "2pow63": str(2**63), "nan": "nan", "inf": "inf"}


def _model(d: Path) -> None:
    shutil.copytree(REPO / "generated" / "movielens", d / "model")


def _data(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "x.csv").write_text("userId,movieId\n1,2\n")


# (command, flag, base, argv before the flag, values accepted by the option's type that the command must refuse
#  itself, with the refusal's text)
FLAGS: list[tuple[str, str, Callable[[Path], None], list[str], dict[str, str]]] = [
    ("serve", "--http-port", _model, ["serve", "model/triton", "--grpc-port", "2", "--metrics-port", "0"], {}),
    ("serve", "--grpc-port", _model, ["serve", "model/triton", "--http-port", "1", "--metrics-port", "0"], {}),
    ("serve", "--timeout", _model, ["serve", "model/triton", "--http-port", "1", "--grpc-port", "2"],
     {"0": "--timeout", "minus1": "--timeout", "nan": "--timeout", "inf": "--timeout"}),
    ("query", "--rows", _data, ["query", "http://127.0.0.1:1", "--data", "x.csv"], {"2pow63": "cannot reach|refused"}),
    ("query", "--batch-size", _data, ["query", "http://127.0.0.1:1", "--data", "x.csv"],
     {"2pow63": "cannot reach|refused"}),
    ("query", "--tolerance", _data, ["query", "http://127.0.0.1:1", "--data", "x.csv"],
     {"minus1": "--tolerance", "nan": "--tolerance", "inf": "--tolerance", "2pow63": "cannot reach|refused",
      "0": "cannot reach|refused"}),
    ("assemble", "--cores", lambda d: spec_folder(d), ["assemble", "s.yaml", "--workflow", "wf", "--checkpoint",
                                                       "ck", "--out", "deploy"], {}),
    ("etl", "--workers", lambda d: spec_folder(d), ["etl", "s.yaml", "--out", "gen"], {"2pow63": "etl"}),
    ("train", "--gpus", lambda d: spec_folder(d), ["train", "s.yaml", "--out", "run"], {"2pow63": ""}),
    ("train", "--ranks", lambda d: spec_folder(d), ["train", "s.yaml", "--out", "run", "--device", "cpu"],
     {"2pow63": ""}),
    ("train", "--max-iter", lambda d: spec_folder(d), ["train", "s.yaml", "--out", "run", "--device", "cpu"],
     {"2pow63": ""}),
    ("demo", "--seed", lambda d: d.mkdir(parents=True, exist_ok=True),
     ["demo", "--root", "dm", "--specs", "nospecs", "--only", "movielens"],
     {"0": "--specs", "minus1": "--seed|--specs", "2pow63": "--seed|--specs"}),
    ("serve", "--metrics-port", _model, ["serve", "model/triton", "--http-port", "1", "--grpc-port", "2"],
     {}),
]
# A valid value the command would run with (the server would start; train generates the model before it finds
# no data): not a hostile input of the flag.
SKIP_VALUES = {("serve", "--timeout", "2pow63"), ("train", "--gpus", "2pow63"), ("train", "--ranks", "2pow63"),
               ("train", "--max-iter", "2pow63"), ("serve", "--metrics-port", "0")}


def _flag(base: Callable[[Path], None], argv: list[str], flag: str, value: str) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        base(d)
        return Run(d, [*argv, flag, value])
    return build


QUICK_FLAGS = {("serve", "--timeout", "nan"), ("query", "--rows", "0"), ("assemble", "--cores", "inf")}
for _cmd, _flag_name, _base, _argv, _own in FLAGS:
    for _vname, _value in NUMBERS.items():
        if (_cmd, _flag_name, _vname) in SKIP_VALUES:
            continue
        _reason = _own.get(_vname, rf"Invalid value for '{_flag_name}'")
        add("flags", f"{_cmd}{_flag_name}={_vname}", _flag(_base, _argv, _flag_name, _value), "refused",
            reason=_reason, quick=(_cmd, _flag_name, _vname) in QUICK_FLAGS)


# ---- serve --host: addresses this machine cannot listen on ------------------------------------------------------------

def _serve_host(host: str) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        _model(d)
        return Run(d, ["serve", "model/triton", "--host", host, "--http-port", "18190", "--grpc-port", "18191",
                       "--metrics-port", "0", "--timeout", "1"])
    return build


HOSTS = {"test_net": ("192.0.2.1", "cannot listen there"), "public": ("8.8.8.8", "cannot listen there"),
         "link_local_v6": ("fe80::1", "cannot listen there"), "broadcast": ("255.255.255.255", "broadcast"),
         "multicast": ("224.0.0.1", "multicast"), "multicast_v6": ("ff02::1", "multicast"),
         "reserved": ("240.0.0.1", "reserved"), "empty": ("", "not an address"),
         "with_port": ("127.0.0.1:80", "not an address"), "command": ("a$(id)", "not an address"),
         "unresolvable": ("no.such.host.invalid", "not an address"), "trailing_space": ("127.0.0.1 ", "not an address"),
         "newline": ("127.0.0.1\nx", "not an address")}
for _vname, (_host, _reason) in HOSTS.items():
    add("serve", f"host_{_vname}", _serve_host(_host), "refused", reason=_reason,
        quick=_vname in ("test_net", "multicast"))


# ---- demo --only and its folders (refused before any data is built) ---------------------------------------------------

def _demo(*argv: str, prepare: Callable[[Path], Any] = lambda d: None) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        d.mkdir(parents=True, exist_ok=True)
        prepare(d)
        return Run(d, ["demo", *argv])
    return build


DEMOS = {"only_unknown": (("--only", "bogus"), "Invalid value for '--only'"),
         "only_empty": (("--only", ""), "Invalid value for '--only'"),
         "only_path": (("--only", "../specs/movielens"), "Invalid value for '--only'"),
         "only_code": (("--only", "movielens; id"), "Invalid value for '--only'"),
         "only_upper": (("--only", "MOVIELENS"), "Invalid value for '--only'"),
         "specs_missing": (("--specs", "nope", "--root", "dm"), "--specs"),
         "seed_text": (("--seed", "abc"), "Invalid value for '--seed'"),
         "seed_float": (("--seed", "1.5"), "Invalid value for '--seed'")}
for _vname, (_argv, _reason) in DEMOS.items():
    add("demo", _vname, _demo(*_argv), "refused", reason=_reason, quick=_vname in ("only_unknown", "only_code"))
add("demo", "specs_a_file", _demo("--specs", "f", "--root", "dm", prepare=lambda d: (d / "f").write_text("x")),
    "refused", reason="--specs")
add("demo", "specs_fifo", _demo("--specs", "f", "--root", "dm", prepare=lambda d: os.mkfifo(d / "f")), "refused",
    reason="--specs")


# ---- the trainer's flags (generated/movielens/train_torch.py, in the case's process) -----------------------------------

TRAINER_FLAGS = {
    "batch_size_0": (("--batch-size", "0"), "batch sizes must be positive"), "batch_size_minus1": (("--batch-size", "-1"), "batch sizes"),
    "batch_size_2pow63": (("--batch-size", str(2**63)), "--batch-size"),
    "eval_batch_size_0": (("--eval-batch-size", "0"), "batch sizes"),
    "eval_batch_size_2pow63": (("--eval-batch-size", str(2**63)), "--eval-batch-size"),
    "threads_0": (("--threads", "0"), "--threads"), "threads_minus1": (("--threads", "-1"), "--threads"),
    "threads_2pow63": (("--threads", str(2**63)), "--threads"),
    "epochs_minus1": (("--epochs", "-1"), "--epochs"),
    "replicate_rows_minus1": (("--replicate-rows", "-1"), "--replicate-rows"),
    "lr_1e400": (("--lr", "1e400"), "--lr"),
    "resume_missing": (("--resume", "{d}/nope.pt"), "--resume"),
    "resume_fifo": (("--resume", "{d}/f.pt"), "--resume"),
    "resume_dev_zero": (("--resume", "/dev/zero"), "--resume"),
    "device_bogus": (("--device", "tpu"), "--device"),
    "early_stop_bogus": (("--early-stop", "bogus"), "--early-stop"),
}


for _vname, (_argv, _reason) in TRAINER_FLAGS.items():
    _prep: Callable[[Path], Any] = (lambda d: os.mkfifo(d / "f.pt")) if _vname == "resume_fifo" else (lambda d: None)
    add("trainer", f"flag_{_vname}", _trainer(*_argv, prepare=_prep), "refused", reason=_reason,
        quick=_vname in ("threads_0", "resume_fifo"))
for _vname, _flag_value in {"display_2pow63": ("--display", str(2**63)),
                            "snapshot_2pow63": ("--snapshot", str(2**63))}.items():
    # a period longer than any run: never (the run ends with its model)
    add("trainer", f"flag_{_vname}", _trainer(*_flag_value), "accepted",
        check=lambda d: "" if (d / "run" / "model.pt").is_file() else "silent wrong: no model.pt written")


# ---- the generated Vertex AI submit.py, as a process with --dry-run ---------------------------------------------------

VERTEX = REPO / "generated" / "deepfm_vertex" / "vertex"
TUNE = "hyperparameter_tuning_job.json"
CUSTOM = "custom_job_spec.json"
DRY = ("--dry-run", "--project", "p", "--region", "us-central1", "--bucket", "b")


def _submit(argv: tuple[str, ...], prepare: Callable[[Path], Any] = lambda v: None,
            check_out: Callable[[str], str] | None = None) -> Callable[[Path], Run]:
    """submit.py copied into the case's folder (it reads its job files beside itself), run as a process; an
    exit 2 without a traceback is its refusal (its one line, 'submit.py: ...')."""
    def build(d: Path) -> Run:
        shutil.copytree(VERTEX, d / "vertex")
        prepare(d / "vertex")
        args = [a.replace("{d}", str(d)) for a in argv]

        def call() -> None:
            from codegen.errors import Located

            done = subprocess.run([sys.executable, "-W", "ignore", str(d / "vertex" / "submit.py"), *args],
                                  cwd=d, capture_output=True, text=True, timeout=60)
            if "Traceback" in done.stderr or done.returncode not in (0, 2):
                sys.stderr.write(done.stderr)
                raise RuntimeError(f"submit.py exited {done.returncode}")
            if done.returncode:
                lines = [line for line in done.stderr.splitlines() if line.strip()]
                raise Located("\n".join(lines) or "submit.py: no message")
            problem = check_out(done.stdout) if check_out else ""
            if problem:
                raise AssertionError(problem)
        return Run(d, call=call)
    return build


def _edit(name: str, change: Callable[[dict], Any]) -> Callable[[Path], Any]:
    def prepare(v: Path) -> None:
        doc = json.loads((v / name).read_text())
        change(doc)
        (v / name).write_text(json.dumps(doc))
    return prepare


def _write(name: str, data: bytes | str) -> Callable[[Path], Any]:
    def prepare(v: Path) -> None:
        (v / name).unlink()
        (v / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return prepare


def _trials(trials: list[dict], prefix: str = "gs://b/deepfm/1") -> Callable[[Path], Any]:
    job = {"name": "projects/p/locations/r/hyperparameterTuningJobs/1",
           "study_spec": {"metrics": [{"metric_id": "AUC", "goal": "MAXIMIZE"}]},
           "trial_job_spec": {"base_output_directory": {"output_uri_prefix": prefix}}, "trials": trials}
    return lambda v: (v.parent / "job.json").write_text(json.dumps(job))


def _trial(tid: str, value: Any, state: str = "SUCCEEDED") -> dict:
    return {"id": tid, "state": state, "final_measurement": {"metrics": [{"metric_id": "AUC", "value": value}]}}


def _says(text: str) -> Callable[[str], str]:
    return lambda out: "" if text in out else f"the output does not say {text!r}: {out[-200:]!r}"


SUBMITS: dict[str, tuple[tuple[str, ...], Callable[[Path], Any], str]] = {
    "tune_image_uri_no_pools": (("tune", *DRY, "--image-uri", "x"), _edit(TUNE, lambda d: d["trial_job_spec"].pop(
        "worker_pool_specs")), "no worker_pool_specs"),
    "tune_image_uri_pools_text": (("tune", *DRY, "--image-uri", "x"), _edit(
        TUNE, lambda d: d["trial_job_spec"].__setitem__("worker_pool_specs", "x")), "no worker_pool_specs"),
    "custom_image_uri_pool_without_container": (("custom", *DRY, "--image-uri", "x"), _edit(
        CUSTOM, lambda d: d["worker_pool_specs"][0].pop("container_spec")), "no worker_pool_specs"),
    "tune_no_trial_job_spec": (("tune", *DRY), _edit(TUNE, lambda d: d.pop("trial_job_spec")), "trial_job_spec"),
    "tune_json_deep": (("tune", *DRY), _write(TUNE, "[" * 100_000 + "]" * 100_000), "not JSON|must be a JSON"),
    "custom_json_nested_object": (("custom", *DRY), _write(CUSTOM, '{"a": ' * 50_000 + "1" + "}" * 50_000),
                                  "not JSON|not a Vertex AI job"),
    "custom_json_list": (("custom", *DRY), _write(CUSTOM, "[]"), "must be a JSON object"),
    "custom_json_not_utf8": (("custom", *DRY), _write(CUSTOM, b'{"a": "\xff"}'), "not JSON"),
    "custom_json_fifo": (("custom", *DRY), lambda v: ((v / CUSTOM).unlink(), os.mkfifo(v / CUSTOM)),
                         "not a regular file"),
    "custom_json_missing": (("custom", *DRY), lambda v: (v / CUSTOM).unlink(), "cannot be read"),
    "custom_json_folder": (("custom", *DRY), lambda v: ((v / CUSTOM).unlink(), (v / CUSTOM).mkdir()),
                           "not a regular file|Is a directory"),
    "custom_json_huge": (("custom", *DRY), lambda v: big_sparse(v / CUSTOM, 100 << 20), "over 16 MiB"),
    "custom_unknown_field": (("custom", *DRY), _edit(CUSTOM, lambda d: d.__setitem__("bogus", 1)),
                             "not a Vertex AI job"),
    "project_with_slash": (("custom", "--dry-run", "--project", "p/../x", "--region", "r", "--bucket", "b"),
                           lambda v: None, "not a valid name"),
    "bucket_with_braces": (("custom", "--dry-run", "--project", "p", "--region", "r", "--bucket", "{project}"),
                           lambda v: None, "not a valid name"),
    "missing_project": (("custom", "--dry-run", "--region", "r", "--bucket", "b"), lambda v: None, "missing"),
    "trials_nested_json": (("trials", "--from-json", "{d}/job.json"), lambda v: (v.parent / "job.json").write_text(
        '{"trials": ' + "[" * 100_000 + "]" * 100_000 + "}"), "not a tuning job"),
    "trials_from_fifo": (("trials", "--from-json", "{d}/job.json"), lambda v: os.mkfifo(v.parent / "job.json"),
                         "not a regular file"),
    "trials_from_missing": (("trials", "--from-json", "{d}/nope.json"), lambda v: None, "not a tuning job"),
    "trials_save_in_missing_folder": (("trials", "--from-json", "{d}/job.json", "--save", "{d}/no/x.json"),
                                      _trials([_trial("1", 0.7)]), "folder does not exist"),
    "trials_job_bad_name": (("trials", "--job", "projects/p/../x"), lambda v: None, "expected projects/"),
    "deploy_trial_dotdot": (("deploy", "--from-json", "{d}/job.json", "--trial", "best", "--workflow", "w", "--out",
                             "o"), _trials([_trial("../../etc", 0.7)]), "not a Vertex AI trial id"),
    "deploy_prefix_dotdot": (("deploy", "--from-json", "{d}/job.json", "--trial", "1", "--workflow", "w", "--out",
                              "o"), _trials([_trial("1", 0.7)], "gs://b/../../x"), "not a gs://BUCKET/FOLDER"),
    "deploy_prefix_not_gs": (("deploy", "--from-json", "{d}/job.json", "--trial", "1", "--workflow", "w", "--out",
                              "o"), _trials([_trial("1", 0.7)], "/etc"), "not a gs://BUCKET/FOLDER"),
    "deploy_unknown_trial": (("deploy", "--from-json", "{d}/job.json", "--trial", "9", "--workflow", "w", "--out",
                              "o"), _trials([_trial("1", 0.7)]), "the job has trials"),
    "deploy_only_nan": (("deploy", "--from-json", "{d}/job.json", "--workflow", "w", "--out", "o"),
                        _trials([_trial("1", "NaN")]), "no trial"),
}
for _vname, (_argv, _prep, _reason) in SUBMITS.items():
    add("submit.py", _vname, _submit(_argv, _prep), "refused", reason=_reason,
        quick=_vname in ("tune_image_uri_no_pools", "custom_json_fifo"))
add("submit.py", "trials_nan_ranked_last", _submit(("trials", "--from-json", "{d}/job.json"), _trials(
    [_trial("1", "NaN"), _trial("2", 0.6), _trial("3", 0.5)]), check_out=_says("best: trial 2")), "accepted",
    check=lambda d: "")
add("submit.py", "tune_dry_run_image_uri", _submit(("tune", *DRY, "--image-uri", "gcr.io/p/i:1"),
                                                   check_out=_says('"image_uri": "gcr.io/p/i:1"')), "accepted",
    check=lambda d: "")
