"""The slowest tests of a suite run and whether each says why (docs/testing.md, "Keeping `make test` fast").

    python -m pytest --durations=0 ... > run.log
    python tools/slow_tests.py run.log [--top 20] [--over 5] [--check]

Reads pytest's `--durations` lines (setup, call and teardown of one test added up; a module- or session-scoped
fixture's setup counts for the test that paid it) and prints a Markdown table of the `--top` slowest tests: seconds,
test, and the first line of its docstring. With `--check`, exit 1 when a test over `--over` seconds has no docstring:
the rule is that a test of seconds says in its docstring why it needs them.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(\S+?)::(\S+?)(\[.*\])?(@\S+)?\s*$")


def durations(text: str) -> dict[tuple[str, str, str], float]:
    """(file, test function, parameters) -> seconds of setup + call + teardown."""
    out: dict[tuple[str, str, str], float] = defaultdict(float)
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            seconds, _, path, name, params, _ = m.groups()
            out[(path, name, params or "")] += float(seconds)
    return dict(out)


def docstrings(path: Path) -> dict[str, str]:
    """Test function -> the first line of its docstring ('' without one)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            doc = ast.get_docstring(node) or ""
            out[node.name] = doc.strip().splitlines()[0] if doc.strip() else ""
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path, help="the output of a pytest run with --durations=0")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--over", type=float, default=5.0, help="seconds above which a test must say why")
    ap.add_argument("--check", action="store_true", help="exit 1 when a test over --over has no docstring")
    args = ap.parse_args(argv)
    found = durations(args.log.read_text(encoding="utf-8", errors="replace"))
    if not found:
        ap.error(f"{args.log}: no --durations lines (run pytest with --durations=0)")
    docs: dict[str, dict[str, str]] = {}
    ranked = sorted(found.items(), key=lambda kv: -kv[1])
    print("| s | test | why (its docstring) |\n|---:|---|---|")
    missing = []
    for rank, ((path, name, params), seconds) in enumerate(ranked):
        doc = docs.setdefault(path, docstrings(REPO / path)).get(name, "")
        if seconds > args.over and not doc:
            missing.append(f"{path}::{name}{params} ({seconds:.1f} s)")
        if rank < args.top:
            print(f"| {seconds:.1f} | `{path.removeprefix('tests/')}::{name}{params}` | {doc} |")
    if args.check and missing:
        print(f"\n{len(missing)} test(s) over {args.over:g} s without a docstring saying why:", file=sys.stderr)
        for item in missing:
            print(f"  {item}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
