"""Real training runs of committed generated train_torch.py scripts on small synthetic data, in this process: a
features.json whose tables are cut to 40 rows (the script's layout, small tables) and one Parquet file per split of
its columns (labels 0/1, continuous values in [0, 1), ids within each column's cardinality, multi-hot lists of 1 to
nnz ids). The data carries no signal: a run shows the script trains and writes its run folder, not that it learns."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from conftest import REPO

ROWS = 300
FAST = ("--device", "cpu", "--max-iter", "4", "--batch-size", "64", "--display", "2", "--eval-interval", "2",
        "--snapshot", "2", "--max-eval-batches", "1", "--eval-batch-size", "128", "--threads", "1")


def columns(features: dict, rng: np.random.Generator, rows: int) -> dict[str, pa.Array]:
    cols = {c["name"]: pa.array(rng.integers(0, 2, rows).astype(np.int8)) for c in features["labels"]}
    cols.update({c["name"]: pa.array(rng.random(rows).astype(np.float32)) for c in features["continuous"]})
    for s in features["sparse"]:
        for c in s["columns"]:
            if c["multi_hot"]:
                lengths = rng.integers(1, s["nnz"] + 1, rows)
                cols[c["name"]] = pa.array([rng.integers(0, c["cardinality"], n).tolist() for n in lengths],
                                           pa.list_(pa.int64()))
            else:
                cols[c["name"]] = pa.array(rng.integers(0, c["cardinality"], rows))
    return cols


def trained(root: Path, name: str, *, rows_per_slot: int | None = 40, fast: tuple[str, ...] = FAST) -> dict[str, Path]:
    """generated/<name>/train_torch.py beside a features.json of small tables (``rows_per_slot``; None: the committed
    cardinalities, as a served model needs them), data of its columns, a run of it."""
    folder = root / name
    folder.mkdir()
    shutil.copy(REPO / "generated" / name / "train_torch.py", folder)
    features = json.loads((REPO / "generated" / name / "features.json").read_text())
    for s in features["sparse"]:
        for c in s["columns"]:
            c["cardinality"] = rows_per_slot or c["cardinality"]
    (folder / "features.json").write_text(json.dumps(features))
    rng = np.random.default_rng(0)
    for split in ("train", "valid"):
        (folder / split).mkdir()
        pq.write_table(pa.table(columns(features, rng, ROWS)), folder / split / "part_0.parquet")
    spec = importlib.util.spec_from_file_location(f"synthetic_{name}_train_torch", folder / "train_torch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = folder / "run"
    assert module.main(["--train", str(folder / "train"), "--eval", str(folder / "valid"), *fast,
                        "--output-dir", str(run)]) == 0
    return {"generated": folder, "valid": folder / "valid", "run": run}
