"""The static parts of the generated vertex/submit.py (templates/vertex/submit.py.j2): submitting the Vertex AI job,
and after a tuning job listing its trials and assembling the best one.

Included verbatim in the generated submit.py: the parts may use only what submit.py imports (argparse, json, math, os,
re, stat, subprocess, sys, time; google-cloud-aiplatform inside functions), never codegen.
"""

import json
import math
import os
import re
import stat
import subprocess
import sys
import time

# The model's facts, which the template writes (stand-ins, never included).
HERE = os.path.dirname(os.path.abspath(__file__))
FILES = {"custom": "custom_job_spec.json", "tune": "hyperparameter_tuning_job.json"}
METRIC = "auc"
SAFE_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")


def metric_value(trial):
    """Stand-in: the template writes it (its docstring names the spec's metric)."""
    return None


# ctrgen: part helpers
def refuse(message):
    """Bad input: one line on stderr and exit status 2, as every ctrgen command."""
    print(message, file=sys.stderr)
    sys.exit(2)


def fill(value, names):
    """Replace {project}/{region}/{bucket} in every string of a JSON document (other braces are left alone)."""
    if isinstance(value, str):
        for key, text in names.items():
            value = value.replace("{" + key + "}", text)
        return value
    if isinstance(value, list):
        return [fill(v, names) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, names) for k, v in value.items()}
    return value


# ctrgen: part request
def build_request(args):
    """(kind, message) for the job, built with google.cloud.aiplatform_v1's types (no network)."""
    name = FILES[args.kind]
    doc = fill(read_job_file(name), {"project": args.project, "region": args.region, "bucket": args.bucket})
    job_id = args.job_id or time.strftime("%Y%m%d_%H%M%S", time.gmtime())
    output = f"gs://{args.bucket}/{args.display_name}/{job_id}"
    spec = doc if args.kind == "custom" else doc.get("trial_job_spec")
    if not isinstance(spec, dict):
        refuse(f"submit.py: {name}: trial_job_spec: must be a JSON object (regenerate with ctrgen generate)")
    spec["base_output_directory"] = {"output_uri_prefix": output}
    if args.service_account:
        spec["service_account"] = args.service_account
    if args.image_uri:
        pools = spec.get("worker_pool_specs")
        if not isinstance(pools, list) or not pools or not all(
                isinstance(p, dict) and isinstance(p.get("container_spec"), dict) for p in pools):
            refuse(f"submit.py: {name}: --image-uri: no worker_pool_specs with a container_spec to set it in "
                     "(regenerate with ctrgen generate)")
        for pool in pools:
            pool["container_spec"]["image_uri"] = args.image_uri
    # Imported after the checks above: refusing a broken job file takes no aiplatform import (about 2 s of CPU).
    from google.cloud import aiplatform_v1
    from google.protobuf.json_format import ParseError

    try:
        if args.kind == "custom":
            return aiplatform_v1.CustomJob(display_name=args.display_name,
                                           job_spec=aiplatform_v1.CustomJobSpec.from_json(json.dumps(doc)))
        doc["display_name"] = f"{args.display_name}-tuning"
        return aiplatform_v1.HyperparameterTuningJob.from_json(json.dumps(doc))
    except (ValueError, TypeError, ParseError) as exc:
        refuse(f"submit.py: {name}: not a Vertex AI job description ({str(exc).splitlines()[0][:200]})")
    except RecursionError:
        refuse(f"submit.py: {name}: not a Vertex AI job description (nested too deep)")


def read_job_file(name):
    """The job file beside this script as a JSON object: a regular file of at most 16 MiB (a FIFO would block, a
    device never end), UTF-8, nested at most as deep as json can go."""
    path = os.path.join(HERE, name)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                refuse(f"submit.py: {name}: not a regular file (regenerate with ctrgen generate)")
            data = fh.read(16 * 1024 * 1024 + 1)
        if len(data) > 16 * 1024 * 1024:
            refuse(f"submit.py: {name}: over 16 MiB, not a job description (regenerate with ctrgen generate)")
        doc = json.loads(data.decode("utf-8"))
    except OSError as exc:
        refuse(f"submit.py: {name}: cannot be read ({exc.strerror or exc}; regenerate with ctrgen generate)")
    except ValueError as exc:     # not UTF-8, not JSON
        refuse(f"submit.py: {name}: not JSON ({str(exc)[:200]})")
    except RecursionError:
        refuse(f"submit.py: {name}: not JSON (nested too deep)")
    if not isinstance(doc, dict):
        refuse(f"submit.py: {name}: must be a JSON object, not {type(doc).__name__}")
    return doc


