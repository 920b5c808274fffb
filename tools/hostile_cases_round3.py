"""The hostile inputs of issue 43 (third round): the commands other than the trainer (report, etl, port, query,
import, the generated Vertex AI submit.py). Registered into tools/hostile_cases.py's CASES when it is imported; built
at run time like every other case."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable

from hostile_cases import add, big_sparse
from hostile_outcomes import Run

# ---- ctrgen report: a run folder (run.json, metrics.json, metrics.jsonl) --------------------------------------------

RUN_JSON = {"ctrgen": "0.1.0", "name": "m", "spec": "m.yaml", "spec_sha256": "0" * 64, "command": ["python", "t.py"],
            "data": {"--train": ["t.txt"]}, "generated": {"model.py": "1" * 64},
            "graph": {"nodes": [["a", ["input"], "input"], ["b", ["loss"], "loss"]], "edges": [["a", "b"]]},
            "hardware": {"machine": "x86_64", "cpus": 2, "system": "Linux", "python": "3.11", "gpus": []}}
POINTS = "".join(json.dumps({"step": s, "tag": "train/loss", "value": v}) + "\n" for s, v in ((1, 0.5), (2, 0.4)))


def _report(mutate: Callable[[Path], Any] = lambda run: None, out: str | None = None) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        run = d / "run"
        run.mkdir(parents=True)
        (run / "run.json").write_text(json.dumps(RUN_JSON))
        (run / "metrics.json").write_text(json.dumps({"iterations": 2, "samples_per_second": 1.0}))
        (run / "metrics.jsonl").write_text(POINTS)
        mutate(run)
        return Run(d, ["report", "run", *(["--out", out] if out else [])])
    return build


def _run_json(change: dict | str) -> Callable[[Path], Any]:
    text = change if isinstance(change, str) else json.dumps({**RUN_JSON, **change})
    return lambda run: (run / "run.json").write_text(text)


def _points(text: str | bytes) -> Callable[[Path], Any]:
    data = text if isinstance(text, bytes) else text.encode()
    return lambda run: (run / "metrics.jsonl").write_bytes(data)


def _page_says(*needles: str) -> Callable[[Path], str]:
    def check(d: Path) -> str:
        page = (d / "run" / "report.html").read_text(encoding="utf-8")
        coords = re.findall(r'points="([^"]*)"', page)
        if any(re.search(r"nan|inf", c, re.I) for c in coords):
            return "silent wrong: a curve has a NaN or Infinity coordinate"
        missing = [n for n in needles if n not in page]
        return f"silent wrong: the page does not say {missing[0]!r}" if missing else ""
    return check


REPORTS: dict[str, tuple[Callable[[Path], Run], str, str]] = {
    "step_1e400": (_report(_points('{"step": 1e400, "tag": "t", "value": 1}\n')), "refused", r"jsonl:1: not a point"),
    "deep_metrics_line": (_report(_points("[" * 100_000 + "]" * 100_000 + "\n")), "refused", r"jsonl:1: "),
    "deep_run_json": (_report(_run_json("[" * 100_000 + "]" * 100_000)), "refused", "nests more than"),
    "run_json_not_utf8": (_report(lambda r: (r / "run.json").write_bytes(b'{"name": "\xff"}')), "refused",
                          "not UTF-8"),
    "metrics_not_utf8": (_report(_points(POINTS.encode() + b"\xff\n" + POINTS.encode())), "refused",
                         r"jsonl:3: not UTF-8"),
    "run_json_without_graph": (_report(lambda r: (r / "run.json").write_text(json.dumps(
        {k: v for k, v in RUN_JSON.items() if k != "graph"}))), "refused", "graph: must be"),
    "run_json_command_text": (_report(_run_json({"command": "rm -rf /"})), "refused", "command: must be a list"),
    "no_graph_nodes": (_report(_run_json({"graph": {"nodes": [], "edges": []}})), "refused", "no nodes"),
    "out_is_a_folder": (_report(lambda r: (r.parent / "f").mkdir(), out="f"), "refused", "is a folder"),
    "out_in_missing_folder": (_report(out="missing/r.html"), "refused", "does not exist"),
    "metrics_2gib": (_report(lambda r: big_sparse(r / "metrics.jsonl", 2 << 30)), "refused", "bytes, more than"),
    "metrics_non_json_line": (_report(_points(POINTS + "oops\n" + POINTS)), "refused", r"jsonl:3: not a JSON point"),
    "metrics_fifo": (_report(lambda r: ((r / "metrics.jsonl").unlink(), os.mkfifo(r / "metrics.jsonl"))), "refused",
                     "not a regular file"),
}
for _name, (_build, _expect, _reason) in REPORTS.items():
    add("report", _name, _build, _expect, reason=_reason, quick=_name in ("step_1e400", "metrics_fifo", "no_graph_nodes"))
add("report", "metrics_cut_last_line", _report(_points(POINTS + '{"step": 3, "tag": "tr')), "accepted",
    check=_page_says("2 points from metrics.jsonl", "was cut off"), quick=True)
add("report", "metrics_nan_value", _report(_points(POINTS + '{"step": 3, "tag": "train/loss", "value": NaN}\n')),
    "accepted", check=_page_says("1 point(s) not drawn"))
