"""run.json: what ``ctrgen train`` knew when it started a run (spec, graph, command line, data, generated files'
digests, hardware), so that ``ctrgen report`` needs nothing but the run folder."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from .. import __version__
from ..output import replace_file
from ..render.diagram import nodes_and_edges
from ..render.text import visible

RUN_FILE = "run.json"


def write_json(path: Path, data: dict) -> None:
    replace_file(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def gpu_names() -> list[str]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    proc = subprocess.run([smi, "--query-gpu=name,memory.total", "--format=csv,noheader"], capture_output=True,
                          text=True)
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()] if proc.returncode == 0 else []


def hardware() -> dict[str, Any]:
    return {"machine": platform.machine(), "system": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "gpus": gpu_names()}


def graph(job) -> dict[str, list]:
    """The model graph of ``ctrgen graph`` as plain nodes (id, label lines, kind) and edges (from, to)."""
    nodes, edges = nodes_and_edges(job)
    return {"nodes": [[i, [visible(part) for part in label.split("<br/>")], kind]
                      for i, label, kind in nodes],
            "edges": [list(e) for e in edges]}


def run_record(ctx, rendered, launch) -> dict[str, Any]:
    return {
        "ctrgen": __version__,
        "name": rendered.name,
        "spec": ctx.display,
        "spec_sha256": hashlib.sha256(ctx.loaded.text.encode("utf-8")).hexdigest(),
        "command": launch.argv,
        "data": launch.data,
        "generated": {str(rel): hashlib.sha256(text.encode("utf-8")).hexdigest()
                      for rel, text in sorted(rendered.files.items())},
        "graph": graph(rendered.job),
        "hardware": hardware(),
    }
