"""nvtabular is imported without PyTorch (merlin would import torch only for its dtype names: ~1 s of CPU and ~230 MB
per process) by ctrgen, the generated etl.py (also in each local Dask worker, through its preload) and the Triton
preprocessing model (the runtime's nvt_model); torch stays importable afterwards."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow

CHECK = """
import runpy, sys
assert "torch" not in sys.modules
from codegen.runtime.nvt_import import import_nvtabular
nvt = import_nvtabular()
assert "torch" not in sys.modules and nvt.Workflow, sorted(k for k in sys.modules if k.startswith("torch"))[:5]
# The generated etl.py's copy of the function (templates/_macros.j2), and the Dask worker it starts; the Triton
# preprocessing model uses ctrgen's (its runtime's nvt_model imports it).
from codegen.runtime import nvt_model
assert nvt_model.import_nvtabular is import_nvtabular
for path in ("generated/movielens/etl.py",):
    source = open(path).read()
    start = source.index("def import_nvtabular():")
    namespace = {"sys": sys, "warnings": __import__("warnings")}
    exec(source[start:source.index("\\n\\n\\n", start)], namespace)
    assert namespace["import_nvtabular"]() is nvt
etl = runpy.run_path("generated/movielens/etl.py", run_name="ctrgen_etl")
client = etl["start_client"](1, None, False)
try:
    worker = list(client.run(lambda: sorted(k for k in sys.modules if k in ("torch", "nvtabular"))).values())
finally:
    client.close()
    client.cluster.close()
assert worker == [["nvtabular"]], worker
import torch
assert "torch" in sys.modules and float(torch.ones(2).sum()) == 2.0
print("ok")
"""


def test_nvtabular_is_imported_without_torch_here_in_generated_code_and_in_dask_workers():
    """Seconds: fresh interpreters (and a Dask worker) import NVTabular, as the three places under test do."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-c", CHECK], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
