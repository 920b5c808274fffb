"""One error type: every input problem is a codegen.errors.Problem, raised as UserError (Located before the file is
known), formatted FILE:LINE:COL: FIELD: MESSAGE (fix: HINT), sorted; the CLI prints one line each and exits 2."""

from __future__ import annotations

import json

import pytest

from codegen.errors import Located, Problem, Problems, UserError, location
from codegen.triton.lint.findings import render_findings
from conftest import run_ctrgen


def test_one_location_format():
    assert location("a.yaml") == "a.yaml"
    assert location("a.yaml", 3) == "a.yaml:3"
    assert location("a.yaml", 3, 7) == "a.yaml:3:7"
    assert location("a.yaml", None, 7) == "a.yaml"   # a column without a line means nothing
    assert Problem("a.yaml", "bad", "solver.batchsize", 3, 7, "use 2048").format() == \
        "a.yaml:3:7: solver.batchsize: bad (fix: use 2048)"
    assert Problem("ps.json", "bad", "models[0]", 4, severity="error").format() == "ps.json:4: error: models[0]: bad"


def test_collector_reports_every_problem_sorted_and_once():
    c = Problems()
    assert not c
    c.add("b.yaml", "second file")
    c.add("a.yaml", "later line", line=9, col=1)
    c.add("a.yaml", "earlier line", line=2, col=5)
    c.add("a.yaml", "earlier line", line=2, col=5)      # the same problem twice is reported once
    c.add("a.yaml", "same line, earlier column", line=2, col=1)
    with pytest.raises(UserError) as info:
        c.raise_if_any()
    assert info.value.format().splitlines() == [
        "a.yaml:2:1: same line, earlier column", "a.yaml:2:5: earlier line", "a.yaml:9:1: later line",
        "b.yaml: second file"]
    Problems().raise_if_any()     # nothing collected: nothing raised


def test_located_gets_its_file_from_the_caller():
    exc = Located("not valid Python: invalid syntax", 4, "fix the script", col=2, field="source")
    assert isinstance(exc, UserError)
    assert exc.at("train.py").format() == "train.py:4:2: source: not valid Python: invalid syntax (fix: fix the script)"
    assert exc.at("train.py", line=5, message="m").format() == "train.py:5:2: source: m (fix: fix the script)"


def test_validate_findings_are_problems():
    findings = [Problem("b/config.pbtxt", "y", "max_batch_size", 2, severity="warning"),
                Problem("a/ps.json", "x", "models", 1, 3, severity="error", actual=1, expected=2)]
    text = render_findings(findings)
    assert text.splitlines() == ["a/ps.json:1:3: error: models: x", "b/config.pbtxt:2: warning: max_batch_size: y",
                                 "1 error, 1 warning"]
    doc = json.loads(render_findings(findings, "json"))
    assert doc["findings"][0] == {"file": "a/ps.json", "line": 1, "col": 3, "severity": "error", "field": "models",
                                  "message": "x", "fix": "", "actual": 1, "expected": 2}


def test_cli_prints_all_problems_of_a_spec_one_line_each(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("version: 1\nname: 9bad\nhugectr_version: '23.06'\nsolver: {batchsize: -1, nope: 1}\n")
    result = run_ctrgen("generate", str(spec), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) >= 3 and "Traceback" not in result.stderr
    assert all(line.startswith(f"{spec}:") for line in lines), lines
    positions = [tuple(int(x) for x in line[len(str(spec)) + 1:].split(":")[:2]) for line in lines]
    assert positions == sorted(positions)
    assert not (tmp_path / "out").exists()


def test_every_problem_of_a_lock_is_reported_at_once(tmp_path):
    from codegen.features import read_lock

    lock = {"ctrgen_features_lock": 1, "categorical": [
        {"name": "a", "dtype": "int64", "cardinality": 2**64},
        {"name": "b", "dtype": "int64", "cardinality": 3, "max_len": True, "colour": 1},
        {"name": "c", "dtype": "int64"}], "continuous": {}, "labels": [{"name": "y", "dtype": "float32"}]}
    path = tmp_path / "x.features.lock.json"
    path.write_text(json.dumps(lock, indent=1))
    with pytest.raises(UserError) as info:
        read_lock(path)
    lines = info.value.format().splitlines()
    assert [line.split(": ")[:2] for line in lines] == [
        [f"{path}:4:3", "categorical[0]"], [f"{path}:9:3", "categorical[1]"], [f"{path}:9:3", "categorical[1]"],
        [f"{path}:16:3", "categorical[2]"], [f"{path}:21:16", "continuous"]]
