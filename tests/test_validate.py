"""``ctrgen validate`` against the lint cases (tests/lint_repos.py: the defects of official notebooks' Triton
repositories, and a clean case) and against mutated copies of the clean one.

Case matching rule (docs/triton_facts.md "Lint cases"): each expect line is
``FIELD VALUE in FILE ...[; expected [..]]``. A case passes when
  * every expect line is matched by an error finding with that field, that file (relative to the case folder) and
    that value as the file holds it (JSON-equal; ``[v]*n`` is the cases' shorthand for n copies), and, when the
    line gives ``expected [..]``, that expected value;
  * every error finding is claimed by an expect line with the same (file, field): no other defects;
  * every warning names a field of the case's ``may_also`` list (data- or release-dependent findings are allowed
    there, and nowhere else);
  * the CLI exits 1 when the case lists defects and 0 when it lists none; the clean case reports nothing at all.
The reference tier runs the same check on the upstream folders themselves and checks that each written repository
validates exactly as its upstream folder does.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from google.protobuf import text_format
from lint_repos import CLEAN, case, cases, write_case
from tritonclient.grpc import model_config_pb2 as mc
from upstream import reference_dir

from codegen.triton import render_findings, validate_repository
from codegen.triton.commands.validate import validate_command
from codegen.triton.lint.findings import ERROR, WARNING

CASES = cases()


def test_cases_present():
    assert CLEAN in CASES and len(CASES) == 6, CASES
    assert all(case(c)["expect"] for c in CASES if c != CLEAN) and not case(CLEAN)["expect"]


# ---- expect lines ----------------------------------------------------------------------------------------------
EXPECT_LINE = re.compile(r"^(?P<field>\S+) (?P<value>.+?) in (?P<file>[^\s:;,]+)")
EXPECTED_LIST = re.compile(r"expected (?P<list>\[[^\]]*\](?:\*\d+)?)")


def fixture_value(text: str):
    """A value as an expect line writes it: JSON, or the shorthand [v]*n."""
    m = re.fullmatch(r"(\[.*\])\*(\d+)", text.strip())
    if m:
        return json.loads(m.group(1)) * int(m.group(2))
    return json.loads(text)


def read_expect(lines: list[str]) -> list[dict]:
    out = []
    for line in lines:
        m = EXPECT_LINE.match(line)
        assert m, f"unreadable expect line: {line}"
        e = {"field": m["field"], "file": m["file"], "value": fixture_value(m["value"]), "line": line}
        x = EXPECTED_LIST.search(line)
        e["expected"] = fixture_value(x["list"]) if x else None
        out.append(e)
    return out


def check_case(folder: Path, expect_lines: list[str], may_also: list[str]) -> None:
    findings = validate_repository(folder)
    expect = read_expect(expect_lines)
    errors = [f for f in findings if f.severity == ERROR]
    warnings = [f for f in findings if f.severity == WARNING]
    report = render_findings(findings)

    for e in expect:
        same_field = [f for f in errors if f.field == e["field"] and f.file == e["file"]]
        assert same_field, f"not reported: {e['line']}\n{report}"
        assert any(f.actual == e["value"] and (e["expected"] is None or f.expected == e["expected"])
                   for f in same_field), f"reported with other values: {e['line']}\n{report}"
    claimed = {(e["file"], e["field"]) for e in expect}
    extra = [f.format() for f in errors if (f.file, f.field) not in claimed]
    assert not extra, "errors the case does not list:\n" + "\n".join(extra)

    stray = [f.format() for f in warnings if f.field not in may_also]
    assert not stray, "warnings the case does not allow ('may_also'):\n" + "\n".join(stray)
    if not expect:
        assert findings == [], report

    result = CliRunner().invoke(validate_command, [str(folder)])
    assert result.exit_code == (1 if expect else 0), result.output


@pytest.mark.parametrize("name", CASES)
def test_case(name, tmp_path):
    check_case(write_case(name, tmp_path / name), case(name)["expect"], case(name)["may_also"])


def _comparable(findings) -> list[tuple]:
    return sorted((f.file, f.field, f.severity, json.dumps(f.actual, default=str),
                   json.dumps(f.expected, default=str)) for f in findings)       # lines differ: written anew


@pytest.mark.reference
@pytest.mark.parametrize("name", CASES)
def test_upstream_case_as_it_is(name, tmp_path):
    """The upstream folder passes the same check, and the repository written from the facts validates exactly as
    it does (same findings, values and severities: each defect reproduced, nothing added)."""
    upstream = reference_dir() / "fixtures" / "lint" / name
    check_case(upstream, case(name)["expect"], case(name)["may_also"])
    assert _comparable(validate_repository(write_case(name, tmp_path / name))) == \
        _comparable(validate_repository(upstream))


# ---- a writable copy of the clean case, and mutations of it -----------------------------------------------------
@pytest.fixture
def repo(tmp_path) -> Path:
    """The clean case, written to a writable folder."""
    return write_case(CLEAN, tmp_path / "repo")


def edit_config(repo: Path, fn, model: str = "movielens") -> None:
    path = repo / model / "config.pbtxt"
    cfg = text_format.Parse(path.read_text(), mc.ModelConfig())
    fn(cfg)
    path.write_text(text_format.MessageToString(cfg))


def edit_ps(repo: Path, fn) -> None:
    path = repo / "ps.json"
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data, indent=4))


def edit_graph(repo: Path, fn) -> None:
    path = repo / "movielens" / "1" / "movielens.json"
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True))


def set_param(key: str, value: str):
    def fn(cfg):
        cfg.parameters[key].string_value = value
    return fn


def errors_of(findings) -> set[tuple[str, str]]:
    return {(f.file, f.field) for f in findings if f.severity == ERROR}


def test_copy_of_clean_case_is_clean(repo):
    assert validate_repository(repo) == []


PS, CFG, GRAPH = "ps.json", "movielens/config.pbtxt", "movielens/1/movielens.json"


def set_dtype(tensor: str, dtype):
    def fn(cfg):
        next(i for i in cfg.input if i.name == tensor).data_type = dtype
    return fn


def set_instance(**fields):
    def fn(cfg):
        for key, value in fields.items():
            if key == "gpus":
                cfg.instance_group[0].gpus.extend(value)
            else:
                setattr(cfg.instance_group[0], key, value)
    return fn


MUTATIONS = {
    # triton.md §2.1: config.pbtxt on its own
    "rowindex_fp32": (lambda r: edit_config(r, set_dtype("ROWINDEX", mc.TYPE_FP32)),
                      {(CFG, "input.ROWINDEX.data_type")}),
    "extra_input": (lambda r: edit_config(r, lambda c: c.input.add(name="X", data_type=mc.TYPE_FP32, dims=[-1])),
                    {(CFG, "input")}),
    "des_dims": (lambda r: edit_config(r, lambda c: c.input[0].dims.__setitem__(0, 1)), {(CFG, "input.DES.dims")}),
    "two_outputs": (lambda r: edit_config(r, lambda c: c.output.add(name="OUTPUT1", data_type=mc.TYPE_FP32,
                                                                    dims=[-1])), {(CFG, "output")}),
    "cpu_kind": (lambda r: edit_config(r, set_instance(kind=mc.ModelInstanceGroup.KIND_CPU)),
                 {(CFG, "instance_group.kind")}),
    # triton.md §2.1, §5: config.pbtxt vs ps.json
    "count_above_workers": (lambda r: edit_config(r, set_instance(count=2)), {(CFG, "instance_group.count")}),
    "gpu_not_deployed": (lambda r: edit_config(r, set_instance(gpus=[3])),
                         {(CFG, "instance_group.gpus")}),
    "max_batch_size": (lambda r: edit_ps(r, lambda d: d["models"][0].update(max_batch_size=32)),
                       {(CFG, "max_batch_size")}),
    "name_vs_folder": (lambda r: (edit_config(r, lambda c: setattr(c, "name", "ml")),
                                  edit_ps(r, lambda d: d["models"][0].update(model="ml"))), {(CFG, "name")}),
    "name_not_in_ps": (lambda r: edit_ps(r, lambda d: d["models"][0].update(model="other")), {(CFG, "name")}),
    "gpucache": (lambda r: edit_config(r, set_param("gpucache", "false")), {(CFG, "gpucache")}),
    "gpucacheper": (lambda r: edit_config(r, set_param("gpucacheper", "0.8")), {(CFG, "gpucacheper")}),
    "hit_rate_threshold": (lambda r: edit_config(r, set_param("hit_rate_threshold", "0.95")),
                           {(CFG, "hit_rate_threshold")}),
    "ps_missing_dense_file": (lambda r: edit_ps(r, lambda d: d["models"][0].pop("dense_file")), {(PS, "dense_file")}),
    # triton.md §5: against the graph JSON
    "slots": (lambda r: edit_config(r, set_param("slots", "3")), {(CFG, "slots")}),
    "ps_slot_num": (lambda r: edit_ps(r, lambda d: d["models"][0].update(slot_num=3)), {(PS, "slot_num")}),
    "des_feature_num": (lambda r: edit_config(r, set_param("des_feature_num", "13")), {(CFG, "des_feature_num")}),
    "label_dim": (lambda r: edit_config(r, set_param("label_dim", "2")), {(CFG, "label_dim")}),
    "cat_feature_num_below_slots": (lambda r: edit_config(r, set_param("cat_feature_num", "1")),
                                    {(CFG, "cat_feature_num")}),
    "max_nnz_zero": (lambda r: edit_config(r, set_param("max_nnz", "0")), {(CFG, "max_nnz")}),
    "embedding_vector_size": (lambda r: edit_config(r, set_param("embedding_vector_size", "32")),
                              {(CFG, "embedding_vector_size")}),
    "not_a_number": (lambda r: edit_config(r, set_param("slots", "two")), {(CFG, "slots")}),
    "table_name": (lambda r: edit_ps(r, lambda d: d["models"][0].update(embedding_table_names=["emb"])),
                   {(PS, "embedding_table_names")}),
    "vecsize": (lambda r: edit_ps(r, lambda d: d["models"][0].update(embedding_vecsize_per_table=[32])),
                {(PS, "embedding_vecsize_per_table")}),
    "config_vs_network_file": (lambda r: (shutil.copy(r / GRAPH, r / "movielens/1/other.json"),
                                          edit_config(r, set_param("config", "movielens/1/other.json"))),
                               {(CFG, "config")}),
    # R2: the graph on its own
    "slot_size_array_length": (lambda r: edit_graph(r, lambda g: g["layers"][1]["sparse_embedding_hparam"].update(
        slot_size_array=[51])), {(GRAPH, "slot_size_array")}),
    # triton.md §5, R6: key width
    "long_type_false": (lambda r: edit_config(r, set_param("embeddingkey_long_type", "false")),
                        {(CFG, "embeddingkey_long_type"), (PS, "supportlonglong")}),
    "catcolumn_uint32": (lambda r: edit_config(r, set_dtype("CATCOLUMN", mc.TYPE_UINT32)),
                         {(CFG, "embeddingkey_long_type")}),
    "catcolumn_int32": (lambda r: edit_config(r, set_dtype("CATCOLUMN", mc.TYPE_INT32)),
                        {(CFG, "input.CATCOLUMN.data_type")}),
    # hugectr.md §5: files
    "dense_missing": (lambda r: (r / "movielens/1/_dense_1900.model").unlink(), {(PS, "dense_file")}),
    "emb_vector_of_other_width": (lambda r: (r / "movielens/1/0_sparse_1900.model/emb_vector").write_bytes(
        bytes(2 * 32 * 4)), {(PS, "sparse_files")}),
    "sparse_without_key": (lambda r: (r / "movielens/1/0_sparse_1900.model/key").unlink(), {(PS, "sparse_files")}),
    "graph_missing": (lambda r: (r / GRAPH).unlink(), {(CFG, "config"), (PS, "network_file")}),
    "no_version_folder": (lambda r: shutil.move(r / "movielens/1", r / "movielens/files"),
                          {(CFG, "version"), (CFG, "config"), (PS, "network_file"), (PS, "dense_file"),
                           (PS, "sparse_files")}),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutation_is_reported(repo, name):
    mutate, expected = MUTATIONS[name]
    mutate(repo)
    findings = validate_repository(repo)
    assert errors_of(findings) == expected, render_findings(findings)
    for f in findings:
        assert f.message and f.fix, f.format()


MALFORMED = {
    "ps_models_not_a_list": (lambda r: edit_ps(r, lambda d: d.update(models={"model": "movielens"})),
                             {(PS, "models"), (CFG, "name")}),
    "ps_sparse_files_string": (lambda r: edit_ps(r, lambda d: d["models"][0].update(sparse_files="a.model")),
                               {(PS, "sparse_files")}),
    "ps_devices_strings": (lambda r: edit_ps(r, lambda d: d["models"][0].update(deployed_device_list=["gpu0"])),
                           {(PS, "deployed_device_list")}),
    "ps_top_level_list": (lambda r: (r / "ps.json").write_text("[]"), {(PS, "syntax")}),
    "graph_without_layers": (lambda r: (r / GRAPH).write_text('{"model_name": "x"}'), {(GRAPH, "layers")}),
    # the graph's own fields are named by their path in the file (the reader ctrgen import shares)
    "graph_bottom_unknown": (lambda r: edit_graph(r, lambda g: g["layers"][1].update(bottom="data9")),
                             {(GRAPH, "layers[1].bottom")}),
    "graph_nnz_list_too_short": (lambda r: edit_graph(r, lambda g: g["layers"][0]["sparse"][0].update(
        nnz_per_slot=[1])), {(GRAPH, "layers[0].sparse[0].nnz_per_slot")}),
    "no_inputs": (lambda r: edit_config(r, lambda c: c.ClearField("input")), {(CFG, "input")}),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_files_are_findings_not_crashes(repo, name):
    mutate, expected = MALFORMED[name]
    mutate(repo)
    findings = validate_repository(repo)
    assert errors_of(findings) == expected, render_findings(findings)


def test_parse_error_has_line_and_col(repo):
    path = repo / "movielens" / "config.pbtxt"
    path.write_text(path.read_text().replace("max_batch_size: 64", "max_batch_size: 64\nbogus_field: 1"))
    findings = validate_repository(repo)
    assert [(f.file, f.field, f.line, f.col) for f in findings] == [(CFG, "syntax", 3, 1)], render_findings(findings)
    assert "bogus_field" in findings[0].message


def test_ps_json_syntax_error(repo):
    (repo / "ps.json").write_text('{"models": [}\n')
    findings = validate_repository(repo)
    assert (PS, "syntax") in errors_of(findings)
    assert next(f for f in findings if f.field == "syntax").line == 1


def test_multi_hot_evidence_turns_warning_into_error(repo):
    """cat_feature_num == slots with a graph allowing more keys is data-dependent (warning); cat_feature_num >
    slots declares multi-hot rows, so the graph's bound applies (error) - the rule the MovieLens fixtures follow."""
    graph = json.loads((repo / GRAPH).read_text())
    graph["layers"][0]["sparse"][0].update(nnz_per_slot=[1, 5], is_fixed_length=False)
    (repo / GRAPH).write_text(json.dumps(graph, indent=2))
    edit_config(repo, set_param("max_nnz", "5"))
    edit_ps(repo, lambda d: d["models"][0].update(maxnum_catfeature_query_per_table_per_sample=[6]))
    findings = validate_repository(repo)
    assert errors_of(findings) == set()
    assert {(f.file, f.field) for f in findings if f.severity == WARNING} == {(CFG, "cat_feature_num")}
    edit_config(repo, set_param("cat_feature_num", "3"))
    assert errors_of(validate_repository(repo)) == {(CFG, "cat_feature_num")}


