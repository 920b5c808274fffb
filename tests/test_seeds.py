"""What docs/seeds.md claims about the seeds, checked where it is cheap (issue 46): each test names the claim.

Reads the committed generated/ and the runtime's sources; trains nothing.
"""

from __future__ import annotations

import ast
import re

from conftest import REPO

GENERATED = REPO / "generated"


def test_multi_gpu_docstrings_say_what_the_runtime_does():
    """Seed 001, multi-GPU: the runtime averages gradients itself (GradientSync), not DistributedDataParallel; every
    generated train_torch.py and docs/seeds.md say so and none claims DDP."""
    runtime = "\n".join(p.read_text() for p in sorted((REPO / "codegen" / "runtime").glob("*.py")))
    assert "GradientSync(" in runtime and "DistributedDataParallel(" not in runtime
    scripts = sorted(GENERATED.glob("*/train_torch.py"))
    assert len(scripts) >= 10
    for path in scripts:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert "without DistributedDataParallel" in doc and "GradientSync" in doc, path
        assert not re.search(r"#\s*DistributedDataParallel", doc), path
    seeds = (REPO / "docs" / "seeds.md").read_text()
    row = next(line for line in seeds.splitlines() if line.startswith("| `hvd.DistributedOptimizer`"))
    assert "GradientSync" in row and "DistributedDataParallel (" not in row, row
