"""ctrgen import of a graph JSON (what model.graph_to_json writes): generate on the imported spec writes the same
bytes, for every committed generated/<name>/<name>.json and for every example spec retargeted to every supported
release; bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from codegen.errors import UserError
from codegen.hugectr.versions import STANDIN
from codegen.importer import import_source
from codegen.importer.graph_json import decimal_of_f32, regenerate
from codegen.importer.write import write_import
from codegen.output import write
from codegen.pipeline import open_spec, render_spec
from codegen.render.graph_json import f32

REPO = Path(__file__).resolve().parents[1]
SPECS = sorted((REPO / "specs").glob("*.yaml"))
# A spec's tests run on one xdist worker: they share its found imports (below).
BY_SPEC = [pytest.param(s, id=s.stem, marks=pytest.mark.xdist_group(f"import_graph_json_{s.stem}")) for s in SPECS]


def _name_version(spec: Path) -> tuple[str, str]:
    from ruamel.yaml import YAML
    doc = YAML(typ="safe").load(spec.read_text(encoding="utf-8"))
    return doc.get("name", spec.stem), str(doc["hugectr_version"])


def _generate(tmp_path: Path, result) -> bytes:
    """Write the import as `ctrgen import` does, then `ctrgen generate` it; the graph JSON's bytes."""
    specs = tmp_path / "specs"
    write_import(result, specs)
    rendered = render_spec(open_spec(specs / f"{result.name}.yaml"))
    write(tmp_path / "generated" / rendered.name, rendered.files)
    return (tmp_path / "generated" / rendered.name / f"{rendered.name}.json").read_bytes()


# The import with the release found (all 22 releases tried), its regeneration and what it writes and generates, per
# JSON file (its bytes and name) and spec name: a spec retargeted to several releases often writes the same bytes (the
# committed JSON among them), and the same file imports the same.
_FOUND: dict[tuple[bytes, str, str], tuple] = {}


def _found(source: Path, name: str, tmp_path: Path) -> tuple:
    key = (source.read_bytes(), source.name, name)
    if key not in _FOUND:
        found = import_source(source, None, name)
        _FOUND[key] = (found, regenerate(found).encode("utf-8"), _generate(tmp_path / "found", found))
    return _FOUND[key]


# ---- every committed graph JSON ---------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", BY_SPEC)
def test_committed_graph_json_round_trips(spec: Path, tmp_path: Path):
    name, version = _name_version(spec)
    source = REPO / "generated" / name / f"{name}.json"
    # At the spec's release, as given ...
    given = import_source(source, version, name)
    assert f'hugectr_version: "{version}"' in given.spec_text
    assert _generate(tmp_path / "given", given) == source.read_bytes()
    # ... and at the release the JSON reveals (a release that writes the same bytes).
    found, regenerated, generated = _found(source, name, tmp_path)
    assert regenerated == generated == source.read_bytes()
    assert found.features.source_kind == "imported"


def test_release_is_read_from_the_fields():
    """Concat "axis" (3.6+), the auto Slices (3.3+) and max_vocabulary_size_global's formula (3.5+) pick the release;
    several fitting releases are named in the assumptions."""
    dcn = import_source(REPO / "generated/dcn/dcn.json", None, "dcn")
    assert 'hugectr_version: "23.12"' in dcn.spec_text    # the newest release whose writer gives these bytes
    assert dcn.assumptions[0] == ("release 23.12 assumed: the JSON fits HugeCTR 3.6–23.12 "
                                  "(pass --hugectr-version to choose)")
    assert any("Slice layers of 'concat1' left out" in a for a in dcn.assumptions)
    assert "Slice" not in dcn.spec_text  # the Slice graph_analysis inserted is not in the spec
    ml = import_source(REPO / "generated/movielens/movielens.json", None, "movielens")
    assert 'hugectr_version: "3.4"' in ml.spec_text and "fits HugeCTR 3.2–3.4" in ml.assumptions[0]
    vertex = import_source(REPO / "generated/deepfm_vertex/deepfm_vertex.json", "3.2", "deepfm_vertex")
    assert "vvgpu: [[0, 1, 2, 3]]" in vertex.spec_text  # 190650180 = 4 x 2000 MB // (4*11)
    assert "slice11" in vertex.spec_text  # 3.2: explicit Slices stay


