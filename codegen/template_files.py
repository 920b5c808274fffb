"""Where the templates and the programs' static parts (codegen/programs/) are, and their digest (part of every inputs
hash, so the model's provenance needs it below the renderers that fill the templates in)."""

from __future__ import annotations

import hashlib
import re
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


# A part of a program module starts on this line (codegen/programs/__init__.py).
_PART = re.compile(r"# ctrgen: part ([a-z_]+)")


def programs_root():
    """codegen/programs/, in a checkout or an installed wheel alike (it is a package of codegen)."""
    return resources.files("codegen.programs")


@lru_cache(maxsize=None)
def program_parts(module: str) -> dict[str, str]:
    """{part name: text} of codegen/programs/<module>.py: a part is the lines after its ``# ctrgen: part NAME`` line
    up to the next such line or the end of the file, without the blank lines at either end (the template writes
    those). Only the package's own modules are read: a name is a plain identifier, never a path."""
    if not re.fullmatch(r"[a-z_]+", module) or module == "__init__":
        raise ValueError(f"program module {module!r}: not a module name of codegen/programs")
    parts: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in programs_root().joinpath(f"{module}.py").read_text(encoding="utf-8").splitlines():
        marker = _PART.fullmatch(line)
        if marker:
            if marker[1] in parts:
                raise ValueError(f"codegen/programs/{module}.py: part {marker[1]!r} twice")
            lines = parts[marker[1]] = []
        elif lines is not None:
            lines.append(line)
    return {name: "\n".join(body).strip("\n") for name, body in parts.items()}


def program_part(module: str, part: str) -> str:
    """The text a template includes verbatim with ``{{ program(module, part) }}``."""
    parts = program_parts(module)
    if part not in parts:
        raise ValueError(f"codegen/programs/{module}.py has no part {part!r} (it has {sorted(parts)})")
    return parts[part]


@lru_cache(maxsize=1)
def templates_digest() -> str:
    """sha256 over every template and program module (name and bytes, in sorted order): part of the inputs hash in
    headers."""
    h = hashlib.sha256()

    def walk(node, prefix=""):
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            rel = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, rel + "/")
            elif child.name.endswith(".j2"):
                h.update(rel.encode() + b"\0" + child.read_bytes() + b"\0")

    walk(templates_root())
    for child in sorted(programs_root().iterdir(), key=lambda c: c.name):
        if child.name.endswith(".py"):
            h.update(f"programs/{child.name}".encode() + b"\0" + child.read_bytes() + b"\0")
    return h.hexdigest()