# ---- features lock ------------------------------------------------------------------------------------------
def write_lock(path: Path, cats, conts=(), labels=("rating",)) -> Path:
    lock = {"ctrgen_features_lock": 1, "source": "recorded", "provenance": "test",
            "categorical": [dict(c) for c in cats],
            "continuous": [{"name": n, "dtype": "float32"} for n in conts],
            "labels": [{"name": n, "dtype": "float32"} for n in labels]}
    path.write_text(json.dumps(lock))
    return path


CATS = [{"name": "userId", "dtype": "int64", "cardinality": 51}, {"name": "movieId", "dtype": "int64",
                                                                   "cardinality": 41}]


def test_lock_consistent(repo, tmp_path):
    lock = write_lock(tmp_path / "m.features.lock.json", CATS)
    assert validate_repository(repo, features_lock=lock) == []


@pytest.mark.parametrize("lock_args, expected", [
    # the graph is the training truth the serving files are checked against; the lock checks the graph
    ((CATS + [{"name": "genres", "dtype": "int64", "cardinality": 21}],), {(GRAPH, "slot_num")}),
    ((CATS, ["age"]), {(GRAPH, "dense_dim")}),
    ((CATS, (), ["rating", "click"]), {(GRAPH, "label_dim")}),
    (([{**c, "dtype": "int32"} for c in CATS],), {(CFG, "embeddingkey_long_type")}),
])
def test_lock_disagrees(repo, tmp_path, lock_args, expected):
    lock = write_lock(tmp_path / "m.features.lock.json", *lock_args)
    findings = validate_repository(repo, features_lock=lock)
    assert errors_of(findings) == expected, render_findings(findings)