# ---- every example spec at every supported release ------------------------------------------------------------

def _retargeted_json(spec: Path, release: str, tmp_path: Path) -> tuple[str, str] | None:
    specs = tmp_path / "src"
    specs.mkdir()
    for lock in spec.parent.glob("*.features.lock.json"):
        (specs / lock.name).write_bytes(lock.read_bytes())
    text, n = re.subn(r'^hugectr_version: .*$', f'hugectr_version: "{release}"', spec.read_text(encoding="utf-8"),
                      count=1, flags=re.M)
    assert n == 1
    (specs / spec.name).write_text(text, encoding="utf-8")
    try:
        rendered = render_spec(open_spec(specs / spec.name))
    except UserError:
        return None  # the spec does not build at this release (tests/test_standin.py checks the message)
    from pathlib import PurePosixPath
    return rendered.name, rendered.files[PurePosixPath(f"{rendered.name}.json")]


@pytest.mark.parametrize("release", list(STANDIN))
@pytest.mark.parametrize("spec", BY_SPEC)
def test_every_spec_at_every_release_round_trips(spec: Path, release: str, tmp_path: Path):
    got = _retargeted_json(spec, release, tmp_path)
    # The continuous-training specs build only where their embedding cache exists (MOS: 3.2, ETC: 3.3 up to 23.12).
    # The sample families build where their layers exist (tests/test_presets_families.py: MLP 4.2, BST's
    # MultiHeadAttention 4.3, several labels 3.5).
    builds = release in {"wdl_continuous": ("3.2",), "wdl_continuous_etc": ("3.3", "4.3", "23.06"),
                         **dict.fromkeys(("bst", "dlrm_mlp", "mmoe", "shared_bottom"), ("4.3", "23.06"))}.get(
        spec.stem, STANDIN)
    assert (got is not None) == builds
    if got is None:
        return
    name, text = got
    source = tmp_path / f"{name}.json"
    source.write_bytes(text.encode("utf-8"))
    given = import_source(source, release, name)
    assert regenerate(given).encode("utf-8") == source.read_bytes()
    # At the release found, regenerated and (written and generated as the CLI does) the same bytes again.
    _, regenerated, generated = _found(source, name, tmp_path)
    assert regenerated == generated == source.read_bytes()


# ---- values the writer transforms -----------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0.9, 0.999, 1e-7, 1e-5, 0.1, 0.5, 1.0, 0.0, 0.25, 3e-4, 123.456])
def test_float32_widening_is_undone(value: float):
    assert decimal_of_f32(f32(value), "x") == value


def _dcn_doc() -> dict:
    return json.loads((REPO / "generated/dcn/dcn.json").read_text(encoding="utf-8"))


def _dump(doc: dict) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)


def test_optimizer_hyperparameters_and_model_name_round_trip(tmp_path: Path):
    doc = _dcn_doc()
    doc["model_name"] = "dcn_named"
    for layer in doc["layers"][1:2]:
        layer["optimizer"]["adam_hparam"] = {"beta1": f32(0.8), "beta2": f32(0.99), "epsilon": f32(1e-4)}
        layer["optimizer"]["update_type"] = "LazyGlobal"
    src = tmp_path / "g.json"
    src.write_text(_dump(doc), encoding="utf-8")
    result = import_source(src, None, None)
    assert result.name == "dcn_named" and "model_name: true" in result.spec_text
    assert "beta1: 0.8" in result.spec_text and "epsilon: 0.0001" in result.spec_text
    assert regenerate(result).encode("utf-8") == src.read_bytes()


def test_workspace_that_cannot_be_inverted_is_refused(tmp_path: Path):
    doc = json.loads((REPO / "generated/movielens/movielens.json").read_text(encoding="utf-8"))
    doc["layers"][1]["sparse_embedding_hparam"]["max_vocabulary_size_global"] = 1638401
    src = tmp_path / "m.json"
    src.write_text(_dump(doc), encoding="utf-8")
    with pytest.raises(UserError, match=r"max_vocabulary_size_global: --hugectr-version 3.3: 1638401 is not a "
                                        r"whole number of GPUs"):
        import_source(src, "3.3", "m")


