"""The user's cache folder for what ctrgen may keep between runs: compiled templates (render/template_cache.py),
parsed workflow schemas (workflow.py) and the proof that a saved workflow loads (triton/deploy/copying.py); the
generated trainer keeps torch's bytecode there too (its ``bytecode_cache``). ``$XDG_CACHE_HOME/ctrgen/`` (default ``~/.cache/ctrgen/``); a folder is used only when it is a
real folder of this user's that no one else can write to. One knob: ``CTRGEN_CACHE=0`` turns every one of these
caches off. An entry is used only for the same inputs as when it was written, so outputs do not depend on the
cache."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def enabled() -> bool:
    return os.environ.get("CTRGEN_CACHE", "1") != "0" and hasattr(os, "getuid")


def private_dir(path: Path) -> bool:
    """``path`` exists or was made, is a real folder owned by this user, and no one else can write to it."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def folder(name: str) -> Path | None:
    """``<cache>/ctrgen/<name>``, private, or None (caching off, no usable home)."""
    if not enabled():
        return None
    try:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    except RuntimeError:           # no home directory
        return None
    path = base / "ctrgen" / name
    return path if base.is_absolute() and private_dir(path) else None
