"""Import, fourth round (issue 44, points 5-7): a try block around fit followed by code the evaluator does not
model, a script a notebook writes with open().write() and runs, and the script's own helper modules beside it.
Every script here is written for these tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from codegen.errors import UserError
from codegen.importer import import_source
from codegen.importer.calls import Reader
from test_import import _roundtrip
from test_import_round3 import SCRIPT

FIT = 'model.fit(max_iter=2300, display=200, eval_interval=1000, snapshot=1000000, snapshot_prefix="mlp")'
BASE = SCRIPT.replace("PARSE", "parser.parse_args()")


def _with_fit(text: str) -> str:
    return BASE.replace(FIT, text.replace("FIT", FIT))


TRY_FIT = """import numpy as np
import json
try:
    FIT
    metrics = model.get_eval_metrics()
    np.save("metrics.npy", np.array(metrics))
    report = json.dumps({"auc": float(metrics[0][1])})
except Exception as exc:
    print("training failed", exc)
    raise
print(report)
"""


def test_try_around_fit_then_code_not_modelled(tmp_path: Path):
    """fit runs whether or not what follows it in the try block raises: the calls are read, the rest is listed as
    skipped among the assumptions."""
    src = tmp_path / "tryfit.py"
    src.write_text(_with_fit(TRY_FIT), encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    notes = import_source(src, "23.06").assumptions
    skipped = [n for n in notes if "skipped" in n]
    assert len(skipped) == 1
    first = src.read_text(encoding="utf-8").splitlines().index("    np.save(\"metrics.npy\", np.array(metrics))") + 1
    assert skipped[0].startswith(f"line {first}: lines {first}-{first + 1} (after hugectr.Model.get_eval_metrics(...) "
                                 "in the try block")


@pytest.mark.parametrize("after", [
    # a hugectr call after the first operation that may raise: it may not run
    "try:\n    FIT\n    np.save('x', np.zeros(1))\n    model.save_params_to_files('mlp')\nexcept Exception:\n    pass\n",
    # a hugectr call in the handler: runs only if something raised
    "try:\n    FIT\n    np.save('x', np.zeros(1))\nexcept Exception:\n    model.save_params_to_files('mlp')\n",
    # ... or in the else block: runs only if nothing raised
    "try:\n    FIT\n    np.save('x', np.zeros(1))\nexcept Exception:\n    pass\nelse:\n"
    "    model.save_params_to_files('mlp')\n",
])
def test_calls_that_may_not_run_after_a_try_are_still_refused(tmp_path: Path, after: str):
    src = tmp_path / "tryfit.py"
    src.write_text(_with_fit("import numpy as np\n" + after), encoding="utf-8")
    with pytest.raises(UserError, match="which hugectr calls run depends on a value that cannot be known statically: "
                                        "an operation in the try block may raise"):
        import_source(src, "23.06")


def test_what_the_skipped_rest_assigns_is_unknown(tmp_path: Path):
    """A value assigned after the first operation that may raise, then fed to a hugectr call: refused at that
    argument, never the value of a run that did not raise."""
    src = tmp_path / "tryfit.py"
    src.write_text(_with_fit("import numpy as np\nprefix = 'a'\ntry:\n    FIT\n    np.save('x', np.zeros(1))\n"
                             "    prefix = 'b'\nexcept Exception:\n    pass\n"
                             "model.save_params_to_files(prefix)\n"), encoding="utf-8")
    with pytest.raises(UserError, match=r"save_params_to_files.*'prefix' cannot be known"):
        import_source(src, "23.06")


def test_try_else_runs_only_when_nothing_raised():
    """An else block after a body that may raise is not run for certain (it was, giving the value of a run that
    did not raise)."""
    src = "x = 1\ntry:\n    y = int(open('f').read())\nexcept ValueError:\n    pass\nelse:\n    x = 2\nr = x\n"
    g = Reader("<test>", src).ev.run_module(ast.parse(src)).globals
    assert type(g["r"]).__name__ == "Unknown"


def _notebook(path: Path, *cells: str) -> Path:
    import json

    path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": c} for c in cells], "metadata": {},
                                "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    return path


WRITTEN = BASE.replace('default=2048)', 'default=512)').replace("{", "{{").replace("}", "}}") \
    .replace("max_iter=2300", "max_iter={ITERS}")


@pytest.mark.parametrize("write", [
    'ITERS = 1200\nscript = f"""W"""\nopen("mlp_train.py", "w").write(script)\n',
    'ITERS = 1200\nwith open("mlp_train.py", "w") as f:\n    f.write(f"""W""")\n',
])
def test_notebook_that_writes_its_script_with_open_write(tmp_path: Path, write: str):
    """A script the notebook writes with open(...).write(TEXT) (an f-string) and runs with !python is read as a
    %%writefile cell is, with the command line of that run."""
    nb = _notebook(tmp_path / "nb.ipynb", "import os\nprint(os.getcwd())", write.replace("W", WRITTEN),
                   "!python3 mlp_train.py --batch 1024 --hidden_units_num 2")
    result = import_source(nb, "23.06")
    from codegen.importer.write import write_import
    from codegen.specfile.load import load_spec

    write_import(result, tmp_path / "specs")
    spec = load_spec(tmp_path / "specs" / "nb.yaml").spec
    assert spec.solver.batchsize == 1024 and spec.training.max_iter == 1200
    assert [x.num_output for x in spec.model.layers if x.type == "InnerProduct"] == [64, 64, 1]
    assert any("command line of mlp_train.py: --batch 1024 --hidden_units_num 2, from the notebook's cell 3" in n
               for n in result.assumptions)


def test_notebook_writes_its_script_with_unknown_text(tmp_path: Path):
    """The text is not known statically: the refusal says so (not "no hugectr.Model is built")."""
    nb = _notebook(tmp_path / "nb.ipynb", "import os\nwith open('t.py', 'w') as f:\n    f.write(os.environ['SRC'])",
                   "!python t.py")
    with pytest.raises(UserError) as exc:
        import_source(nb, "23.06")
    text = exc.value.format()
    assert "writes t.py with open().write() and runs it, but the text it writes cannot be known statically" in text
    assert "no hugectr.Model" not in text


def test_notebook_passes_the_file_it_writes_to_a_call(tmp_path: Path):
    """print(..., file=f) writes to the script too, and no such write is followed: the text is unknown, and the
    refusal names the call (not the text written before it)."""
    write = 'ITERS = 1200\nwith open("mlp_train.py", "w") as f:\n    f.write(f"""W""")\n    print("# end", file=f)\n'
    nb = _notebook(tmp_path / "nb.ipynb", "import os", write.replace("W", WRITTEN), "!python3 mlp_train.py")
    with pytest.raises(UserError) as exc:
        import_source(nb, "23.06")
    assert "the text it writes cannot be known statically: the file is passed to print(...), whose writes are not " \
           "followed (cell 2, line 54)" in exc.value.format()


MODEL_MODULE = BASE[BASE.index("solver = hugectr.CreateSolver("):BASE.index("model.compile()")]
HELPER = ("import hugectr as hc\n\n\ndef create_model(args, vvgpu, gpus):\n"
          + "".join("    " + line + "\n" for line in MODEL_MODULE.replace("hugectr.", "hc.").splitlines())
          + "    return model\n")
MAIN = BASE[:BASE.index("solver = hugectr.CreateSolver(")] + \
    "from model import create_model\nmodel = create_model(args, vvgpu, gpus)\nmodel.compile()\n" + FIT + "\n"


def test_sibling_module_builds_the_model(tmp_path: Path):
    """from model import create_model: model.py beside the script is read with the same evaluator (never run), its
    own hugectr alias included, and its function builds the model."""
    (tmp_path / "model.py").write_text(HELPER, encoding="utf-8")
    src = tmp_path / "train.py"
    src.write_text(MAIN, encoding="utf-8")
    result = import_source(src, "23.06")
    from codegen.importer.write import write_import
    from codegen.specfile.load import load_spec

    write_import(result, tmp_path / "specs")
    spec = load_spec(tmp_path / "specs" / "train.yaml").spec
    assert [x.num_output for x in spec.model.layers if x.type == "InnerProduct"] == [64, 64, 64, 1]
    assert any("module model read from" in n for n in result.assumptions)


def test_sibling_module_written_by_the_notebook(tmp_path: Path):
    nb = _notebook(tmp_path / "nb.ipynb", "%%writefile model.py\n" + HELPER, MAIN)
    result = import_source(nb, "23.06")
    assert any("module model read from model.py" in n for n in result.assumptions)


def test_missing_sibling_module_is_the_named_cause(tmp_path: Path):
    src = tmp_path / "train.py"
    src.write_text(MAIN, encoding="utf-8")
    with pytest.raises(UserError) as exc:
        import_source(src, "23.06")
    text = exc.value.format()
    line = MAIN.splitlines().index("from model import create_model") + 1
    assert f"train.py:{line}:" in text
    assert "imports module model" in text and "put model.py beside the script" in text


def test_sibling_module_outside_the_folder_is_not_read(tmp_path: Path):
    """A module is a regular file in the source's folder: a link to a file outside it is not followed."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "model.py").write_text(HELPER, encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").symlink_to(tmp_path / "outside" / "model.py")
    src = tmp_path / "src" / "train.py"
    src.write_text(MAIN, encoding="utf-8")
    with pytest.raises(UserError, match="imports module model"):
        import_source(src, "23.06")
