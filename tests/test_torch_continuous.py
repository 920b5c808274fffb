"""Continuous training through the PyTorch target, for real on the CPU: specs/wdl_continuous_etc.yaml rendered against
the demo's NVTabular Criteo output, split into two passes; train pass 1, save, continue on pass 2 from the saved
state (a second process), and check that exactly the embedding rows pass 2 looks up changed, the dense layers
changed, and the two processes reach the weights of one uninterrupted run bit for bit.

The keys of pass 2 are computed here from the Parquet files and features.json's slot order, and cross-checked against
the keysets `ctrgen keysets` writes for the spec's passes (HugeCTR's global keys: the table row plus the slots of
the inputs before it).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from ruamel.yaml import YAML

from codegen.demo.cli import demo_spec_text
from codegen.keysets.cli import spec_keysets
from codegen.keysets.write import read_keyset
from codegen.output import write
from codegen.pipeline import open_spec, render_spec
from codegen.workflow import read_workflow_features
from conftest import REPO
from demo_data import built_demo
from warm_python import run as run_warm

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("torch_continuous")]    # one worker: one setup

NAME = "wdl_continuous_etc"
BATCH = 128


def _write_pass(folder: Path, table: pa.Table) -> Path:
    """One pass as NVTabular writes it: part files and a HugeCTR _file_list.txt (count, then the paths)."""
    folder.mkdir(parents=True)
    half = table.num_rows // 2
    parts = [table.slice(0, half), table.slice(half)]
    for i, part in enumerate(parts):
        pq.write_table(part, folder / f"part_{i}.parquet")
    (folder / "_file_list.txt").write_text(f"{len(parts)}\n" + "".join(
        f"{folder / f'part_{i}.parquet'}\n" for i in range(len(parts))))
    return folder / "_file_list.txt"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The demo's Criteo training rows split in two passes (8 batches each, the first rows and the next),
    the spec's passes pointed at them, train_torch.py rendered, and the keysets of both passes written."""
    demo = built_demo()
    root = tmp_path_factory.mktemp("torch-continuous")
    dataset = demo.root / "criteo"
    files = sorted((dataset / "train").glob("part_*.parquet"), key=lambda p: int(p.stem.split("_")[1]))
    table = pa.concat_tables([pq.read_table(f) for f in files])
    per_pass = 8 * BATCH      # of 4,800: each pass still looks up rows the other does not (asserted in the test)
    lists = [_write_pass(root / f"pass{k + 1}", table.slice(k * per_pass, per_pass)) for k in range(2)]

    spec_dir = demo.root / "torch-continuous-specs"
    spec_dir.mkdir(exist_ok=True)
    text = demo_spec_text((REPO / "specs" / f"{NAME}.yaml").read_text(), spec_name=NAME, dataset_dir=dataset,
                          spec_dir=spec_dir)
    keysets = [lst.with_suffix(".keyset") for lst in lists]
    yaml = YAML()
    doc = yaml.load(text)
    doc["data"]["train"] = [str(lists[0])]
    doc["continuous_training"]["passes"] = [{"keyset": [str(keysets[0])]},
                                            {"source": [str(lists[1])], "keyset": [str(keysets[1])]}]
    buf = io.StringIO()
    yaml.dump(doc, buf)
    text = buf.getvalue()
    spec = spec_dir / f"{NAME}.yaml"
    spec.write_text(text)
    ctx = open_spec(spec)
    ctx.lock_path.write_text(read_workflow_features(ctx, ctx.workflow_path).lock_text())
    write(root / "out", render_spec(ctx).files)
    spec_keysets(spec)
    return {"script": root / "out" / "train_torch.py", "root": root, "lists": lists, "keysets": keysets,
            "features": json.loads((root / "out" / "features.json").read_text()), "spec": ctx.spec}


