"""The upstream facts the tests check against: committed tables (tests/facts, written by tools/upstream_facts.py from
the upstream reference folder) and, for the reference tier, that folder itself.

Tests of the reference tier are marked ``@pytest.mark.reference``; they read upstream text (the seed notebooks as
delivered, the lint fixtures as the notebooks wrote them) and run only when ``CTRGEN_REFERENCE`` names the folder
(``.ci/run`` sets it to the folder CI places beside the clone). Without it they are deselected and the run ends
with one line saying how many did not run (tests/conftest.py).
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

FACTS = Path(__file__).resolve().parent / "facts"
REFERENCE_ENV = "CTRGEN_REFERENCE"
LOG_PREFIX = re.compile(r"^\[HCTR\]\[[^\]]*\]\[INFO\]\[RK0\]\[main\]: ")


@functools.cache
def table(name: str) -> dict:
    """One committed fact table (``seed_calls``, ``summaries``, ``graph_json``, ``lint_cases``)."""
    return json.loads((FACTS / f"{name}.json").read_text(encoding="utf-8"))


def printed_summary(file: str, cell: str | None = None) -> str:
    """A model.summary() table as HugeCTR printed it (the file's only cell unless ``cell`` names one), log prefixes
    included, no final newline."""
    cells = table("summaries")[file]["cells"]
    if cell is None:
        (cell,) = cells
    return cells[cell]


def summary_as_printed_without_log(file: str, cell: str | None = None) -> str:
    """The table without HugeCTR's log prefixes, with a final newline: what ctrgen and the stand-in print."""
    return "\n".join(LOG_PREFIX.sub("", ln) for ln in printed_summary(file, cell).split("\n")) + "\n"


def reference_dcn_json() -> str:
    """The graph JSON HugeCTR 23.06 writes for NVIDIA's DCN sample (4 GPUs, batch 4096), without a final newline."""
    return table("graph_json")["dcn_23.06"]["text"]


def seed_calls(seed: str) -> list[list]:
    """The hugectr calls of seed 000's or 002's training script (tools/upstream_facts.py ``hugectr_calls``)."""
    return table("seed_calls")[seed]["calls"]


def reference_dir() -> Path:
    """The upstream reference folder of the reference tier (only called by tests marked ``reference``)."""
    value = os.environ.get(REFERENCE_ENV, "")
    path = Path(value)
    assert value and (path / "seeds").is_dir(), f"{REFERENCE_ENV}={value!r} is not the upstream reference folder"
    return path


@functools.cache
def facts_tool():
    """tools/upstream_facts.py as a module (its ``hugectr_calls`` is how the seed calls were recorded)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "tools" / "upstream_facts.py"
    spec = importlib.util.spec_from_file_location("ctrgen_upstream_facts", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
