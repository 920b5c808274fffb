"""Compiled templates kept between runs (issue 16 item 7: about 0.05 s of every ``check`` is Jinja compiling the
same templates again).

Jinja's own bytecode cache, in ``$XDG_CACHE_HOME/ctrgen/`` (default ``~/.cache/ctrgen/``): an entry is used only
when the template's source has the same sha1 as when it was compiled, for the same Python and Jinja versions, so
outputs are those of a fresh compile. The folder must be the user's own and writable by nobody else (cached code is
run); otherwise, or with ``CTRGEN_CACHE=0``, or when it cannot be written, templates are compiled each run
(codegen/user_cache.py).
"""

from __future__ import annotations

import sys

import jinja2
from jinja2.bccache import Bucket, FileSystemBytecodeCache

from .. import user_cache


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


def bytecode_cache() -> FileSystemBytecodeCache | None:
    version = f"py{sys.version_info[0]}.{sys.version_info[1]}-jinja{jinja2.__version__}"
    folder = user_cache.folder(f"templates-{version}")
    return None if folder is None else _QuietCache(str(folder), pattern="%s.cache")
