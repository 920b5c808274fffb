"""Hostile input: no input can hang, crash or escape ctrgen. Each case ends with one line naming the file, exit
status 2, no traceback and nothing written; a killed `generate` leaves the old folder or the new one."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codegen.atomic import clean_stale
from codegen.errors import UserError
from codegen.features import read_lock
from codegen.inputs import check_yaml_tree
from codegen.specfile.load import load_spec
from schema_files import MOVIELENS, write_output_schema
from conftest import REPO, run_ctrgen
from specfactory import MOVIELENS_LOCK


@pytest.fixture
def specs(tmp_path) -> Path:
    """A copy of specs/movielens.yaml and its lock."""
    folder = tmp_path / "specs"
    folder.mkdir()
    for name in ("movielens.yaml", "movielens.features.lock.json"):
        shutil.copy(REPO / "specs" / name, folder / name)
    return folder


def one_line(result, start: str) -> str:
    """The single stderr line of a refused command (exit 2, no traceback)."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(start), lines[0]
    return lines[0]


def generate(specs_dir: Path, *names: str, out: Path, extra: tuple = ()):
    return run_ctrgen("generate", *[str(specs_dir / n) for n in names], "--out", str(out), *extra)


def with_text(specs_dir: Path, old: str, new: str, name: str = "movielens.yaml") -> Path:
    path = specs_dir / name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


# ---- reading files -------------------------------------------------------------------------------------------------

def test_alias_bomb_is_refused_not_expanded(specs, tmp_path):
    rows = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        rows.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")   # 9**9 strings when expanded
    (specs / "movielens.yaml").write_text("\n".join(rows) + "\n")
    line = one_line(generate(specs, "movielens.yaml", out=tmp_path / "out"), str(specs / "movielens.yaml"))
    assert "expands to more than" in line
    assert not (tmp_path / "out").exists()


def test_a_cyclic_tree_is_refused_by_depth():
    """ruamel resolves an alias to the node itself; a cycle must end in the depth cap, not loop."""
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(UserError, match="nested more than 64 levels"):
        check_yaml_tree({"a": cyclic}, "x.yaml")


@pytest.mark.parametrize("depth, where", [(5000, ""), (80, ":1:")])
def test_deeply_nested_yaml(specs, tmp_path, depth, where):
    (specs / "movielens.yaml").write_text("a: " + "[" * depth + "]" * depth + "\n")
    line = one_line(generate(specs, "movielens.yaml", out=tmp_path / "out"), str(specs / "movielens.yaml") + where)
    assert "nested" in line


def test_nul_in_the_spec(specs, tmp_path):
    with_text(specs, "name: movielens", "name: movie\0lens")
    line = one_line(generate(specs, "movielens.yaml", out=tmp_path / "out"), f"{specs / 'movielens.yaml'}:6:12:")
    assert "NUL" in line


def test_non_utf8_spec_and_lock(specs, tmp_path):
    (specs / "movielens.features.lock.json").write_bytes(b'{"ctrgen_features_lock": 1, "provenance": "\xff"}')
    line = one_line(generate(specs, "movielens.yaml", out=tmp_path / "out"),
                    f"{specs / 'movielens.features.lock.json'}:1:44:")
    assert "not UTF-8" in line
    (specs / "movielens.yaml").write_bytes(b"version: 1\nname: \xe9\n")
    one_line(generate(specs, "movielens.yaml", out=tmp_path / "out"), f"{specs / 'movielens.yaml'}:2:7:")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("path", ["/dev/zero", "/proc/self/status", "fifo", "folder", "big"])
def test_spec_path_must_be_a_small_regular_file(tmp_path, path):
    if path == "fifo":
        path = str(tmp_path / "spec.yaml")
        os.mkfifo(path)        # reading it would block forever
    elif path == "folder":
        path = str(tmp_path)
    elif path == "big":
        path = str(tmp_path / "big.yaml")
        Path(path).write_text("# padding\n" * 200_000)
    result = run_ctrgen("generate", path, "--out", str(tmp_path / "out"))
    one_line(result, path + ":")
    assert not (tmp_path / "out").exists()


def test_lock_path_must_be_a_regular_file(specs, tmp_path):
    lock = specs / "movielens.features.lock.json"
    lock.unlink()
    os.mkfifo(lock)
    line = one_line(generate(specs, "movielens.yaml", out=tmp_path / "out"), str(lock))
    assert "not a regular file" in line


