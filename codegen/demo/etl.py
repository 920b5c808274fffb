"""Running an NVTabular workflow on the CPU the way the notebooks do, deterministically and without littering the cwd.

* ``Categorify.fit`` writes ``./categories`` into the current directory (environment.md §2.5), so fit, transform and
  save run inside a scratch working directory; the schema's ``cat_path`` is then the notebooks' relative
  ``.//categories/unique.<col>.parquet`` instead of a random temporary path. (The working directory is
  process-wide: don't run two ETLs concurrently in threads of one process.)
* ``Shuffle.PER_PARTITION`` shuffles with ``DataFrame.sample`` and numpy's global RNG (merlin/io/shuffle.py), so the
  ETL runs on dask's synchronous scheduler with that RNG seeded (and restored afterwards).
* ``Workflow.save`` writes no schema (§3.2); :func:`save_workflow` adds ``output_schema.pbtxt`` so that
  ``codegen.workflow.read_features(..., allow_import=False)`` can read a saved workflow without nvtabular.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from ..workflow import WORKFLOW_INPUT_SCHEMA, WORKFLOW_SCHEMA

OUT_FILES_PER_PROC = 2


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence merlin's notices (no TensorFlow/PyTorch dtype mappings; "Dataset in CPU mode ... experimental")."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def import_nvtabular():
    from ..runtime.nvt_import import import_nvtabular

    return import_nvtabular()


@contextlib.contextmanager
def scratch_cwd() -> Iterator[Path]:
    """Run inside a fresh temporary working directory (removed afterwards)."""
    old = os.getcwd()
    tmp = Path(tempfile.mkdtemp(prefix="ctrgen-etl-"))
    os.chdir(tmp)
    try:
        yield tmp
    finally:
        os.chdir(old)
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def seeded_numpy(seed: int) -> Iterator[None]:
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def save_workflow(workflow, path: Path) -> Path:
    """``Workflow.save`` plus ``output_schema.pbtxt`` and ``input_schema.pbtxt`` written with merlin-core
    (environment.md §3.2): ``check`` and ``lock --check`` read them instead of unpickling the workflow."""
    from merlin.schema.io.tensorflow_metadata import TensorflowMetadata

    workflow.save(str(path))
    TensorflowMetadata.from_merlin_schema(workflow.output_schema).to_proto_text_file(str(path), WORKFLOW_SCHEMA)
    TensorflowMetadata.from_merlin_schema(workflow.input_schema).to_proto_text_file(str(path),
                                                                                    WORKFLOW_INPUT_SCHEMA)
    return path


# The steps build.py counts (etl.py also reports reading the inputs, which is part of fit here).
STEPS = ("fit", "transform train", "transform valid", "save workflow")


def run_section(name: str, section: dict, raw_dir: Path, *, step: Callable[[str], None] | None = None
                ) -> dict[str, Path]:
    """Run an ``etl:`` section with ctrgen's generated etl.py (codegen.etl): the demo's ETL is the one users get."""
    import json

    from ..etl.run import run_section as run

    spec = {"version": 1, "name": name, "hugectr_version": "23.06",
            "data": {"format": "parquet", "train": ["train/_file_list.txt"], "eval": "valid/_file_list.txt"},
            "model": {"preset": "mlp", "units": [1]}, "etl": section}
    report = step or (lambda _label: None)
    with quiet():
        out = run(json.dumps(spec, indent=1), Path(f"{name}.demo.yaml"), Path(raw_dir),
                  progress=lambda label: report(label) if label in STEPS else None)
    return {"train": out / "train", "valid": out / "valid", "workflow": out / "workflow"}


def fit_transform_save(workflow, train_path: Path, valid_path: Path, out_dir: Path, *, cats: Sequence[str],
                       conts: Sequence[str], labels: Sequence[str], dtypes: dict, seed: int,
                       step: Callable[[str], None] | None = None) -> dict[str, Path]:
    """Fit on train, write ``out_dir/{train,valid}`` with ``to_parquet`` and save ``out_dir/workflow``.

    ``step(label)`` is called as each of the four phases starts (fit, train, valid, save).
    """
    import dask

    nvt = import_nvtabular()
    out_dir = Path(out_dir).resolve()
    train_path, valid_path = Path(train_path).resolve(), Path(valid_path).resolve()
    paths = {"train": out_dir / "train", "valid": out_dir / "valid", "workflow": out_dir / "workflow"}
    for p in paths.values():
        if p.exists():
            shutil.rmtree(p)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = step or (lambda _label: None)
    write = dict(cats=list(cats), conts=list(conts), labels=list(labels), dtypes=dtypes,
                 out_files_per_proc=OUT_FILES_PER_PROC)
    with scratch_cwd(), seeded_numpy(seed), dask.config.set(scheduler="synchronous"), quiet():
        train = nvt.Dataset(str(train_path), engine="parquet", cpu=True)
        valid = nvt.Dataset(str(valid_path), engine="parquet", cpu=True)
        report("fit")
        workflow.fit(train)
        report("transform train")
        # The notebooks shuffle the training output per partition and leave validation in order.
        workflow.transform(train).to_parquet(output_path=str(paths["train"]), shuffle=nvt.io.Shuffle.PER_PARTITION,
                                             **write)
        report("transform valid")
        workflow.transform(valid).to_parquet(output_path=str(paths["valid"]), shuffle=False, **write)
        report("save workflow")
        save_workflow(workflow, paths["workflow"])
    return paths
