"""Import is exact or refused (issue 24): each value a script computes reaches the spec as CPython computes it,
or the import stops with the file, line and column of the value and the argument it would have fed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codegen.errors import UserError
from codegen.importer import import_source
from conftest import run_ctrgen
from test_import import NORM_DCN

# Each snippet computes WS, which the script passes as SparseEmbedding(workspace_size_per_gpu_in_mb=WS).
EXACT = {
    "while-doubling": ("ws = 1\nwhile ws < 75:\n    ws *= 2\nWS = ws\n", 128),
    "while-true-break": ("n = 0\nwhile True:\n    n += 1\n    if n == 6:\n        break\nWS = n * 50\n", 300),
    "set-len": ("WS = len({6, 6, 3}) * 100\n", 200),
    "set-order": ("WS = [x for x in {300, 200, 100}][0] * 4\n", 800),
    "aliasing": ("L = [512]\nM = L\nM += [512]\nWS = sum(L)\n", 1024),
    "mutable-default": ("def grow(x, acc=[]):\n    acc.append(x)\n    return len(acc)\ngrow(1)\nWS = grow(2) * 3\n",
                        6),
    "global": ("ws = 10\ndef setup():\n    global ws\n    ws = 75\nsetup()\nWS = ws\n", 75),
    "try-except": ("try:\n    WS = 300 // 0\nexcept ZeroDivisionError:\n    WS = 64\n", 64),
    "math-ceil": ("import math\nWS = math.ceil(100 / 3) * 4\n", 136),
    "floor-division": ("WS = 1000 // 7\n", 142),
    "argparse-upper": ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--ws', type=str.upper, "
                       "default='ab')\nWS = len(p.parse_args().ws) * 100 if p.parse_args().ws == 'AB' else 1\n",
                       200),
}
REFUSED = {
    "object-str": ("WS = int(len(f'{solver}'))\n", "an object that is not a number"),
    "instance-fstring": ("class C:\n    pass\nWS = len(f'{C()}')\n", "an object that is not a number"),
    "string-set-order": ("WS = len([x for x in {'ab', 'c'}][0])\n", "changes from run to run"),
    "home-folder": ("import os\nWS = len(os.path.expanduser('~/data'))\n", "only known where the script runs"),
    "environment": ("import os\nWS = int(os.environ['WS'])\n", "WS"),
}


def _script(snippet: str) -> str:
    text = NORM_DCN.replace("workspace_size_per_gpu_in_mb=300", "workspace_size_per_gpu_in_mb=WS")
    return text.replace("model = hugectr.Model(", snippet + "model = hugectr.Model(", 1)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_values_are_pythons(name: str, tmp_path: Path):
    snippet, value = EXACT[name]
    src = tmp_path / "m.py"
    src.write_text(_script(snippet), encoding="utf-8")
    spec = import_source(src, "23.06", "m").spec_text
    assert re.search(rf"workspace_size_per_gpu_in_mb: {value}\b", spec), spec


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_cannot_be_known_is_refused_with_line_and_column(name: str, tmp_path: Path):
    snippet, why = REFUSED[name]
    src = tmp_path / "m.py"
    text = _script(snippet)
    src.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as err:
        import_source(src, "23.06", "m")
    line = err.value.format()
    ws_line = 1 + text.splitlines().index(next(ln for ln in text.splitlines() if ln.startswith("WS =")))
    assert line.startswith(f"{src}:{ws_line}:"), line
    assert "SparseEmbedding(workspace_size_per_gpu_in_mb=...)" in line and why in line


def test_argparse_applies_type_to_a_string_default(tmp_path: Path):
    snippet = ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--combiner', type=str.lower, "
               "default='MEAN')\nCOMBINER = p.parse_args().combiner\nWS = 300\n")
    src = tmp_path / "m.py"
    src.write_text(_script(snippet).replace('combiner="sum"', "combiner=COMBINER"), encoding="utf-8")
    assert "combiner: mean" in import_source(src, "23.06", "m").spec_text


def test_an_unknown_branch_with_hugectr_calls_is_refused(tmp_path: Path):
    src = tmp_path / "m.py"
    src.write_text(NORM_DCN.replace("model.summary()", "import os\nif os.path.exists('x'):\n    model.summary()"),
                   encoding="utf-8")
    with pytest.raises(UserError, match="which hugectr calls run depends on"):
        import_source(src, "23.06", "m")


def test_names_fit_the_rules(tmp_path: Path):
    long = tmp_path / ("a_very_long_training_script_name_" * 3 + ".py")
    long.write_text(NORM_DCN, encoding="utf-8")
    result = import_source(long, "23.06")
    assert len(result.name) == 64 and result.name.startswith("a_very_long")
    assert any("cut to 64 characters" in n for n in result.assumptions)
    proc = run_ctrgen("import", str(long), "--hugectr-version", "23.06", "--name", "m" * 65, "--out",
                      str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "--name is 65 characters; a model name has at most 64" in proc.stderr and "fix:" in proc.stderr


def test_scripts_of_releases_before_3_2_name_the_release(tmp_path: Path):
    old = ("import hugectr\nsolver_config = hugectr.solver_parser_helper(batchsize=1024, vvgpu=[[0]])\n"
           "opt = hugectr.optimizer.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam)\n"
           "model = hugectr.Model(solver_config, opt)\nmodel.compile()\nmodel.fit()\n")
    src = tmp_path / "old.py"
    src.write_text(old, encoding="utf-8")
    with pytest.raises(UserError) as err:
        import_source(src, "3.2", "old")
    line = err.value.format()
    assert f"{src}:2:" in line and "API of HugeCTR 3.0 and 3.1" in line and "HugeCTR 3.2" in line


def test_a_raise_on_an_unknown_condition_does_not_stop_the_reading(tmp_path: Path):
    # The inference tests check a value only known when they run and raise a built-in exception with it.
    snippet = ("import os\nmse = float(os.environ['MSE'])\nif mse > 1e-3:\n    raise RuntimeError(f'mse {mse}')\n"
               "WS = 300\n")
    src = tmp_path / "m.py"
    src.write_text(_script(snippet), encoding="utf-8")
    assert "workspace_size_per_gpu_in_mb: 300" in import_source(src, "23.06", "m").spec_text
    # Raised unconditionally, it stops the script: refused with its line.
    src.write_text(_script("raise RuntimeError(f'stop {len(L)}')\nWS = 300\n".replace("len(L)", "os.sep")),
                   encoding="utf-8")
    with pytest.raises(UserError, match="stops here with RuntimeError"):
        import_source(src, "23.06", "m")


@pytest.mark.parametrize("body,value", [
    ("total = 0\nfor i in range(3):\n    if U == 'x':\n        continue\n    total += i\nr = total", None),
    ("n = 0\nwhile True:\n    n += 1\n    if U == 'x':\n        break\nr = n", None),
    ("n = 0\nfor i in range(3):\n    for j in range(2):\n        if U == 'x':\n            break\n        n += 1\nr = n", None),
    ("n = 0\nfor i in range(3):\n    n += 1\n    for j in range(2):\n        if U == 'x':\n            break\nr = n", 3),
    ("k = 5\nfor i in range(3):\n    if U == 'x':\n        break\nr = k", 5),
], ids=["continue", "while-true-break", "inner-break-before", "inner-break-after", "untouched"])
def test_a_break_or_continue_on_an_unknown_makes_the_loop_uncertain(body: str, value: object):
    from codegen.importer.calls import Reader
    from codegen.importer.values import Unknown

    src = "import os\nU = os.environ['U']\n" + body
    r = Reader("m.py", src).ev.run_module(__import__("ast").parse(src)).globals["r"]
    assert isinstance(r, Unknown) if value is None else r == value


def test_the_evaluator_alone_reads_python_and_leaves_every_module_unknown():
    """The evaluator with no world (codegen.importer.evaluator.Nothing) computes CPython's values and knows no module:
    what hugectr, os or any import gives is unknown, and a loop or branch on it still leaves what it assigns
    unknown; only the Reader (its world for a training script) records hugectr calls and reads os."""
    import ast

    from codegen.importer.evaluator import Evaluator
    from codegen.importer.values import Unknown

    src = ("import hugectr, os\nimport numpy as np\nL = [3, 1, 2]\nL.sort()\nd = {k: v * 2 for k, v in zip('ab', L)}\n"
           "m = hugectr.Model(hugectr.CreateSolver(batchsize=1))\nx = np.zeros(3)\nhome = os.path.expanduser('~')\n"
           "n = 0\nfor i in range(len(home)):\n    n += 1\nr = (L, d, sorted(d))\n")
    g = Evaluator("m.py", src).run_module(ast.parse(src)).globals
    assert g["r"] == ([1, 2, 3], {"a": 2, "b": 4}, ["a", "b"])
    for name, why in (("hugectr", ""), ("m", "'module hugectr' cannot be known statically"),
                      ("x", "'module numpy' cannot be known statically"),
                      ("home", "'module os' cannot be known statically"),
                      ("n", "the loop over 'range(len(home))' has an unknown length")):
        assert isinstance(g[name], Unknown) and g[name].why == why, (name, g[name])
    from codegen.importer.calls import Reader

    reader = Reader("m.py", src)
    reader.ev.run_module(ast.parse(src))
    assert [c.func for c in reader.script.all_calls] == ["CreateSolver", "Model"]


# ---- a path under the home folder: kept as os.path.expanduser("~/..."), exactly, or refused --------------------------

# Each expression P is read to a HomePath (or a literal) whose spec form, expanded with the same HOME, must be the
# string CPython computes for P; HOME values cover a trailing "/", the root folder and an empty HOME.
HOME_EXACT = {
    "append": 'os.path.expanduser("~/nvt/data/") + "train/_file_list.txt"',
    "append-twice": 'os.path.expanduser("~/d") + "/a" + "/b.txt"',
    "augmented": None,
    "join-bare-home": 'os.path.join(os.path.expanduser("~"), "data", "x.txt")',
    "join": 'os.path.join(os.path.expanduser("~/d/"), "a", "", "b")',
    "join-then-append": 'os.path.join(os.path.expanduser("~/d"), "model/") + "1/m.json"',
    "join-absolute-part": 'os.path.join(os.path.expanduser("~/d"), "/abs", "x")',
    "fstring-appends": 'f"{os.path.expanduser(\'~/d/\')}x/{3}.txt"',
    "fstring-alone": 'f"{os.path.expanduser(\'~\')}"',
    "bare-home": 'os.path.expanduser("~")',
    "double-slash": 'os.path.expanduser("~//d") + "x"',
    "no-tilde": 'os.path.expanduser("/workspace/d/") + "x"',
    "environment-default": 'os.environ.get("CTRGEN_TEST_UNSET_DIR", os.path.expanduser("~/d/")) + "x"',
    # An environment variable's path (seed 002's INPUT_DATA_DIR): its value appended to or joined, exactly.
    "environment-literal": 'os.environ.get("CTRGEN_TEST_UNSET_DIR", "/srv/d/") + "train/x.txt"',
    "environment-join": 'os.path.join(os.getenv("CTRGEN_TEST_UNSET_DIR", "/d"), "model/") + "1/m.json"',
    "environment-join-twice": 'os.path.join(os.environ.get("CTRGEN_TEST_UNSET_DIR", "d") + "a", "b", "c")',
    "environment-fstring": 'f"{os.environ.get(\'CTRGEN_TEST_UNSET_DIR\', \'/d/\')}x/{3}"',
    "environment-absolute-part": 'os.path.join(os.environ.get("CTRGEN_TEST_UNSET_DIR", "/d"), "/abs", "x")',
}
# The values an environment variable is read with: unset (its default), and set with and without a trailing "/".
ENVIRONMENT = [None, "/e", "/e/", ""]
HOMES = ["/home/u", "/home/u/", "/", "//", ""]


def _read_home(expr: str | None):
    import ast

    from codegen.importer.calls import Reader

    src = ("import os\np = os.path.expanduser('~/d')\np += '/x.txt'\n" if expr is None
           else f"import os\np = {expr}\n")
    return src, Reader("m.py", src).ev.run_module(ast.parse(src)).globals["p"]


@pytest.mark.parametrize("name", sorted(HOME_EXACT))
def test_a_home_path_is_the_value_python_computes(name: str, monkeypatch):
    import posixpath

    from codegen.importer.values import HomePath, Unknown

    from codegen.runtime.contract import local_path

    monkeypatch.delenv("CTRGEN_TEST_UNSET_DIR", raising=False)
    src, value = _read_home(HOME_EXACT[name])
    assert not isinstance(value, Unknown) or isinstance(value, HomePath), value
    for home in HOMES:
        for env in ENVIRONMENT if name.startswith("environment") else [None]:
            monkeypatch.setenv("HOME", home)
            if env is not None:
                monkeypatch.setenv("CTRGEN_TEST_UNSET_DIR", env)
            scope: dict = {}
            exec(compile(src, "m.py", "exec"), scope)
            # The spec form, read as the generated script and the trainer read it (local_path).
            ours = local_path(value.spec) if isinstance(value, HomePath) else value
            assert ours == scope["p"], (home, env, value)
            assert posixpath.expanduser(value.spec) == ours if type(value) is HomePath else True
            monkeypatch.delenv("CTRGEN_TEST_UNSET_DIR", raising=False)
    if name in ("join-absolute-part", "no-tilde"):
        assert not isinstance(value, HomePath)


# Each expression feeds DataReaderParams(source=[...]): an inexact use of a path under the home folder is refused
# with the file, line and column of the expression and the argument.
HOME_REFUSED = {
    "left-concatenation": '"/x/" + os.path.expanduser("~/d")',
    "bare-home-plus-text": 'os.path.expanduser("~") + "data"',
    "another-users-home": 'os.path.expanduser("~ml/data")',
    "str-method": 'os.path.expanduser("~/d/").rstrip("/") + "/x"',
    "slice": 'os.path.expanduser("~/d/")[:-1]',
    "later-join-argument": 'os.path.join("/a", os.path.expanduser("~/d"))',
    "prefix-fstring": 'f"x{os.path.expanduser(\'~/d\')}"',
    "repr-fstring": 'f"{os.path.expanduser(\'~/d\')!r}"',
    "format-spec": 'f"{os.path.expanduser(\'~/d\'):>30}"',
    "dirname": 'os.path.dirname(os.path.expanduser("~/d/x"))',
    "repeat": 'os.path.expanduser("~/d") * 2',
    "unmodelled-call": 'str(os.path.expanduser("~/d"))',
    # An environment variable's value where only the script knows it: never its default instead.
    "environment-slash-after-value": 'os.environ.get("CTRGEN_X", "/d") + "/x"',
    "environment-join-empty-part": 'os.path.join(os.environ.get("CTRGEN_X", "/d"), "", "x")',
    "environment-int-default": 'str(int(os.environ.get("CTRGEN_X", 3)))',
    "environment-no-default": 'os.environ.get("CTRGEN_X") + "x"',
    "environment-unexpanded-home": 'os.environ.get("CTRGEN_X", "~/d/") + "x"',
    "environment-left-concatenation": '"/x/" + os.getenv("CTRGEN_X", "/d/")',
    "environment-nested": 'os.environ.get("CTRGEN_X", os.environ.get("CTRGEN_Y", "/d/")) + "x"',
}


@pytest.mark.parametrize("name", sorted(HOME_REFUSED))
def test_an_inexact_use_of_a_home_path_is_refused(name: str, tmp_path: Path):
    expr = HOME_REFUSED[name]
    text = NORM_DCN.replace('source=["./data/file_list.txt"]', f"source=[{expr}]").replace(
        "import hugectr", "import os\nimport hugectr", 1)
    src = tmp_path / "m.py"
    src.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as err:
        import_source(src, "23.06", "m")
    line = err.value.format()
    lineno = 1 + next(i for i, ln in enumerate(text.splitlines()) if expr in ln)
    col = 1 + text.splitlines()[lineno - 1].index(expr)
    assert line.startswith(f"{src}:{lineno}:{col}:"), line
    assert "DataReaderParams(source=...)" in line and "only known where the script runs" in line, line


def test_a_home_path_is_refused_where_its_spec_field_does_not_keep_it(tmp_path: Path):
    """fit(snapshot_prefix=...) becomes training.snapshot_prefix, which is passed on as it is: refused."""
    text = NORM_DCN.replace("import hugectr", "import os\nimport hugectr", 1).replace(
        'snapshot_prefix="dcn"', "snapshot_prefix=os.path.expanduser('~/snap/dcn')", 1)
    src = tmp_path / "m.py"
    src.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=r"fit\(snapshot_prefix=\.\.\.\).*only known where the script runs"):
        import_source(src, "23.06", "m")


def test_a_home_path_round_trips_as_the_same_expression(tmp_path: Path):
    """A reader source, eval_source and graph JSON under the home folder become ~/ spec paths, and the generated
    model.py makes the same calls with the same os.path.expanduser(...) expressions."""
    from codegen.importer.write import write_import
    from codegen.importer.compare import compare_texts
    from codegen.pipeline import open_spec, render_spec

    text = NORM_DCN.replace("import hugectr", "import os\nimport hugectr\nDATA = os.path.expanduser('~/criteo/')", 1)
    text = text.replace('source=["./data/file_list.txt"], eval_source="./data/file_list_test.txt"',
                        'source=[DATA + "file_list.txt"], eval_source=os.path.join(DATA, "test", "list.txt")')
    text = text.replace('graph_config_file="dcn.json"', 'graph_config_file=f"{DATA}graphs/dcn.json"')
    src = tmp_path / "dcn.py"
    src.write_text(text, encoding="utf-8")
    result = import_source(src, "23.06", "dcn")
    assert 'train: ["~/criteo/file_list.txt"]' in result.spec_text
    assert 'eval: "~/criteo/test/list.txt"' in result.spec_text
    assert 'graph_json: "~/criteo/graphs/dcn.json"' in result.spec_text
    write_import(result, tmp_path / "specs")
    rendered = render_spec(open_spec(tmp_path / "specs" / "dcn.yaml"))
    model_py = next(v for k, v in rendered.files.items() if str(k) == "model.py")
    assert 'source=[os.path.expanduser("~/criteo/file_list.txt")]' in model_py
    assert compare_texts(text, model_py, release="23.06") == []
    # The comparison sees a home path replaced by a literal one.
    literal = model_py.replace('os.path.expanduser("~/criteo/file_list.txt")', '"/root/criteo/file_list.txt"')
    assert any("under the home folder" in d for d in compare_texts(text, literal, release="23.06"))


def test_an_environment_variable_round_trips_as_the_same_lookup(tmp_path: Path):
    """Seed 002's INPUT_DATA_DIR = os.environ.get("INPUT_DATA_DIR", os.path.expanduser("~/...")): the reader source,
    eval_source and graph JSON become ${INPUT_DATA_DIR-~/...} spec paths (appended, or joined with /), the generated
    model.py reads the variable the same way, and the comparison sees it replaced by its default."""
    from codegen.importer.compare import compare_texts
    from codegen.importer.write import write_import
    from codegen.pipeline import open_spec, render_spec

    text = NORM_DCN.replace("import hugectr", "import os\nimport hugectr\nDATA = os.environ.get('DATA', "
                            "os.path.expanduser('~/criteo/'))\nMODEL = os.path.join(DATA, 'model/')", 1)
    text = text.replace('source=["./data/file_list.txt"], eval_source="./data/file_list_test.txt"',
                        'source=[DATA + "file_list.txt"], eval_source=DATA + "test/list.txt"')
    text = text.replace('graph_config_file="dcn.json"', 'graph_config_file=MODEL + "1/dcn.json"')
    src = tmp_path / "dcn.py"
    src.write_text(text, encoding="utf-8")
    result = import_source(src, "23.06", "dcn")
    assert 'train: ["${DATA-~/criteo/}file_list.txt"]' in result.spec_text
    assert 'eval: "${DATA-~/criteo/}test/list.txt"' in result.spec_text
    assert 'graph_json: "${DATA-~/criteo/}/model/1/dcn.json"' in result.spec_text
    write_import(result, tmp_path / "specs")
    model_py = next(v for k, v in render_spec(open_spec(tmp_path / "specs" / "dcn.yaml")).files.items()
                    if str(k) == "model.py")
    home = 'os.environ.get("DATA", os.path.expanduser("~/criteo/"))'
    assert f'source=[{home} + "file_list.txt"]' in model_py
    assert f'graph_config_file=os.path.join({home}, "model/1/dcn.json")' in model_py
    assert compare_texts(text, model_py, release="23.06") == []
    default = model_py.replace(f'source=[{home} + "file_list.txt"]',
                               'source=[os.path.expanduser("~/criteo/file_list.txt")]')
    assert any("${DATA-~/criteo/}file_list.txt" in d for d in compare_texts(text, default, release="23.06"))