# ---- integers and strict types ---------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, message", [
    ("batchsize: 2048", "batchsize: 9223372036854775808", "2**31-1"),
    ("batchsize: 2048", "batchsize: 1000000000000000000000000000000000000000000", "2**31-1"),
    ("batchsize: 2048", "batchsize: 2147483648", "2**31-1"),
    ("max_iter: 2000", "max_iter: 2147483648", "2**31-1"),
    ("units: [128, 128]", "units: [128, 1000000000000]", "2**31-1"),
    ("batchsize: 2048", 'batchsize: "2048"', "must be an integer, not a string '2048'"),
    ("batchsize: 2048", "batchsize: true", "must be an integer, not a boolean True"),
    ("batchsize: 2048", "batchsize: 2048.0", "must be an integer, not a float 2048.0"),
    ("batchsize: 2048", "batchsize: 0", "greater than 0"),
    ("repeat_dataset: true", "repeat_dataset: true\n  seed: 18446744073709551616", "2**64-1"),
    ("type: Adam", "type: Adam\n  beta1: '0.9'", "must be a number, not a string '0.9'"),
    ("type: Adam", "type: Adam\n  beta1: true", "must be a number, not a boolean True"),
    ("repeat_dataset: true", 'repeat_dataset: "yes"', "must be true or false, not a string 'yes'"),
    ("repeat_dataset: true", "repeat_dataset: 1", "must be true or false, not an integer 1"),
    ("  label: [rating]", "  label: rating", "must be a list, not a string 'rating'"),
    ("  label: [rating]", "  label: []", "must have at least 1 item"),
    ("  label: [rating]", "  categorical: []", "must have at least 1 item"),
])
def test_integers_fit_their_cpp_type_and_types_are_strict(specs, tmp_path, old, new, message):
    with_text(specs, old, new)
    line = one_line(generate(specs, "movielens.yaml", out=tmp_path / "out"), f"{specs / 'movielens.yaml'}:")
    assert message in line
    assert not (tmp_path / "out").exists()


def test_integer_bounds_are_inclusive(specs):
    """Both sides of each boundary: the largest value of the C++ type loads, the next one does not."""
    path = with_text(specs, "batchsize: 2048", "batchsize: 2147483647")
    with_text(specs, "repeat_dataset: true", "repeat_dataset: true\n  seed: 18446744073709551615")
    spec = load_spec(path).spec
    assert spec.solver.batchsize == 2**31 - 1 and spec.solver.seed == 2**64 - 1
    path = with_text(specs, "type: Adam", "type: Adam\n  beta1: 1")      # an integer is a number
    assert load_spec(path).spec.optimizer.beta1 == 1.0


@pytest.mark.parametrize("card, ok", [(2**63 - 1, True), (2**63, False), (2**70, False), (0, False),
                                      (True, False), (10.0, False), ("10", False)])
def test_lock_cardinality_fits_int64(tmp_path, card, ok):
    lock = json.loads(json.dumps(MOVIELENS_LOCK))
    lock["categorical"][0]["cardinality"] = card
    path = tmp_path / "x.features.lock.json"
    path.write_text(json.dumps(lock, indent=2))
    if ok:
        assert read_lock(path).categorical[0].cardinality == card
        return
    with pytest.raises(UserError) as info:
        read_lock(path)
    # the line and column of the column's entry in the lock
    assert info.value.format().startswith(f"{path}:6:5: categorical[0]: cardinality must be a positive integer")


# ---- output folders -----------------------------------------------------------------------------------------------

def test_out_empty_or_a_file_is_refused(specs, tmp_path):
    one_line(run_ctrgen("generate", str(specs / "movielens.yaml"), "--out", "", cwd=tmp_path), "'': --out:")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["specs"]
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    one_line(generate(specs, "movielens.yaml", out=afile), f"{afile}: --out: is a file")
    one_line(generate(specs, "movielens.yaml", out=afile / "below"), f"{afile / 'below'}: --out: {afile} is a file")
    assert afile.read_text() == "mine\n"