# ctrgen: part load_job
def load_job(args):
    """The tuning job as an aiplatform_v1 HyperparameterTuningJob: from Vertex AI, or from a saved description."""
    from google.cloud import aiplatform_v1
    from google.protobuf.json_format import ParseError

    if args.from_json:
        try:
            # A FIFO or device would block or never end: a regular file only, opened without waiting.
            fd = os.open(args.from_json, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, encoding="utf-8") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    refuse(f"submit.py: --from-json {args.from_json}: not a regular file")
                text = fh.read(64 * 1024 * 1024)
            return aiplatform_v1.HyperparameterTuningJob.from_json(text, ignore_unknown_fields=True)
        except (OSError, ValueError, ParseError) as exc:
            refuse(f"submit.py: --from-json {args.from_json}: not a tuning job's description "
                     f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})")
        except RecursionError:
            refuse(f"submit.py: --from-json {args.from_json}: not a tuning job's description (nested too deep)")
    parts = args.job.split("/")
    if len(parts) != 6 or parts[0] != "projects" or parts[2] != "locations" \
            or parts[4] != "hyperparameterTuningJobs":
        refuse(f"submit.py: --job {args.job!r}: expected projects/P/locations/R/hyperparameterTuningJobs/ID")
    client = aiplatform_v1.JobServiceClient(
        client_options={"api_endpoint": f"{parts[3]}-aiplatform.googleapis.com"})
    try:
        return client.get_hyperparameter_tuning_job(name=args.job)
    except Exception as exc:  # no credentials, no network, no such job: one line, not a traceback
        refuse(f"submit.py: --job {args.job}: cannot read the job ({type(exc).__name__}: {str(exc)[:200]})")


# ctrgen: part trials
def best_trial(job):
    """The succeeded trial with the best final metric for the study's goal (ties: the lowest trial id)."""
    goal = job.study_spec.metrics[0].goal.name if job.study_spec.metrics else "MAXIMIZE"
    scored = [(metric_value(t), t) for t in job.trials if t.state.name == "SUCCEEDED"]
    # NaN is no score: it would compare as neither better nor worse and could be named best.
    scored = [(v, t) for v, t in scored if v is not None and math.isfinite(v)]
    if not scored:
        return None
    sign = -1 if goal == "MAXIMIZE" else 1
    return min(scored, key=lambda vt: (sign * vt[0], int(vt[1].id) if vt[1].id.isdigit() else 0, vt[1].id))[1]


def list_trials(job) -> str:
    names = sorted({p.parameter_id for t in job.trials for p in t.parameters})
    rows = [["trial", "state", METRIC, *names]]
    for t in sorted(job.trials, key=lambda t: (len(t.id), t.id)):
        value = metric_value(t)
        params = {p.parameter_id: p.value for p in t.parameters}
        rows.append([t.id, t.state.name, "-" if value is None else f"{value:.6f}",
                     *("-" if params.get(n) is None else f"{params[n]:g}" if isinstance(params[n], float)
                       else str(params[n]) for n in names)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    best = best_trial(job)
    lines.append(f"best: trial {best.id} ({METRIC} {metric_value(best):.6f})" if best else
                 f"best: none (no trial succeeded with a final {METRIC})")
    return "\n".join(lines)


def trial_model_dir(job, trial, gcs_root):
    """Where the trial's task.py saved the model: <base output directory>/<trial id>/model (AIP_MODEL_DIR of a
    tuning job's trial), gs:// read through the mount at gcs_root."""
    prefix = job.trial_job_spec.base_output_directory.output_uri_prefix.rstrip("/")
    parts = prefix[len("gs://"):].split("/") if prefix.startswith("gs://") else []
    # The path is read from the job's description: '..', '.' or an empty part would lead outside gcs_root.
    if not parts or any(p in ("", ".", "..") for p in parts):
        refuse(f"submit.py: the job's output directory {prefix!r} is not a gs://BUCKET/FOLDER path")
    if not SAFE_ID.fullmatch(trial.id):
        refuse(f"submit.py: trial id {trial.id!r} is not a Vertex AI trial id (letters, digits, '-', '_')")
    return os.path.join(gcs_root, *parts, trial.id, "model")


def check_save(path):
    """--save's folder must exist and the path must not be a folder: checked before the job is read."""
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder) or os.path.isdir(path):
        refuse(f"submit.py: --save {path}: {'is a folder' if os.path.isdir(path) else 'its folder does not exist'}")


def save(path, text):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def deploy(args, job) -> int:
    if args.trial == "best":
        trial = best_trial(job)
        if trial is None:
            refuse(f"submit.py: no trial of {job.name or args.from_json} succeeded with a final {METRIC}")
    else:
        trial = next((t for t in job.trials if t.id == args.trial), None)
        if trial is None:
            refuse(f"submit.py: --trial {args.trial!r}: the job has trials {sorted(t.id for t in job.trials)}")
    weights = trial_model_dir(job, trial, args.gcs_root)
    value = metric_value(trial)
    print(f"trial {trial.id} ({METRIC} {'-' if value is None else f'{value:.6f}'}): {weights}")
    command = [sys.executable, "-m", "codegen", "assemble", args.spec, "--workflow", args.workflow,
               "--weights", weights, "--out", args.out] + (["--force"] if args.force else [])
    print("+ " + " ".join(command[2:]), flush=True)
    return subprocess.call(command)