def test_lock_is_the_truth_when_the_graph_cannot_be_read(repo, tmp_path):
    """Absolute paths outside --root-map and no copy of the graph in the repository: the serving counts are checked
    against the lock."""
    make_absolute(repo)
    (repo / "movielens" / "1" / "movielens.json").unlink()
    lock = write_lock(tmp_path / "m.features.lock.json", CATS + [{"name": "genres", "dtype": "int64",
                                                                  "cardinality": 21}], ["age"])
    findings = validate_repository(repo, features_lock=lock)
    assert errors_of(findings) == {(CFG, "slots"), (PS, "slot_num"), (CFG, "des_feature_num"),
                                   (PS, "maxnum_des_feature_per_sample")}, render_findings(findings)
    assert all("features lock" in f.message for f in findings if f.severity == ERROR)


def test_lock_slot_size_array(repo, tmp_path):
    graph = json.loads((repo / GRAPH).read_text())
    graph["layers"][1]["sparse_embedding_hparam"]["slot_size_array"] = [41, 51]  # swapped order (R1)
    (repo / GRAPH).write_text(json.dumps(graph, indent=2))
    lock = write_lock(tmp_path / "m.features.lock.json", CATS)
    findings = validate_repository(repo, features_lock=lock)
    assert errors_of(findings) == {(GRAPH, "slot_size_array")}, render_findings(findings)
    f = next(f for f in findings if f.field == "slot_size_array")
    assert (f.actual, f.expected) == ([41, 51], [51, 41])


