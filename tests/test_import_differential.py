"""Differential test of the importer's evaluator: generated programs run by CPython and by the evaluator must give
the same value, or the evaluator refuses; never a different value (issue 24).

The suite runs the committed seed corpus (tests/data/evaluator_corpus.json) and a few hundred fresh programs (a few
seconds). The long run, 10,000+ programs:

    CTRGEN_DIFF_BATCHES=500 .venv/bin/python -m pytest tests/test_import_differential.py -q -s -p no:randomly

(batches of 20 programs; ``CTRGEN_DIFF_WRITE=1`` adds the programs of the run to the seed corpus).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from differential_programs import HOME, HOMES, programs, run_cpython, run_reader

CORPUS = Path(__file__).parent / "data" / "evaluator_corpus.json"
BATCHES = int(os.environ.get("CTRGEN_DIFF_BATCHES", "15"))
BATCH = 20
_seen: list[str] = []
_counts = [0, 0]     # programs with CPython's value, programs run (printed by the long run)


def _check(sources: list[str], home: str = HOME) -> tuple[int, int]:
    expected = run_cpython(sources, home)
    exact = 0
    for src, want in zip(sources, expected):
        got = run_reader(src, home)
        if got is not None:
            assert got == want, f"the evaluator gives {got}, CPython {want}, with HOME={home!r}, for:\n{src}"
            exact += 1
    return exact, len(sources)


def test_seed_corpus_gives_python_values_or_refusals():
    sources = json.loads(CORPUS.read_text(encoding="utf-8"))
    exact, total = _check(sources)
    assert total >= 200
    assert exact >= total * 0.7       # mostly exact: a refusal is allowed, not the rule
    # The programs with a path under the home folder, with every other HOME too.
    home = [s for s in sources if "expanduser" in s]
    assert len(home) >= 100
    for other in HOMES[1:]:
        exact_home, _ = _check(home, other)
        assert exact_home >= len(home) * 0.5


@settings(max_examples=BATCHES, derandomize=os.environ.get("CTRGEN_DIFF_BATCHES") is None, deadline=None,
          phases=[Phase.explicit, Phase.generate],    # a failure prints its program; shrinking 20 at once is slow
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@pytest.mark.slow
@given(st.lists(programs(), min_size=BATCH, max_size=BATCH), st.sampled_from(HOMES))
def test_generated_programs_give_python_values_or_refusals(sources: list[str], home: str):
    """Seconds: a few hundred fresh programs (hypothesis), each run by CPython and by the evaluator."""
    exact, total = _check(sources, home)
    _counts[0] += exact
    _counts[1] += total
    if os.environ.get("CTRGEN_DIFF_BATCHES"):
        print(f"\nprograms {_counts[1]}: {_counts[0]} gave CPython's value, {_counts[1] - _counts[0]} refused")
    if os.environ.get("CTRGEN_DIFF_WRITE"):
        _seen.extend(sources)
        old = json.loads(CORPUS.read_text(encoding="utf-8")) if CORPUS.exists() else []
        CORPUS.write_text(json.dumps(sorted(set(old) | set(_seen)), indent=0) + "\n", encoding="utf-8")
