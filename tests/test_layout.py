"""The package's layering (issue 23): front ends (the spec, features locks, workflows) -> the typed model -> the
renderers of each target -> what works on the outputs -> the commands. A module imports its own layer or lower ones
only, nothing imports in a circle, and no renderer reads the spec. Inside codegen/triton/ (issue 15): plan/ (what
ctrgen writes), lint/ (ctrgen validate's rules) and deploy/ (ctrgen assemble's logic) depend on lower layers only;
the commands in commands/ open the spec and hand what they read in. Imports are read with ast, so a late import
inside a function (and one under TYPE_CHECKING) counts too."""

from __future__ import annotations

import ast
import fnmatch
import re
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CODEGEN = REPO / "codegen"
TRITON = CODEGEN / "triton"

# Lowest first; a module may import its own layer and those below it. Every module of codegen/ is named here, by its
# package and its file name (``__init__`` names the package), so that no new module lands in a layer by its folder's
# name: a new one fails test_every_module_has_a_layer until it is added to its layer's line for its package (and to
# that layer's row of docs/architecture.md, which says where a new module goes).
LAYERS: tuple[tuple[str, dict[str, str]], ...] = (
    ("base: knows no spec and no model", {
        # torch_target: what the PyTorch target translates (the builder's rules and its renderer read it)
        "codegen": "__init__ errors atomic user_cache inputs cli_paths tfmd template_files torch_target",
        "codegen.hugectr": "__init__ api arg_types backend graph_reader versions",
        # what generated files import (torch, numpy, pyarrow only): nothing of ctrgen above
        "codegen.runtime": "__init__ attention checkpoint checks cli collection compiled contract data dense_optim"
                           " distributed early_stop errors evaluation feature_order ftrl initializers job kernels"
                           " label_names layers losses metrics nvt_arrays nvt_categorify nvt_check nvt_import nvt_model nvt_values"
                           " optimizers precision progress"
                           " row_counts row_optim run_facts run_folder sharding shards startup threads torch_model trainer",
        # the static parts of generated task.py, submit.py and etl.py, included verbatim by their templates
        "codegen.programs": "__init__ cardinality etl submit task",
        "codegen.etl": "__init__",  # (empty package files of mixed packages)
        "codegen.triton.plan": "__init__",
        # pb: the protobuf loader; layout: where generated/<name>/ keeps each repository's files (render, deploy, lint)
        "codegen.triton": "pb layout",
    }),
    ("front ends: the spec, features locks and workflows", {
        "codegen": "features lock stale workflow workflow_schema workflow_graph",
        "codegen.specfile": "__init__ context embedding_collection etl fields graph launch load model reader_check serving"
                        " suggest write",
        "codegen.etl": "inputs",
    }),
    ("model: codegen.model.build_model and what it holds", {
        "codegen.model": "__init__ build home_paths launch spec_rules torch_collection torch_rules types",
        "codegen.graph": "__init__ build context continuous embedding_collection ir layers preset_table presets"
                         " presets_multitask presets_ncf presets_seq reader_check shapes sparse unrunnable",
        "codegen.etl": "plan",
        "codegen.triton.plan": "repository",
    }),
    ("renderers: model -> text", {
        "codegen.render": "__init__ card cluster continuous diagram embedding_collection env graph_json literals script"
                          " summary targets task template_cache text torch_collection torch_features torch_model triton vertex",
        "codegen.etl": "render",
        "codegen.triton.plan": "configs",
    }),
    ("on the outputs: pipeline, writing, import (checked through the model), port, lint, deploy, serve, keysets", {
        "codegen": "pipeline output port",
        "codegen.importer": "__init__ arguments argv builtins calls compare containers embedding_collection evaluator"
                            " expressions files graph_fields graph_json graph_layers graph_read handlers known_modules modules"
                            " poison presets release_facts result scopes sections signatures source state stdlib to_spec"
                            " values world write",
        "codegen.etl": "norm_output",  # HugeCTR Norm files from the ETL's Parquet output
        "codegen.keysets": "__init__ norm parquet raw sources write",
        "codegen.serve": "__init__ offline query raw_rows repository server",
        "codegen.train": "__init__ child launch record report report_inputs report_summary svg torchrun",
        "codegen.export": "__init__ onnx trained vcsr",
        "codegen.weights": "__init__ convert files layout run",
        # (codegen/triton/__init__.py: ctrgen validate's entry points, loaded on first use)
        "codegen.triton": "__init__",
        "codegen.triton.lint": "__init__ context findings modelconfig params paths psentry psjson rules_ensemble"
                               " rules_files rules_graph rules_hugectr rules_keys rules_nvt rules_pstables"
                               " training_side validate",
        "codegen.triton.deploy": "__init__ assemble checkpoint_choice copying instances lock_check onnx_step run_card"
                                 " runtime_copy",
    }),
    ("commands", {
        "codegen": "cli entry __main__",
        "codegen.triton.commands": "__init__ assemble validate",
        "codegen.etl": "run cli",
        "codegen.demo": "__init__ build cli criteo etl families metrics movielens serve_job",
        "codegen.keysets": "cli",
        "codegen.serve": "cli_serve cli_query",
        "codegen.train": "cli",
        "codegen.export": "cli",
        "codegen.weights": "cli",
    }),
)