def test_two_specs_with_one_name_are_refused_before_writing(specs, tmp_path):
    shutil.copy(specs / "movielens.yaml", specs / "again.yaml")
    shutil.copy(specs / "movielens.features.lock.json", specs / "again.features.lock.json")
    line = one_line(generate(specs, "movielens.yaml", "again.yaml", out=tmp_path / "out"),
                    f"{specs / 'again.yaml'}:6:1: name: 'movielens' is also the name of")
    assert "give each spec its own name" in line
    assert not (tmp_path / "out").exists()


def test_a_problem_with_the_second_folder_writes_nothing(specs, tmp_path):
    """Every spec is rendered and every output folder checked before the first byte is written."""
    genres = specs / "movielens_genres.yaml"
    shutil.copy(REPO / "specs" / "movielens_genres.yaml", genres)
    shutil.copy(REPO / "specs" / "movielens_genres.features.lock.json", specs)
    out = tmp_path / "out"
    (out / "movielens_genres").mkdir(parents=True)
    (out / "movielens_genres" / "model.py").write_text("# mine\n")
    line = one_line(generate(specs, "movielens.yaml", "movielens_genres.yaml", out=out),
                    f"{out / 'movielens_genres'}: would overwrite")
    assert "model.py" in line
    assert sorted(p.name for p in out.iterdir()) == ["movielens_genres"]


def test_a_symlink_at_the_output_folder_is_not_followed(specs, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "movielens").symlink_to(outside)
    one_line(generate(specs, "movielens.yaml", out=out), f"{out / 'movielens'}: is a symbolic link")
    assert list(outside.iterdir()) == []


def test_links_inside_the_folder_are_never_written_through(specs, tmp_path):
    out = tmp_path / "out"
    assert generate(specs, "movielens.yaml", out=out).returncode == 0
    outside = tmp_path / "outside.txt"
    outside.write_text("outside\n")
    (out / "movielens" / "summary.txt").unlink()
    (out / "movielens" / "summary.txt").symlink_to(outside)
    one_line(generate(specs, "movielens.yaml", out=out), f"{out / 'movielens'}: would overwrite")
    assert generate(specs, "movielens.yaml", out=out, extra=("--force",)).returncode == 0
    assert outside.read_text() == "outside\n"
    assert not (out / "movielens" / "summary.txt").is_symlink()


def test_an_old_manifest_naming_paths_outside_is_refused_before_writing(specs, tmp_path):
    out = tmp_path / "out"
    folder = out / "movielens"
    folder.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (folder / "MANIFEST.json").write_text(json.dumps({"generator": "ctrgen", "files": {"../../victim.txt": "0"}}))
    line = one_line(generate(specs, "movielens.yaml", out=out), f"{folder / 'MANIFEST.json'}: the old MANIFEST")
    assert "'../../victim.txt'" in line
    assert victim.read_text() == "keep me\n"
    assert sorted(p.name for p in folder.iterdir()) == ["MANIFEST.json"]


def test_files_ctrgen_did_not_write_are_carried_into_the_new_folder(specs, tmp_path):
    out = tmp_path / "out"
    assert generate(specs, "movielens.yaml", out=out).returncode == 0
    (out / "movielens" / "notes").mkdir()
    (out / "movielens" / "notes" / "mine.txt").write_text("mine\n")
    with_text(specs, "units: [128, 128]", "units: [64, 64]")
    result = generate(specs, "movielens.yaml", out=out)
    assert result.returncode == 0, result.stderr
    assert "num_output=64" in (out / "movielens" / "model.py").read_text()
    assert (out / "movielens" / "notes" / "mine.txt").read_text() == "mine\n"
    assert [p.name for p in out.iterdir()] == ["movielens"]


# ---- signals -------------------------------------------------------------------------------------------------------

