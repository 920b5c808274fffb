"""Import of the constructs the published corpus needed beyond the first round: each is read into the spec, written
back by generate call for call, and refused (naming what is missing) where its release lacks it."""

from __future__ import annotations

from pathlib import Path

import pytest

from codegen.errors import UserError
from codegen.importer import import_source
from codegen.importer.write import write_import
from codegen.pipeline import open_spec, render_spec
from codegen.spec.load import load_spec
from test_import import NORM_DCN, _roundtrip

INFERENCE = """model.export_predictions("/out/pred_2000", "/out/label_2000")
emb_trained = model.check_out_tensor("sparse_embedding1", hugectr.Tensor_t.Evaluate)

from hugectr.inference import InferenceModel, InferenceParams

params = InferenceParams(model_name="dcn", max_batchsize=1024, hit_rate_threshold=1.0,
                         dense_model_file="/out/dcn_dense_2000.model", sparse_model_files=["/out/dcn0_sparse_2000.model"],
                         device_id=0, use_gpu_embedding_cache=False, cache_size_percentage=1.0, i64_input_key=False)
model_inf = InferenceModel("dcn.json", params)
pred = model_inf.predict(1, "./data/file_list_test.txt", hugectr.DataReaderType_t.Norm, hugectr.Check_t.Sum)
emb_inferred = model_inf.check_out_tensor("sparse_embedding1")
other = model_inf.check_out_tensor(tensor_name="fc3")
"""


def test_inference_model_methods_after_predict_round_trip(tmp_path: Path):
    src = tmp_path / "check_out.py"
    src.write_text(NORM_DCN + INFERENCE, encoding="utf-8")
    spec, diffs = _roundtrip(tmp_path, src, "23.06")
    assert diffs == []
    o = load_spec(spec).spec.offline_inference
    assert [(c.method, c.args) for c in o.then] == [("check_out_tensor", {"tensor_name": "sparse_embedding1"}),
                                                    ("check_out_tensor", {"tensor_name": "fc3"})]
    model_py = (tmp_path / "generated" / "check_out" / "model.py").read_text(encoding="utf-8")
    assert 'inference_model.check_out_tensor(tensor_name="sparse_embedding1")' in model_py


def test_inference_model_method_of_a_later_release_is_refused(tmp_path: Path):
    src = tmp_path / "check_out.py"
    src.write_text(NORM_DCN + INFERENCE, encoding="utf-8")
    with pytest.raises(UserError, match=r"hugectr\.inference\.InferenceModel\.check_out_tensor is "
                                        r"not in HugeCTR 4\.0; it exists in HugeCTR 4\.1"):
        write_import(import_source(src, "4.0"), tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_inference_then_is_checked_against_the_release(tmp_path: Path):
    src = tmp_path / "check_out.py"
    src.write_text(NORM_DCN + INFERENCE, encoding="utf-8")
    spec, _ = _roundtrip(tmp_path, src, "23.06")
    spec.write_text(spec.read_text(encoding="utf-8").replace('hugectr_version: "23.06"', 'hugectr_version: "4.0"'),
                    encoding="utf-8")
    with pytest.raises(UserError) as exc:
        render_spec(open_spec(spec))
    text = exc.value.format()
    assert "offline_inference.then[0].method" in text and "it exists in HugeCTR 4.1" in text
