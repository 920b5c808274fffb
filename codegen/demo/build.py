"""Build the embedded demo datasets: synthetic raw data plus the real NVTabular ETL (see movielens.py, criteo.py).

Layout under ``root`` (``paths`` in the returned dict)::

    demo.json                          stamp: format, seed, hash of the demo code, nvtabular version
    movielens/raw/                     ratings.csv, movies.csv, movies_converted.parquet, train/valid.parquet,
                                       truth.json (planted ground truth, oracle and baseline AUCs)
    movielens/{train,valid}/           to_parquet output: part_*.parquet, _file_list.txt, _metadata.json,
                                       schema.pbtxt, .merlin/schema.json
    movielens/workflow/                workflow.pkl, metadata.json, categories/, output_schema.pbtxt
    movielens_genres/{train,valid,workflow}/   the same ratings with multi-hot genres (raw: movielens/raw)
    criteo/{raw,train,valid,workflow}/

A second call with the same seed and unchanged demo code returns at once (the stamp is written last, so an
interrupted build is redone). Only this module's standard-library imports load at import time: numpy, pandas and
nvtabular are imported when a build actually runs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from importlib import metadata
from pathlib import Path
from typing import Callable

DEMO_FORMAT = 1
DEFAULT_SEED = 20240501
STAMP = "demo.json"
DATASETS = ("movielens", "movielens_genres", "criteo")
# Steps reported through ``progress``: synthesize + 4 ETL phases, 4 ETL phases, synthesize + 4 ETL phases.
TOTAL_STEPS = 14

Progress = Callable[[str, int, int], None]


def demo_paths(root: Path) -> dict[str, dict[str, Path]]:
    root = Path(root).resolve()
    ml, genres, criteo = (root / d for d in DATASETS)
    out = {
        "movielens": {"raw": ml / "raw", "train": ml / "train", "valid": ml / "valid", "workflow": ml / "workflow"},
        "movielens_genres": {"raw": ml / "raw", "train": genres / "train", "valid": genres / "valid",
                             "workflow": genres / "workflow"},
        "criteo": {"raw": criteo / "raw", "train": criteo / "train", "valid": criteo / "valid",
                   "workflow": criteo / "workflow"},
    }
    for d in out.values():
        d["truth"] = d["raw"] / "truth.json"
    return out


def _stamp(seed: int) -> dict:
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    # etl.py's code: its template and the static parts it includes (codegen/programs/etl.py).
    etl_code = sorted((here.parent / "etl").glob("*.py")) + [here.parent.parent / "templates" / "etl" / "etl.py.j2",
                                                              here.parent / "programs" / "etl.py"]
    for f in sorted(here.glob("*.py")) + [here.parent / "workflow.py"] + [f for f in etl_code if f.is_file()]:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    try:
        nvt_version = metadata.version("nvtabular")
    except metadata.PackageNotFoundError:
        nvt_version = None
    return {"ctrgen_demo": DEMO_FORMAT, "seed": seed, "code_sha256": h.hexdigest(), "nvtabular": nvt_version}


def demo_is_current(root: Path, *, seed: int = DEFAULT_SEED) -> bool:
    """True when ``root`` holds a complete demo built with this seed, code and nvtabular version."""
    stamp = Path(root) / STAMP
    try:
        if json.loads(stamp.read_text(encoding="utf-8")) != _stamp(seed):
            return False
    except (OSError, ValueError):
        return False
    required = ("workflow/workflow.pkl", "workflow/output_schema.pbtxt", "train/_metadata.json",
                "train/.merlin/schema.json", "valid/_metadata.json", "valid/_file_list.txt")
    return all((d["raw"] / "truth.json").is_file() and all((d["train"].parent / r).is_file() for r in required)
               for d in demo_paths(root).values())


def build_demo(root: Path, *, progress: Progress | None = None, seed: int = DEFAULT_SEED,
               force: bool = False) -> dict[str, dict[str, Path]]:
    """Build (or reuse) the demo under ``root``; returns ``{dataset: {raw, train, valid, workflow, truth}}``.

    ``progress(label, done, total)`` is called as each step starts (``done`` steps finished out of ``total``) and
    once at the end with ``done == total`` (label ``"up to date"`` when nothing had to be built).
    """
    root = Path(root).resolve()
    paths = demo_paths(root)
    report = progress or (lambda _label, _done, _total: None)
    if not force and demo_is_current(root, seed=seed):
        report("up to date", TOTAL_STEPS, TOTAL_STEPS)
        return paths

    from . import criteo, movielens  # numpy / pandas; nvtabular is imported by the ETL itself

    (root / STAMP).unlink(missing_ok=True)
    for name in DATASETS:
        shutil.rmtree(root / name, ignore_errors=True)
    done = 0

    def stepper(dataset: str) -> Callable[[str], None]:
        def step(label: str) -> None:
            nonlocal done
            report(f"{dataset}: {label}", done, TOTAL_STEPS)
            done += 1
        return step

    step = stepper("movielens")
    step("synthesize")
    movielens.write_raw(movielens.synthesize(seed), paths["movielens"]["raw"], seed=seed)
    movielens.run_etl(paths["movielens"]["raw"], root / "movielens", multi_hot=False, seed=seed, step=step)
    movielens.run_etl(paths["movielens"]["raw"], root / "movielens_genres", multi_hot=True, seed=seed,
                      step=stepper("movielens_genres"))
    step = stepper("criteo")
    step("synthesize")
    criteo.write_raw(criteo.synthesize(seed), paths["criteo"]["raw"], seed=seed)
    criteo.run_etl(paths["criteo"]["raw"], root / "criteo", seed=seed, step=step)

    (root / STAMP).write_text(json.dumps(_stamp(seed), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    report("done", TOTAL_STEPS, TOTAL_STEPS)
    return paths