def _run_with(hook: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run the real CLI in a child process with ``hook`` (Python) executed first: it wraps a function of ctrgen so
    that a real signal arrives at a known point of the run."""
    code = textwrap.dedent(hook) + "\nfrom codegen.cli import main\nmain(args=%r, prog_name='ctrgen')\n" % (args,)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    # SIGINT as at a terminal: a child inherits an ignored SIGINT from a suite started as a background job (`make
    # test &`, a CI runner), and ctrgen, like Python, then leaves it ignored (the Ctrl-C test got exit 0 that way).
    # A small launcher resets the disposition and execs the real command (no preexec_fn: unsafe with threads).
    return subprocess.run([sys.executable, "-c", DEFAULT_SIGINT, sys.executable, "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "os.execv(sys.argv[1], sys.argv[1:])")


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_sigint_exits_130_with_one_line(specs, tmp_path):
    hook = """
        import os, signal, time
        import codegen.output as o
        def interrupted(plan):
            os.kill(os.getpid(), signal.SIGINT)
            while True:             # the KeyboardInterrupt ends this wait, however loaded the machine
                time.sleep(0.01)
        o.apply_write = interrupted
    """
    result = _run_with(hook, ["generate", str(specs / "movielens.yaml"), "--out", str(tmp_path / "out")], tmp_path)
    assert result.returncode == 130, result.stderr
    assert result.stderr.strip().splitlines() == ["ctrgen: interrupted"]
    assert not (tmp_path / "out").exists()


KILL_AFTER_FILES = """
    import os, signal, builtins
    import codegen.output as o
    real_open, count = builtins.open, [0]
    def counting_open(file, mode="r", *a, **k):
        if "x" in mode:
            count[0] += 1
            if count[0] == %d:
                os.kill(os.getpid(), signal.SIGKILL)
        return real_open(file, mode, *a, **k)
    o.open = counting_open
"""
KILL_BEFORE_SWAP = """
    import os, signal
    import codegen.output as o
    def killed(staged, target):
        os.kill(os.getpid(), signal.SIGKILL)
    o.swap_in = killed
"""
KILL_BETWEEN_RENAMES = """
    import os, signal
    import codegen.atomic as a
    a._exchange = lambda x, y: False            # the rename fallback
    real_rename, count = os.rename, [0]
    def rename(src, dst):
        real_rename(src, dst)
        count[0] += 1
        if count[0] == 1:                       # the old folder moved aside, the new one not yet in
            os.kill(os.getpid(), signal.SIGKILL)
    a.os.rename = rename
"""


@pytest.mark.parametrize("hook", [KILL_AFTER_FILES % 3, KILL_BEFORE_SWAP, KILL_BETWEEN_RENAMES],
                         ids=["while-staging", "before-the-swap", "between-renames"])
@pytest.mark.slow
def test_sigkill_midway_leaves_the_old_folder_or_the_new_one(specs, tmp_path, hook):
    out = tmp_path / "out"
    assert generate(specs, "movielens.yaml", out=out).returncode == 0
    old = _tree(out / "movielens")
    with_text(specs, "units: [128, 128]", "units: [64, 64]")
    args = ["generate", str(specs / "movielens.yaml"), "--out", str(out)]
    killed = _run_with(hook, args, tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    if hook == KILL_BETWEEN_RENAMES:     # the one moment without the folder: the old one is beside it
        assert not (out / "movielens").exists()
    else:
        assert _tree(out / "movielens") == old
    assert len(list(out.iterdir())) == 2
    clean_stale(out)                     # what the next run that writes there does first
    assert _tree(out / "movielens") == old
    assert [p.name for p in out.iterdir()] == ["movielens"]
    assert generate(specs, "movielens.yaml", out=out).returncode == 0
    assert "num_output=64" in (out / "movielens" / "model.py").read_text()


@pytest.mark.slow
def test_sigkill_after_the_swap_leaves_the_new_folder(specs, tmp_path):
    out = tmp_path / "out"
    assert generate(specs, "movielens.yaml", out=out).returncode == 0
    with_text(specs, "units: [128, 128]", "units: [64, 64]")
    hook = """
        import os, signal
        import codegen.atomic as a
        real = a._exchange
        def exchange(x, y):
            done = real(x, y)
            os.kill(os.getpid(), signal.SIGKILL)
        a._exchange = exchange
    """
    killed = _run_with(hook, ["generate", str(specs / "movielens.yaml"), "--out", str(out)], tmp_path)
    assert killed.returncode == -signal.SIGKILL
    new = _tree(out / "movielens")
    assert "num_output=64" in new["model.py"].decode()
    assert len(list(out.iterdir())) == 2            # the new folder and the old one, swapped out, to be removed
    assert generate(specs, "movielens.yaml", out=out).returncode == 0
    assert _tree(out / "movielens") == new
    assert [p.name for p in out.iterdir()] == ["movielens"]


# ---- text copied into README.md ----------------------------------------------------------------------------------

def test_names_in_the_model_card_show_control_and_bidi_characters_as_escapes(specs, tmp_path):
    lock = json.loads((specs / "movielens.features.lock.json").read_text())
    lock["categorical"][0]["name"] = "user\u202eId\0\x1b[31m\u200b"
    lock["provenance"] = "recorded \u2066hidden\u2069"
    (specs / "movielens.features.lock.json").write_text(json.dumps(lock))
    names = '["user\\u202eId\\0\\e[31m\\u200b", movieId]'
    with_text(specs, "  label: [rating]", f"  label: [rating]\n  categorical: {names}")
    result = generate(specs, "movielens.yaml", out=tmp_path / "out")
    assert result.returncode == 0, result.stderr
    card = (tmp_path / "out" / "movielens" / "README.md").read_text()
    for ch in ("\u202e", "\0", "\x1b", "\u200b", "\u2066", "\u2069"):
        assert ch not in card
    assert "user\\u202eId\\u0000\\u001b[31m\\u200b" in card and "\\u2066hidden\\u2069" in card


# ---- saved workflows ---------------------------------------------------------------------------------------------

# One worker runs the tests of the saved workflow (one NVTabular load, see workflow_and_checkpoint).
WORKFLOW_GROUP = pytest.mark.xdist_group("inputs_workflow")


@pytest.fixture(scope="module")
def pristine_workflow(tmp_path_factory) -> Path:
    """The demo's saved MovieLens workflow (a real workflow.pkl and Categorify tables; assemble proves it loads), its
    output schema rewritten with the committed lock's cardinalities (what assemble checks against the lock). Never
    written by the tests: ``workflow_and_checkpoint`` gives each a fresh copy."""
    from demo_data import built_demo

    pristine = tmp_path_factory.mktemp("workflow") / "pristine"
    shutil.copytree(built_demo().paths["movielens"]["workflow"], pristine)
    write_output_schema(pristine, MOVIELENS, label="rating")
    return pristine


@pytest.fixture
def workflow_and_checkpoint(pristine_workflow, tmp_path):
    """A fresh copy of the pristine workflow and a checkpoint folder shaped like train_torch.py's output (a model.pt of
    tensors). The copy lies at one path for the module, with workflow.pkl a hard link to the pristine one: assemble
    remembers a workflow.pkl it saw load (path, inode, size, time), so its NVTabular process runs once here, not per
    test."""
    import torch

    workflow = pristine_workflow.parent / "workflow"
    shutil.rmtree(workflow, ignore_errors=True)
    shutil.copytree(pristine_workflow, workflow, ignore=shutil.ignore_patterns("workflow.pkl"))
    os.link(pristine_workflow / "workflow.pkl", workflow / "workflow.pkl")
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    torch.save({"table.weight": torch.zeros(4, 2)}, checkpoint / "model.pt")
    shutil.copy(REPO / "generated" / "movielens" / "features.json", checkpoint / "features.json")
    return workflow, checkpoint


def assemble(workflow: Path, checkpoint: Path, out: Path, *extra: str):
    return run_ctrgen("assemble", str(REPO / "specs" / "movielens.yaml"), "--workflow", str(workflow),
                      "--checkpoint", str(checkpoint), "--out", str(out), *extra)


@WORKFLOW_GROUP
@pytest.mark.slow
def test_a_corrupt_categories_parquet_is_one_line(workflow_and_checkpoint, tmp_path):
    workflow, checkpoint = workflow_and_checkpoint
    assert assemble(workflow, checkpoint, tmp_path / "repo").returncode == 0      # the intact table passes
    table = workflow / "categories" / "unique.userId.parquet"
    table.write_bytes(table.read_bytes()[:40])
    line = one_line(assemble(workflow, checkpoint, tmp_path / "repo2"), f"{table}: unreadable Parquet file")
    assert "save the workflow again" in line
    assert not (tmp_path / "repo2").exists()
    # `ctrgen lock --check` on a workflow saved without its schema files reads the categories tables instead, and
    # stops at the same table.
    (workflow / "output_schema.pbtxt").unlink()
    one_line(run_ctrgen("lock", str(REPO / "specs" / "movielens.yaml"), "--workflow", str(workflow), "--check"),
             f"{table}: unreadable Parquet file")


@WORKFLOW_GROUP
@pytest.mark.slow
def test_workflow_pickle_must_be_a_regular_file(workflow_and_checkpoint, tmp_path):
    workflow, checkpoint = workflow_and_checkpoint
    (workflow / "workflow.pkl").unlink()
    os.mkfifo(workflow / "workflow.pkl")
    one_line(assemble(workflow, checkpoint, tmp_path / "repo"), f"{workflow / 'workflow.pkl'}")


@WORKFLOW_GROUP
@pytest.mark.slow
def test_assemble_replaces_the_repository_whole_and_cleans_up(workflow_and_checkpoint, tmp_path):
    workflow, checkpoint = workflow_and_checkpoint
    out = tmp_path / "repo"
    assert assemble(workflow, checkpoint, out).returncode == 0
    (tmp_path / ".ctrgen-repo-999999999-abcdefgh").mkdir()        # left by a killed run (no such process)
    (out / "stray.txt").write_text("from the previous repository\n")
    result = assemble(workflow, checkpoint, out, "--force")
    assert result.returncode == 0, result.stderr
    assert not (out / "stray.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "repo"]
    link = tmp_path / "linked"
    link.symlink_to(out)
    one_line(assemble(workflow, checkpoint, link, "--force"), f"{link}: --out: is a symbolic link")
    one_line(assemble(workflow, checkpoint, workflow / "workflow.pkl" / "x"), f"{workflow / 'workflow.pkl' / 'x'}: "
             f"--out: {workflow / 'workflow.pkl'} is a file")


LAYERS_SPEC = """\
version: 1
name: lay
hugectr_version: "23.06"
data: {train: [/a.txt], eval: /b.txt}
embeddings: [{workspace_size_per_gpu_in_mb: 1}]
model:
  preset: layers
  layers:
    - {type: Reshape, bottom: sparse_embedding1, top: r1, leading_dim: 32}
    - {type: InnerProduct, bottom: r1, top: fc1, num_output: 1}
    - {type: Dropout, bottom: fc1, top: d1, dropout_rate: 0.5}
    - {type: BinaryCrossEntropyLoss, bottom: [d1, label], top: loss}