@lru_cache(maxsize=1)
def assigned() -> dict[str, int]:
    """{module: its layer's index}, from LAYERS (a module named twice is an error)."""
    out: dict[str, int] = {}
    for i, (_, packages) in enumerate(LAYERS):
        for package, leaves in packages.items():
            for leaf in leaves.split():
                name = package if leaf == "__init__" else f"{package}.{leaf}"
                assert name not in out, f"{name} is named twice in tests/test_layout.py's LAYERS"
                out[name] = i
    return out


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
    if name not in assigned():
        package = name.rpartition(".")[0]
        raise AssertionError(f"{name} is in no layer: name it in tests/test_layout.py's LAYERS, on its layer's line "
                             f"for {package!r}, and in that layer's row of docs/architecture.md (which says where a "
                             "new module goes)")
    return assigned()[name]


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


def test_every_module_has_a_layer():
    """Each module of codegen/ is named in LAYERS, and LAYERS names no module that is gone."""
    modules, named = set(package_graph()), set(assigned())
    problems = []
    for name in sorted(modules - named):
        try:
            _layer(name)
        except AssertionError as e:
            problems.append(str(e))
    problems += [f"tests/test_layout.py's LAYERS names {name}, which is no module of codegen/: remove it"
                 for name in sorted(named - modules)]
    assert problems == [], "\n".join(problems)


def test_a_new_module_is_placed_by_no_folder_name():
    """A module LAYERS does not name is refused with where to add it, even in a folder whose modules share a layer."""
    for name in ("codegen.render.new_target", "codegen.etl.new_step", "codegen.triton.plan.new_part"):
        with pytest.raises(AssertionError, match=r"in no layer: name it in tests/test_layout\.py's LAYERS"):
            _layer(name)
    assert _layer("codegen.triton.plan.configs") == 3 and _layer("codegen.triton.plan.repository") == 2
    assert _layer("codegen.keysets.cli") == 5 and _layer("codegen.keysets.norm") == 4
    assert _layer("codegen.hugectr.versions") == 0 and _layer("codegen.specfile.context") == 1


def _doc_layer_rows() -> list[tuple[str, list[str]]]:
    """docs/architecture.md's layer table: (layer, the `module` entries of its row), lowest first."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text[text.index("| layer | modules |"):].split("\n\n")[0]
    rows = [line.split("|")[1:3] for line in table.splitlines()[2:]]
    return [(layer.strip(), re.findall(r"`([A-Za-z0-9_/*]+)`", cells)) for layer, cells in rows]


def _doc_entry_for(name: str, entries: list[tuple[int, str]]) -> tuple[int, str] | None:
    """The most specific entry of the docs' layer table that covers module ``name`` (a file, a glob, a folder)."""
    path = name.removeprefix("codegen").lstrip(".").replace(".", "/")
    if (CODEGEN / path / "__init__.py").is_file():
        path = f"{path}/__init__".lstrip("/")      # a package is its __init__ file: `etl/__init__`, `__init__`
    best = None
    for row, entry in entries:
        folder = entry.rstrip("/")
        if entry.endswith("/") or (CODEGEN / folder).is_dir():
            rank = len(folder) if path.startswith(folder + "/") else -1
        elif "*" in entry:
            rank = 1000 if fnmatch.fnmatchcase(path, entry) else -1
        else:
            rank = 2000 if path == entry else -1
        if rank >= 0 and (best is None or rank > best[0]):
            best = (rank, row, entry)
    return None if best is None else best[1:]