# ---- ensembles ----------------------------------------------------------------------------------------------
def add_ensemble(repo: Path, *, nvt_catcolumn=mc.TYPE_INT64, ens_step_model="movielens_nvt") -> None:
    nvt = mc.ModelConfig(name="movielens_nvt", backend="python", max_batch_size=64)
    for col in ("userId", "movieId"):
        nvt.input.add(name=col, data_type=mc.TYPE_INT64, dims=[-1])
    for name, dtype in (("DES", mc.TYPE_FP32), ("CATCOLUMN", nvt_catcolumn), ("ROWINDEX", mc.TYPE_INT32)):
        nvt.output.add(name=name, data_type=dtype, dims=[-1])
    nvt.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU)
    for key, value in (("cats", '["userId", "movieId"]'), ("conts", ""), ("output_model", "hugectr")):
        nvt.parameters[key].string_value = value
    ens = mc.ModelConfig(name="movielens_ens", platform="ensemble", max_batch_size=64)
    ens.input.extend(nvt.input)
    ens.output.add(name="OUTPUT0", data_type=mc.TYPE_FP32, dims=[-1])
    step = ens.ensemble_scheduling.step.add(model_name=ens_step_model, model_version=-1)
    for col in ("userId", "movieId"):
        step.input_map[col] = col
    for t in ("DES", "CATCOLUMN", "ROWINDEX"):
        step.output_map[t] = t + "_nvt"
    step = ens.ensemble_scheduling.step.add(model_name="movielens", model_version=-1)
    for t in ("DES", "CATCOLUMN", "ROWINDEX"):
        step.input_map[t] = t + "_nvt"
    step.output_map["OUTPUT0"] = "OUTPUT0"
    for cfg in (nvt, ens):
        (repo / cfg.name / "1").mkdir(parents=True)
        (repo / cfg.name / "config.pbtxt").write_text(text_format.MessageToString(cfg))