"""


@pytest.mark.parametrize("old, new, message", [
    ("num_output: 1", "num_output: 1000000000000", "num_output 1000000000000 is out of range (size_t: from 0 to"),
    ("num_output: 1", "num_output: 2147483648", "num_output 2147483648 is out of range"),
    ("num_output: 1", "num_output: -1", "num_output -1 is out of range"),
    ("num_output: 1", 'num_output: "1"', "num_output must be an integer (size_t), not a string '1'"),
    ("num_output: 1", "num_output: true", "num_output must be an integer (size_t), not a boolean True"),
    ("num_output: 1", "num_output: 1.0", "num_output must be an integer (size_t), not a float 1.0"),
    ("leading_dim: 32", "leading_dim: 32.0", "leading_dim must be an integer (size_t), not a float 32.0"),
    ("dropout_rate: 0.5", 'dropout_rate: "0.5"', "dropout_rate must be a number, not a string '0.5'"),
])
def test_dense_layer_arguments_fit_their_cpp_type(tmp_path, old, new, message):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "lay.yaml").write_text(LAYERS_SPEC.replace(old, new))
    (folder / "lay.features.lock.json").write_text(json.dumps(MOVIELENS_LOCK))
    line = one_line(run_ctrgen("generate", str(folder / "lay.yaml"), "--out", str(tmp_path / "out")),
                    f"{folder / 'lay.yaml'}:")
    assert message in line
    assert not (tmp_path / "out").exists()


def test_dense_layer_arguments_at_their_bounds_are_accepted(tmp_path):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "lay.yaml").write_text(LAYERS_SPEC.replace("dropout_rate: 0.5", "dropout_rate: 0"))
    (folder / "lay.features.lock.json").write_text(json.dumps(MOVIELENS_LOCK))
    result = run_ctrgen("generate", str(folder / "lay.yaml"), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr


def _dataset_schema(folder: Path) -> Path:
    """A to_parquet-style .merlin/schema.json with MovieLens's columns (cardinalities from intDomain.max + 1)."""
    def feature(name, ftype, tags, domain_max=None):
        f = {"name": name, "type": ftype, "annotation": {"tag": tags, "extraMetadata": [{"dtype_item_size": 64.0}]}}
        if domain_max is not None:
            f["intDomain"] = {"name": name, "min": "0", "max": str(domain_max)}
        return f
    path = folder / ".merlin" / "schema.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"feature": [feature("userId", "INT", ["categorical"], 162541),
                                            feature("movieId", "INT", ["categorical"], 56585),
                                            feature("rating", "FLOAT", ["target"])]}))
    return folder


