"""The package's layering (issue 23): front ends (the spec, features locks, workflows) -> the typed model -> the
renderers of each target -> what works on the outputs -> the commands. A module imports its own layer or lower ones
only, nothing imports in a circle, and no renderer reads the spec. Inside codegen/triton/ (issue 15): plan/ (what
ctrgen writes), lint/ (ctrgen validate's rules) and deploy/ (ctrgen assemble's logic) depend on lower layers only;
the commands in commands/ open the spec and hand what they read in. Imports are read with ast, so a late import
inside a function (and one under TYPE_CHECKING) counts too."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODEGEN = REPO / "codegen"
TRITON = CODEGEN / "triton"

# Lowest first. A module belongs to the layer of its longest matching prefix; it may import its own layer and those
# below it. Where a new module goes: docs/architecture.md.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base: knows no spec and no model", (
        "codegen", "codegen.errors", "codegen.atomic", "codegen.user_cache", "codegen.inputs", "codegen.cli_paths",
        "codegen.tfmd", "codegen.nvt_import", "codegen.template_files", "codegen.hugectr", "codegen.triton.pb",
        "codegen.etl", "codegen.triton.plan",     # (empty package files of mixed packages)
        "codegen.runtime",      # what generated files import (torch, numpy, pyarrow only): nothing of ctrgen above
        "codegen.torch_target",  # what the PyTorch target translates (the builder's rules and its renderer read it)
        "codegen.triton.layout")),   # where generated/<name>/ keeps each repository's files (render, deploy, lint)
    ("front ends: the spec, features locks and workflows", (
        "codegen.spec", "codegen.features", "codegen.workflow", "codegen.workflow_schema", "codegen.stale", "codegen.lock",
        "codegen.etl.inputs")),
    ("the model: codegen.model.build_model and what it holds", (
        "codegen.model", "codegen.graph", "codegen.etl.plan", "codegen.triton.plan.repository")),
    ("renderers: model -> text", (
        "codegen.render", "codegen.etl.render", "codegen.triton.plan.configs")),
    ("on the outputs: pipeline, writing, import (checked through the model), port, lint, deploy, serve, keysets", (
        "codegen.pipeline", "codegen.output", "codegen.importer", "codegen.port", "codegen.triton.lint",
        "codegen.triton.deploy", "codegen.serve", "codegen.keysets", "codegen.train", "codegen.export",
        "codegen.weights", "codegen.triton")),   # (codegen/triton/__init__.py: ctrgen validate's entry points, loaded on first use)
    ("commands", (
        "codegen.cli", "codegen.entry", "codegen.__main__", "codegen.triton.commands", "codegen.etl.run",
        "codegen.etl.cli", "codegen.demo", "codegen.keysets.cli", "codegen.serve.cli_serve",
        "codegen.serve.cli_query", "codegen.train.cli", "codegen.export.cli", "codegen.weights.cli")),
)
# Circles known to be left: the importer's package and its modules (issue 23 item 4 splits them). Nothing else.
KNOWN_CIRCLES: set[str] = set()

# Modules above plan/, lint/ and deploy/: the pipeline and the command layers (ctrgen's group, the click commands,
# the demo and serve commands that call into them).
UPPER = ("codegen.pipeline", "codegen.cli", "codegen.triton.commands", "codegen.demo", "codegen.serve")
# Sibling sub-packages each layer must not reach into (lint and plan are independent; deploy builds on plan).
SIBLINGS = {
    "plan": ("codegen.triton.lint", "codegen.triton.deploy"),
    "lint": ("codegen.triton.plan", "codegen.triton.deploy"),
    "deploy": ("codegen.triton.lint",),
}


def _layer(name: str) -> int:
    best = max(((len(p), i) for i, (_, prefixes) in enumerate(LAYERS) for p in prefixes
                if name == p or name.startswith(p + ".") and p != "codegen"), default=None)
    assert best is not None, f"{name} is in no layer of tests/test_layout.py's LAYERS: add it (docs/architecture.md)"
    return best[1]


@lru_cache(maxsize=1)
def package_graph() -> dict[str, set[str]]:
    """{module: the codegen modules it imports} over the whole package ("from . import x" names module x; an
    imported name that is not a module stands for its module)."""
    paths = {_module_name(p): p for p in CODEGEN.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        found = set()
        for imported in imported_modules(path):
            if imported in paths:
                found.add(imported)
            elif imported.rpartition(".")[0] in paths and imported.startswith("codegen."):
                found.add(imported.rpartition(".")[0])
        graph[name] = found - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    left = [c for c in circles(package_graph()) if not all(_reaches(m, tuple(KNOWN_CIRCLES)) for m in c)]
    assert left == [], left


def test_circle_finder_sees_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_import_runs_down_the_layers():
    bad = []
    for name, imported in sorted(package_graph().items()):
        for target in sorted(imported):
            if _layer(target) > _layer(name):
                bad.append(f"{name} ({LAYERS[_layer(name)][0]}) imports {target} ({LAYERS[_layer(target)][0]})")
    assert bad == [], "\n".join(bad)


def test_layers_place_modules_by_longest_prefix():
    assert _layer("codegen.triton.plan.configs") == 3 and _layer("codegen.triton.plan.repository") == 2
    assert _layer("codegen.keysets.cli") == 5 and _layer("codegen.keysets.norm") == 4
    assert _layer("codegen.hugectr.versions") == 0 and _layer("codegen.spec.context") == 1


def test_renderers_do_not_read_the_spec():
    """Every renderer takes the model (codegen.model.types.Model or a part of it), never the spec."""
    bad = [f"{name} imports {target}" for name, imported in sorted(package_graph().items()) if _layer(name) == 3
           for target in sorted(imported) if _reaches(target, ("codegen.spec",))]
    assert bad == [], "\n".join(bad)


def test_renderers_refuse_nothing():
    """Every spec rule runs in the model builder with its spec line (the PyTorch target's too): no module of the
    renderer layer imports codegen.errors, where UserError and Located are."""
    bad = [f"{name} imports {target}" for name, imported in sorted(package_graph().items()) if _layer(name) == 3
           for target in sorted(imported) if _reaches(target, ("codegen.errors",))]
    assert bad == [], "\n".join(bad)


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
            if node.module is not None or node.level == 0:
                found.add(target)
            # `from . import findings` names a module (the package only where a name is not one: package_graph)
            found.update(f"{target}.{a.name}" for a in node.names)
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
    """Only what plan/render, lint and deploy share stays beside the sub-packages (the protobuf loader, and where
    generated/<name>/ keeps each repository's files); every other module lives in plan/, lint/, deploy/ or
    commands/."""
    top = sorted(p.name for p in TRITON.glob("*.py"))
    assert top == ["__init__.py", "layout.py", "pb.py"], top
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


# ---- each fact once (issue 23 item 4) ------------------------------------------------------------------------------
# The importer's modules are being split (issue 23 item 4); their release comparisons and parsers move then.
NOT_YET: tuple[str, ...] = ()
RELEASE_COMPARISON = re.compile(r"release\w*(\([^()]*\))?\s*(>=|<=|==|!=|<|>)\s*\(\s*\d+\s*,"
                                r"|\(\s*\d+\s*,\s*\d+\s*\)\s*(>=|<=|<|>)")
RELEASE_PARSER = re.compile(r"def \w*release\w*\(|\.split\(\"\.\"\)\[:2\]")


@lru_cache(maxsize=1)
def _all_sources() -> tuple[tuple[str, str], ...]:
    return tuple((p.relative_to(REPO).as_posix(), p.read_text(encoding="utf-8")) for p in sorted(CODEGEN.rglob("*.py")))


def _sources(*skip: str) -> list[tuple[str, str]]:
    return [(rel, text) for rel, text in _all_sources() if not rel.startswith(NOT_YET) and rel not in skip]


def test_release_comparisons_only_in_versions_py():
    """Every release rule is a named span in codegen/hugectr/versions.py (BEHAVIOUR, holds()); code asks for the rule
    by name instead of comparing a release with a literal such as (23, 6)."""
    found = [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for rel, text in _sources("codegen/hugectr/versions.py") for m in RELEASE_COMPARISON.finditer(text)]
    assert found == [], "\n".join(found)


def test_the_release_comparison_pattern_sees_comparisons():
    for text in ("if p.release >= (23, 8):", "A.release_key(release) < (3, 8)", "(4, 3) <= t.release"):
        assert RELEASE_COMPARISON.search(text), text
    assert not RELEASE_COMPARISON.search('V.holds("matmul_4d", t.release)')


def test_one_release_parser():
    """A release name becomes (major, minor) in one place: codegen.hugectr.api.release_key."""
    found = [f"{rel}: {m.group(0)}" for rel, text in _sources("codegen/hugectr/api.py")
             for m in RELEASE_PARSER.finditer(text)]
    assert found == [], "\n".join(found)


def test_one_field_path_format():
    """Field paths are written by codegen.errors.field_path (``a[0].b``), never joined by hand."""
    joined = re.compile(r"\"\.\"\.join\(\s*str\(|\.replace\(\"\.\[\", \"\[\"\)")
    found = [f"{rel}: {m.group(0)}" for rel, text in _sources("codegen/errors.py") for m in joined.finditer(text)]
    assert found == [], "\n".join(found)


def test_the_backend_inputs_are_defined_once():
    """DES, CATCOLUMN and ROWINDEX: codegen/runtime/contract.py only (the deployed runtime needs them without the
    rest of ctrgen; codegen/hugectr/backend.py adds their data types)."""
    found = [rel for rel, text in _sources("codegen/runtime/contract.py")
             if re.search(r"\"(DES|CATCOLUMN|ROWINDEX)\"", text)]
    assert found == [], found


def test_hugectr_parameter_types_come_from_the_api_table():
    """No second table of C++ parameter types beside api_table.json (graph/param_types.py disagreed with it)."""
    assert not (CODEGEN / "graph" / "param_types.py").exists()
    found = [rel for rel, text in _sources() if re.search(r"^(SIZE_T|INT_LISTS|SIZE_T_LISTS)\s*=", text, re.M)]
    assert found == [], found


def test_modules_stay_small():
    """No module of codegen/ over 500 lines (the importer's are being split)."""
    big = {rel: text.count("\n") for rel, text in _sources() if text.count("\n") > 500}
    assert big == {}, big
