"""Replacing a whole folder in one step: build the new content beside it, then swap.

The new folder is staged as ``PARENT/.ctrgen-NAME-PID-XXXXXXXX`` and exchanged with ``PARENT/NAME`` by one
``renameat2(RENAME_EXCHANGE)`` (Linux); a reader, or a process killed at any point, sees the old folder or the new
one, never a mix. Where the exchange is not available (another OS, a file system without it) the old folder is
renamed aside and the new one renamed in: a kill between the two renames leaves ``NAME`` missing and the old
content in ``.ctrgen-NAME-PID-old``, which the next run puts back. Temporary folders of a killed run are removed by
the next run that writes into the same parent (:func:`clean_stale`); those of a running process are left alone.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import tempfile
from pathlib import Path

PREFIX = ".ctrgen-"
_STALE = re.compile(r"^\.ctrgen-(?P<name>.+)-(?P<pid>\d+)-(?P<tag>[A-Za-z0-9_]+)$")
_OLD = "old"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def stage(parent: Path, name: str) -> Path:
    """An empty temporary folder beside ``parent/name``, named so that :func:`clean_stale` knows whose it is, with
    the permissions of the folder it replaces (mkdtemp's 0700 would lock out other users, e.g. a Triton server)."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{name}-{os.getpid()}-", dir=parent))
    try:
        mode = os.stat(parent / name).st_mode & 0o7777
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        mode = 0o777 & ~mask
    os.chmod(path, mode)
    return path


def swap_in(staged: Path, target: Path) -> None:
    """Put ``staged`` at ``target`` in one step; the previous ``target`` folder is removed afterwards."""
    if not os.path.lexists(target):
        os.rename(staged, target)
        return
    if _exchange(staged, target):
        shutil.rmtree(staged, ignore_errors=True)   # now holds the previous content
        return
    old = target.parent / f"{PREFIX}{target.name}-{os.getpid()}-{_OLD}"
    os.rename(target, old)
    os.rename(staged, target)
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):   # EINVAL, ENOSYS, EOPNOTSUPP: no exchange here; rename instead
        return False
    raise OSError(err, os.strerror(err), str(b))


# Linux's largest pid_max (2**22); a larger number in a leftover's name is no process (and os.kill would overflow).
_PID_MAX = 1 << 22


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if not 0 < pid <= _PID_MAX:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(parent: Path) -> list[str]:
    """Remove the temporary folders that killed runs left in ``parent`` and put back a folder a killed swap had
    moved aside; return the names removed and the names of the folders put back."""
    cleaned: list[str] = []
    try:
        entries = sorted(os.listdir(parent))
    except OSError:
        return cleaned
    for entry in entries:
        m = _STALE.match(entry)
        if not m or _alive(int(m.group("pid"))):
            continue
        path = parent / entry
        target = parent / m.group("name")
        if m.group("tag") == _OLD and not os.path.lexists(target):
            # The swap was killed between its two renames: the old folder goes back. Only a real folder: a link
            # (pointing anywhere) is no folder ctrgen moved aside and is left where it is.
            if path.is_dir() and not path.is_symlink():
                os.rename(path, target)
                cleaned.append(m.group("name"))
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            cleaned.append(entry)
    return cleaned
