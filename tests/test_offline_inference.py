"""Offline inference after training (seed 004 measures its AUC this way): enum arguments are checked when the spec is
generated, and `then: evaluate` prints the AUC it computes."""

from __future__ import annotations

import re

from conftest import run_ctrgen
from hugectr_run import calls_named, run_with_standin
from specfactory import dcn_spec, write_spec

LOCK = {"ctrgen_features_lock": 1, "source": "recorded", "provenance": "test",
        "categorical": [{"name": f"C{i}", "dtype": "int64", "cardinality": 1000 + i} for i in range(1, 27)],
        "continuous": [{"name": f"I{i}", "dtype": "float32"} for i in range(1, 14)],
        "labels": [{"name": "label", "dtype": "float32"}]}


def _spec(predict_reader: str, evaluate_reader: str = "DataReaderType_t.Norm") -> dict:
    spec = dcn_spec("23.06", gpus=[0])
    spec["training"].update(max_iter=10, snapshot=0)
    spec["offline_inference"] = {
        "api": "CreateInferenceSession",
        "params": {"model_name": "dcn", "max_batchsize": 64, "hit_rate_threshold": 1.0,
                   "dense_model_file": "_dense_10.model", "sparse_model_files": ["0_sparse_10.model"],
                   "use_gpu_embedding_cache": False, "cache_size_percentage": 0.5, "i64_input_key": False},
        "predict": {"num_batches": 1, "source": "./file_list_test.txt", "data_reader_type": predict_reader,
                    "check_type": "Check_t.Sum"},
        "then": [{"method": "evaluate", "args": {"num_batches": 2, "source": "./file_list_test.txt",
                                                 "data_reader_type": evaluate_reader, "check_type": "Check_t.Sum"}}],
    }
    return spec


def test_then_evaluate_prints_the_auc(tmp_path):
    spec = write_spec(tmp_path / "specs", _spec("DataReaderType_t.Norm"), LOCK, name="dcn")
    proc = run_ctrgen("generate", str(spec), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    script = tmp_path / "out" / "dcn" / "model.py"
    assert "auc = inference_model.evaluate(num_batches=2, " in script.read_text()
    result = run_with_standin(script, "23.06", cwd=tmp_path, env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert result.returncode == 0, result.stderr
    assert calls_named(result, "InferenceSession.evaluate")[0]["kwargs"]["num_batches"] == 2
    # The stand-in computes nothing: evaluate returns 0.0, and the script prints what it got.
    assert "offline inference AUC: 0.0" in result.stdout.splitlines()


def test_enum_arguments_are_checked_at_generation(tmp_path):
    """`data_reader_type: Parquet` (a string where an enum member belongs) used to reach HugeCTR as a string and
    fail only when model.py ran; an unknown member is named with the members the release has."""
    for i, (predict, evaluate, field, text) in enumerate([
            ("Parquet", "DataReaderType_t.Norm", "offline_inference.predict.data_reader_type",
             "takes a DataReaderType_t member written DataReaderType_t.Member"),
            ("DataReaderType_t.Norm", "DataReaderType_t.Csv", "offline_inference.then[0].args.data_reader_type",
             "DataReaderType_t.Csv is not a member of DataReaderType_t in any HugeCTR release (HugeCTR 23.06 has "
             "DataReaderType_t.Norm, DataReaderType_t.Parquet, DataReaderType_t.Raw"),
            ("Check_t.Sum", "DataReaderType_t.Norm", "offline_inference.predict.data_reader_type",
             "takes a DataReaderType_t member, not a Check_t one")]):
        spec = write_spec(tmp_path / f"s{i}", _spec(predict, evaluate), LOCK, name="dcn")
        proc = run_ctrgen("generate", str(spec), "--out", str(tmp_path / f"out{i}"))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        line = next(ln for ln in proc.stderr.splitlines() if f": {field}: " in ln)
        assert re.search(r"dcn\.yaml:\d+:\d+: ", line) and text in line, line
        assert not (tmp_path / f"out{i}").exists()


def test_solver_enum_and_bool_arguments(tmp_path):
    """The same rule for every args: map: CreateSolver's device_layout (an enum with a default) and a bool."""
    from codegen.hugectr.arg_types import arg_problem

    assert "DeviceLayout.Member" in arg_problem("CreateSolver", "23.06", "device_layout", "LocalFirst")
    assert "DeviceLayout.Bogus is not a member of DeviceLayout in any" in arg_problem("CreateSolver", "23.06", "device_layout", "DeviceLayout.Bogus")
    assert arg_problem("CreateSolver", "23.06", "device_layout", "DeviceLayout.NodeFirst") == ""
    spec = dcn_spec("23.06", gpus=[0])
    spec["solver"]["args"] = {"device_layout": "NodeFirst"}
    path = write_spec(tmp_path / "s", spec, LOCK, name="dcn")
    proc = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "solver.args.device_layout: " in proc.stderr