def test_ensemble_clean(repo, tmp_path):
    add_ensemble(repo)
    assert validate_repository(repo) == []
    lock = write_lock(tmp_path / "m.features.lock.json", CATS)
    assert validate_repository(repo, features_lock=lock) == []


ENS, NVT = "movielens_ens/config.pbtxt", "movielens_nvt/config.pbtxt"


def test_ensemble_dtype_mismatch(repo):
    add_ensemble(repo, nvt_catcolumn=mc.TYPE_INT32)
    findings = validate_repository(repo)
    assert errors_of(findings) == {(ENS, "input_map")}, render_findings(findings)
    assert "TYPE_INT32" in findings[0].message and "TYPE_INT64" in findings[0].message


def test_ensemble_unknown_model(repo):
    add_ensemble(repo, ens_step_model="movielens_pre")
    assert errors_of(validate_repository(repo)) == {(ENS, "model_name"), (ENS, "input_map")}


def test_ensemble_wiring_and_names(repo):
    add_ensemble(repo)
    edit_config(repo, lambda c: c.ensemble_scheduling.step[1].input_map.pop("ROWINDEX"), model="movielens_ens")
    edit_config(repo, lambda c: c.ensemble_scheduling.step[1].output_map.update({"OUT": "OUTPUT0"}),
                model="movielens_ens")
    findings = validate_repository(repo)
    assert errors_of(findings) == {(ENS, "input_map"), (ENS, "output_map")}, render_findings(findings)