def test_the_architecture_doc_places_every_module_in_its_layer():
    """docs/architecture.md's layer table has LAYERS' rows in order, and its most specific entry for each module (the
    module, a glob, or its folder) sits in the module's layer."""
    rows = _doc_layer_rows()
    assert [layer for layer, _ in rows] == [title.split(":")[0] for title, _ in LAYERS]
    entries = [(i, entry) for i, (_, found) in enumerate(rows) for entry in found]
    problems = []
    for name, layer in sorted(assigned().items()):
        found = _doc_entry_for(name, entries)
        if found is None:
            problems.append(f"{name}: in no row of docs/architecture.md's layer table (add it to {rows[layer][0]!r})")
        elif found[0] != layer:
            problems.append(f"{name}: docs/architecture.md puts it in {rows[found[0]][0]!r} (`{found[1]}`), LAYERS in "
                            f"{rows[layer][0]!r}")
    assert problems == [], "\n".join(problems)


def test_renderers_do_not_read_the_spec():
    """Every renderer takes the model (codegen.model.types.Model or a part of it), never the spec."""
    bad = [f"{name} imports {target}" for name, imported in sorted(package_graph().items()) if _layer(name) == 3
           for target in sorted(imported) if _reaches(target, ("codegen.specfile",))]
    assert bad == [], "\n".join(bad)


def test_renderers_take_the_release_profile_from_the_model():
    """The builder resolves the release profile once (TrainingJob.profile) and HugeCTR's defaults come from the API
    table (codegen.hugectr.api): no renderer rebuilds the profile from codegen.hugectr.versions (issue 42)."""
    graph = package_graph()
    renderers = [name for name in sorted(graph) if name.startswith("codegen.render.")]
    assert "codegen.render.torch_model" in renderers
    bad = [name for name in renderers if "codegen.hugectr.versions" in graph[name]]
    assert bad == [], f"{bad} import codegen.hugectr.versions: read job.profile instead"


def test_renderers_refuse_nothing():
    """Every spec rule runs in the model builder with its spec line (the PyTorch target's too): no module of the
    renderer layer imports codegen.errors, where UserError and Located are."""
    bad = [f"{name} imports {target}" for name, imported in sorted(package_graph().items()) if _layer(name) == 3
           for target in sorted(imported) if _reaches(target, ("codegen.errors",))]
    assert bad == [], "\n".join(bad)


# The importer's Python evaluator (issue 42): Python's own rules, nothing of HugeCTR. What a script imports and the
# objects those modules make come from the world it is handed (codegen.importer.world.World; codegen.importer.calls
# is the one a training script is read with). builtins and values are the value types it shares with that world.
EVALUATOR = ("codegen.importer.evaluator", "codegen.importer.expressions", "codegen.importer.poison",
             "codegen.importer.world", "codegen.importer.scopes", "codegen.importer.containers")
EVALUATOR_MAY_IMPORT = ("codegen.errors", "codegen.importer.builtins", "codegen.importer.values")


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module (f-string parts too), docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_the_evaluator_knows_nothing_of_hugectr():
    """The evaluator's modules import only each other, codegen.errors and the shared value types, and no message or
    name of theirs speaks of hugectr: HugeCTR is the world's business (codegen.importer.calls)."""
    graph = package_graph()
    problems = [f"{name} imports {target}" for name in EVALUATOR for target in sorted(graph[name])
                if target not in EVALUATOR + EVALUATOR_MAY_IMPORT]
    for name in EVALUATOR:
        path = CODEGEN / (name.removeprefix("codegen.").replace(".", "/") + ".py")
        problems += [f"{name}:{line}: {text!r}" for line, text in _strings(path) if "hugectr" in text.lower()]
    assert problems == [], "\n".join(problems)
    assert [text for _, text in _strings(CODEGEN / "importer" / "calls.py") if "which hugectr calls" in text], \
        "the check reads string constants"


# Classes of codegen/ that take a base from another codegen module, each with why it is no class split across files:
# a class is written in one module, and its steps are functions over what it holds (issue 42: the importer's Reader
# holds its evaluator; the graph builder's steps take one build context, graph/context.py).
CROSS_MODULE_BASES = {
    "codegen.specfile.fields.Strict": "the spec sections' shared pydantic configuration (extra=forbid, frozen, strict)",
    "codegen.specfile.load.LoadedSpec": "the import's graph JSON check reads a spec whose problems have no line",
    "codegen.render.script.Bindings": "model.py's bindings bind nothing; task.py's bind values to its arguments",
}


