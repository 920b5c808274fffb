"""What a reviewer diffs: the committed generated/ stays small and holds each large file once (issue 23).

Every generated file of more than 200 lines has its own bytes, except two known copies the HugeCTR side keeps (its
Triton repository must stand alone): the graph JSON in triton/<name>/1/ (the same bytes as generated/<name>/<name>.json)
and the PyTorch repository's ensemble (the same as triton/'s). generated/ as a whole stays under its budget.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

from conftest import REPO

GENERATED = REPO / "generated"
BUDGET_LINES = 31_000      # 78,426 before the runtime (issue 23), 28,907 after it (30,721 with the seed-001 spec and the container files); the target is 25,000


def _files():
    return sorted(p for p in GENERATED.rglob("*") if p.is_file())


def test_no_large_generated_file_is_a_copy_of_another_but_the_known_two():
    by_digest = defaultdict(list)
    for path in _files():
        data = path.read_bytes()
        if data.count(b"\n") > 200:
            by_digest[hashlib.sha256(data).hexdigest()].append(path.relative_to(GENERATED))
    for paths in by_digest.values():
        if len(paths) == 1:
            continue
        name = paths[0].parts[0]
        known = ({f"{name}/{name}.json", f"{name}/triton/{name}/1/{name}.json"},
                 {f"{name}/triton/{name}_ens/config.pbtxt", f"{name}/triton_torch/{name}_ens/config.pbtxt"})
        assert {str(p) for p in paths} in known, paths


def test_generated_stays_within_its_budget():
    lines = sum(p.read_bytes().count(b"\n") for p in _files())
    assert lines <= BUDGET_LINES, lines
    for path in GENERATED.glob("*/train_torch.py"):
        assert path.read_bytes().count(b"\n") <= 400, path
    assert not list(GENERATED.rglob("nvt_arrays.py")) and not list(GENERATED.glob("*/triton_torch/*/1/train_torch.py"))
