"""The committed MovieLens outputs reproduce the seed notebooks: same HugeCTR calls with the same arguments,
and the model.summary() table HugeCTR 3.3 printed (tests/facts, docs/hugectr_facts.md)."""

from __future__ import annotations

import re

import pytest
from upstream import facts_tool, printed_summary, reference_dir, seed_calls, summary_as_printed_without_log

from conftest import REPO, run_ctrgen


def _without_nested(calls):
    # model.add(...) wraps the layer call; its argument is compared through the layer call itself.
    return [[name, {k: v for k, v in kw.items() if k != "#0" or name != "model.add"}] for name, kw in calls]


@pytest.mark.parametrize("seed,name", [("000", "movielens"), ("002", "movielens_genres")])
def test_generated_model_py_calls_hugectr_like_the_seed(seed, name):
    generated = (REPO / "generated" / name / "model.py").read_text()
    assert _without_nested(facts_tool().hugectr_calls(generated)) == _without_nested(seed_calls(seed))


@pytest.mark.reference
def test_upstream_fact_tables_are_current(tmp_path):
    """tools/upstream_facts.py on the reference folder writes the committed tables byte for byte."""
    assert facts_tool().main([str(reference_dir()), "--check"]) == 0


def test_slot_size_arrays_are_the_notebooks():
    for name, expected in [("movielens", [162542, 56586]), ("movielens_genres", [162542, 56586, 21])]:
        text = (REPO / "generated" / name / "model.py").read_text()
        assert f"slot_size_array={expected}".replace(" ", "") in text.replace(" ", "")


def test_summary_matches_hugectr_3_3_output():
    # Seed 002's run (HugeCTR 3.3) as printed in NVIDIA-Merlin/NVTabular@v1.0.0's notebook.
    expected = printed_summary("nvt_v1.0.0_movielens_summary.txt")
    result = run_ctrgen("summary", "specs/movielens_genres.yaml")
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected + "\n"
    assert (REPO / "generated" / "movielens_genres" / "summary.txt").read_text() == expected + "\n"


def test_seed002_flattened_summary_agrees_after_whitespace_collapse():
    flat = printed_summary("seed002_movielens_genres_summary_flattened.txt")
    ours = (REPO / "generated" / "movielens_genres" / "summary.txt").read_text()
    collapse = lambda t: [re.sub(r"\s+", " ", line).strip() for line in t.splitlines() if line.strip()]  # noqa: E731
    assert collapse(ours) == collapse(flat)


def test_seed000_summary_rows_match():
    # Seed 000 ran HugeCTR 3.1 (other table layout); its rows - layer, inputs, outputs, shape - must be ours.
    fixture = summary_as_printed_without_log("seed000_movielens_summary.txt")
    ours = (REPO / "generated" / "movielens" / "summary.txt").read_text()

    def rows(text: str) -> list[list[str]]:
        out = []
        for line in text.splitlines():
            parts = line.split()
            if parts and parts[0] in ("LocalizedSlotSparseEmbeddingHash", "Reshape", "InnerProduct", "ReLU",
                                      "BinaryCrossEntropyLoss"):
                out.append(parts)
            elif parts and out and line.startswith(" " * 40):  # continuation line (3.3 layout)
                out[-1][1] += "," + parts[0]
        return [[p for p in r if p] for r in out]

    assert rows(fixture)
    assert rows(ours) == rows(fixture)


def test_committed_outputs_are_current():
    """`ctrgen check` in-process: every example spec renders to exactly the committed generated/ (the first thing a
    change to a renderer must keep, or regenerate; `make test-fast` runs it)."""
    result = run_ctrgen("check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: specs/movielens.yaml" in result.stdout


@pytest.mark.slow
def test_check_is_clean_on_committed_outputs():
    result = run_ctrgen("check", process=True)         # the real entry point, as CI runs it
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: specs/movielens.yaml" in result.stdout
