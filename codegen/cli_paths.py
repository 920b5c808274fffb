"""Path options shared by the commands."""

from __future__ import annotations

import os
from pathlib import Path

import click

from .errors import UserError


def out_path(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """--out: an empty string is refused (Path('') would silently be the current folder). Messages name the option as
    the user wrote it (``--hugectr`` of ``weights export``, whose value is its ``out``)."""
    if value is None:
        return None
    option = param.opts[0] if param.opts else f"--{param.name}"
    if value == "":
        raise UserError.one("''", "the output path is empty", field=option,
                            fix="name a folder, or leave the option out for its default")
    check_writable_path(Path(value), option)
    return Path(value)


# Linux's PATH_MAX and NAME_MAX, in bytes: longer paths fail in the middle of a write (ENAMETOOLONG).
PATH_MAX = 4096
NAME_MAX = 255
_PSEUDO_FS = ("/proc", "/sys", "/dev")


def check_writable_path(path: Path, option: str) -> None:
    """A path ctrgen may write under: not under /proc, /sys or /dev (kernel interfaces, no place for files; /dev/shm
    is a file system and allowed), not
    longer than PATH_MAX, no component longer than NAME_MAX (the staged ``.ctrgen-NAME-PID-XXXXXXXX`` sibling of a
    folder adds ~30 bytes to its name, so names stay under NAME_MAX - 40)."""
    full = os.fsencode(os.path.abspath(path))
    if len(full) + 64 >= PATH_MAX:
        raise UserError.one(path, f"the path is {len(full)} bytes long; paths stay under {PATH_MAX - 64}",
                            field=option, fix="choose a shorter path")
    long = [p for p in full.split(b"/") if len(p) > NAME_MAX - 40]
    if long:
        raise UserError.one(path, f"a folder name is {len(long[0])} bytes long; names stay under {NAME_MAX - 40}",
                            field=option, fix="choose a shorter name")
    real = os.path.realpath(path)
    if any(real == p or real.startswith(p + "/") for p in _PSEUDO_FS) and not real.startswith("/dev/shm/"):
        raise UserError.one(path, "is under /proc, /sys or /dev, where no files can be written", field=option,
                            fix="name a folder on a disk")


def check_out_file(path: Path, option: str = "--out") -> None:
    """A file ctrgen replaces (report.html, a ported spec): its folder must exist, and the path must not be a folder,
    a symbolic link (the new file would be written where the link points, or the link replaced without a word) or
    anything but a regular file."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        what = "does not exist" if not os.path.lexists(parent) else "is not a folder"
        raise UserError.one(path, f"its folder {parent} {what}", field=option,
                            fix="create the folder first, or choose a path in an existing one")
    if path.is_symlink():
        raise UserError.one(path, "is a symbolic link; ctrgen does not write through links", field=option,
                            fix="remove the link, or give the file it points to")
    if path.is_dir():
        raise UserError.one(path, "is a folder, not a file", field=option, fix="give a file path inside it")
    if os.path.lexists(path) and not path.is_file():
        raise UserError.one(path, "is not a regular file (a FIFO, device or socket)", field=option,
                            fix="give a file path")
