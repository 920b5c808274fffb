"""Where the templates are and their digest (part of every inputs hash, so the model's provenance needs it below the
renderers that fill the templates in)."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources
from pathlib import Path


def templates_root():
    # A source checkout renders its own templates/ (also when several checkouts share one editable install);
    # an installed wheel has them as the codegen.templates package.
    checkout = Path(__file__).resolve().parents[1] / "templates"
    if (checkout / "hugectr").is_dir():
        return checkout
    return resources.files("codegen.templates")


@lru_cache(maxsize=1)
def templates_digest() -> str:
    """sha256 over every template (name and bytes, in sorted order): part of the inputs hash in headers."""
    h = hashlib.sha256()

    def walk(node, prefix=""):
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            rel = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, rel + "/")
            elif child.name.endswith(".j2"):
                h.update(rel.encode() + b"\0" + child.read_bytes() + b"\0")

    walk(templates_root())
    return h.hexdigest()
