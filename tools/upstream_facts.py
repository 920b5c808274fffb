#!/usr/bin/env python3
"""Extract the upstream facts the tests check against into committed tables (tests/facts/*.json).

    python tools/upstream_facts.py REFERENCE_DIR [-o tests/facts] [--check]

REFERENCE_DIR is the upstream reference folder CI provides beside the clone (``seeds/``: the seed notebooks and
scripts as delivered; ``fixtures/summary/``: ``model.summary()`` tables as NVIDIA's notebooks printed them;
``fixtures/lint/``: Triton model repositories of the official notebooks, each with its defects in ``expect.txt``;
``reference/hugectr.md``: HugeCTR's graph JSON example). The tables hold facts, never the upstream scripts:

* ``seed_calls.json``: the ``hugectr.X(...)`` / ``model.X(...)`` calls of the seed notebooks' training scripts
  (seeds 000 and 002, HugeCTR 3.1 / 3.3), with their literal arguments, sorted (``hugectr_calls``);
* ``summaries.json``: each printed ``model.summary()`` table, per file and notebook cell, as HugeCTR printed it
  (log prefixes included), with the release that printed it and the notebook it comes from;
* ``graph_json.json``: the DCN graph JSON that HugeCTR 23.06's ``Model.graph_to_json`` writes (the full example of
  the HugeCTR reference, §2.11: NVIDIA's samples/dcn/dcn.py on 4 GPUs, batch 4096);
* ``lint_cases.json``: per lint case, the values of its files (config.pbtxt as a protobuf dictionary, ps.json and
  the graph JSON as data, every weight file's size), the defects a correct validator reports (``expect``) and the
  fields allowed as warnings (``may_also``), with the notebooks they come from. tests/lint_repos.py writes each
  case as a repository from these values.

``--check`` compares instead of writing and exits 1 naming each table that differs. The tests' reference tier
(``CTRGEN_REFERENCE=DIR``) runs the same comparison. Only the standard library and protobuf are used.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests" / "facts"
# Arguments that name files on the notebook's machine; the specs point them elsewhere on purpose.
PATH_ARGS = {"source", "eval_source", "graph_config_file"}
SEED_SOURCES = {
    "000": "seed 000 (NVIDIA-Merlin/NVTabular@v0.8.0 examples/getting-started-movielens/inference-HugeCTR/"
           "Training-with-HugeCTR.ipynb, the %%writefile './model.py' cell; HugeCTR 3.1)",
    "002": "seed 002 (NVIDIA-Merlin/NVTabular@v1.0.0 examples/getting-started-movielens/03-Training-with-HugeCTR"
           ".ipynb cell 27, as a web page rendered it; HugeCTR 3.3)",
}


# ---- seeds ------------------------------------------------------------------------------------------------------

def seed_model_py(reference: Path, seed: str) -> str:
    """The training script of seed 000 (a notebook's %%writefile cell) or 002 (lines 143-241 of its rendering: the
    model.py cell, indentation lost, which Python does not need inside parentheses)."""
    if seed == "000":
        text = (reference / "seeds" / "000_9f50e44cd6b11148.txt.md").read_text(encoding="utf-8")
        return text.split("%%writefile './model.py'\n", 1)[1].split("```", 1)[0]
    lines = (reference / "seeds" / "002_be9c0ebb18f0a0d8.txt").read_text(encoding="utf-8").splitlines()
    return "\n".join(lines[142:241])


def hugectr_calls(source: str) -> list[list]:
    """Every call of hugectr.X(...) or model.X(...) with its literal arguments (positional ones as ``#i``; a
    non-literal as its source text), sorted by name and arguments: [[name, {argument: value}], ...]."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.value.id in ("hugectr", "model"):
            kwargs = {}
            for kw in node.keywords:
                if kw.arg not in PATH_ARGS:
                    kwargs[kw.arg] = _literal(kw.value)
            for i, arg in enumerate(node.args):
                kwargs[f"#{i}"] = _literal(arg)
            out.append([f"{node.func.value.id}.{node.func.attr}", kwargs])
    return sorted(out, key=lambda c: (c[0], json.dumps(c[1], sort_keys=True, default=str)))


def _literal(node: ast.expr):
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)
    return [*value] if isinstance(value, tuple) else value


def seed_calls(reference: Path) -> dict:
    return {seed: {"source": SEED_SOURCES[seed], "calls": hugectr_calls(seed_model_py(reference, seed))}
            for seed in SEED_SOURCES}