def test_ensemble_nvt_naming_and_version_folder(repo):
    add_ensemble(repo)
    shutil.rmtree(repo / "movielens_ens" / "1")
    findings = validate_repository(repo)
    assert errors_of(findings) == {(ENS, "version")}, render_findings(findings)
    nvt_dir = repo / "movielens_nvt"
    nvt_dir.rename(repo / "prep")
    edit_config(repo, lambda c: setattr(c, "name", "prep"), model="prep")
    edit_config(repo, lambda c: setattr(c.ensemble_scheduling.step[0], "model_name", "prep"), model="movielens_ens")
    warnings = {(f.file, f.field) for f in validate_repository(repo) if f.severity == WARNING}
    assert warnings == {(ENS, "model_name")}


def test_nvt_cats_against_lock_and_graph(repo, tmp_path):
    add_ensemble(repo)
    edit_config(repo, set_param("cats", '["movieId", "userId"]'), model="movielens_nvt")
    lock = write_lock(tmp_path / "m.features.lock.json", CATS)
    assert errors_of(validate_repository(repo, features_lock=lock)) == {(NVT, "cats")}
    edit_config(repo, set_param("cats", '["userId"]'), model="movielens_nvt")
    assert errors_of(validate_repository(repo)) == {(NVT, "cats")}


# ---- paths: --ps and --root-map ---------------------------------------------------------------------------------
def test_ps_outside_repository(repo, tmp_path):
    outside = tmp_path / "serving" / "ps.json"
    outside.parent.mkdir()
    shutil.move(repo / "ps.json", outside)
    assert errors_of(validate_repository(repo)) == {(CFG, "ps.json")}
    assert validate_repository(repo, ps=outside) == []


def make_absolute(repo: Path, prefix: str = "/model") -> None:
    edit_config(repo, set_param("config", f"{prefix}/movielens/1/movielens.json"))

    def fn(d):
        m = d["models"][0]
        for key in ("dense_file", "network_file"):
            m[key] = f"{prefix}/{m[key]}"
        m["sparse_files"] = [f"{prefix}/{p}" for p in m["sparse_files"]]
    edit_ps(repo, fn)


def test_garbage_graph_is_found_without_root_map(repo):
    """An absolute graph path without --root-map: the repository's own copy (the repository mounted at the model
    root) is checked, so a garbage graph JSON is an error, not a pass."""
    make_absolute(repo)
    (repo / "movielens" / "1" / "movielens.json").write_text("garbage{")
    result = CliRunner().invoke(validate_command, [str(repo)])
    assert result.exit_code == 1, result.output
    assert "movielens/1/movielens.json:1:1: error: syntax: invalid JSON" in result.output


def test_root_map(repo, tmp_path):
    make_absolute(repo)
    unmapped = validate_repository(repo)
    assert errors_of(unmapped) == set()
    assert {f.field for f in unmapped if f.severity == WARNING} == {"config", "network_file", "dense_file",
                                                                   "sparse_files"}
    assert all("--root-map /model=" in f.fix for f in unmapped)
    assert validate_repository(repo, root_map={"/model": repo}) == []
    wrong = validate_repository(repo, root_map={"/model": tmp_path})
    assert errors_of(wrong) == {(CFG, "config"), (PS, "network_file"), (PS, "dense_file"), (PS, "sparse_files")}