@pytest.mark.slow
def test_layout_differences_are_refused(tmp_path: Path):
    src = tmp_path / "dcn.json"
    src.write_bytes((REPO / "generated/dcn/dcn.json").read_bytes() + b"\n")
    with pytest.raises(UserError, match="ends with a newline"):
        import_source(src, None, "dcn")
    src.write_bytes((REPO / "generated/dcn/dcn.json").read_bytes().replace(b"\n", b"\r\n"))
    with pytest.raises(UserError, match="CRLF line ends"):
        import_source(src, None, "dcn")
    src.write_text(json.dumps(_dcn_doc(), indent=4, sort_keys=True), encoding="utf-8")
    with pytest.raises(UserError, match="laid out differently"):
        import_source(src, None, "dcn")


# ---- bad input: one line, exit 2, nothing written ------------------------------------------------------------------

def _dcn_with(change) -> str:
    doc = _dcn_doc()
    change(doc)
    return _dump(doc)


def _unknown_layer(doc: dict) -> None:
    doc["layers"][-2]["type"] = "FancyLayer"


def _no_data(doc: dict) -> None:
    del doc["layers"][0]


def _auto_slice_removed(doc: dict) -> None:
    """concat1 feeds two layers with no Slice in between: no release from 3.3 writes that, and 3.2 has no axis."""
    layers = doc["layers"]
    i = next(k for k, layer in enumerate(layers) if layer["type"] == "Slice")
    del layers[i]
    for layer in layers[2:]:
        if isinstance(layer["bottom"], str) and layer["bottom"].startswith("concat1_slice"):
            layer["bottom"] = "concat1"


BAD = {
    "invalid_json": ('{"layers": [', [], "not valid JSON"),
    "array": ("[1, 2]", [], "a JSON array, not a graph JSON"),
    "other_object": ('{"not": "a graph"}', [], 'without "layers"'),
    "config": ('{"solver": {}, "optimizer": {}, "layers": []}', [], "hand-written HugeCTR JSON config"),
    "no_data_layer": (_dcn_with(_no_data), [], "no Data layer"),
    "unknown_layer": (_dcn_with(_unknown_layer), [], "unknown layer type 'FancyLayer'"),
    "contradicted_release": (None, ["--hugectr-version", "3.3"],
                             "--hugectr-version 3.3: HugeCTR 3.3 writes no Concat \"axis\""),
    "unsupported_release": (None, ["--hugectr-version", "9.9"], "unsupported HugeCTR release '9.9'"),
    "bad_name": (None, ["--name", "not-a-name"], "not a valid identifier"),
    "no_release_fits": (_dcn_with(_auto_slice_removed), [], "no supported HugeCTR release"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_graph_json_is_one_line_exit_2_nothing_written(case: str, tmp_path: Path):
    from conftest import run_ctrgen

    text, args, expected = BAD[case]
    src = tmp_path / "graph.json"
    if text is None:
        src.write_bytes((REPO / "generated/dcn/dcn.json").read_bytes())
    else:
        src.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    proc = run_ctrgen("import", str(src), "--out", str(out), *args)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert expected in proc.stderr and str(src) in proc.stderr, proc.stderr
    assert not out.exists() or not any(out.iterdir())


def test_contradicted_release_names_the_field_and_the_releases_that_fit(tmp_path: Path):
    with pytest.raises(UserError) as exc:
        import_source(REPO / "generated/dcn/dcn.json", "3.3", "dcn")
    line = exc.value.format()
    assert "layers[" in line and ".axis" in line and "omit --hugectr-version (the JSON fits HugeCTR 3.6–23.12)" in line


def test_cli_writes_spec_and_lock_and_lists_assumptions(tmp_path: Path):
    from conftest import run_ctrgen

    out = tmp_path / "specs"
    proc = run_ctrgen("import", str(REPO / "generated/wdl/wdl.json"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "wdl.yaml").is_file() and (out / "wdl.features.lock.json").is_file()
    assert "assumed: release 23.12 assumed" in proc.stdout and "placeholder file lists" in proc.stdout
