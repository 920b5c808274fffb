"""Path options shared by the commands."""

from __future__ import annotations

from pathlib import Path

import click

from .errors import UserError


def out_path(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """--out: an empty string is refused (Path('') would silently be the current folder)."""
    if value is None:
        return None
    if value == "":
        raise UserError.one("''", "the output path is empty", field=f"--{param.name}",
                            fix="name a folder, or leave the option out for its default")
    return Path(value)
