"""Serve the PyTorch model step of generated/<model>/triton_torch/ on a real Triton server, on a GPU and on the CPU.

For each instance kind (KIND_GPU when a GPU is visible, then KIND_CPU) it builds a one-model repository from the
committed files (config.pbtxt with that kind, 1/model.py, 1/train_torch.py) plus a model.pt of the Model at its
seeded initialisation and the committed features.json, starts tritonserver (explicit model control, loopback
ports), checks from the server log which device the instance runs on, sends VCSR requests (DES, CATCOLUMN,
ROWINDEX, as the preprocessing model sends them) over HTTP and compares every score with the offline forward of the
same Model in this process. Prints the largest score difference (must be below 1e-5) and the median request
latency per batch size. Exit status 1 when a score differs.

    python bench/serve_torch.py                                   # needs torch, numpy and the nvidia-pytriton wheel
    python bench/serve_torch.py --model movielens_genres --requests 50

The ensemble with the NVTabular model (<model>_nvt) is tested in tests/test_triton_torch_serving.py; this script
covers the model step alone, which is what runs on the GPU.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_throughput import REPO, load_trainer  # noqa: E402  (bench/ is a folder of scripts, not a package)

sys.path.insert(0, str(REPO))
from codegen.runtime.data import load_features  # noqa: E402
from codegen.serve.server import Server, pytriton_dir  # noqa: E402  (the server `ctrgen serve` and the tests run)
from codegen.triton.deploy.runtime_copy import write_runtime  # noqa: E402


def build_repo(root: Path, name: str, kind: str, model: torch.nn.Module, features_path: Path) -> Path:
    """<root>/<name>/{config.pbtxt, 1/{model.py, train_torch.py, model.pt, features.json}}, instances of `kind`."""
    src = REPO / "generated" / name / "triton_torch" / name
    dest = root / name
    shutil.copytree(src, dest)
    config = (dest / "config.pbtxt").read_text()
    generated_group = re.search(r"instance_group \{\n(?:  count: \d+\n)?\}", config)
    if generated_group is None:
        raise SystemExit(f"error: {src / 'config.pbtxt'}: no instance_group without a kind to set the kind of")
    (dest / "config.pbtxt").write_text(config.replace(generated_group.group(0),
                                                      f"instance_group {{\n  count: 1\n  kind: {kind}\n}}"))
    torch.save(model.state_dict(), dest / "1" / "model.pt")
    shutil.copy2(features_path, dest / "1" / "features.json")
    shutil.copy2(REPO / "generated" / name / "train_torch.py", dest / "1" / "train_torch.py")   # as assemble does
    write_runtime(root)                           # ctrgen's runtime at the repository's root, as assemble puts it
    return root


def infer(server: Server, model: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """One request over HTTP/JSON (KServe v2), as any client sends it; the scores as an array."""
    dtypes = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64", np.dtype(np.int32): "INT32"}
    body = {"inputs": [{"name": k, "shape": list(v.shape), "datatype": dtypes[v.dtype], "data": v.ravel().tolist()}
                       for k, v in inputs.items()]}
    request = urllib.request.Request(f"http://{server.http_url}/v2/models/{model}/infer",
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            out = json.loads(response.read())["outputs"][0]
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"error: {model}: HTTP {exc.code}: {exc.read().decode(errors='replace')}\n"
                         f"server log:\n{server.log_text()}") from None
    return np.asarray(out["data"], dtype=np.float32).reshape(out["shape"])


def vcsr(features: dict, batch: int, rng: np.random.Generator) -> tuple[dict, list[np.ndarray], np.ndarray]:
    """A request as the preprocessing model sends it, and the Model's own inputs for the same rows. CATCOLUMN is
    sample-major (per sample: table by table, slot by slot), each key shifted by the cardinalities of every slot
    before its own; ROWINDEX holds one CSR row-pointer array per table."""
    dense = rng.normal(size=(batch, len(features["continuous"]))).astype(np.float32)
    sparse, counts, offsets, rowindex = [], [], [], []
    first = 0
    for s in features["sparse"]:
        ids = np.full((batch, len(s["columns"]), s["nnz"]), -1, dtype=np.int64)
        n = np.ones((batch, len(s["columns"])), dtype=np.int64)
        for j, c in enumerate(s["columns"]):
            if c["multi_hot"]:
                n[:, j] = rng.integers(1, s["nnz"] + 1, size=batch)
            for b in range(batch):
                ids[b, j, :n[b, j]] = rng.integers(0, c["cardinality"], size=n[b, j])
        cards = [c["cardinality"] for c in s["columns"]]
        offsets.append(first + np.concatenate([[0], np.cumsum(cards)[:-1]]))
        first += sum(cards)
        rowindex.extend(np.concatenate([[0], np.cumsum(n.ravel())]).tolist())
        sparse.append(ids)
        counts.append(n)
    keys = [int(k) for b in range(batch) for ids, n, off in zip(sparse, counts, offsets)
            for j in range(ids.shape[1]) for k in ids[b, j, :n[b, j]] + off[j]]
    request = {"DES": dense.reshape(1, -1), "CATCOLUMN": np.asarray(keys, dtype=np.int64).reshape(1, -1),
               "ROWINDEX": np.asarray(rowindex, dtype=np.int32).reshape(1, -1)}
    return request, sparse, dense


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="movielens", help="a generated/<model>/ with triton_torch/")
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 16, 64])
    ap.add_argument("--requests", type=int, default=200, help="timed requests per batch size")
    args = ap.parse_args()
    try:
        pytriton_dir()
    except RuntimeError as exc:
        ap.error(str(exc))
    # The committed generated/<model>/train_torch.py (assemble copies it into the served repository).
    script, features_path = load_trainer(args.model)
    torch.manual_seed(0)
    features = load_features(features_path, script.LAYOUT)
    model = script.Model(features).eval()
    kinds = (["KIND_GPU"] if torch.cuda.is_available() else []) + ["KIND_CPU"]
    ok = True
    print(f"{args.model}: Triton python backend, torch {torch.__version__}"
          + (f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""))
    print("| instance | runs on | batch | median latency (ms) | samples/s | largest score difference |")
    print("|---|---|---:|---:|---:|---:|")
    for kind in kinds:
        with tempfile.TemporaryDirectory(prefix="ctrgen-serve-") as tmp_name:
            tmp = Path(tmp_name)
            build_repo(tmp / "repo", args.model, kind, model, features_path)
            server = Server(repos=[tmp / "repo"], scratch=tmp, log_verbose=1)   # verbose: instance placement
            try:
                try:
                    server.start([args.model], timeout=180)
                except RuntimeError as exc:
                    raise SystemExit(f"error: {exc}") from None
                placed = re.search(r"ModelInstanceInitialize: \S+ \(((?:CPU|GPU|MODEL) device \d+)\)",
                                   server.log.read_text(errors="replace"))
                where = placed.group(1) if placed else "?"
                rng = np.random.default_rng(0)
                for batch in args.batches:
                    worst, times = 0.0, []
                    for i in range(args.requests + 5):
                        request, sparse, dense = vcsr(features, batch, rng)
                        start = time.perf_counter()
                        scores = infer(server, args.model, request)
                        if i >= 5:                   # the first requests warm up the instance
                            times.append(time.perf_counter() - start)
                        with torch.no_grad():
                            expected = torch.sigmoid(model(torch.from_numpy(dense),
                                                           *[torch.from_numpy(x) for x in sparse])).numpy()
                        worst = max(worst, float(np.abs(scores.reshape(-1) - expected.reshape(-1)).max()))
                    ok = ok and worst < 1e-5
                    median = statistics.median(times)
                    print(f"| {kind} | {where} | {batch} | {median * 1e3:.2f} | {batch / median:,.0f} | {worst:.2e} |",
                          flush=True)
            finally:
                server.stop()
    print("ok" if ok else "FAILED: served scores differ from the offline forward by 1e-5 or more")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