# ---- model.summary() tables -------------------------------------------------------------------------------------

def summaries(reference: Path) -> dict:
    folder = reference / "fixtures" / "summary"
    rows = {}
    for line in (folder / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].endswith(".txt"):
            rows[cells[0]] = {"printed_by": cells[1], "source": cells[2]}
    out = {}
    for path in sorted(folder.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        blocks = re.findall(r"^### (.+)\n((?:(?!### ).*\n?)*)", text, flags=re.M)
        out[path.name] = {"printed_by": rows[path.name]["printed_by"], "source": rows[path.name]["source"],
                          "cells": {cell: body.rstrip("\n") for cell, body in blocks}}
    return out


# ---- the reference graph JSON -----------------------------------------------------------------------------------

def graph_json(reference: Path) -> dict:
    text = (reference / "reference" / "hugectr.md").read_text(encoding="utf-8")
    section = text.split("### 2.11", 1)[1]
    example = re.search(r"```json\n(.*?)\n```", section, re.S).group(1)
    return {"dcn_23.06": {"source": "HugeCTR's Model.graph_to_json at v23.06 for NVIDIA-Merlin/HugeCTR samples/dcn/"
                                    "dcn.py (4 GPUs, batch 4096); no final newline",
                          "text": example}}


# ---- lint cases ---------------------------------------------------------------------------------------------------

def _case_sources(folder: Path) -> dict[str, str]:
    out = {}
    for line in (folder / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and (folder / cells[0]).is_dir():
            out[cells[0]] = f"serving files: {cells[1]}; graph JSON: {cells[2]}"
    return out


def _file_fact(path: Path) -> dict:
    if path.name == "config.pbtxt":
        from google.protobuf import json_format, text_format
        from tritonclient.grpc import model_config_pb2 as mc

        message = text_format.Parse(path.read_text(encoding="utf-8"), mc.ModelConfig())
        return {"config": json_format.MessageToDict(message, preserving_proto_field_name=True)}
    if path.suffix == ".json":
        return {"json": json.loads(path.read_text(encoding="utf-8"))}
    return {"size": path.stat().st_size}


def lint_cases(reference: Path) -> dict:
    folder = reference / "fixtures" / "lint"
    sources = _case_sources(folder)
    out = {}
    for case in sorted(p for p in folder.iterdir() if (p / "expect.txt").is_file()):
        notes = (case / "NOTES.md").read_text(encoding="utf-8")
        i = notes.find("may also be reported")
        spans = re.findall(r"`([^`]*)`", notes[i:]) if i >= 0 else []       # the leading name of each `span`
        may_also = sorted({m[1] for m in (re.match(r'"?([A-Za-z_][A-Za-z0-9_.]*)', s) for s in spans) if m})
        files = {}
        for path in sorted(case.rglob("*")):
            rel = path.relative_to(case).as_posix()
            if path.is_file() and rel not in ("expect.txt", "NOTES.md"):
                files[rel] = _file_fact(path)
        out[case.name] = {"source": sources.get(case.name, "constructed (NOTES.md)"),
                          "expect": [ln for ln in (case / "expect.txt").read_text(encoding="utf-8").splitlines()
                                     if ln.strip()],
                          "may_also": may_also, "files": files}
    return out


# ---- tables -------------------------------------------------------------------------------------------------------

TABLES = {"seed_calls.json": seed_calls, "summaries.json": summaries, "graph_json.json": graph_json,
          "lint_cases.json": lint_cases}


def table_text(value) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def extract(reference: Path) -> dict[str, str]:
    """Every table's text, from the reference folder."""
    return {name: table_text(fn(reference)) for name, fn in TABLES.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("reference", type=Path, help="the upstream reference folder (seeds/, fixtures/, reference/)")
    parser.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="compare with the committed tables; write nothing")
    args = parser.parse_args(argv)
    if not (args.reference / "seeds").is_dir():
        print(f"upstream_facts: {args.reference} has no seeds/ folder (give the upstream reference folder)",
              file=sys.stderr)
        return 2
    tables = extract(args.reference)
    if args.check:
        stale = [n for n, t in tables.items() if not (args.out / n).is_file()
                 or (args.out / n).read_text(encoding="utf-8") != t]
        for name in stale:
            print(f"upstream_facts: {args.out / name} differs from {args.reference}; rerun without --check",
                  file=sys.stderr)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in tables.items():
        (args.out / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
