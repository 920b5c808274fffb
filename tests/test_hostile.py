"""Hostile inputs (issue 28), the quick part: for each kind of input, the cases of tools/hostile_cases.py marked
``quick``, built at test time in a temporary folder and run in-process. Each must end as the case expects: refused
(exit 2 or the command's finding status, one line per problem, no traceback, nothing written or changed) or
accepted with a correct, inert output. `make hostile` (tools/hostile.py) runs every case, each in its own process
under time, memory and file-size limits, and prints the table of docs/testing.md."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import REPO, run_ctrgen

_spec = importlib.util.spec_from_file_location("hostile_cases", REPO / "tools" / "hostile_cases.py")
assert _spec is not None and _spec.loader is not None
H = importlib.util.module_from_spec(_spec)
sys.modules["hostile_cases"] = H
_spec.loader.exec_module(H)
import hostile_outcomes as O  # noqa: E402  (beside hostile_cases, which put tools/ on the path)

pytestmark = pytest.mark.slow   # a process per case kind: seconds (make test-fast leaves them out)

QUICK = [c for c in H.CASES if c.quick and not c.area]
KINDS = sorted({c.kind for c in QUICK})


def _run(c, folder):
    from codegen.errors import UserError

    run = c.build(folder)
    before = O.snapshot(folder)
    if run.call is not None:
        try:
            run.call()
            result = O.Result(0, "", "")
        except UserError as exc:
            result = O.Result(2, "", exc.format() + "\n")
    else:
        done = run_ctrgen(*run.argv, cwd=run.cwd)
        result = O.Result(done.returncode, done.stdout, done.stderr)
    return O.classify(c, run, result, before, O.snapshot(folder), folder)


def test_every_kind_has_quick_cases_and_the_sweep_has_hundreds():
    assert len(H.CASES) >= 400
    assert {c.kind for c in H.CASES if not c.area} == set(KINDS), "a kind without a quick case"


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_inputs_of_each_kind(kind, tmp_path):
    wrong = []
    for i, c in enumerate(c for c in QUICK if c.kind == kind):
        outcome, detail = _run(c, tmp_path / str(i))
        if not O.expected_outcome(c, outcome):
            wrong.append(f"{c.id}: {outcome} ({detail}), expected {c.expect}")
    assert not wrong, "\n".join(wrong)


def test_the_sweep_sees_what_it_must_see(tmp_path):
    """The classifier itself: a refusal that wrote a file is a partial write, an exit 0 where a refusal is expected
    is silent wrong, a refusal split by a raw newline is an injection, a Python output calling os.system is one."""
    c = O.Case("x", "y", lambda d: O.Run(d, ["generate"]), "refused")
    run = O.Run(tmp_path, ["generate"])
    assert O.classify(c, run, O.Result(2, "", "a: b\n"), {}, {"f": ("file", 1, b"x")}, tmp_path)[0] == "partial write"
    assert O.classify(c, run, O.Result(0, "", ""), {}, {}, tmp_path)[0] == "silent wrong"
    assert O.classify(c, run, O.Result(2, "", "a\x1b[2Jb: c\n"), {}, {}, tmp_path)[0] == "injection"
    assert O.classify(c, run, O.Result(1, "", "Traceback (most recent call last):\n"), {}, {}, tmp_path)[0] == \
        "traceback"
    assert O.classify(c, run, O.Result(None, "", ""), {}, {}, tmp_path)[0] == "hang"
    names = O.Case("names", "n", lambda d: O.Run(d, ["generate"]), "refused")
    assert O.classify(names, run, O.Result(2, "", "/x/a\nb.yaml: not found\n"), {}, {}, tmp_path)[0] == "injection"
    assert O.classify(names, run, O.Result(2, "", "/x/a\\nb.yaml: not found\n"), {}, {}, tmp_path)[0] == "refused"
    assert O.injection_in_python("import os\nos.system('id')\n", "m.py").startswith("injection")
    assert O.injection_in_python("x = \"os.system('id')\"\n", "m.py") == ""
