"""Instance counts of the python-backend models: ``count: auto`` (the default) leaves generated/ machine-independent
and ``ctrgen assemble`` writes the count for the machine (or ``--cores N``); a count in the spec is kept; bad counts
are spec errors."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from codegen.pipeline import open_spec, render_spec
from codegen.triton.deploy.instances import Machine, for_machine
from codegen.triton.layout import repository_sources
from codegen.triton.lint.modelconfig import load_config
from tests.conftest import REPO, run_ctrgen
from tests.specfactory import MOVIELENS_LOCK, write_spec
from tests.test_triton_torch_repo import assemble, inputs  # noqa: F401  (the assemble fixture)

BASE = (REPO / "specs" / "movielens.yaml").read_text()


def plan(tmp_path, serving: str = ""):
    return render_spec(open_spec(write_spec(tmp_path, BASE + serving, MOVIELENS_LOCK, name="movielens"))).triton_torch


def counts(repository_plan, machine: Machine) -> dict[str, int]:
    return {m.name: m.instances[0].count for m in for_machine(repository_plan, machine)}


def test_generated_configs_name_no_count_by_default():
    for folder in ("triton", "triton_torch"):
        sources = repository_sources(REPO / "generated" / "movielens", folder)
        for model in ("movielens_nvt", "movielens") if folder == "triton_torch" else ("movielens_nvt",):
            config = load_config(sources[PurePosixPath(model, "config.pbtxt")]).config
            assert [g.count for g in config.instance_group] == [0], (folder, model)   # 0: unset


@pytest.mark.parametrize("cores, nvt, model", [(1, 1, 1), (2, 2, 1), (3, 3, 1), (4, 4, 2), (8, 8, 4), (9, 8, 4),
                                               (32, 8, 16), (33, 8, 16), (64, 8, 16)])
def test_auto_counts_follow_the_cores(tmp_path, cores, nvt, model):
    assert counts(plan(tmp_path), Machine(cores=cores, gpus=0)) == {"movielens_nvt": nvt, "movielens": model}


def test_auto_counts_divide_the_cores_by_the_torch_threads(tmp_path):
    threaded = plan(tmp_path, "triton:\n  torch:\n    threads: 2\n")
    assert counts(threaded, Machine(cores=8, gpus=0)) == {"movielens_nvt": 8, "movielens": 2}
    assert counts(threaded, Machine(cores=3, gpus=0)) == {"movielens_nvt": 3, "movielens": 1}
    assert counts(threaded, Machine(cores=1, gpus=0)) == {"movielens_nvt": 1, "movielens": 1}


def test_gpu_instances_count_one_per_gpu(tmp_path):
    # KIND_AUTO (the torch default) runs on the GPU when the machine has one; the nvt step stays on the CPU.
    assert counts(plan(tmp_path), Machine(cores=32, gpus=2)) == {"movielens_nvt": 8, "movielens": 1}
    gpu = plan(tmp_path, "triton:\n  torch:\n    instance: {kind: KIND_GPU}\n")
    assert counts(gpu, Machine(cores=32, gpus=0)) == {"movielens_nvt": 8, "movielens": 1}


def test_a_count_in_the_spec_is_kept(tmp_path):
    pinned = plan(tmp_path, "triton:\n  preprocessing:\n    instance: {count: 3}\n"
                            "  torch:\n    instance: {kind: KIND_CPU, count: 1}\n")
    assert counts(pinned, Machine(cores=64, gpus=0)) == {}
    assert [m.instances[0].count for m in pinned.models[:2]] == [3, 1]


@pytest.mark.parametrize("value, ok, message", [
    ("auto", True, ""), ("1", True, ""), ("2147483647", True, ""),
    ("0", False, "must be 'auto' or greater than 0, got 0"), ("-1", False, "greater than 0, got -1"),
    ("2147483648", False, "less than or equal to 2147483647 (2**31-1, the C++ int it becomes)"),
    ("many", False, "must be 'auto' or an integer, not a string 'many'"), ('"2"', False, "not a string '2'"),
    ("Auto", False, "not a string 'Auto'"), ("2.0", False, "not a float 2.0"), ("true", False, "not a boolean True"),
    ("[1]", False, "not a list")])
def test_count_is_a_positive_integer_or_auto(tmp_path, value, ok, message):
    path = write_spec(tmp_path, BASE + f"triton:\n  preprocessing:\n    instance: {{count: {value}}}\n",
                      MOVIELENS_LOCK, name="movielens")
    result = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    if ok:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().count("\n") == 0, result.stderr          # one line
    line = result.stderr.strip()
    assert "movielens.yaml:" in line and "triton.preprocessing.instance.count: " in line and message in line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_assemble_writes_the_counts_for_the_cores(inputs, tmp_path):  # noqa: F811
    """Seconds when it is its process's first assemble (tests/test_triton_torch_repo.py's ``inputs``: the workflow is
    proven to load in a process of its own)."""
    workflow, checkpoint = inputs
    for cores, expected in (("2", (2, 1)), ("12", (8, 6))):
        out = tmp_path / f"repo{cores}"
        result = assemble("--workflow", str(workflow), "--checkpoint", str(checkpoint), "--out", str(out),
                          "--cores", cores)
        assert result.returncode == 0, result.stderr
        got = tuple(load_config(out / m / "config.pbtxt").config.instance_group[0].count
                    for m in ("movielens_nvt", "movielens"))
        assert got == expected
        text = (out / "movielens" / "config.pbtxt").read_text()
        assert f"chosen by ctrgen assemble for {cores} core(s)" in text and text.startswith("# @generated")
        assert f"movielens: {expected[1]} instance(s)" in result.stderr
        # The rest of the config is the generated one.
        generated = load_config(REPO / "generated" / "movielens" / "triton_torch" / "movielens" / "config.pbtxt")
        served = load_config(out / "movielens" / "config.pbtxt").config
        served.instance_group[0].ClearField("count")
        assert served == generated.config
    result = assemble("--workflow", str(workflow), "--checkpoint", str(checkpoint), "--out", str(tmp_path / "x"),
                      "--cores", "0")
    assert result.returncode == 2 and "--cores" in result.stderr and not (tmp_path / "x").exists()