def test_lock_reads_every_spec_before_writing_a_lock(specs, tmp_path):
    data = _dataset_schema(tmp_path / "data")
    lock = specs / "movielens.features.lock.json"
    lock.unlink()
    with_text(specs, "hugectr_version:", f"workflow: {data}\nhugectr_version:")
    shutil.copy(specs / "movielens.yaml", specs / "second.yaml")
    with_text(specs, f"workflow: {data}", f"workflow: {tmp_path / 'missing'}", name="second.yaml")
    line = one_line(run_ctrgen("lock", str(specs / "movielens.yaml"), str(specs / "second.yaml")),
                    f"{specs / 'second.yaml'}: workflow:")
    assert "not found" in line
    assert not lock.exists(), "the first spec's lock must not be written when the second spec fails"
    mask = os.umask(0o022)
    try:
        result = run_ctrgen("lock", str(specs / "movielens.yaml"))
    finally:
        os.umask(mask)
    assert result.returncode == 0, result.stderr
    assert json.loads(lock.read_text())["categorical"][0]["cardinality"] == 162542
    assert lock.stat().st_mode & 0o777 == 0o644


def test_a_replaced_folder_keeps_ordinary_permissions(specs, tmp_path):
    out = tmp_path / "out"
    old = os.umask(0o022)
    try:
        assert generate(specs, "movielens.yaml", out=out).returncode == 0
        assert (out / "movielens").stat().st_mode & 0o777 == 0o755      # not mkdtemp's 0700
        (out / "movielens").chmod(0o750)
        with_text(specs, "units: [128, 128]", "units: [64, 64]")
        assert generate(specs, "movielens.yaml", out=out).returncode == 0
        assert (out / "movielens").stat().st_mode & 0o777 == 0o750      # the replaced folder's mode
    finally:
        os.umask(old)


