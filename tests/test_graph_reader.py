"""One reader of the graph JSON Model.graph_to_json writes (issue 23 item 4): codegen/hugectr/graph_reader.py parses
the document for both ``ctrgen import`` (which layers graph_to_json's exact shape on top) and ``ctrgen validate``
(lenient, as hand-written Triton repositories need). A malformed document is the same refusal, field and line on
both sides; what only the importer refuses is refused on top of the same reading."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from codegen.errors import Located, UserError
from codegen.hugectr import graph_reader
from codegen.hugectr.graph_reader import Graph, load_graph, position, read_graph
from codegen.importer import import_source
from codegen.triton import validate_repository

REPO = Path(__file__).resolve().parents[1]
MOVIELENS = REPO / "generated" / "movielens"


def _doc() -> dict:
    return json.loads((MOVIELENS / "movielens.json").read_text(encoding="utf-8"))


def _write(path: Path, doc: dict) -> str:
    text = json.dumps(doc, indent=2, sort_keys=True)
    path.write_text(text, encoding="utf-8")
    return text


def _repository(tmp_path: Path, change=None) -> tuple[Path, Path]:
    """generated/movielens copied, its graph JSON changed by ``change``: (the triton repository, the graph)."""
    model = tmp_path / "movielens"
    shutil.copytree(MOVIELENS, model)
    graph = model / "movielens.json"
    if change is not None:
        doc = _doc()
        change(doc)
        _write(graph, doc)
    return model / "triton", graph


def _graph_findings(repo: Path) -> list:
    return [f for f in validate_repository(repo) if f.file.endswith("movielens.json")]


def test_one_parse_feeds_import_and_validate(tmp_path, monkeypatch):
    """Both commands read the graph through graph_reader's one parse of the document."""
    seen: list[str] = []
    parse = graph_reader._read

    def counting(doc, path):
        seen.append(Path(path).name)
        return parse(doc, path)

    monkeypatch.setattr(graph_reader, "_read", counting)
    repo, graph = _repository(tmp_path)
    result = import_source(graph, "3.4", "movielens")
    assert seen == ["movielens.json"] and 'hugectr_version: "3.4"' in result.spec_text
    assert _graph_findings(repo) == [] and seen == ["movielens.json", "movielens.json"]


def test_a_malformed_graph_is_the_same_refusal_for_import_and_validate(tmp_path):
    def zero_slots(doc):
        doc["layers"][0]["sparse"][0]["slot_num"] = 0

    repo, graph = _repository(tmp_path, zero_slots)
    with pytest.raises(Located) as read:
        load_graph(graph)
    assert (read.value.field, read.value.message) == ("layers[0].sparse[0].slot_num",
                                                      "expected an integer >= 1, got 0")
    assert read.value.line == position(graph.read_text(encoding="utf-8"), read.value.field)[0] is not None
    [finding] = _graph_findings(repo)
    assert (finding.field, finding.message, finding.line, finding.col) == (
        read.value.field, read.value.message, read.value.line, read.value.col)
    with pytest.raises(UserError) as imported:
        import_source(graph, None, "movielens")
    [problem] = imported.value.problems
    assert (problem.field, problem.message, problem.line, problem.col) == (
        read.value.field, read.value.message, read.value.line, read.value.col)


def test_an_embedding_of_no_input_is_found_by_the_reader_on_both_sides(tmp_path):
    """Before, the importer found it only when the imported spec failed to build (named as a spec field)."""
    def unknown_bottom(doc):
        doc["layers"][1]["bottom"] = "data9"

    repo, graph = _repository(tmp_path, unknown_bottom)
    want = ("layers[1].bottom", 'embedding "sparse_embedding1" reads "data9", which is not a sparse input of the Data '
                                "layer (data1)")
    assert [(f.field, f.message) for f in _graph_findings(repo)] == [want]
    with pytest.raises(UserError) as imported:
        import_source(graph, None, "movielens")
    assert [(p.field, p.message) for p in imported.value.problems] == [want]