def cross_module_bases(source: str, module: str, is_package: bool = False) -> list[tuple[str, str]]:
    """(class, base) for each base of a class of ``source`` (module ``module``) that another codegen module defines:
    a name imported from one (``from .sparse import SparseParts``) or an attribute of one (``sparse.SparseParts``)."""
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(source)
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            names.update({a.asname or a.name: f"{target}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            names.update({a.asname: a.name for a in node.names if a.asname})
            names.update({a.name.partition(".")[0]: a.name.partition(".")[0] for a in node.names if not a.asname})
    found = []
    for node in ast.walk(tree):
        for b in node.bases if isinstance(node, ast.ClassDef) else ():
            head, _, rest = ast.unparse(b.value if isinstance(b, ast.Subscript) else b).partition(".")
            qualified = names.get(head, "") + (f".{rest}" if rest else "")
            if qualified.startswith("codegen.") and qualified.rpartition(".")[0] != module:
                found.append((node.name, qualified))
    return found


def test_no_class_is_assembled_across_files():
    """No class of codegen/ derives from a class of another of its modules (issue 42: the importer's Reader and the
    graph builder were mixins over three files each), except the bases CROSS_MODULE_BASES names and says why."""
    found = {(_module_name(p), cls, base) for p in sorted(CODEGEN.rglob("*.py"))
             for cls, base in cross_module_bases(p.read_text(encoding="utf-8"), _module_name(p), p.name == "__init__.py")}
    bad = sorted(f"{module}: class {cls}({base})" for module, cls, base in found if base not in CROSS_MODULE_BASES)
    assert bad == [], "\n".join(bad)
    unused = set(CROSS_MODULE_BASES) - {base for _, _, base in found}
    assert unused == set(), f"CROSS_MODULE_BASES names bases no class takes: {sorted(unused)}"


def test_cross_module_bases_see_imported_names_and_module_attributes():
    source = ("from pydantic import BaseModel\nfrom . import layers\nfrom .sparse import SparseParts as S\n"
              "import codegen.errors\n\nclass Local:\n    pass\n\nclass A(S, layers.DenseLayers, Local, BaseModel):\n"
              "    pass\n\ndef f():\n    from ..specfile.load import LoadedSpec\n\n    class B(LoadedSpec, codegen.errors.UserError):\n"
              "        pass\n")
    assert cross_module_bases(source, "codegen.graph.build") == [
        ("A", "codegen.graph.sparse.SparseParts"), ("A", "codegen.graph.layers.DenseLayers"),
        ("B", "codegen.specfile.load.LoadedSpec"), ("B", "codegen.errors.UserError")]


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


# A long function is a table of cases or several steps: split it so (issue 42).
FUNCTION_CAP = 120


def function_lengths(rel: str, text: str) -> dict[str, int]:
    """{"<file> <qualified name>": lines from ``def`` to the body's last line} of every function, methods and nested
    functions included."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out[f"{rel} {name}"] = child.end_lineno - child.lineno + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(text), "")
    return out


def test_functions_stay_short():
    """No function of codegen/ over FUNCTION_CAP lines (methods and nested functions count)."""
    lengths = {k: n for rel, text in _all_sources() for k, n in function_lengths(rel, text).items()}
    long = {k: n for k, n in lengths.items() if n > FUNCTION_CAP}
    assert long == {}, f"functions over {FUNCTION_CAP} lines (split each into a table of cases or named steps): {long}"


def test_function_lengths_see_methods_and_nested_functions():
    text = "class A:\n    def m(self):\n        def inner():\n            pass\n        return 1\n\n\nasync def f():\n    pass\n"
    assert function_lengths("x.py", text) == {"x.py A.m": 4, "x.py A.m.inner": 2, "x.py f": 2}


def test_files_cited_in_code_exist():
    """A comment or docstring of codegen/, templates/, tools/ or tests/ that names a test file or a module of codegen/
    names one that exists (comments went on citing test_facts_triton and the top-level nvt_import after they moved)."""
    cited = re.compile(r"\b(tests/test_\w+\.py|codegen/[\w/]+\.py)")
    found = []
    for folder in ("codegen", "templates", "tools", "tests"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix not in (".py", ".j2") or not path.is_file():
                continue
            for m in cited.finditer(path.read_text(encoding="utf-8")):
                if not (REPO / m.group(1)).is_file():
                    found.append(f"{path.relative_to(REPO)}: {m.group(1)}")
    assert found == [], "\n".join(found)