def test_crlf_line_ends_give_the_same_outputs(specs, tmp_path):
    assert generate(specs, "movielens.yaml", out=tmp_path / "lf").returncode == 0
    path = specs / "movielens.yaml"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert generate(specs, "movielens.yaml", out=tmp_path / "crlf").returncode == 0
    assert _tree(tmp_path / "lf") == _tree(tmp_path / "crlf")


def test_deeply_nested_lock(specs, tmp_path):
    (specs / "movielens.features.lock.json").write_text("[" * 100_000 + "]" * 100_000)
    lock = specs / "movielens.features.lock.json"
    line = one_line(generate(specs, "movielens.yaml", out=tmp_path / "out"), f"{lock}:1:65:")
    assert "nests more than 64 levels deep" in line     # found on the text, before json.loads could recurse


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "/proc/self/status", "schema-fifo"])
def test_workflow_path_must_be_a_regular_file_or_folder(specs, tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "workflow"
        os.mkfifo(path)
    elif kind == "schema-fifo":          # a dataset folder whose schema file is a FIFO
        path = tmp_path / "data"
        (path / ".merlin").mkdir(parents=True)
        os.mkfifo(path / ".merlin" / "schema.json")
    else:
        path = Path(kind)
    result = generate(specs, "movielens.yaml", out=tmp_path / "out", extra=("--workflow", str(path)))
    one_line(result, str(path))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dtype, cards, ok", [
    ("int32", [2**31, 2**31], True), ("int32", [2**31, 2**31 + 1], False),          # unsigned int keys 0 .. 2**32-1
    ("int64", [2**62, 2**62], True), ("int64", [2**62, 2**62 + 1], False),          # long long keys 0 .. 2**63-1
])
def test_slot_offsets_fit_the_key_type(specs, tmp_path, dtype, cards, ok):
    lock = json.loads((specs / "movielens.features.lock.json").read_text())
    for column, card in zip(lock["categorical"], cards):
        column["cardinality"], column["dtype"] = card, dtype
    (specs / "movielens.features.lock.json").write_text(json.dumps(lock))
    result = run_ctrgen("summary", str(specs / "movielens.yaml"))
    if ok:
        assert "more keys than" not in result.stderr
        return
    line = one_line(result, f"{specs / 'movielens.yaml'}:")
    assert f"the cardinalities add up to {sum(cards)}, more keys than" in line


