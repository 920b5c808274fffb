"""``ctrgen demo --serve`` (what ``make demo`` runs): after lock and generate, the rest of the job on the CPU.

For the MovieLens demo spec: ``ctrgen train`` trains a short run (``ctrgen report`` writes its page),
``assemble --checkpoint`` builds the repository, ``ctrgen serve`` runs it as a real process, 1,000 raw validation
rows go through the ensemble over HTTP, the scores are compared with the offline ones (workflow + trained Model in
this process), the server is stopped with SIGTERM, and a short report says what came out and where every artifact
is (the run's report page and TensorBoard logs among them).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import click

from .. import runtime
from ..errors import UserError
from ..runtime.progress import TENSORBOARD_DIR

SERVE_SPEC = "movielens"
TRAIN_ITERS, TRAIN_BATCH = 300, 256
TRAIN_DISPLAY, TRAIN_EVAL = 25, 100     # points of the run's curves (metrics.jsonl, TensorBoard, the report)
QUERY_ROWS, LATENCY_REQUESTS = 1000, 200
TOLERANCE = 1e-5
READY_TIMEOUT_S = 300


@dataclass
class ServeReport:
    auc: float
    train_seconds: float
    max_diff: float
    rows: int
    p50_1: float
    p99_1: float
    p50_batch: float
    batch: int
    paths: dict[str, Path]

    @property
    def agrees(self) -> bool:
        return self.max_diff <= TOLERANCE


def train(spec: Path, out: Path) -> dict:
    """``ctrgen train`` on the CPU, one thread (the demo's machine may have two cores), on this ctrgen's runtime,
    then ``ctrgen report`` of the run."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "PYTHONPATH": os.pathsep.join(
        p for p in (str(Path(runtime.__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")) if p)}
    ctrgen = [sys.executable, "-m", "codegen"]
    steps = [[*ctrgen, "train", str(spec), "--device", "cpu", "--max-iter", str(TRAIN_ITERS), "--out", str(out),
              "--", "--batch-size", str(TRAIN_BATCH), "--display", str(TRAIN_DISPLAY), "--eval-interval",
              str(TRAIN_EVAL), "--snapshot", "0"],
             [*ctrgen, "report", str(out)]]
    for cmd in steps:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise click.ClickException(f"ctrgen {cmd[3]} failed (exit {proc.returncode}): {tail}")
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))


def assemble_repo(ctx, rendered, workflow: Path, checkpoint: Path, out: Path) -> Path:
    """``ctrgen assemble SPEC --workflow W --checkpoint C --out OUT --force``."""
    from ..triton.commands.assemble import lock_checker
    from ..triton.deploy.assemble import assemble, check_generated

    generated = ctx.root / "generated" / rendered.name
    check_generated(generated, rendered.files, rendered.triton_torch.step, ctx.display)
    assemble(rendered.triton_torch, generated, workflow=workflow, weights=checkpoint, out=out, force=True,
             features_json=rendered.files[PurePosixPath("features.json")],
             train_torch=rendered.files[PurePosixPath("train_torch.py")], check_workflow=lock_checker(ctx))
    return out


def _start_serve(repo: Path, log: Path) -> tuple[subprocess.Popen, str, Path]:
    """``ctrgen serve REPO`` on free loopback ports; returns the process, its HTTP address and its output file."""
    from ..serve.server import free_port

    http = free_port()
    out = Path(tempfile.mkstemp(prefix="ctrgen-demo-serve-", suffix=".out")[1])
    cmd = [sys.executable, "-m", "codegen", "serve", str(repo), "--http-port", str(http), "--grpc-port",
           str(free_port()), "--metrics-port", str(free_port()), "--log", str(log)]
    with open(out, "wb") as handle:
        proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        text = out.read_text(errors="replace")
        if "Serving " in text:
            return proc, f"127.0.0.1:{http}", out
        if proc.poll() is not None:
            out.unlink()
            raise click.ClickException(f"ctrgen serve failed: {text.strip()}")
        time.sleep(0.2)
    _stop(proc)
    out.unlink()
    raise click.ClickException(f"ctrgen serve was not ready after {READY_TIMEOUT_S}s")


def _stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def serve_and_compare(repo: Path, checkpoint: Path, valid: Path, log: Path) -> dict:
    """Serve ``repo`` with ``ctrgen serve``, score raw validation rows, compare, stop the server (exit 0)."""
    from ..serve.offline import offline_scores
    from ..serve.query import client, find_ensemble, read_rows, score

    proc, url, out = _start_serve(repo, log)
    try:
        with client(url) as conn:
            ensemble = find_ensemble(conn, url)
            frame = read_rows(valid, ensemble.columns, QUERY_ROWS)
            with click.progressbar(length=len(frame), label="  querying", file=sys.stderr) as bar:
                batched = score(conn, ensemble, frame, valid, batch_size=ensemble.max_batch_size or 1,
                                progress=bar.update)
            single = score(conn, ensemble, frame.head(LATENCY_REQUESTS), valid, batch_size=1)
    finally:
        code = _stop(proc)
        text = out.read_text(errors="replace")
        out.unlink()
    if code != 0:
        raise click.ClickException(f"ctrgen serve did not stop cleanly (exit {code}): {text.strip()[-500:]}")
    offline = offline_scores(repo, ensemble.name, checkpoint, frame)
    return {"ensemble": ensemble.name, "rows": len(frame), "max_diff": float(abs(offline - batched.scores).max()),
            "batched": batched, "single": single, "batch": ensemble.max_batch_size or 1}


def run_serve_job(ctx, rendered, root: Path, workflow: Path, valid: Path) -> ServeReport:
    if rendered.triton_torch is None:
        raise UserError.one(ctx.loaded.path, "the served demo needs the torch target", field="targets")
    checkpoint = root / "train" / rendered.name
    repo = root / "serve" / rendered.name
    log = root / "serve" / f"{rendered.name}.tritonserver.log"
    click.echo(f"Training {rendered.name} on the CPU ({TRAIN_ITERS} iterations of {TRAIN_BATCH}) ...", err=True)
    metrics = train(ctx.loaded.path, checkpoint)
    click.echo(f"Assembling {repo}/ and serving it with 'ctrgen serve' ...", err=True)
    assemble_repo(ctx, rendered, workflow, checkpoint, repo)
    served = serve_and_compare(repo, checkpoint, valid, log)
    single, batched = served["single"], served["batched"]
    return ServeReport(auc=float(metrics["auc"]), train_seconds=float(metrics.get("train_seconds", 0.0)),
                       max_diff=served["max_diff"], rows=served["rows"], p50_1=single.p50,
                       p99_1=single.percentile(99), p50_batch=batched.p50, batch=served["batch"],
                       paths={"spec": ctx.loaded.path, "generated": root / "generated" / rendered.name,
                              "checkpoint": checkpoint, "report": checkpoint / "report.html",
                              "tensorboard": checkpoint / TENSORBOARD_DIR, "repository": repo, "server log": log,
                              "data": valid})


def print_report(report: ServeReport, name: str, min_auc: float | None) -> None:
    verdict = "served = offline" if report.agrees else "served != offline"
    click.echo(f"\nServed demo ({name}, the PyTorch model on the CPU):")
    learned = f" (a model that learns the planted structure reaches >= {min_auc})" if min_auc is not None else ""
    click.echo(f"  AUC          {report.auc:.4f} on the validation split after {TRAIN_ITERS} iterations{learned}")
    click.echo(f"  scores       {report.rows} raw validation rows through {name}_ens: {verdict} "
               f"(max |served - offline| {report.max_diff:.3g}, tolerance {TOLERANCE:g})")
    click.echo(f"  latency      batch 1: p50 {report.p50_1:.2f} ms, p99 {report.p99_1:.2f} ms over "
               f"{LATENCY_REQUESTS} requests; batch {report.batch}: p50 {report.p50_batch:.2f} ms (HTTP, this machine)")
    for label, path in report.paths.items():
        if label == "tensorboard":
            click.echo(f"  {label:<12} tensorboard --logdir {path}" if path.is_dir() else
                       f"  {label:<12} none (pip install tensorboard; metrics.jsonl holds every point)")
        else:
            click.echo(f"  {label:<12} {path}")
    repo = report.paths["repository"]
    click.echo(f"  serve again  ctrgen serve {repo}    then, elsewhere:  ctrgen query http://127.0.0.1:8000 "
               f"--data {report.paths['data']} --rows 5")
