"""Compiled templates kept between runs (issue 16 item 7: about 0.05 s of every ``check`` is Jinja compiling the
same templates again).

Jinja's own bytecode cache, in ``$XDG_CACHE_HOME/ctrgen/`` (default ``~/.cache/ctrgen/``): an entry is used only
when the template's source has the same sha1 as when it was compiled, for the same Python and Jinja versions, so
outputs are those of a fresh compile. The folder must be the user's own and writable by nobody else (cached code is
run); otherwise, or with ``CTRGEN_TEMPLATE_CACHE=0``, or when it cannot be written, templates are compiled each run.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import jinja2
from jinja2.bccache import Bucket, FileSystemBytecodeCache


class _QuietCache(FileSystemBytecodeCache):
    """A cache that never fails a render: a full disk or a read-only home only costs the compile."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:   # a truncated or foreign file (unpickling, unmarshalling, reading): compile instead
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _private_dir(path: Path) -> bool:
    """``path`` exists or was made, is a real folder owned by this user, and no one else can write to it."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def bytecode_cache() -> FileSystemBytecodeCache | None:
    if os.environ.get("CTRGEN_TEMPLATE_CACHE", "1") == "0" or not hasattr(os, "getuid"):
        return None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = base / "ctrgen" / f"templates-py{sys.version_info[0]}.{sys.version_info[1]}-jinja{jinja2.__version__}"
    if not base.is_absolute() or not _private_dir(folder):
        return None
    return _QuietCache(str(folder), pattern="%s.cache")
