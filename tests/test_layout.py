"""codegen/triton/'s layering (issue 15): plan/ (what ctrgen writes), lint/ (ctrgen validate's rules) and deploy/
(ctrgen assemble's logic) depend on lower layers only; the commands in commands/ open the spec through the pipeline
and hand what they read in. Imports are read with ast, so a late import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRITON = REPO / "codegen" / "triton"

# Modules above plan/, lint/ and deploy/: the pipeline and the command layers (ctrgen's group, the click commands,
# the demo and serve commands that call into them).
UPPER = ("codegen.pipeline", "codegen.cli", "codegen.triton.commands", "codegen.demo", "codegen.serve")
# Sibling sub-packages each layer must not reach into (lint and plan are independent; deploy builds on plan).
SIBLINGS = {
    "plan": ("codegen.triton.lint", "codegen.triton.deploy"),
    "lint": ("codegen.triton.plan", "codegen.triton.deploy"),
    "deploy": ("codegen.triton.lint",),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved against its package)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return imports_of(path.read_text(encoding="utf-8"), package)


def imports_of(source: str, package: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)   # `from . import findings` names a module
    return found


def _reaches(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_import_resolution_sees_relative_and_late_imports():
    """The checker itself: a late import inside a function, three levels up, is codegen.pipeline."""
    source = "from .findings import ERROR\nfrom . import context\n\ndef f():\n    from ...pipeline import open_spec\n"
    names = imports_of(source, "codegen.triton.lint")
    assert {"codegen.triton.lint.findings", "codegen.triton.lint.context", "codegen.pipeline"} <= names
    assert _reaches("codegen.pipeline", UPPER) and not _reaches("codegen.pipelines", UPPER)


def test_triton_folders_say_what_they_hold():
    """Only the shared protobuf loader stays beside the sub-packages; every module lives in plan/, lint/, deploy/ or
    commands/."""
    top = sorted(p.name for p in TRITON.glob("*.py"))
    assert top == ["__init__.py", "pb.py"], top
    subs = sorted(p.name for p in TRITON.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    assert subs == ["commands", "deploy", "lint", "plan"], subs


def test_plan_lint_and_deploy_do_not_reach_up():
    bad = []
    for layer in ("plan", "lint", "deploy"):
        for path in sorted((TRITON / layer).glob("*.py")):
            for name in sorted(imported_modules(path)):
                if _reaches(name, UPPER + SIBLINGS[layer]):
                    bad.append(f"{path.relative_to(REPO)} imports {name}")
    assert bad == [], "\n".join(bad)


def test_commands_are_what_reaches_the_pipeline():
    """The spec is opened by the commands (validate --spec, assemble's lock check), not below them."""
    names = set().union(*(imported_modules(p) for p in (TRITON / "commands").glob("*.py")))
    assert "codegen.pipeline" in names
    assert {"codegen.triton.lint.validate", "codegen.triton.deploy.assemble",
            "codegen.triton.deploy.lock_check"} <= names
