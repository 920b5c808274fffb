"""The Jinja environment: templates ship inside the package (codegen.templates); nothing is autoescaped because
every value is pre-rendered by codegen.render.literals (Python) or a JSON/protobuf writer."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources
from pathlib import Path

import jinja2

from .template_cache import bytecode_cache


def _templates_root():
    # A source checkout renders its own templates/ (also when several checkouts share one editable install);
    # an installed wheel has them as the codegen.templates package.
    checkout = Path(__file__).resolve().parents[2] / "templates"
    if (checkout / "hugectr").is_dir():
        return checkout
    return resources.files("codegen.templates")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    root = _templates_root()
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: root.joinpath(name).read_text(encoding="utf-8")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        bytecode_cache=bytecode_cache(),
    )


def render(template: str, **context) -> str:
    return environment().get_template(template).render(**context)


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

    walk(_templates_root())
    return h.hexdigest()
