"""ctrgen's runtime (codegen/runtime/) on its own: what it imports, the copy `ctrgen assemble` deploys, the version a
generated file requires.

The runtime must load with torch, numpy and pyarrow only (a Triton server or a training container without ctrgen):
importing every module of it pulls in nothing else of ctrgen and none of its dependencies. The copy
``runtime_copy.write_runtime`` puts into a repository is enough to train a generated train_torch.py and to load the
Triton python models' runtime; a runtime of another version is one clear error, never a silent mix. The kernels'
CPU references, sharding, optimizers and checkpoints are tested through the generated trainers in
tests/test_torch_*.py (trainer_view gives them the runtime's names).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codegen import __version__
from codegen.triton.deploy.runtime_copy import runtime_files, write_runtime
from conftest import REPO
from test_torch_fast_paths import synthesize

RUNTIME = REPO / "codegen" / "runtime"
MODULES = sorted(p.stem for p in RUNTIME.glob("*.py") if p.stem != "__init__")


def _python(code: str, path: Path, cwd: Path, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(path), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)


def test_the_runtime_is_plain_python_without_templates():
    """Code with no placeholders is a module: nothing in the runtime is rendered, no template is left for it."""
    for path in RUNTIME.glob("*.py"):
        text = path.read_text()
        assert "{{" not in text and "{%" not in text, path
        assert len(text.splitlines()) <= 600, path
    assert not (REPO / "templates" / "triton" / "nvt_arrays.py.j2").exists()
    assert sorted(p.name for p in (REPO / "templates" / "torch").iterdir()) == ["train_torch.py.j2"]


def test_the_deployed_copy_is_the_runtime_with_its_version(tmp_path):
    files = runtime_files()
    assert {p.name for p in files if p.parent.name == "runtime"} == {p.name for p in RUNTIME.glob("*.py")}
    written = write_runtime(tmp_path)
    assert written == ["codegen", "MANIFEST.json"]
    for rel, data in files.items():
        assert (tmp_path / rel).read_bytes() == data
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())
    assert manifest["runtime"]["version"] == __version__
    assert sorted(manifest["runtime"]["files"]) == sorted(str(p) for p in files)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory) -> Path:
    """A folder holding only the deployed runtime copy and the generated movielens trainer with its data."""
    root = tmp_path_factory.mktemp("deployed")
    write_runtime(root / "site")
    for name in ("train_torch.py", "features.json"):
        (root / name).write_bytes((REPO / "generated" / "movielens" / name).read_bytes())
    features = json.loads((root / "features.json").read_text())
    synthesize(features, 3000, root / "data" / "train", files=1)
    synthesize(features, 600, root / "data" / "valid", files=1)
    return root


def _train(root: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(root / "train_torch.py"), *_train_args(root)],
                          capture_output=True, text=True, env=env, cwd=root, timeout=300)


def _train_args(root: Path) -> list[str]:
    return ["--device", "cpu", "--train", str(root / "data" / "train"), "--eval", str(root / "data" / "valid"),
            "--max-iter", "5", "--batch-size", "128", "--display", "5", "--output-dir", str(root / "out")]


@pytest.fixture(scope="module")
def alone(deployed) -> dict:
    """One fresh interpreter (not forked from the warm Python: its preloads, e.g. tensorboard's protobuf, would be in
    sys.modules) with the deployed copy alone first on the path, run with -v (which names the file each import
    loads): it imports every runtime module and records sys.modules, then runs the generated train_torch.py as
    __main__."""
    modules = deployed / "modules.json"
    code = ("import importlib, json, runpy, sys\n"
            f"for name in {MODULES!r}:\n"
            "    importlib.import_module('codegen.runtime.' + name)\n"
            f"open({str(modules)!r}, 'w').write(json.dumps(sorted(sys.modules)))\n"
            f"sys.argv = [{str(deployed / 'train_torch.py')!r}, *{_train_args(deployed)!r}]\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    proc = _python(code, deployed / "site", deployed, "-v")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"proc": proc, "modules": json.loads(modules.read_text()), "site": deployed / "site"}


@pytest.mark.slow
def test_the_runtime_imports_nothing_of_ctrgen_but_itself(alone):
    """Every runtime module, imported in a fresh interpreter (the module's `alone` run): no other ctrgen module (the
    deployed copy has none to find), none of ctrgen's own dependencies (pydantic, jinja2, click, ruamel, protobuf)
    and no nvtabular (nvt_model imports it when a model loads, not at import). The copy's files are the runtime's
    (test_the_deployed_copy_is_the_runtime_with_its_version); codegen/__init__.py imports nothing in both."""
    loaded = alone["modules"]
    ours = [m for m in loaded if m.startswith("codegen")]
    assert ours == ["codegen", "codegen.runtime"] + [f"codegen.runtime.{m}" for m in MODULES]
    for package in ("pydantic", "jinja2", "click", "ruamel", "google.protobuf", "nvtabular", "merlin", "pandas"):
        assert not any(m == package or m.startswith(package + ".") for m in loaded), package
    for init in (REPO / "codegen" / "__init__.py", alone["site"] / "codegen" / "__init__.py"):
        body = ast.parse(init.read_text()).body
        assert not [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom))], init


@pytest.mark.slow
def test_a_generated_trainer_runs_on_the_deployed_copy(deployed, alone):
    """The copy alone (first on the path) trains the generated file (the module's `alone` run): every module of
    codegen it imports is the copy's (python -v names the file each import loads)."""
    proc = alone["proc"]
    assert json.loads((deployed / "out" / "metrics.json").read_text())["iterations"] == 5
    loaded = re.findall(r"^# code object from '?(\S*?/codegen/\S*?\.py)'?$", proc.stderr, re.M) + \
        re.findall(r"^# \S+\.pyc matches (\S*?/codegen/\S*?\.py)$", proc.stderr, re.M)
    site = str(deployed / "site" / "codegen") + "/"
    assert str(deployed / "site" / "codegen" / "runtime" / "trainer.py") in loaded, loaded
    assert all(path.startswith(site) for path in loaded), loaded


@pytest.mark.slow
def test_a_runtime_of_another_version_is_one_clear_error(deployed, tmp_path):
    other = tmp_path / "site"
    write_runtime(other)
    init = other / "codegen" / "__init__.py"
    init.write_text(init.read_text().replace(repr(__version__), repr("0.0.0-other")))
    proc = _train(deployed, other)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and \
        f"was generated by ctrgen {__version__}, but the runtime it imports" in lines[0] and \
        "is ctrgen 0.0.0-other" in lines[0], lines


@pytest.mark.parametrize("model", ["movielens_nvt", "movielens"])
def test_a_triton_model_refuses_a_runtime_of_another_version(tmp_path, model):
    """The generated python model finds the runtime at its repository's root and checks its version before anything
    loads (a stand-in triton_python_backend_utils: the real server runs these models in the serving tests)."""
    repo = tmp_path / "repo"
    write_runtime(repo)
    folder = "triton_torch" if model == "movielens" else "triton"
    source = REPO / "generated" / "movielens" / folder / model / "1" / "model.py"
    (repo / model / "1").mkdir(parents=True)
    (repo / model / "1" / "model.py").write_bytes(source.read_bytes())
    init = repo / "codegen" / "__init__.py"
    code = (
        "import importlib.util, sys, types\n"
        "pb = types.ModuleType('triton_python_backend_utils')\n"
        "class TritonModelException(Exception): pass\n"
        "pb.TritonModelException = TritonModelException\n"
        "sys.modules['triton_python_backend_utils'] = pb\n"
        f"spec = importlib.util.spec_from_file_location('m', {str(repo / model / '1' / 'model.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        f"found = m.runtime({{'model_repository': {str(repo / model)!r}}})\n"
        "print(found.__file__)\n")
    proc = _python(code, tmp_path, tmp_path)        # no ctrgen on the path: the repository's copy is found
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(repo / "codegen" / "runtime" / "__init__.py")
    init.write_text(init.read_text().replace(repr(__version__), repr("0.0.0-other")))
    proc = _python(code, tmp_path, tmp_path)
    assert proc.returncode == 1
    assert f"{model}: ctrgen's runtime: {model}/model.py was generated by ctrgen {__version__}" in proc.stderr
    assert "is ctrgen 0.0.0-other" in proc.stderr


def test_generated_trainers_hold_the_model_only():
    """Each generated train_torch.py is its model's facts: at most 400 lines, no machinery."""
    for path in sorted((REPO / "generated").glob("*/train_torch.py")):
        text = path.read_text()
        assert len(text.splitlines()) <= 400, path
        assert "class Model(nn.Module)" in text and "def main(" in text
        for machinery in ("class SparseEmbedding", "class RowSparseOptimizer", "def train_pass", "class Stream"):
            assert machinery not in text, (path, machinery)


def test_a_model_named_like_the_runtime_folder_is_refused(tmp_path):
    """The runtime lives at the repository's root as codegen/: no model of the repository may have that name."""
    from codegen.errors import UserError
    from codegen.pipeline import open_spec, render_spec
    from codegen.triton.deploy.assemble import assemble
    from specfactory import MOVIELENS_LOCK, write_spec

    text = (REPO / "specs" / "movielens.yaml").read_text().replace("name: movielens\n", "name: codegen\n", 1)
    assert "name: codegen\n" in text
    rendered = render_spec(open_spec(write_spec(tmp_path / "specs", text, MOVIELENS_LOCK, name="codegen")))
    with pytest.raises(UserError, match="the repository's root holds ctrgen's runtime under that name"):
        assemble(rendered.triton, tmp_path / "generated", workflow=tmp_path / "workflow", weights=tmp_path / "w",
                 out=tmp_path / "out")
    assert not (tmp_path / "out").exists()
