"""The trainer's checks of its input before anything is built or written (issue 43): each flag's range, and the
bounded reading of every small file it reads (a regular file, a size cap, UTF-8, JSON of bounded nesting). Each
problem is a DataError: one line naming the flag or the file, with the fix."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from .contract import local_path
from .errors import DataError

MAX_JSON_BYTES = 16 << 20       # features.json is kilobytes; a cap keeps /dev/zero or a huge file from filling memory
MAX_JSON_DEPTH = 64             # features.json nests 4 deep; json.loads recurses once per level
MAX_SEED = 2**64 - 1            # what torch.manual_seed takes (HugeCTR's seed is an unsigned 64-bit number too)

# flag -> (smallest value, what it must be)
_AT_LEAST = {"display": (1, "a number of iterations, 1 or more"),
             "eval_interval": (1, "a number of iterations, 1 or more"),
             "snapshot": (0, "a number of iterations, 0 (never) or more"),
             "max_iter": (1, "a number of iterations, 1 or more"),
             "epochs": (1, "a number of epochs, 1 or more"),
             "max_eval_batches": (1, "a number of batches, 1 or more"),
             "seed": (0, "between 0 and 2**64 - 1")}


def check_args(args) -> None:
    """Every number in range and --output-dir a folder that can be made; refused in one line naming the flag."""
    for name, (least, want) in _AT_LEAST.items():
        value = getattr(args, name, None)
        if value is not None and (value < least or (name == "seed" and value > MAX_SEED)):
            flag = "--" + name.replace("_", "-")
            raise DataError(f"{flag} {value}: must be {want} (fix: pass {flag} {least} or more, or leave it out)")
    # 0 is allowed: a run that must not move the weights (the benches' "does not learn" check, an evaluation pass)
    if not (math.isfinite(args.lr) and args.lr >= 0):
        raise DataError(f"--lr {args.lr}: must be a finite number, 0 or more (fix: e.g. --lr 0.001, or leave it out "
                        "for the spec's)")
    check_output_dir(args.output_dir)
    check_device(args.device)


def check_output_dir(folder: Path) -> None:
    """--output-dir is a folder or can be made one: not a file, nor under one."""
    for part in (folder, *folder.parents):
        if part.exists() or part.is_symlink():
            if not part.is_dir():
                where = "is a file" if part == folder else f"is under {part}, which is not a folder"
                raise DataError(f"--output-dir {folder}: {where} (fix: pass a folder, e.g. --output-dir runs/m)")
            return


def regular_file(path: Path, what: str, fix: str, verb: str = "read") -> os.stat_result:
    """The stat of ``path`` when it is a regular file (following links); a FIFO or a device would block or never
    end, so either is refused."""
    try:
        info = path.stat()
    except OSError as exc:
        raise DataError(f"{path}: cannot {verb} the {what} ({exc.strerror or exc}) (fix: {fix})") from None
    if not stat.S_ISREG(info.st_mode):
        raise DataError(f"{path}: cannot {verb} the {what} (not a regular file) (fix: {fix})")
    return info


def read_text(path: Path, what: str, fix: str, cap: int = MAX_JSON_BYTES) -> str:
    """A small text file, read whole: regular, at most ``cap`` bytes, UTF-8."""
    if regular_file(path, what, fix).st_size > cap:
        raise DataError(f"{path}: the {what} is over {cap >> 20} MiB (fix: {fix})")
    try:
        with open(path, "rb") as fh:
            data = fh.read(cap + 1)      # the size may change after the stat
    except OSError as exc:
        raise DataError(f"{path}: cannot read the {what} ({exc.strerror or exc}) (fix: {fix})") from None
    if len(data) > cap:
        raise DataError(f"{path}: the {what} is over {cap >> 20} MiB (fix: {fix})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: the {what} is not UTF-8 (byte {exc.start}) (fix: {fix})") from None


def json_depth(text: str) -> int:
    """How deep ``text``'s brackets nest (strings skipped), without parsing it."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def read_json(path: Path, what: str, fix: str) -> Any:
    """A small JSON file (read_text's rules), nesting at most MAX_JSON_DEPTH deep, without NaN or Infinity."""
    text = read_text(path, what, fix)
    if json_depth(text) > MAX_JSON_DEPTH:
        raise DataError(f"{path}: the {what} nests more than {MAX_JSON_DEPTH} levels (fix: {fix})")

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")
    try:
        return json.loads(text, parse_constant=constant)
    except ValueError as exc:
        raise DataError(f"{path}: the {what} is not JSON ({exc}) (fix: {fix})") from None


def check_finite(file: Path, name: str, values: np.ndarray, kind: str) -> None:
    """A float column without NaN or ±Infinity (a loss or a gradient of them is NaN from that step on)."""
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.argmax(bad))
        raise DataError(f"{file}: {kind} column {name!r}: row {row} is {values[row]} (fix: fill or drop the rows "
                        "without a finite value before training, e.g. in the NVTabular workflow)")