def run(setup, out: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    env["PYTHONPATH"] = str(REPO)   # codegen.runtime of this checkout; besides it torch, numpy, pyarrow only
    proc = run_warm([sys.executable, str(setup["script"]), "--device", "cpu", "--epochs", "1", "--batch-size",
                     str(BATCH), "--display", "1000", "--eval-interval", "1000", "--max-eval-batches", "4",
                     "--output-dir", str(out), *args], env=env, cwd=REPO, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def table_rows(files: list[Path], features: dict) -> dict[str, np.ndarray]:
    """Per sparse input, the embedding-table rows the data looks up: each id plus its slot's offset (the
    cardinalities of the input's slots before it)."""
    out = {}
    for s in features["sparse"]:
        offsets = np.concatenate([[0], np.cumsum([c["cardinality"] for c in s["columns"]])[:-1]])
        rows = [pq.read_table(f, columns=[c["name"] for c in s["columns"]]) for f in files]
        out[s["input"]] = np.unique(np.concatenate([
            t.column(c["name"]).to_numpy().astype(np.int64) + off
            for t in rows for c, off in zip(s["columns"], offsets)]))
    return out


def parts(list_file: Path) -> list[Path]:
    return sorted(list_file.parent.glob("part_*.parquet"))


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)


def test_pass_two_changes_exactly_its_rows_and_resumes_bit_for_bit(setup):
    """Seconds: two continuous-training passes, one resumed in a new process, compared bit for bit."""
    features, root = setup["features"], setup["root"]
    tables = {e.name: e.input for e in setup["spec"].embeddings}        # embedding -> sparse input

    # Pass by pass: two processes, the second continuing from pass_1.pt (the default for --passes 2).
    run(setup, root / "stepwise", "--passes", "1")
    proc = run(setup, root / "stepwise", "--passes", "2")
    assert f"resumed from {root / 'stepwise' / 'pass_1.pt'}" in proc.stdout
    # Uninterrupted: both passes in one process.
    run(setup, root / "whole")

    after1, after2 = load(root / "stepwise" / "pass_1.pt"), load(root / "stepwise" / "pass_2.pt")
    whole = load(root / "whole" / "pass_2.pt")
    assert after1["pass"] == 1 and after2["pass"] == 2 and after2["iteration"] > after1["iteration"] > 0

    rows1 = table_rows(parts(setup["lists"][0]), features)
    rows2 = table_rows(parts(setup["lists"][1]), features)
    for name, inp in tables.items():
        # The split gives each pass keys the other does not have (else the check below would prove little).
        assert np.setdiff1d(rows2[inp], rows1[inp]).size and np.setdiff1d(rows1[inp], rows2[inp]).size, inp
        w1, w2 = after1["model"][f"{name}.weight"], after2["model"][f"{name}.weight"]
        in2 = torch.zeros(w1.shape[0], dtype=torch.bool)
        in2[torch.from_numpy(rows2[inp])] = True
        changed = (w1 != w2).any(dim=1)
        assert changed[in2].all(), f"{name}: {int((~changed[in2]).sum())} rows of pass 2 did not change"
        assert torch.equal(w1[~in2], w2[~in2]), f"{name}: rows outside pass 2 moved"
        assert int((~in2).sum()) > 0 and int(in2.sum()) == rows2[inp].size

    dense = [k for k in after1["model"] if not any(k == f"{n}.weight" for n in tables)]
    assert dense and all(not torch.equal(after1["model"][k], after2["model"][k])
                         for k in dense if after1["model"][k].is_floating_point())

    # Resuming reproduces the uninterrupted run exactly (same shuffles per pass, dropout RNG restored, optimizer
    # state saved): the weights after each pass are bit-identical.
    for k, v in whole["model"].items():
        assert torch.equal(v, after2["model"][k]), k
    for k, v in load(root / "whole" / "pass_1.pt")["model"].items():
        assert torch.equal(v, after1["model"][k]), k
    metrics = json.loads((root / "whole" / "metrics.json").read_text())
    assert [p["pass"] for p in metrics["passes"]] == [1, 2] and metrics["auc"] > 0.5


def test_keysets_of_the_passes_are_the_rows_it_trains(setup):
    """`ctrgen keysets` (HugeCTR's global keys) and train_torch.py's table rows name the same embedding rows."""
    features = setup["features"]
    starts, total = {}, 0
    for s in features["sparse"]:
        starts[s["input"]] = total
        total += sum(c["cardinality"] for c in s["columns"])
    for list_file, keyset in zip(setup["lists"], setup["keysets"]):
        keys = read_keyset(keyset, "int64")
        rows = table_rows(parts(list_file), features)
        expected = np.concatenate([rows[s["input"]] + starts[s["input"]] for s in features["sparse"]])
        assert np.array_equal(np.sort(keys), np.sort(expected))


def test_pass_arguments_are_checked(setup, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    env["PYTHONPATH"] = str(REPO)   # codegen.runtime of this checkout; besides it torch, numpy, pyarrow only
    proc = run_warm([sys.executable, str(setup["script"]), "--device", "cpu", "--pass-train", "a",
                     "--output-dir", str(tmp_path)], env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 2 and "--pass-train given 1 time(s); the spec has 2 passes" in proc.stderr
    proc = run_warm([sys.executable, str(setup["script"]), "--device", "cpu", "--passes", "2",
                     "--output-dir", str(tmp_path)], env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 2 and "pass_1.pt: cannot load the checkpoint" in proc.stderr and "Traceback" not in \
        proc.stderr
