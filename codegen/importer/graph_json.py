"""Graph JSON (written by HugeCTR's model.graph_to_json) -> spec. Not read yet: refused with one line."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError


def import_graph_json(path: Path, text: str, hugectr_version: str | None, name: str | None):
    raise UserError.one(path, "importing a graph JSON is not supported yet",
                        fix="import the script that wrote it (ctrgen import model.py --hugectr-version V)")
