"""Serving speed on the CPU: the ensemble against the model alone and a pass-through python model, in one server.

Builds (or reuses) the demo's synthetic data and NVTabular ETL under --root, locks and generates the spec against
that workflow, saves the Model of the generated train_torch.py at its seeded initialisation (speed does not depend on
the weights), assembles the PyTorch repository with `ctrgen assemble --checkpoint` (its command, run in this
process) and adds a pass-through python model. One real Triton server (the nvidia-pytriton wheel's) then serves, side
by side:

* ensemble     <name>_ens: raw request columns -> <name>_nvt (the workflow as numpy lookups) -> <name> (torch);
* model alone  <name> on the VCSR tensors <name>_nvt returned for the same rows (already preprocessed);
* nvt step     <name>_nvt alone on the raw columns;
* floor        a python model that returns zeros for the model's inputs: what any python step costs.

For each batch size and concurrency (client threads, gRPC requests serialized once, one in flight each) it prints p50/p99 latency and
samples/s, then one verdict line per target: ensemble throughput >= 1/2 of the model alone at every point, nvt step
p50 <= 1 ms at batch 1. The ensemble's scores must equal the model alone's on the same rows (exit 1 otherwise; a
missed speed target exits 1 only with --strict: timings on a shared machine vary).

    python bench/serve.py                          # wdl on the Criteo-shaped demo data, batches 1 and 64
    python bench/serve.py --model movielens --requests 400
    python bench/serve.py --tiny                   # a few requests per point: checks the script, measures nothing
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
from triton_server import Server, pytriton_dir  # noqa: E402  (the server fixture of the serving tests)

FLOOR = "passthrough"
MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
FLOOR_MODEL = '''\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Returns one zero per sample of the model's inputs: the cost of a python step that does nothing."""

    def execute(self, requests):
        out = []
        for request in requests:
            rows = pb_utils.get_input_tensor_by_name(request, "ROWINDEX").as_numpy().size
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.zeros((1, rows), np.float32))]))
        return out
