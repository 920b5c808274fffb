"""tools/upstream_facts.py on a small reference folder written here (the layout of the upstream one, none of its
text): each table holds what the folder says, --check notices a change, a folder without seeds is refused. The
reference tier runs the tool on the real folder (test_seed_reproduction.py::test_upstream_fact_tables_are_current)."""

from __future__ import annotations

import json
from pathlib import Path

from upstream import facts_tool

SEED000 = """\
# a notebook

```python
%%writefile './model.py'
import hugectr
solver = hugectr.CreateSolver(batchsize=64, vvgpu=[[0]], lr=0.5)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=0, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 1, True, 2)]))
model.graph_to_json(graph_config_file="/far/away/m.json")
```
"""
SEED002_SCRIPT = ["import hugectr", "solver = hugectr.CreateSolver(batchsize=8, vvgpu=[(0, 1)])",
                  "model.fit(max_iter=10)"]
SUMMARY = "### cell 4\n=====Model Summary=====\n[HCTR][00:00:01][INFO][RK0][main]: label    Dense\nlast line\n"
CONFIG = 'name: "m"\nbackend: "hugectr"\nmax_batch_size: 4\nparameters { key: "slots" value { string_value: "2" } }\n'


def reference_folder(root: Path) -> Path:
    (root / "seeds").mkdir(parents=True)
    (root / "seeds" / "000_9f50e44cd6b11148.txt.md").write_text(SEED000)
    filler = [f"# line {i}" for i in range(1, 143)]
    tail = [f"# after {i}" for i in range(20)]
    (root / "seeds" / "002_be9c0ebb18f0a0d8.txt").write_text(
        "\n".join(filler + SEED002_SCRIPT + ["pass"] * (99 - len(SEED002_SCRIPT)) + tail) + "\n")
    summary = root / "fixtures" / "summary"
    summary.mkdir(parents=True)
    (summary / "README.md").write_text("| file | HugeCTR | spec |\n|---|---|---|\n| s.txt | 3.3 | owner/repo@v1:nb.ipynb |\n")
    (summary / "s.txt").write_text(SUMMARY)
    case = root / "fixtures" / "lint" / "case_a"
    (case / "m" / "1" / "0_sparse_1.model").mkdir(parents=True)
    (root / "fixtures" / "lint" / "README.md").write_text(
        "| case | upstream serving files | training side | must report |\n|---|---|---|---|\n"
        "| case_a | owner/repo@v2:serve.ipynb | owner/repo@v2:train.ipynb | slots |\n")
    (case / "m" / "config.pbtxt").write_text(CONFIG)
    (case / "ps.json").write_text('{"supportlonglong": true, "models": [{"model": "m", "max_batch_size": "4"}]}')
    (case / "m" / "1" / "m.json").write_text('{"layers": [{"type": "Data"}]}')
    (case / "m" / "1" / "0_sparse_1.model" / "key").write_bytes(bytes(24))
    (case / "expect.txt").write_text('slots "2" in m/config.pbtxt != 3\n\n')
    (case / "NOTES.md").write_text("- Not required, may also be reported: `max_nnz 2` and `\"gpucache\": x`.\n")
    (root / "reference").mkdir()
    (root / "reference" / "hugectr.md").write_text('## 2\n### 2.10 other\n### 2.11 Full example\n\n```json\n'
                                                   '{\n  "layers": []\n}\n```\n')
    return root


def test_tables_hold_what_the_folder_says(tmp_path):
    tool = facts_tool()
    ref = reference_folder(tmp_path / "ref")
    out = tmp_path / "facts"
    assert tool.main([str(ref), "-o", str(out)]) == 0
    calls = json.loads((out / "seed_calls.json").read_text())
    assert calls["000"]["calls"] == [
        ["hugectr.CreateSolver", {"batchsize": 64, "lr": 0.5, "vvgpu": [[0]]}],
        ["hugectr.DataReaderSparseParam", {"#0": "data1", "#1": 1, "#2": True, "#3": 2}],
        ["hugectr.Input", {"data_reader_sparse_param_array": "[hugectr.DataReaderSparseParam('data1', 1, True, 2)]",
                           "dense_dim": 0, "dense_name": "dense", "label_dim": 1, "label_name": "label"}],
        ["hugectr.Model", {"#0": "solver", "#1": "reader", "#2": "optimizer"}],
        ["model.add", {"#0": "hugectr.Input(label_dim=1, label_name='label', dense_dim=0, dense_name='dense', "
                              "data_reader_sparse_param_array=[hugectr.DataReaderSparseParam('data1', 1, True, 2)])"}],
        ["model.graph_to_json", {}]]                 # the path argument names the notebook's machine: left out
    assert calls["002"]["calls"] == [["hugectr.CreateSolver", {"batchsize": 8, "vvgpu": [[0, 1]]}],
                                     ["model.fit", {"max_iter": 10}]]        # lines 143-241 only; tuples as lists
    summaries = json.loads((out / "summaries.json").read_text())
    assert summaries == {"s.txt": {"printed_by": "3.3", "source": "owner/repo@v1:nb.ipynb", "cells": {
        "cell 4": "=====Model Summary=====\n[HCTR][00:00:01][INFO][RK0][main]: label    Dense\nlast line"}}}
    assert json.loads((out / "graph_json.json").read_text())["dcn_23.06"]["text"] == '{\n  "layers": []\n}'
    case = json.loads((out / "lint_cases.json").read_text())["case_a"]
    assert case["expect"] == ['slots "2" in m/config.pbtxt != 3']
    assert case["may_also"] == ["gpucache", "max_nnz"]
    assert case["source"] == "serving files: owner/repo@v2:serve.ipynb; graph JSON: owner/repo@v2:train.ipynb"
    assert case["files"] == {
        "m/1/0_sparse_1.model/key": {"size": 24},
        "m/1/m.json": {"json": {"layers": [{"type": "Data"}]}},
        "m/config.pbtxt": {"config": {"name": "m", "backend": "hugectr", "max_batch_size": 4,
                                      "parameters": {"slots": {"string_value": "2"}}}},
        "ps.json": {"json": {"supportlonglong": True, "models": [{"model": "m", "max_batch_size": "4"}]}}}


def test_check_compares_and_a_folder_without_seeds_is_refused(tmp_path, capsys):
    tool = facts_tool()
    ref = reference_folder(tmp_path / "ref")
    out = tmp_path / "facts"
    assert tool.main([str(ref), "-o", str(out)]) == 0
    assert tool.main([str(ref), "-o", str(out), "--check"]) == 0
    (ref / "fixtures" / "summary" / "s.txt").write_text(SUMMARY.replace("last line", "another line"))
    assert tool.main([str(ref), "-o", str(out), "--check"]) == 1
    assert "summaries.json differs" in capsys.readouterr().err
    assert tool.main([str(tmp_path / "nothing"), "-o", str(out)]) == 2
    assert "has no seeds/ folder" in capsys.readouterr().err
