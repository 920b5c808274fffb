"""The static parts of generated programs live in codegen/programs/ (issue 42 item 5): each module stands alone (it
imports nothing of codegen but its sibling program modules, and a part imports nothing of codegen at all), every part
is included by a template verbatim, and the schema's cardinality rule is one function that the generator and the
generated task.py both run."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from codegen import template_files
from codegen.errors import UserError
from codegen.pipeline import open_spec, render_spec
from codegen.workflow_schema import read_schema_json
from conftest import REPO

PROGRAMS = REPO / "codegen" / "programs"
MODULES = sorted(p.stem for p in PROGRAMS.glob("*.py") if p.stem != "__init__")
# Between them, these specs render every part: deepfm_vertex's task.py and submit.py (with a study),
# movielens_genres's etl.py (with a join table).
SPECS = ("deepfm_vertex", "movielens_genres")
VERTEX_TASK = REPO / "generated" / "deepfm_vertex" / "task.py"


def _render_all() -> dict[str, str]:
    out = {}
    for spec in SPECS:
        for rel, text in render_spec(open_spec(REPO / "specs" / f"{spec}.yaml")).files.items():
            if rel.suffix == ".py":
                out[f"{spec}/{rel.as_posix()}"] = text
    return out


@lru_cache(maxsize=1)
def rendered() -> dict[str, str]:
    return _render_all()


def test_program_modules_stand_alone():
    """Each module imports on its own; its imports name no codegen module but a sibling program's (its parts run
    inside a generated program, where codegen is absent)."""
    for name in MODULES:
        module = importlib.import_module(f"codegen.programs.{name}")
        assert module.__doc__ and "verbatim" in module.__doc__, name
        for node in ast.walk(ast.parse((PROGRAMS / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 and node.module in MODULES, (name, node.module)
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] == "codegen" for n in names), (name, names)


def test_parts_compile_and_import_nothing_of_codegen():
    for name in MODULES:
        parts = template_files.program_parts(name)
        assert parts, f"codegen/programs/{name}.py has no part"
        for part, text in parts.items():
            tree = ast.parse(text, f"{name}:{part}")
            assert text == text.strip("\n") and text.strip(), (name, part)
            for node in ast.walk(tree):
                assert not (isinstance(node, ast.ImportFrom) and node.level), (name, part)
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                assert not any(m.split(".")[0] == "codegen" for m in modules), (name, part, modules)


def test_every_part_is_included_verbatim_by_a_template():
    """Each part's text is in a rendered program as written, and replacing a part's text changes what is rendered
    in its place (the templates read the modules, not a copy): a part no template includes fails here."""
    texts = "\n".join(rendered().values())
    every = {(m, p): t for m in MODULES for p, t in template_files.program_parts(m).items()}
    for (module, part), text in every.items():
        assert text in texts, f"codegen/programs/{module}.py's part {part!r} is in no rendered program"

    real = template_files.program_parts

    def marked(module: str) -> dict[str, str]:
        return {part: f"MARK_{module}_{part} = 1" for part in real(module)}

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(template_files, "program_parts", marked)
        changed = "\n".join(_render_all().values())
    for module, part in every:
        assert f"\nMARK_{module}_{part} = 1\n" in changed, (module, part)
    for text in every.values():
        assert text not in changed


def test_program_part_reads_only_the_package_modules():
    for bad in ("../render/env", "etl.py", "__init__", "/etc/passwd", "Task"):
        with pytest.raises(ValueError, match="not a module name of codegen/programs"):
            template_files.program_part(bad, "x")
    with pytest.raises(ValueError, match="has no part 'nope'"):
        template_files.program_part("task", "nope")


def test_the_templates_digest_covers_the_program_modules(tmp_path, monkeypatch):
    """A program module is an input of the generated files: changing it changes the inputs hash in their headers."""
    import shutil

    before = template_files.templates_digest()
    copy = tmp_path / "programs"
    shutil.copytree(PROGRAMS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    template_files.templates_digest.cache_clear()
    monkeypatch.setattr(template_files, "programs_root", lambda: copy)
    try:
        assert template_files.templates_digest() == before
        (copy / "task.py").write_text((copy / "task.py").read_text() + "# changed\n")
        template_files.templates_digest.cache_clear()
        assert template_files.templates_digest() != before
    finally:
        template_files.templates_digest.cache_clear()


# ---- the cardinality rule, once ----------------------------------------------------------------------------------

def _generated_task():
    spec = importlib.util.spec_from_file_location("generated_task", VERTEX_TASK)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _schema(tmp_path: Path, name: str, features: list[dict]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"feature": [{"type": "INT", "annotation": {"tag": ["categorical"]}, **f}
                                            for f in features]}))
    return path


def _with_cardinality(name: str, card) -> dict:
    return {"name": name, "annotation": {"tag": ["categorical"], "extraMetadata": [
        {"embedding_sizes": {"cardinality": card, "dimension": 16.0}}]}}


def test_generated_task_reads_a_schema_as_the_generator_does(tmp_path):
    """The generated task.py's --schema and codegen.workflow_schema give the same cardinalities, and refuse the same
    values with the same words: one rule (codegen/programs/cardinality.py)."""
    task = _generated_task()
    good = _schema(tmp_path, "good.json", [
        _with_cardinality("a", 7.0), {"name": "b", "intDomain": {"min": "0", "max": "9"}},
        {**_with_cardinality("c", 3.0), "intDomain": {"max": "99"}}, {"name": "d"}])
    expected = {c.name: c.cardinality for c in read_schema_json(good).columns if c.cardinality is not None}
    assert expected == {"a": 7, "b": 10, "c": 3}
    assert task.read_cardinalities(str(good)) == expected
    for card, words in ((0.0, "cardinality of 'a' must be positive, got 0"), (1.5, "expected an integer, got 1.5")):
        bad = _schema(tmp_path, "bad.json", [_with_cardinality("a", card)])
        with pytest.raises(ValueError, match=words):
            task.read_cardinalities(str(bad))
        with pytest.raises(UserError, match=words):
            read_schema_json(bad)


def test_task_refuses_a_schema_cardinality_the_generator_refuses(tmp_path):
    """Bug fixed with the rule written once: task.py took cardinality 0 (or 1.5, truncated to 1) from --schema into
    slot_size_array; it now refuses it with one line, exit 2, before importing hugectr."""
    slots = [f"C{i}" for i in range(1, 27)]
    schema = _schema(tmp_path, "schema.json", [_with_cardinality(c, 0.0 if c == "C3" else 100.0) for c in slots])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-W", "ignore", str(VERTEX_TASK), f"--schema={schema}"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"--schema {schema}: cannot read it (ValueError: cardinality of 'C3' must be positive, got 0)" \
        in proc.stderr