'''


def floor_config(model_config: str) -> str:
    """The model's config.pbtxt (same inputs, instances, batching) renamed, for the pass-through model."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    config = text_format.Parse(model_config, mc.ModelConfig())
    config.name = FLOOR
    config.ClearField("parameters")
    return text_format.MessageToString(config)


def deploy(name: str, root: Path, scratch: Path, serving: str = "") -> dict:
    """Demo data -> spec -> lock -> generate -> seeded Model -> ctrgen assemble --checkpoint (+ the floor model)."""
    import torch

    from codegen.demo.build import build_demo
    from codegen.demo.cli import DEMO_SPECS, demo_spec_text
    from codegen.output import write
    from codegen.pipeline import open_spec, render_spec
    from codegen.workflow import WORKFLOW_SCHEMA, read_workflow_features

    print(f"building the demo data under {root}/ (once) ...", file=sys.stderr, flush=True)
    paths = build_demo(root)
    dataset = DEMO_SPECS[name]
    spec_dir = root.resolve() / "bench_serve_specs"      # demo_spec_text wants the data below its parent
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = spec_dir / f"{name}.yaml"
    spec.write_text(demo_spec_text((REPO / "specs" / f"{name}.yaml").read_text(), spec_name=name,
                                   dataset_dir=root.resolve() / dataset, spec_dir=spec_dir)
                    + (serving or "triton:\n  torch:\n    instance: {kind: KIND_CPU}\n"))
    ctx = open_spec(spec)
    # The lock from the schema files the demo's ETL saved beside the workflow, as ctrgen assemble and the stale-lock
    # check read them (the same text as nvtabular's reading, without importing it here); the server loads the workflow.
    wf = ctx.workflow_path
    ctx.lock_path.write_text(read_workflow_features(ctx, wf, allow_import=not (wf / WORKFLOW_SCHEMA).is_file())
                             .lock_text())
    rendered = render_spec(ctx)
    generated = ctx.root / "generated" / rendered.name       # where assemble looks for it
    write(generated, rendered.files)
    import importlib.util
    module_spec = importlib.util.spec_from_file_location(f"bench_{name}_train_torch", generated / "train_torch.py")
    script = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(script)
    from codegen.runtime.data import load_features

    features = load_features(generated / "features.json", script.LAYOUT)
    torch.manual_seed(0)
    checkpoint = scratch / "checkpoint"
    checkpoint.mkdir()
    torch.save(script.Model(features).state_dict(), checkpoint / "model.pt")
    shutil.copy2(generated / "features.json", checkpoint / "features.json")
    repo = scratch / "repo"
    # ctrgen assemble's command in this process (torch and codegen are imported already; its workflow check still
    # loads the workflow in a fresh process), its report kept off this bench's table
    from codegen.cli import main as ctrgen

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = ctrgen(["assemble", str(spec), "--workflow", str(ctx.workflow_path), "--checkpoint", str(checkpoint),
                       "--out", str(repo)], prog_name="ctrgen", standalone_mode=False)
    if code:
        raise SystemExit(f"error: ctrgen assemble failed: {err.getvalue().strip()}")
    floor = repo / FLOOR
    (floor / "1").mkdir(parents=True)
    (floor / "1" / "model.py").write_text(FLOOR_MODEL)
    (floor / "config.pbtxt").write_text(floor_config((repo / name / "config.pbtxt").read_text()))
    plan = rendered.triton_torch
    return {"repo": repo, "plan": plan, "raw": paths[dataset]["raw"]}


def _config(repo: Path, model: str):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    return text_format.Parse((repo / model / "config.pbtxt").read_text(), mc.ModelConfig())


def instances(repo: Path, model: str) -> int:
    return sum(g.count for g in _config(repo, model).instance_group)


def torch_threads(repo: Path, model: str) -> str:
    return _config(repo, model).parameters["torch_num_threads"].string_value


def raw_rows(raw: Path, plan, rows: int) -> dict[str, np.ndarray]:
    """Validation rows as a client sends them: one [rows, 1] array per request column (rows whose string and integer
    columns are set: BYTES and INT64 carry no nulls; float columns keep their NaNs, the workflow fills them)."""
    import pandas as pd

    columns = [c.name for c in plan.preprocessing.request]
    must = [c.name for c in plan.preprocessing.request if not c.dtype.startswith("float")]
    frame = pd.concat([pd.read_parquet(raw / f"{split}.parquet")[columns] for split in ("valid", "train")])
    frame = frame.dropna(subset=must)
    if len(frame) < rows:
        raise SystemExit(f"error: {raw} has {len(frame)} rows with every column set, the bench needs {rows}")
    frame = frame.head(rows).reset_index(drop=True)
    out = {}
    for c in plan.preprocessing.request:
        values = frame[c.name].to_numpy()
        if c.dtype == "object":
            values = np.array([str(v).encode() for v in values], dtype=object)
        else:
            values = values.astype(c.dtype)
        out[c.name] = values.reshape(-1, 1)
    return out


def make_inputs(client_mod, arrays: dict[str, np.ndarray]):
    inputs = []
    for name, array in arrays.items():
        dtype = "BYTES" if array.dtype == object else client_mod.np_to_triton_dtype(array.dtype)
        tensor = client_mod.InferInput(name, list(array.shape), dtype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def server_times(server: Server, model: str) -> tuple[int, int, int]:
    """(requests, queue ns, compute ns) the server has counted for `model` (its statistics extension)."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        stats = client.get_inference_statistics(model).model_stats[0].inference_stats
    finally:
        client.close()
    compute = stats.compute_input.ns + stats.compute_infer.ns + stats.compute_output.ns
    return stats.success.count, stats.queue.ns, compute


def serialized(model: str, arrays: dict[str, np.ndarray]):
    """A ModelInferRequest (tensors in raw_input_contents); `measure` sends its bytes, encoded once."""
    from tritonclient.grpc import service_pb2
    from tritonclient.utils import np_to_triton_dtype, serialize_byte_tensor

    request = service_pb2.ModelInferRequest(model_name=model)
    for name, array in arrays.items():
        tensor = request.inputs.add(name=name, shape=list(array.shape),
                                    datatype="BYTES" if array.dtype == object else np_to_triton_dtype(array.dtype))
        del tensor
        if array.dtype == object:
            request.raw_input_contents.append(serialize_byte_tensor(array).item())
        else:
            request.raw_input_contents.append(np.ascontiguousarray(array).tobytes())
    return request


def measure(server: Server, model: str, payloads: list[dict], batch: int, concurrency: int,
            requests: int) -> dict:
    """`concurrency` threads, each with its own gRPC channel, `requests` requests each after a warm-up; the server's
    own queue and compute time per request (averages over the timed requests) beside the clients' latencies.
    Requests are protobuf-encoded once and sent as bytes, answers kept as bytes: the clients share the cores with the
    server, so they do no per-call encoding (as Triton's perf_analyzer does; encoding the 39 tensors of a Criteo
    request in Python took 0.17 ms, a tenth of the ensemble's latency)."""
    import grpc

    latencies: list[float] = []
    lock = threading.Lock()
    errors: list[str] = []
    barrier = threading.Barrier(concurrency + 1)
    prepared = [serialized(model, p).SerializeToString() for p in payloads]

    def worker(k: int) -> None:
        channel = grpc.insecure_channel(server.grpc_url, options=[("grpc.max_receive_message_length", 1 << 30)])
        infer = channel.unary_unary(MODEL_INFER)        # no (de)serializers: bytes in, bytes out
        try:
            for i in range(3):
                infer(prepared[(k + i) % len(prepared)])
            barrier.wait()
            mine = []
            for i in range(requests):
                start = time.perf_counter()
                infer(prepared[(k + i) % len(prepared)])
                mine.append(time.perf_counter() - start)
            with lock:
                latencies.extend(mine)
        except Exception as exc:  # reported after the threads end
            errors.append(f"{model}: {exc}")
            barrier.abort()
        finally:
            channel.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(concurrency)]
    for t in threads:
        t.start()
    try:
        barrier.wait(timeout=120)
    except threading.BrokenBarrierError:
        pass
    before = server_times(server, model)
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    after = server_times(server, model)
    if errors:
        raise SystemExit(f"error: {errors[0]}\nserver log:\n{server.log_text()}")
    latencies.sort()
    count = max(1, after[0] - before[0])
    return {"queue": (after[1] - before[1]) / count / 1e6, "compute": (after[2] - before[2]) / count / 1e6,
            "p50": statistics.median(latencies) * 1e3,
            "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1e3,
            "samples_s": batch * len(latencies) / wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 3)[3],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="wdl", choices=["wdl", "dcn", "dlrm", "deepfm", "movielens", "movielens_genres"],
                    help="an example spec with the torch target (its demo dataset is used)")
    ap.add_argument("--root", type=Path, default=REPO / ".demo", help="the demo folder (built when missing)")
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 64])
    ap.add_argument("--concurrency", nargs="+", type=int, default=[1, 8])
    ap.add_argument("--requests", type=int, default=200, help="timed requests per client thread and point")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds over every point, the models interleaved; the best round of each is reported "
                         "(other processes on the machine slow some rounds down)")
    ap.add_argument("--tiny", action="store_true", help="5 requests per point, one round: checks the script only")
    ap.add_argument("--serving", default="", metavar="YAML",
                    help="a triton: section for the spec instead of the defaults (with CPU torch instances), e.g. "
                         "'triton: {preprocessing: {instance: {count: 2}}, torch: {instance: {kind: KIND_CPU}}}'")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a speed target is missed")
    args = ap.parse_args()
    if args.tiny:
        args.requests, args.rounds = 5, 1
    try:
        pytriton_dir()
    except RuntimeError as exc:
        ap.error(str(exc))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import tritonclient.grpc as grpcclient

    with tempfile.TemporaryDirectory(prefix="ctrgen-bench-serve-") as tmp_name:
        tmp = Path(tmp_name)
        d = deploy(args.model, args.root, tmp, args.serving + "\n" if args.serving else "")
        name, plan = args.model, d["plan"]
        nvt = f"{name}_nvt"
        server = Server(repos=[d["repo"]], scratch=tmp)
        try:
            try:
                server.start([f"{name}_ens", FLOOR], timeout=300)
            except RuntimeError as exc:
                raise SystemExit(f"error: {exc}") from None
            rows = raw_rows(d["raw"], plan, max(args.batches) * 8)
            client = grpcclient.InferenceServerClient(server.grpc_url)
            payloads: dict[tuple[str, int], list[dict]] = {}
            worst = 0.0
            try:
                for batch in args.batches:
                    raw = [{k: v[i * batch:(i + 1) * batch] for k, v in rows.items()} for i in range(8)]
                    vcsr = []
                    for p in raw:
                        out = client.infer(nvt, make_inputs(grpcclient, p))
                        vcsr.append({x: out.as_numpy(x) for x in ("DES", "CATCOLUMN", "ROWINDEX")})
                        alone = client.infer(name, make_inputs(grpcclient, vcsr[-1])).as_numpy("OUTPUT0")
                        ens = client.infer(f"{name}_ens", make_inputs(grpcclient, p)).as_numpy("OUTPUT0")
                        worst = max(worst, float(np.abs(alone - ens).max()))
                    payloads[(f"{name}_ens", batch)] = raw
                    payloads[(nvt, batch)] = raw
                    payloads[(name, batch)] = vcsr
                    payloads[(FLOOR, batch)] = vcsr
            finally:
                client.close()
            roles = [("ensemble", f"{name}_ens"), ("model alone", name), ("nvt step", nvt), ("floor", FLOOR)]
            print(f"{name}: one Triton 2.51 server on the CPU ({os.cpu_count()} cores), gRPC clients, "
                  f"{args.requests} requests per client thread and point, best of {args.rounds} rounds")
            print(f"instances: {instances(d['repo'], nvt)} {nvt}, {instances(d['repo'], name)} {name} x "
                  f"{torch_threads(d['repo'], name)} torch thread(s) (as ctrgen assemble wrote them)")
            print("| model | batch | concurrency | p50 (ms) | p99 (ms) | samples/s | server queue (ms) | "
                  "server compute (ms) |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|")
            results = {}
            for batch in args.batches:
                for conc in args.concurrency:
                    for _ in range(args.rounds):
                        for role, model in roles:
                            r = measure(server, model, payloads[(model, batch)], batch, conc, args.requests)
                            best = results.get((role, batch, conc))
                            if best is None or r["samples_s"] > best["samples_s"]:
                                results[(role, batch, conc)] = r
                    for role, _model in roles:
                        r = results[(role, batch, conc)]
                        print(f"| {role} | {batch} | {conc} | {r['p50']:.2f} | {r['p99']:.2f} | "
                              f"{r['samples_s']:,.0f} | {r['queue']:.2f} | {r['compute']:.2f} |", flush=True)
        finally:
            server.stop()
    met = True
    for batch in args.batches:
        for conc in args.concurrency:
            ratio = results[("ensemble", batch, conc)]["samples_s"] / results[("model alone", batch, conc)]["samples_s"]
            ok = ratio >= 0.5
            met &= ok
            print(f"verdict: ensemble/model-alone throughput at batch {batch}, concurrency {conc}: {ratio:.2f} "
                  f"(target >= 0.50): {'met' if ok else 'MISSED'}")
    if 1 in args.batches:
        r = results[("nvt step", 1, args.concurrency[0])]
        ok = r["p50"] <= 1.0
        met &= ok
        print(f"verdict: nvt step p50 at batch 1, concurrency {args.concurrency[0]}: {r['p50']:.2f} ms round trip, "
              f"{r['compute']:.2f} ms in the server (target <= 1.00 ms): {'met' if ok else 'MISSED'}")
    same = worst <= 1e-6
    print(f"verdict: ensemble scores vs model alone on the same rows, largest difference: {worst:.1e}: "
          f"{'equal' if same else 'DIFFERENT'}")
    if not same:
        print("FAILED: the ensemble does not score what the model scores on the preprocessed rows")
        return 1
    print("ok" if met else "ok (scores equal; speed targets missed, see the verdicts)")
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
