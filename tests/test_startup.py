"""CLI start-up (issue 16 item 7): `check`, `generate` and `lock --check` decide whether a lock is stale from the
saved workflow's schema files, never importing nvtabular, torch, dask, pandas or tritonclient.grpc's client; the
command modules of `validate`, `assemble`, `demo` and `keysets` load only when run. Speed itself is measured by
bench/startup_bench.py (docs/benchmarks.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_ctrgen
from demo_data import built_demo

pytestmark = pytest.mark.slow      # processes and builds of seconds each: not in `make test-fast`

LOCK = REPO / "specs" / "criteo.features.lock.json"
# Top-level packages a quick command must not load (tritonclient.grpc: its package __init__, i.e. grpcio and the
# client; the model_config_pb2 module alone is allowed).
HEAVY = ("nvtabular", "merlin", "torch", "dask", "pandas", "pyarrow", "grpc", "numba", "distributed")
# tensorflow_metadata's protos beyond the schema the stale-lock check parses (codegen/tfmd.py); the Jinja compiler
# is loaded, but templates come compiled from the cache (codegen/render/template_cache.py).
UNUSED_TFMD = ("anomalies_pb2", "statistics_pb2", "metric_pb2", "problem_statement_pb2")

_PROBE = """
import json, sys
from codegen.cli import main
try:
    code = main(sys.argv[1:], prog_name="ctrgen", standalone_mode=False)   # click returns ctx.exit's code
    code = code if isinstance(code, int) else 0
except SystemExit as exc:
    code = exc.code
mods = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r} or m == "tritonclient.grpc"
              or m.startswith(("codegen.demo.", "codegen.keysets.", "codegen.triton.commands.",
                               "codegen.triton.deploy.", "codegen.triton.lint."))
              or m.rpartition(".")[2] in {tfmd!r} and m.startswith("tensorflow_metadata."))
