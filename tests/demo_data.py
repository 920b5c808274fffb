"""The embedded demo, built once per test session (real NVTabular ETL, about 6-8 s on 2 cores).

A module-level cache instead of a conftest fixture, so that several test modules share one build; the build itself
lies in the session's scratch folder (conftest.shared_scratch), made by the first xdist worker that needs it under a
lock and read by the others (also when this module is imported twice, as ``demo_data`` and ``tests.demo_data``).
Tests write only below their own subfolders of ``root`` and never change the datasets.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from codegen.demo.build import TOTAL_STEPS, build_demo

try:
    from conftest import scratch_lock, shared_scratch
except ImportError:                                  # imported as tests.demo_data with tests/ not on sys.path
    from tests.conftest import scratch_lock, shared_scratch


@dataclass(frozen=True)
class BuiltDemo:
    root: Path
    paths: dict[str, dict[str, Path]]
    progress: list[tuple[str, int, int]]
    cwd_categories_before: bool
    cwd_categories_after: bool


_BUILT: BuiltDemo | None = None


def built_demo() -> BuiltDemo:
    global _BUILT
    if _BUILT is None:
        root = shared_scratch()
        record = root / "demo.pickle"
        with scratch_lock("demo"):
            if record.exists():
                _BUILT = BuiltDemo(**pickle.loads(record.read_bytes()))
            else:
                before = (Path.cwd() / "categories").exists()
                calls: list[tuple[str, int, int]] = []
                paths = build_demo(root / "demo",
                                   progress=lambda label, done, total: calls.append((label, done, total)))
                assert calls[-1][1:] == (TOTAL_STEPS, TOTAL_STEPS)
                _BUILT = BuiltDemo(root / "demo", paths, calls, before, (Path.cwd() / "categories").exists())
                record.write_bytes(pickle.dumps(dataclasses.asdict(_BUILT)))
    return _BUILT


def private_demo(name: str) -> BuiltDemo:
    """A copy of the session's demo (2 MB) for tests that write into the demo folder itself (``ctrgen demo --root``
    writes specs/, generated/ and the Criteo keysets there), so that tests of other workers never see those files
    appear under them. The copy is as current as the build: ``ctrgen demo`` finds it up to date."""
    import shutil

    from codegen.demo.build import demo_paths

    built = built_demo()
    root = built.root.parent / f"demo-{name}"
    with scratch_lock("demo"):
        if not root.exists():
            shutil.copytree(built.root, root.with_name(root.name + ".tmp"), symlinks=True)
            root.with_name(root.name + ".tmp").rename(root)
    return dataclasses.replace(built, root=root, paths=demo_paths(root))


def read_parts(directory: Path) -> pd.DataFrame:
    """All part_*.parquet files of a to_parquet output, in file order."""
    parts = sorted(directory.glob("part_*.parquet"), key=lambda p: int(p.stem.split("_")[1]))
    assert parts, f"no part files in {directory}"
    return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
