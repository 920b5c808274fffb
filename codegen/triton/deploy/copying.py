"""What ``ctrgen assemble`` copies into a deployable repository, and the proof that it loads.

Only regular files and folders are copied. A symbolic link is kept as a link when it points inside the folder being
copied (the repository then holds what it points to as well); a link pointing outside, a FIFO, socket or device is
refused, never followed: a link to /dev/zero or to a folder elsewhere would otherwise be copied without end or carry
files nobody named into the repository. The trained PyTorch model must open as a state dict of tensors, and the
saved workflow must load (in a process of its own: loading workflow.pkl runs the code the pickle holds, as the
Triton preprocessing model will)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from ...errors import UserError


def copy_file(src: Path, dest: Path | None, field: str, limit: int | None = None) -> None:
    """``src`` to ``dest`` when it is a regular file of at most ``limit`` bytes (``dest`` None: only check)."""
    st = os.stat(src, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        raise UserError.one(src, "not a regular file (a link, FIFO, socket or device is not copied)", field=field,
                            fix="put the file itself there")
    if limit is not None and st.st_size > limit:
        raise UserError.one(src, f"{st.st_size} bytes, more than the {limit} such a file may have", field=field,
                            fix="check the file")
    if dest is not None:
        shutil.copy2(src, dest)


def copy_tree(src: Path, dest: Path | None, field: str, limit: int | None = None, *,
              _root: Path | None = None) -> None:
    """``src`` into ``dest`` (created), under the rules of the module docstring; each file at most ``limit``.
    ``dest`` None: only check that the folder can be copied (before anything is written)."""
    root = _root or src.resolve()
    if dest is not None:
        dest.mkdir(parents=True, exist_ok=True)
    for entry in sorted(src.iterdir()):
        target = None if dest is None else dest / entry.name
        st = os.stat(entry, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            try:
                resolved = entry.resolve(strict=True)
            except (OSError, RuntimeError):
                raise UserError.one(entry, "a broken or looping symbolic link", field=field,
                                    fix="replace it with the file it stands for") from None
            if not resolved.is_relative_to(root):
                raise UserError.one(entry, f"a symbolic link pointing outside the folder ({os.readlink(entry)})",
                                    field=field, fix="copy the file it points to into the folder instead")
            if target is not None:
                os.symlink(os.path.relpath(resolved, entry.parent.resolve()), target)
        elif stat.S_ISDIR(st.st_mode):
            copy_tree(entry, target, field, limit, _root=root)
        else:
            copy_file(entry, target, field, limit)


def check_state_dict(path: Path, field: str) -> None:
    """model.pt opens (weights only: no code runs) as a non-empty mapping of names to tensors."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:   # torch raises several kinds for a damaged archive
        raise UserError.one(path, f"does not open as a PyTorch state dict ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0][:200] if str(exc) else 'damaged'})", field=field,
                            fix="pass the model.pt train_torch.py wrote") from None
    if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise UserError.one(path, "holds no state dict of tensors", field=field,
                            fix="pass the model.pt train_torch.py wrote")


# The loaded workflow is frozen out of the collector's passes: the process then exits without walking NVTabular's
# objects (about 0.5 s of CPU of the check's 2 s).
LOAD_WORKFLOW = ("import gc\n"
                 "import sys\n"
                 "from codegen.runtime.nvt_import import import_nvtabular\n"
                 "import_nvtabular().Workflow.load(sys.argv[1])\n"
                 "gc.freeze()\n")


# workflow.pkl files this process saw load: (path, inode, size, mtime) -> proven (a file that changes is checked again)
_LOADED: set[tuple] = set()


def check_workflow_loads(workflow: Path, field: str = "--workflow", timeout: int = 300) -> None:
    """workflow.pkl loads with NVTabular, as the preprocessing model will load it (a process of its own)."""
    st = os.stat(workflow / "workflow.pkl")
    key = (str(workflow.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _LOADED:
        return
    proven = _proof_file(workflow)
    if proven is not None and proven.exists():
        _LOADED.add(key)
        return
    package = Path(__file__).resolve().parents[3]        # the folder holding this ctrgen's codegen/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(package), os.environ.get("PYTHONPATH", ""))
                                                        if p), "PYTHONWARNINGS": "ignore"}
    try:
        proc = subprocess.run([sys.executable, "-c", LOAD_WORKFLOW, str(workflow)], env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UserError.one(workflow / "workflow.pkl", f"did not load within {timeout} s", field=field,
                            fix="pass the folder Workflow.save wrote") from None
    if proc.returncode != 0:
        last = next((ln for ln in reversed(proc.stderr.strip().splitlines()) if ln.strip()), "no message")
        raise UserError.one(workflow / "workflow.pkl", f"does not load with NVTabular ({last[:300]})", field=field,
                            fix="pass the folder Workflow.save wrote (workflow.pkl, metadata.json, categories/)")
    _LOADED.add(key)
    if proven is not None:
        proven.touch()


# What loading workflow.pkl depends on besides its bytes: the interpreter and the packages its pickle reaches.
_LOAD_PACKAGES = ("nvtabular", "merlin-core", "pandas", "numpy", "dask", "cloudpickle")


def _proof_file(workflow: Path) -> Path | None:
    """The user cache's record that these exact bytes (workflow.pkl, metadata.json) loaded with this interpreter and
    these package versions; None where the cache is off. A repeated assemble of the same workflow then skips the
    process (about 2 s of CPU: NVTabular's import)."""
    import hashlib
    from importlib import metadata

    from ...user_cache import folder

    where = folder("workflow-loads")
    if where is None:
        return None
    digest = hashlib.sha256(LOAD_WORKFLOW.encode() + sys.executable.encode())
    for name in _LOAD_PACKAGES:
        try:
            digest.update(f"\0{name}={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"\0{name}=-".encode())
    for part in ("workflow.pkl", "metadata.json"):
        path = workflow / part
        digest.update(b"\0" + (path.read_bytes() if path.is_file() else b"-"))
    return where / digest.hexdigest()
