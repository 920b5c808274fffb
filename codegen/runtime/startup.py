"""Start-up of a generated trainer, before torch is imported: only the standard library here."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def drop_script_folder(script: str) -> None:
    """generated/<name>/ also holds triton/ (the Triton repository): as sys.path[0] it would shadow the `triton`
    package that torch imports. Running the script needs nothing from its folder but features.json."""
    here = Path(script).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]


def bytecode_cache() -> str | None:
    """Where this process keeps torch's bytecode, when the installation has none and Python may not write it.

    Container images often set PYTHONDONTWRITEBYTECODE and ship torch without .pyc files: every process then compiles
    torch's Python from source, seconds of start-up. The bytecode is then kept in the user's cache (never beside the
    installed files; Python checks each file against its source). CTRGEN_CACHE=0 turns this off, as it turns off
    ctrgen's other user caches."""
    import importlib.util

    if not sys.dont_write_bytecode or sys.pycache_prefix or os.environ.get("CTRGEN_CACHE", "1") == "0":
        return None
    torch_spec = importlib.util.find_spec("torch")
    if torch_spec is None or not torch_spec.origin:
        return None
    if Path(importlib.util.cache_from_source(torch_spec.origin)).exists():
        return None                       # torch has its bytecode
    try:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ctrgen" / "pycache"
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (OSError, RuntimeError):      # no home, a read-only one: compile as before
        return None
    sys.pycache_prefix, sys.dont_write_bytecode = str(cache), False
    return sys.pycache_prefix

