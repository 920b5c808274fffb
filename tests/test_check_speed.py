"""What `ctrgen check` skips to start faster (issue 16 item 7) must not change what it decides: the libyaml fast path
reads every spec as the round-trip reader does, cached compiled templates render the same bytes, and the pydantic
self-check skipped at start-up passes here. Speed itself: bench/startup_bench.py (docs/benchmarks.md)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from jinja2.bccache import bc_magic

from conftest import REPO

SPECS = sorted((REPO / "specs").glob("*.yaml"))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_fast_yaml_path_reads_each_example_spec_as_the_round_trip_reader(path):
    from codegen.specfile import load

    text = path.read_text()
    fast = load._fast(text)
    assert fast is not None, "an example spec should take the fast path"
    assert fast == load._plain(load._round_trip(path, text))
    loaded = load.load_spec(path)
    assert loaded._tree is load._UNPARSED                   # nothing needed a line number
    # A later check's line comes from libyaml's nodes (where) and is the round-trip tree's, at every key and item
    # and one past each (the closest parent's line).
    tree = load._round_trip(path, text)
    locs = [("nope",)]

    def walk(node, loc):
        locs.extend([loc, (*loc, "nope")])
        if isinstance(node, dict):
            for key in node:
                walk(node[key], (*loc, key))
        elif isinstance(node, list):
            locs.append((*loc, len(node)))
            for i, item in enumerate(node):
                walk(item, (*loc, i))

    walk(tree, ())
    assert len(locs) > 40
    assert [loaded.where(*loc) for loc in locs] == [load.locate(tree, loc) for loc in locs]
    assert loaded._tree is load._UNPARSED


@pytest.mark.parametrize("text", [
    "a: [*x]\n", "b: &b {c: 1}\n<<: *b\n", "- a\n- b\n", "a: [\n", "a: 1\na: 2\n",
    "x: " + "[" * 70 + "]" * 70 + "\n", "x: " + "[" * 200_000 + "]" * 200_000 + "\n",
    "x: " + "- " * 200_000 + "a\n", "x: &a [1, 1]\n" + "".join(f"{c}: &{c} [*{p}, *{p}]\n" for p, c in
                                                            zip("abcdefghijklmnopqrs", "bcdefghijklmnopqrst")),
    "%YAML 1.1\n---\na: yes\n", "a: !!set {b}\n", "a: !local b\n",
], ids=["unknown-alias", "merge", "not-a-mapping", "syntax-error", "duplicate-key", "deep", "deeper-than-libyaml-can",
        "deep-block", "alias-bomb", "yaml-1.1", "explicit-tag", "local-tag"])
def test_fast_yaml_path_leaves_doubtful_documents_to_the_round_trip_reader(text):
    from codegen.specfile import load

    assert load._fast(text) is None


def test_a_spec_error_found_after_the_fast_path_still_names_its_line(tmp_path):
    from codegen.errors import UserError
    from codegen.specfile.load import load_spec

    text = (REPO / "specs" / "dcn.yaml").read_text()
    assert "\ntraining:\n" in text and "\n  display: 200\n" in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("\n  display: 200\n", "\n  display: 0\n", 1))
    with pytest.raises(UserError) as err:
        load_spec(bad)
    line = text.split("\n  display: 200\n")[0].count("\n") + 2
    assert f"bad.yaml:{line}:3: training.display:" in err.value.format()


# Invalid specs the fast path reads: (old, new) replacements of specs/dcn.yaml's text.
INVALID = [("  display: 200\n", "  display: 0\n"), ("  batchsize: 16384\n", "  batchsize: many\n"),
           ("  lr: 0.001\n", "  lr: 0.001\n  learning_rate: 0.1\n"), ("  type: Adam\n", "  type: Adamm\n"),
           ("  units: [1024, 1024]\n", "  units: [1024, -3]\n"), ("  cross_layers: 6\n", "  cross_layers: [6]\n"),
           ("  vvgpu: [[0]]\n", "  vvgpu: [[0, x]]\n"), ("  preset: dcn\n", "  preset: dcn\n  bogus: {a: 1}\n"),
           ("  max_iter: 1500\n", "  max_iter: 1500\n  max_iter_x: 1\n  display_x: 2\n")]


@pytest.mark.parametrize("old, new", INVALID, ids=[n.strip().split(":")[0] for _, n in INVALID])
def test_a_spec_the_fast_path_reads_is_refused_with_the_round_trip_readers_message(tmp_path, monkeypatch, old, new):
    """Problems found by validating the fast path's data are placed by libyaml's node marks: the same message, line
    and column as when the round-trip reader reads the same text (every problem of the file, in order)."""
    from codegen.errors import UserError
    from codegen.specfile import load

    text = (REPO / "specs" / "dcn.yaml").read_text()
    assert text.count(old) == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, new))
    assert load._fast(bad.read_text()) is not None
    with pytest.raises(UserError) as fast:
        load.load_spec(bad)
    monkeypatch.setattr(load, "_fast", lambda text: None)
    with pytest.raises(UserError) as careful:
        load.load_spec(bad)
    assert fast.value.format() == careful.value.format()
    first = next(i for i, line in enumerate(new.splitlines()) if line not in old.splitlines())     # the new line
    assert f"bad.yaml:{text.split(old)[0].count(chr(10)) + 1 + first}:" in fast.value.format()


def _render_all(cache_home: Path) -> dict[str, dict]:
    code = ("import json, sys; from pathlib import Path; from codegen.pipeline import open_spec, render_spec\n"
            "out = {p.name: {str(k): v for k, v in render_spec(open_spec(p)).files.items()}"
            " for p in sorted(Path('specs').glob('*.yaml'))}\n"
            "print(json.dumps(out))")
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(cache_home),
           "CTRGEN_CACHE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    import json

    return json.loads(proc.stdout)


@pytest.mark.slow
def test_cached_templates_render_the_same_bytes(tmp_path):
    """The first run compiles every template (the cache is empty: what a run with CTRGEN_CACHE=0 does) and stores it;
    the next loads the stored code; damaged entries are compiled again. All three render the same bytes. (That
    CTRGEN_CACHE=0 writes no cache: test_one_knob_turns_every_user_cache_off, in-process.)"""
    first = _render_all(tmp_path / "cache")     # compiles and stores
    cached = list((tmp_path / "cache" / "ctrgen").glob("*/*.cache"))
    assert len(cached) > 10
    second = _render_all(tmp_path / "cache")    # loads the stored code
    for path in cached:                                         # damaged entries: compiled again, same bytes
        data = path.read_bytes()
        path.write_bytes(data[:len(data) // 3] if path != cached[0] else data[:len(bc_magic)] + b"garbage")
    third = _render_all(tmp_path / "cache")
    assert first == second == third


def test_template_cache_is_used_only_in_a_private_folder(tmp_path, monkeypatch):
    from codegen.render.template_cache import bytecode_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("CTRGEN_CACHE", raising=False)
    cache = bytecode_cache()
    assert cache is not None
    folder = Path(cache.directory)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    folder.chmod(0o770)                                          # writable by the group: cached code could be planted
    assert bytecode_cache() is None
    folder.chmod(0o700)
    monkeypatch.setenv("CTRGEN_CACHE", "0")
    assert bytecode_cache() is None
    monkeypatch.setenv("CTRGEN_CACHE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    (tmp_path / "file").write_text("")                         # not a folder: no cache, no error
    assert bytecode_cache() is None


def test_schema_proto_alone_then_the_package_as_before():
    """codegen.tfmd loads schema_pb2 without its six siblings; the package still gives each of them afterwards."""
    code = ("import sys; from codegen.tfmd import schema_pb2; s = schema_pb2()\n"
            "loaded = sorted(m.rpartition('.')[2] for m in sys.modules if m.startswith('tensorflow_metadata.proto.v0.'))\n"
            "import tensorflow_metadata.proto as p; from tensorflow_metadata.proto.v0 import statistics_pb2\n"
            "print(loaded, p.v0.schema_pb2 is s is p.schema_pb2, p.anomalies_pb2.__name__, statistics_pb2.__name__)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["['derived_feature_pb2',", "'path_pb2',", "'schema_pb2']", "True",
                                   "tensorflow_metadata.proto.v0.anomalies_pb2",
                                   "tensorflow_metadata.proto.v0.statistics_pb2"]


@pytest.mark.slow
def test_parsed_schemas_are_kept_between_runs_only_for_the_same_text(tmp_path, monkeypatch):
    """The columns of a schema.pbtxt that parsed are kept in the user's cache: the next run (a fresh process, here a
    cleared in-memory memo) reads them without parsing; another text, a corrupt entry or CTRGEN_CACHE=0 parse."""
    from google.protobuf import text_format

    from codegen import workflow_schema
    from schema_files import MOVIELENS, write_output_schema

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CTRGEN_CACHE", raising=False)
    folder = tmp_path / "wf"
    folder.mkdir()
    write_output_schema(folder, MOVIELENS, label="rating")
    schema = folder / "output_schema.pbtxt"
    parses = []
    real_parse = text_format.Parse
    monkeypatch.setattr(text_format, "Parse", lambda *a, **k: parses.append(1) or real_parse(*a, **k))

    def read():
        workflow_schema._PBTXT_CACHE.clear()           # what a new process starts with
        return workflow_schema.read_schema_pbtxt(schema)

    first = read()
    assert len(parses) == 1 and [c.name for c in first.columns] == ["userId", "movieId", "rating"]
    entries = list((tmp_path / "cache" / "ctrgen" / "schemas").glob("*.json"))
    assert len(entries) == 1
    assert read() == first and len(parses) == 1                       # from the cache: no parse
    entries[0].write_text('[{"name": "userId"')                       # truncated: parsed again, then rewritten
    assert read() == first and len(parses) == 2
    assert read() == first and len(parses) == 2
    write_output_schema(folder, {**MOVIELENS, "userId": 162543}, label="rating")   # another text: parsed
    changed = read()
    assert len(parses) == 3 and changed.columns[0].cardinality == 162543 and changed != first
    monkeypatch.setenv("CTRGEN_CACHE", "0")
    assert read() == changed and len(parses) == 4                     # off: parsed every time, nothing written
    assert len(list((tmp_path / "cache" / "ctrgen" / "schemas").glob("*.json"))) == 2
    schema.write_text("feature { name: ")                              # a problem is never cached
    monkeypatch.delenv("CTRGEN_CACHE")
    for _ in range(2):
        workflow_schema._PBTXT_CACHE.clear()
        with pytest.raises(workflow_schema.UserError):
            workflow_schema.read_schema_pbtxt(schema)


def test_the_tests_use_a_user_cache_of_their_own():
    """conftest points XDG_CACHE_HOME into the session's scratch folder: a cache the user's own runs filled (the README
    runs `make demo` before `make test`) cannot change what the tests see, and the tests write nothing to it."""
    from codegen import user_cache
    from conftest import shared_scratch

    assert Path(os.environ["XDG_CACHE_HOME"]) == shared_scratch() / "user-cache"
    folder = user_cache.folder("schemas")
    assert folder is not None and folder.is_relative_to(shared_scratch())


def test_one_knob_turns_every_user_cache_off(tmp_path, monkeypatch):
    """CTRGEN_CACHE=0: no template cache, no schema cache, no folder made (the trainer's torch bytecode:
    tests/test_torch_fast_paths.py)."""
    from codegen import user_cache
    from codegen.render.template_cache import bytecode_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CTRGEN_CACHE", "0")
    assert bytecode_cache() is None and user_cache.folder("schemas") is None
    assert not (tmp_path / "cache").exists()
    monkeypatch.setenv("CTRGEN_CACHE", "1")
    assert bytecode_cache() is not None and user_cache.folder("schemas") == tmp_path / "cache" / "ctrgen" / "schemas"
