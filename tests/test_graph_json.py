"""The graph JSON is byte-identical to what HugeCTR's graph_to_json writes (docs/hugectr_facts.md "Graph JSON")."""

from __future__ import annotations

import json

import pytest

from specfactory import CRITEO_LOCK, dcn_spec, write_spec
from upstream import reference_dcn_json

from conftest import run_ctrgen


def generate(tmp_path, spec) -> str:
    path = write_spec(tmp_path / "specs", spec, CRITEO_LOCK)
    result = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    return (tmp_path / "out" / "dcn" / "dcn.json").read_text()


def test_dcn_v23_06_is_byte_identical_to_the_reference(tmp_path):
    ours = generate(tmp_path, dcn_spec("23.06"))
    assert ours == reference_dcn_json()
    assert not ours.endswith("\n")


def test_dcn_v3_3_has_no_concat_axis_and_the_old_vocabulary_formula(tmp_path):
    doc = json.loads(generate(tmp_path, dcn_spec("3.3")))
    concats = [layer for layer in doc["layers"] if layer["type"] == "Concat"]
    assert concats and all("axis" not in layer for layer in concats)
    # v3.2-v3.4: ws*1024*1024 // (4*vec) per GPU = 1130496, times 4 GPUs (hugectr.md §2.11 variants)
    assert doc["layers"][1]["sparse_embedding_hparam"]["max_vocabulary_size_global"] == 4521984
    slices = [layer for layer in doc["layers"] if layer["type"] == "Slice"]
    assert slices == [{"bottom": "concat1", "ranges": [[0, 429], [0, 429]], "top": ["concat1_slice0", "concat1_slice1"],
                       "type": "Slice"}]


def test_dcn_v4_3_json_equals_v23_06(tmp_path):
    # hugectr.md §2.9: the writer is unchanged from v4.3 through v23.06.
    assert generate(tmp_path / "a", dcn_spec("4.3")) == generate(tmp_path / "b", dcn_spec("23.06"))


def test_v3_2_requires_explicit_slices(tmp_path):
    path = write_spec(tmp_path / "specs", dcn_spec("3.2"), CRITEO_LOCK)
    result = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "['concat1'] feed several layers" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_model_name_is_written_when_requested(tmp_path):
    spec = dcn_spec("23.06")
    spec["solver"]["model_name"] = True
    doc = json.loads(generate(tmp_path, spec))
    assert doc["model_name"] == "dcn"
    text = (tmp_path / "out" / "dcn" / "dcn.json").read_text()
    assert text.endswith('  ],\n  "model_name": "dcn"\n}')


@pytest.mark.parametrize("gpus,expected", [([0], 376832), ([0, 1], 753664)])
def test_vocabulary_scales_with_gpu_count(tmp_path, gpus, expected):
    doc = json.loads(generate(tmp_path, dcn_spec("23.06", gpus)))
    assert doc["layers"][1]["sparse_embedding_hparam"]["max_vocabulary_size_global"] == expected