def test_repository_below_path(repo, tmp_path):
    """ctrgen's layout: generated/<name>/{<name>.json, model.py, triton/{<name>, <name>_nvt, <name>_ens, ps.json}}."""
    gen = tmp_path / "generated" / "movielens"
    gen.mkdir(parents=True)
    add_ensemble(repo)
    shutil.move(repo, gen / "triton")
    (gen / "model.py").write_text("# training script\n")
    make_absolute(gen / "triton")
    assert errors_of(validate_repository(gen)) == set()
    assert validate_repository(gen, root_map={"/model": gen / "triton"}) == []
    nested = validate_repository(gen, root_map={"/model": gen})  # wrong root: files are under triton/
    assert (("triton/ps.json", "network_file")) in errors_of(nested)


def test_root_map_longest_prefix_wins(tmp_path):
    from codegen.triton.lint.paths import PathResolver
    (tmp_path / "b" / "x").mkdir(parents=True)
    resolver = PathResolver(tmp_path, {"/model": tmp_path / "a", "/model/sub/": tmp_path / "b"})
    r = resolver.resolve("/model/sub/x", [tmp_path])
    assert (r.path, r.exists) == (tmp_path / "b" / "x", True)
    assert resolver.resolve("/model/y", [tmp_path]).path == tmp_path / "a" / "y"
    assert resolver.resolve("/modelx/y", [tmp_path]).unmapped


# ---- CLI --------------------------------------------------------------------------------------------------------
def invoke(*args: str):
    runner = CliRunner(mix_stderr=False)
    return runner.invoke(validate_command, [str(a) for a in args], catch_exceptions=False)


def test_cli_exit_codes(repo, tmp_path):
    assert invoke(repo).exit_code == 0
    edit_config(repo, set_param("slots", "3"))
    result = invoke(repo)
    assert result.exit_code == 1
    assert "movielens/config.pbtxt" in result.stdout and "slots" in result.stdout


@pytest.mark.parametrize("args", [
    ["{tmp}/missing"],
    ["{tmp}/empty"],
    ["{repo}", "--ps", "{tmp}/nope.json"],
    ["{repo}", "--features-lock", "{tmp}/nope.lock.json"],
    ["{repo}", "--features-lock", "{repo}/ps.json"],
    ["{repo}", "--root-map", "model"],
    ["{repo}", "--format", "yaml"],
])
def test_cli_unusable_input_exit_2_without_traceback(repo, tmp_path, args):
    (tmp_path / "empty").mkdir()
    result = invoke(*[a.format(tmp=tmp_path, repo=repo) for a in args])
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.strip()


def test_cli_json_format(repo):
    edit_config(repo, set_param("max_nnz", "0"))
    result = invoke(repo, "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["errors"] == 1 and data["warnings"] == 0
    (f,) = data["findings"]
    assert (f["file"], f["field"], f["severity"], f["actual"], f["expected"]) == (CFG, "max_nnz", "error", "0", "1")
    assert f["line"] and f["fix"]


def test_cli_root_map_and_ps(repo, tmp_path):
    make_absolute(repo, "/srv/models")
    outside = tmp_path / "ps.json"
    shutil.move(repo / "ps.json", outside)
    unmapped = invoke(repo, "--ps", outside)  # ps.json found; /srv/models/... paths cannot be checked here
    assert unmapped.exit_code == 0 and "warning: network_file" in unmapped.stdout, unmapped.stdout
    result = invoke(repo, "--ps", outside, "--root-map", f"/srv/models={repo}")
    assert result.exit_code == 0, result.stdout
    assert result.stdout == "ok: no findings\n"


def test_cli_strict(repo):
    make_absolute(repo)
    assert invoke(repo).exit_code == 0
    assert invoke(repo, "--strict").exit_code == 1


def test_cli_help_has_examples():
    result = invoke("--help")
    assert result.exit_code == 0
    assert "Examples:" in result.stdout and "--root-map /model=" in result.stdout


def test_attaches_to_a_click_group(repo):
    group = click.Group("ctrgen")
    group.add_command(validate_command, "validate")
    assert CliRunner().invoke(group, ["validate", str(repo)]).exit_code == 0


def test_output_is_deterministic(tmp_path):
    folder = write_case("merlin_v23.08_movielens_04", tmp_path / "case")
    first = render_findings(validate_repository(folder), "json")
    assert first == render_findings(validate_repository(folder), "json")
    keys = [f.sort_key() for f in validate_repository(folder)]
    assert keys == sorted(keys)