@pytest.mark.parametrize("change, refusal", [
    (lambda s: s.update(nnz_per_slot=2), ("layers[0].sparse[0].nnz_per_slot",
                                          "graph_to_json writes one value per slot (2), got 2")),
    (lambda s: s.pop("is_fixed_length"), ("layers[0].sparse[0]", "a sparse input without 'is_fixed_length'")),
    (lambda s: s.update(is_fixed_length="yes"), ("layers[0].sparse[0].is_fixed_length",
                                                 'expected true or false, got "yes"')),
])
def test_what_only_the_importer_refuses_is_checked_on_the_shared_reading(tmp_path, change, refusal):
    """Hand-written graphs may write nnz_per_slot as one number or leave out is_fixed_length: validate reads them;
    import refuses them (graph_to_json never writes them so), on top of the same reading."""
    repo, graph = _repository(tmp_path, lambda doc: change(doc["layers"][0]["sparse"][0]))
    lenient = load_graph(graph)
    assert isinstance(lenient, Graph) and lenient.slots == 2 and lenient.tables[0].input is lenient.sparse[0]
    assert _graph_findings(repo) == []
    with pytest.raises(UserError) as imported:
        import_source(graph, None, "movielens")
    assert [(p.field, p.message) for p in imported.value.problems] == [refusal]
    assert imported.value.problems[0].line is not None


def test_the_reading_keeps_what_both_sides_need():
    graph = load_graph(REPO / "generated" / "dcn" / "dcn.json")
    assert graph.path.name == "dcn.json" and graph.data["type"] == "Data" and graph.layers[0] is graph.data
    [sparse] = graph.sparse
    assert (sparse.top, sparse.slot_num, sparse.slot_offset, sparse.index) == ("data1", 27, 0, 0)
    assert sparse.json is graph.data["sparse"][0]
    [table] = graph.tables
    assert (table.index, table.layer, table.top, table.bottom, table.input) == (0, 1, "sparse_embedding1", "data1",
                                                                                sparse)
    assert table.json is graph.layers[1] and graph.label_dims == (1,) and not graph.label_array


def test_position_names_the_line_of_a_field_or_of_its_nearest_enclosing_one():
    text = '{\n  "layers": [\n    {"type": "Data",\n     "sparse": [{"top": "a"}]}\n  ]\n}'
    assert position(text, "layers[0].sparse[0].top") == (4, 25)
    assert position(text, "layers[0].sparse[0].slot_num") == (4, 17)     # not written: its object
    assert position(text, "layers[0].type") == (3, 14)
    assert position(text, "") == (None, None) and position(text, "syntax") == (None, None)
    assert position(text, "layers..x") == (None, None)                     # not a field path


@pytest.mark.parametrize("text", ['{"layers": [' + "9" * 5000 + "]}", "[" * 100 + "]" * 100])
def test_unreadable_numbers_and_nesting_are_one_line_on_both_sides(tmp_path, text):
    """Before, a number of more than 4300 digits was a ValueError traceback in both readers."""
    path = tmp_path / "g.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as lint:
        read_graph(graph_reader.parse_graph_text(text, path), path)
    assert not isinstance(lint.value, Located) and "graph JSON" in lint.value.problems[0].message
    with pytest.raises(UserError) as imported:
        import_source(path, None, "g")
    assert [p.message for p in imported.value.problems] == [p.message for p in lint.value.problems]


def test_graph_and_its_parts_are_defined_once():
    """No second parser of the graph JSON: Graph, SparseInput and Table are graph_reader's (the others of those
    names are the typed model's, codegen/graph/ir.py, and the Triton plan's, not the file's)."""
    found = []
    for path in sorted((REPO / "codegen").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in ("Graph", "SparseInput", "Table", "GraphError"):
                found.append(f"{path.relative_to(REPO).as_posix()}:{node.name}")
    assert found == ["codegen/graph/ir.py:SparseInput", "codegen/graph/ir.py:Graph",
                     "codegen/hugectr/graph_reader.py:SparseInput", "codegen/hugectr/graph_reader.py:Table",
                     "codegen/hugectr/graph_reader.py:Graph", "codegen/triton/plan/repository.py:Table"]
    assert not (REPO / "codegen" / "triton" / "lint" / "graphjson.py").exists()