def test_every_problem_of_a_schema_is_reported_at_once(specs, tmp_path):
    data = _dataset_schema(tmp_path / "data")
    schema = data / ".merlin" / "schema.json"
    doc = json.loads(schema.read_text())
    doc["feature"][0]["type"] = "STRUCT"                    # no usable type
    doc["feature"][1]["annotation"] = ["categorical"]      # not shaped like a feature annotation
    doc["feature"].append({"type": "INT"})                  # no name
    schema.write_text(json.dumps(doc))
    result = generate(specs, "movielens.yaml", out=tmp_path / "out", extra=("--workflow", str(data)))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith(f"{schema}: ") for line in lines), lines
    assert "'userId' has no usable type" in lines[0] and "feature[1]" in lines[1] and "feature[3]" in lines[2]


def test_unchanged_files_keep_their_mtime(specs, tmp_path):
    out = tmp_path / "out"
    assert generate(specs, "movielens.yaml", out=out).returncode == 0
    summary, model = out / "movielens" / "summary.txt", out / "movielens" / "model.py"
    os.utime(summary, (1_000_000, 1_000_000))
    os.utime(model, (1_000_000, 1_000_000))
    with_text(specs, "max_iter: 2000", "max_iter: 3000")      # changes model.py, not the summary
    assert generate(specs, "movielens.yaml", out=out).returncode == 0
    assert summary.stat().st_mtime == 1_000_000
    assert model.stat().st_mtime != 1_000_000 and "max_iter=3000" in model.read_text()


def test_assemble_reports_every_missing_trained_file_at_once(tmp_path):
    workflow = tmp_path / "wf"
    workflow.mkdir()
    (workflow / "workflow.pkl").write_bytes(b"")
    weights = tmp_path / "weights"
    (weights / "0_sparse_1900.model").mkdir(parents=True)
    result = run_ctrgen("assemble", str(REPO / "specs" / "movielens.yaml"), "--workflow", str(workflow),
                        "--weights", str(weights), "--out", str(tmp_path / "repo"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert [line.split(": ")[0] for line in lines] == [str(weights / "0_sparse_1900.model" / "emb_vector"),
                                                       str(weights / "0_sparse_1900.model" / "key"),
                                                       str(weights / "_dense_1900.model")]
    assert not (tmp_path / "repo").exists()


@WORKFLOW_GROUP
@pytest.mark.slow
def test_assemble_copies_regular_files_and_inner_links_only(workflow_and_checkpoint, tmp_path):
    """A link inside the workflow folder stays a link in the repository; one pointing outside, a FIFO, a model.pt
    without tensors are one line each, before anything is written (tools/hostile_cases.py has the rest)."""
    workflow, checkpoint = workflow_and_checkpoint
    (workflow / "categories" / "alias.parquet").symlink_to("unique.userId.parquet")
    r = assemble(workflow, checkpoint, tmp_path / "repo")
    assert r.returncode == 0, r.stderr
    copied = tmp_path / "repo" / "movielens_nvt" / "1" / "workflow" / "categories" / "alias.parquet"
    assert copied.is_symlink() and os.readlink(copied) == "unique.userId.parquet" and copied.is_file()
    (workflow / "categories" / "outside").symlink_to(tmp_path)
    _refused(assemble(workflow, checkpoint, tmp_path / "repo2"), "a symbolic link pointing outside the folder")
    (workflow / "categories" / "outside").unlink()
    os.mkfifo(workflow / "categories" / "f")
    _refused(assemble(workflow, checkpoint, tmp_path / "repo2"), "not a regular file")
    (workflow / "categories" / "f").unlink()
    import zipfile

    (checkpoint / "model.pt").unlink()
    with zipfile.ZipFile(checkpoint / "model.pt", "w") as z:
        z.writestr("model/data.pkl", b"")
    _refused(assemble(workflow, checkpoint, tmp_path / "repo2"), "does not open as a PyTorch state dict")
    assert not (tmp_path / "repo2").exists()


def _refused(result, text: str) -> None:
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], result.stderr