def check_device(name: str) -> None:
    """--device names a device this machine has (CUDA without a GPU fails deep inside the first allocation)."""
    import torch

    try:
        device = torch.device(name) if name != "auto" else None
    except RuntimeError:
        raise DataError(f"--device {name}: not a device (fix: auto, cpu, cuda or cuda:N)") from None
    if device is not None and device.type == "cuda" and not torch.cuda.is_available():
        raise DataError(f"--device {name}: this machine has no CUDA GPU that torch can use (fix: --device cpu)")
    if device is not None and device.type not in ("cpu", "cuda"):
        raise DataError(f"--device {name}: the trainer runs on cpu or cuda (fix: --device cpu or --device cuda)")


# What each loss takes as a label (runtime.losses): BCE a probability; MultiCrossEntropy one too, or below -0.5 for
# a missing label; CrossEntropy any finite number (its class is label >= 0.5).
def check_labels(labels, terms, split: str) -> None:
    """The label columns (a tensor (N, labels)) hold what their loss takes; refused naming the first bad row."""
    from .losses import BCE, MULTI

    spans = [(0, labels.shape[1], BCE)] if terms is None else [(*t.labels, t.kind) for t in terms]
    for start, end, kind in spans:
        if kind not in (BCE, MULTI):
            continue
        part = labels[:, start:end]
        bad = (part < 0) | (part > 1)
        if kind == MULTI:
            bad &= part >= -0.5
        if bool(bad.any()):
            row, col = (int(i) for i in bad.nonzero()[0])
            raise DataError(f"{split}: row {row} has label {float(part[row, col])!r}, outside [0, 1], what "
                            f"{kind} takes (fix: labels of 0 and 1, e.g. binarise the target in the NVTabular "
                            "workflow)")


def check_split(args, train, valid, terms) -> None:
    """This rank's rows: at least one training batch, some evaluation rows, labels its loss takes."""
    if train.n < args.batch_size:
        raise DataError(f"--batch-size {args.batch_size}: a rank holds {train.n} training rows, fewer than one batch "
                        "(fix: lower --batch-size)")
    if valid.n == 0:
        raise DataError("--eval: no evaluation rows on a rank (an empty validation split, or fewer rows than ranks) "
                        "(fix: pass --eval data with rows)")
    if hasattr(train, "tensors"):       # a streamed split is checked as its row groups are read
        check_labels(train.tensors[0], terms, "--train")
    check_labels(valid.tensors[0], terms, "--eval")


MAX_PROBLEM_BYTES = 1024


def agree(problem: str, device) -> str:
    """Every rank's view of a problem: the first rank's that has one (each rank raises the same line)."""
    import torch
    import torch.distributed as dist

    from .distributed import collective, world

    if world()[1] == 1:
        return problem
    data = problem.encode()[:MAX_PROBLEM_BYTES]
    mine = torch.zeros(MAX_PROBLEM_BYTES, dtype=torch.uint8, device=device)
    if data:
        mine[:len(data)] = torch.tensor(list(data), dtype=torch.uint8)
    every = [torch.zeros_like(mine) for _ in range(world()[1])]
    collective(dist.all_gather, every, mine)
    texts = [bytes(t.cpu().tolist()).rstrip(b"\0").decode(errors="replace") for t in every]
    return next((t for t in texts if t), "")


def data_files(source: str) -> list[Path]:
    """The Parquet files of a to_parquet output folder, a HugeCTR _file_list.txt, or a single .parquet file (``~/...``:
    under this machine's home folder, as the spec's paths mean)."""
    path = Path(local_path(source))
    if path.is_dir():
        if (path / "_file_list.txt").is_file():
            return data_files(str(path / "_file_list.txt"))
        files = sorted(path.glob("*.parquet"), key=lambda p: (len(p.name), p.name))
        if not files:
            raise DataError(f"{path}: no .parquet files in this folder")
        return _regular(files)
    if path.suffix == ".txt":
        lines = read_text(path, "file list", "pass a _file_list.txt, a folder or .parquet files").split()
        if not lines or not lines[0].isdigit() or int(lines[0]) != len(lines) - 1:
            raise DataError(f"{path}: not a file list (a count, then one path per line)")
        files = []
        for line in lines[1:]:
            listed = Path(line) if Path(line).is_absolute() else path.parent / line
            # Lists hold the absolute paths of the machine that wrote them; the files may have moved with the list.
            files.append(listed if listed.is_file() else path.parent / listed.name)
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise DataError(f"{path}: listed file {missing[0]} not found")
        return _regular(files)
    if path.exists() and not path.is_dir():
        return _regular([path])
    raise DataError(f"{path}: not found (fix: pass a to_parquet output folder, its _file_list.txt or .parquet files)")


def _regular(files: list[Path]) -> list[Path]:
    """Data files are regular files: Parquet's reader blocks forever on a FIFO."""
    for f in files:
        regular_file(f, "data file", "pass Parquet files, a folder of them or a _file_list.txt")
    return files