print("\\n" + json.dumps({{"code": code, "modules": mods}}))
"""


def _probe(*args: str, cwd: Path = REPO) -> dict:
    """Run ctrgen ARGS in a fresh interpreter and return its exit code and the heavy modules it loaded."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    probe = _PROBE.format(heavy=set(HEAVY), tfmd=set(UNUSED_TFMD))
    proc = subprocess.run([sys.executable, "-c", probe, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "stdout": proc.stdout, "stderr": proc.stderr}


def _project(tmp_path: Path, workflow: Path, change=None) -> Path:
    """specs/dcn.yaml + the shared lock in a fresh folder, pointed at ``workflow``."""
    specs = tmp_path / "p" / "specs"
    specs.mkdir(parents=True)
    spec = (REPO / "specs" / "dcn.yaml").read_text().replace(
        "workflow: ../.demo/criteo/workflow", f"workflow: {json.dumps(str(workflow))}")
    assert str(workflow) in spec
    (specs / "dcn.yaml").write_text(spec)
    lock = json.loads(LOCK.read_text())
    if change:
        change(lock)
    (specs / "criteo.features.lock.json").write_text(json.dumps(lock))
    return specs / "dcn.yaml"


def test_check_generate_and_lock_check_do_not_import_heavy_modules(tmp_path):
    workflow = built_demo().paths["criteo"]["workflow"]
    spec = _project(tmp_path, workflow)
    generated = _probe("generate", str(spec))
    assert generated["code"] == 0, generated
    assert generated["modules"] == [], generated["modules"]
    checked = _probe("check", str(spec), cwd=spec.parent.parent)
    assert checked["code"] == 0 and "ok: specs/dcn.yaml" in checked["stdout"], checked
    assert checked["modules"] == []
    locked = _probe("lock", "--check", str(spec))
    assert locked["code"] == 0 and "ok: " in locked["stdout"], locked
    assert locked["modules"] == []


def test_stale_lock_is_found_without_nvtabular(tmp_path):
    """The same drift the nvtabular path reports, incl. the request columns (input_schema.pbtxt)."""
    workflow = built_demo().paths["criteo"]["workflow"]

    def change(lock):
        lock["categorical"][4]["cardinality"] += 1                     # C4
        lock["inputs"] = [c for c in lock["inputs"] if c["name"] != "I13"]

    spec = _project(tmp_path, workflow, change)
    result = _probe("lock", "--check", str(spec))
    assert result["code"] == 1 and result["modules"] == []
    assert "categorical.C4: lock has int64, cardinality 148, workflow has int64, cardinality 147" in result["stdout"]
    assert "inputs: lock has" in result["stdout"] and "I13 (float64)" in result["stdout"]
    generated = _probe("generate", str(spec))
    assert generated["code"] == 2 and generated["modules"] == []
    assert "stale features lock" in generated["stderr"] and "categorical.C4" in generated["stderr"]
    assert not (spec.parent.parent / "generated").exists()


def test_workflow_without_schema_files_is_checked_on_its_categories(tmp_path):
    """A workflow saved by plain Workflow.save (no output_schema.pbtxt): cardinalities from categories/ files."""
    bare = tmp_path / "workflow"
    shutil.copytree(built_demo().paths["criteo"]["workflow"], bare)
    (bare / "output_schema.pbtxt").unlink()
    (bare / "input_schema.pbtxt").unlink()
    ok = _probe("lock", "--check", str(_project(tmp_path / "ok", bare)))
    assert ok["code"] == 0 and ok["modules"] == ["pyarrow"] + [m for m in ok["modules"] if m.startswith("pyarrow.")]

    def bump(lock):
        next(c for c in lock["categorical"] if c["name"] == "C7")["cardinality"] -= 1

    stale = _probe("lock", "--check", str(_project(tmp_path / "stale", bare, bump)))
    assert stale["code"] == 1 and "categorical.C7:" in stale["stdout"] and "C4" not in stale["stdout"]
    assert not any(m.split(".")[0] in ("nvtabular", "merlin", "pandas", "dask") for m in stale["modules"])


def test_category_cardinality_is_the_encoded_range_end():
    from codegen.stale import category_cardinality

    workflow = built_demo().paths["criteo"]["workflow"]
    lock = {c["name"]: c["cardinality"] for c in json.loads(LOCK.read_text())["categorical"]}
    for name in ("C1", "C4", "C1_C2"):
        assert category_cardinality(workflow / "categories" / f"unique.{name}.parquet") == lock[name], name
    assert category_cardinality(workflow / "categories" / "unique.nope.parquet") is None


def test_help_loads_no_command_module():
    result = _probe("--help")
    assert result["code"] == 0 and result["modules"] == []
    for name in ("assemble", "demo", "keysets", "validate"):
        assert f"  {name} " in result["stdout"], name


def test_lazy_commands_short_help_is_the_commands_own():
    import importlib

    from codegen.cli import LAZY_COMMANDS, main

    for name, (module, attr, short) in LAZY_COMMANDS.items():
        cmd = getattr(importlib.import_module(module), attr)
        assert cmd.short_help == short, name
    for name in LAZY_COMMANDS:                       # each runs through the group (lazy import on first use)
        result = run_ctrgen(name, "--help")
        assert result.returncode == 0 and "Usage: ctrgen " + name in result.stdout, name
    assert set(LAZY_COMMANDS) <= set(main.list_commands(None))   # type: ignore[arg-type]


def test_model_config_module_loads_without_the_grpc_client():
    code = ("import sys; from codegen.triton.pb import mc; grpc_before = 'tritonclient.grpc' in sys.modules; "
            "from tritonclient.grpc import model_config_pb2 as again, service_pb2; "
            "print(grpc_before, mc is again, service_pb2.ModelConfigResponse().config.__class__ is mc.ModelConfig)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    # The real package imports afterwards and reuses the one module (one descriptor registration).
    assert out.returncode == 0 and out.stdout.split() == ["False", "True", "True"], out.stderr


def test_startup_bench_prints_cpu_times():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "bench/startup_bench.py", "--repeat", "1"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("demo workflow built: ")
    assert any(line.startswith("ctrgen --help ") and " s CPU" in line for line in lines)
    assert any(line.startswith("ctrgen check (") and " s CPU" in line for line in lines)
