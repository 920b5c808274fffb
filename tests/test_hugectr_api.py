"""The HugeCTR API table (codegen/hugectr/api_table.json) and its accessor, codegen/hugectr/api.py.

The facts below were read from each release's pybind sources; the table is checked here without a HugeCTR clone.
With HUGECTR_CLONE set to a HugeCTR clone, test_table_reproduces_from_clone also regenerates the table and requires
the committed file byte for byte (the test exists only then).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO

from codegen.hugectr import api as A
from codegen.hugectr import versions as V

TABLE = REPO / "codegen" / "hugectr" / "api_table.json"
ALL_RELEASES = ("3.2 3.3 3.4 3.5 3.6 3.7 3.8 3.9 4.0 4.1 4.2 4.3 23.02 23.04 23.05 23.06 23.08 23.09 23.12 24.04 24.06 "
                "25.03").split()


def params(func: str, release: str) -> dict[str, A.Param]:
    return {p.name: p for p in A.signature(func, release)}


# ---- releases ---------------------------------------------------------------------------------------------------

def test_every_release_from_3_2_to_25_03():
    assert list(A.RELEASES) == ALL_RELEASES
    assert list(V.RELEASES) == ALL_RELEASES
    assert sorted(ALL_RELEASES, key=A.release_key) == ALL_RELEASES
    assert A.release_key("23.04") == (23, 4) and A.release_key("3.2") == (3, 2)
    tags = json.loads(TABLE.read_text())["tags"]
    assert tags["3.3"] == "v3.3.1" and tags["23.06"] == "v23.06.01" and tags["23.04"] == "v23.04.00"


def test_profiles_and_generation_for_every_release():
    assert list(V.SUPPORTED) == list(ALL_RELEASES)
    assert V.STANDIN == ("3.2", "3.3", "4.3", "23.06")
    for r in ALL_RELEASES:
        p = V.profile(r)
        assert p is not None and p.release == A.release_key(r)
    assert V.profile("2.9") is None and V.profile("26.01") is None


# ---- facts at known points --------------------------------------------------------------------------------------

def test_create_solver():
    assert A.first_release("CreateSolver", arg="model_name") == "3.3"
    assert not A.has("CreateSolver", "3.2", arg="model_name") and A.has("CreateSolver", "25.03", arg="model_name")
    assert [p.name for p in A.signature("CreateSolver", "3.2")][:3] == ["seed", "lr_policy", "lr"]
    assert [p.name for p in A.signature("CreateSolver", "3.3")][:2] == ["model_name", "seed"]
    for r in ALL_RELEASES:
        ps = params("CreateSolver", r)
        assert ps["batchsize"].default == 2048 and ps["batchsize_eval"].default == 2048
        assert ps["lr"].default == 0.001 and ps["vvgpu"].default == [[0]]
        assert ps["metrics_spec"].default == {"MetricsType.AUC": 1.0}
        assert ps["lr_policy"].default == "LrPolicy_t.fixed" and ps["device_layout"].default == "DeviceLayout.LocalFirst"
        assert not any(p.required for p in ps.values())
    assert A.spans("CreateSolver", "is_dlrm") == (("3.2", "3.8"),)
    assert A.spans("CreateSolver", "training_callbacks") == (("23.04", None),)


def test_optimizers():
    assert A.enum_members("Optimizer_t", "4.2") == ("AdaGrad", "Adam", "MomentumSGD", "Nesterov", "SGD")
    assert A.first_release("Optimizer_t.Ftrl") == "4.3" and A.first_release("Optimizer_t.RMSProp") == "4.3"
    assert A.spans("CreateOptimizer", "beta1") == (("3.2", None),)
    assert [p.name for p in A.signature("CreateOptimizer", "23.04")][:5] == [
        "optimizer_type", "update_type", "beta", "lambda1", "lambda2"]
    assert params("CreateOptimizer", "3.2")["epsilon"].default == 1e-7
    assert params("CreateOptimizer", "3.2")["update_type"].default == "Update_t.Global"
    assert V.OPTIMIZERS["Ftrl"] == V.Span((4, 3))


def test_layers_and_dense_layer_args():
    assert A.first_release("Layer_t.MultiHeadAttention") == "3.7"
    assert A.first_release("DenseLayer", arg="num_attention_heads") == "4.1"
    assert A.first_release("DenseLayer", arg="projection_dim") == "4.3"
    assert A.spans("Layer_t.DotProduct") == (("3.2", "3.4"),)
    assert A.spans("Layer_t.FusedInnerProduct") == (("3.2", "23.12"),)
    assert A.spans("DenseLayer", "max_sequence_len") == (("3.9", "23.08"),)
    # the default of leading_dim changed: one fact per span
    assert params("DenseLayer", "23.06")["leading_dim"].default == 1
    assert params("DenseLayer", "23.08")["leading_dim"].default == 0
    dl = A.signature("DenseLayer", "4.3")
    assert [p.name for p in dl][:3] == ["layer_type", "bottom_names", "top_names"] and all(p.required for p in dl[:3])
    assert [p.name for p in dl].index("projection_dim") == [p.name for p in dl].index("weight_dims") + 1
    assert params("DenseLayer", "3.2")["gamma_init_type"].default == "Initializer_t.Default"
    assert V.LAYERS["MultiHeadAttention"] == V.Span((3, 7))
    assert V.DENSE_LAYER_ARGS["projection_dim"] == V.Span((4, 3))


def test_data_reader_and_embeddings():
    assert A.first_release("DataReaderParams", arg="read_file_sequentially") == "3.8"
    assert params("DataReaderParams", "4.3")["read_file_sequentially"].default is False
    dr = params("DataReaderParams", "23.06")
    assert dr["source"].required and dr["eval_source"].required and dr["check_type"].required
    assert isinstance(dr["async_param"].default, A.Unparsed) and dr["async_param"].default.startswith("AsyncParam{")
    assert A.spans("Embedding_t.HybridSparseEmbedding") == (("3.2", "24.04"),)
    assert A.has("Embedding_t.HybridSparseEmbedding", "23.06") and not A.has("Embedding_t.HybridSparseEmbedding", "25.03")
    assert A.first_release("SparseEmbedding", arg="workspace_size_per_gpu_in_mb") == "3.2"
    assert params("SparseEmbedding", "3.6")["workspace_size_per_gpu_in_mb"].required
    assert params("SparseEmbedding", "3.7")["workspace_size_per_gpu_in_mb"].default == 0
    for r in ALL_RELEASES:
        assert A.enum_members("Check_t", r) == ("Non", "Sum")


def test_overloads_are_merged():
    inp = params("Input", "23.06")
    assert inp["dense_dim"].required and not inp["label_dim"].required and not inp["label_dims"].required
    assert inp["label_dim"].default is A.NO_DEFAULT
    assert [p.name for p in A.signature("Input", "3.2")] == [
        "label_dim", "label_name", "dense_dim", "dense_name", "data_reader_sparse_param_array"]
    assert all(p.required for p in A.signature("Input", "3.2"))


def test_model_methods_and_the_embedding_cache():
    assert params("Model.fit", "3.2")["max_iter"].default == 2000
    assert A.spans("Model.train", "is_first_batch") == (("3.3", "23.04"),)
    assert A.spans("CreateETC") == (("3.3", "23.12"),) and A.spans("CreateMOS") == (("3.2", "3.3"),)
    assert A.spans("Model.set_source", "keyset") == (("3.2", "23.12"),)
    assert [p.name for p in A.signature("Model.save_params_to_files", "23.06")] == ["prefix", "iter"]
    assert A.has("Model.graph_to_json", "25.03") and A.has("inference.InferenceParams", "23.06")
    assert A.has("data.DataSourceParams", "4.1") and A.has("TrainPSType_t", "3.3")
    assert V.CONTINUOUS["train_is_first_batch"] == V.Span((3, 3), (23, 4))


def test_the_tools_module_is_in_the_table():
    assert params("tools.DataGeneratorParams", "23.06")["check_type"].default == "Check_t.Sum"
    assert A.spans("tools.DataGeneratorParams", "num_threads") == (("3.7", None),)
    assert V.ARGS["tools.DataGeneratorParams"]["num_threads"] == V.Span((3, 7))


def test_release_3_2_is_the_v3_2_tag():
    # v3.2.1 changed the API (CreateMOS(ps_types, ...), graph_analysis); "3.2" is v3.2 everywhere: the table's
    # CreateMOS is the model oversubscriber ctrgen writes, and 3.2 has no automatic Slices.
    assert A.TAGS["3.2"] == "v3.2" and A.TAGS["3.3"] == "v3.3.1" and A.TAGS["23.06"] == "v23.06.01"
    assert [p.name for p in A.signature("CreateMOS", "3.2")] == [
        "train_from_scratch", "use_host_memory_ps", "trained_sparse_models", "dest_sparse_models"]
    assert not A.has("TrainPSType_t", "3.2") and not A.has("CreateHMemCache", "3.2")
    assert not V.BEHAVIOUR["auto_slice"].covers((3, 2)) and V.BEHAVIOUR["auto_slice"].covers((3, 3))


# ---- the accessor's messages ------------------------------------------------------------------------------------

def test_error_text_names_the_first_release_that_has_it():
    assert A.missing("Layer_t.MultiHeadAttention", "3.4") == (
        "Layer_t.MultiHeadAttention is not in HugeCTR 3.4; it exists in HugeCTR 3.7 and later")
    assert A.missing("CreateETC", "25.03") == (
        "CreateETC is not in HugeCTR 25.03; it exists in HugeCTR 3.3 up to (not including) 23.12")
    assert A.missing("DenseLayer", "4.0", arg="num_attention_heads") == (
        "DenseLayer argument 'num_attention_heads' is not in HugeCTR 4.0; it exists in HugeCTR 4.1 and later")
    assert A.missing("DenseLayer", "4.3", arg="projection_dim") is None
    with pytest.raises(A.ApiError, match="Model.get_embedding_training_cache is not in HugeCTR 3.2; it exists in "
                                         r"HugeCTR 3.3 up to \(not including\) 23.12"):
        A.signature("Model.get_embedding_training_cache", "3.2")
    with pytest.raises(A.ApiError, match="not a HugeCTR function, class or enum in any release"):
        A.first_release("NoSuchThing")
    assert not A.has("NoSuchThing", "3.2")
    with pytest.raises(A.ApiError, match="not an argument of CreateSolver in any HugeCTR release"):
        A.first_release("CreateSolver", arg="no_such_arg")
    with pytest.raises(A.ApiError, match="not a known release"):
        A.has("CreateSolver", "3.1")
    p = V.profile("3.4")
    assert p.missing(V.LAYERS, "MultiHeadAttention", "layer type") == (
        "layer type 'MultiHeadAttention' is not in HugeCTR 3.4; it exists in HugeCTR 3.7 and later")


# ---- the file ---------------------------------------------------------------------------------------------------

def test_table_is_one_sorted_fact_per_line():
    lines = TABLE.read_text().splitlines()
    start, end = lines.index('  "facts": ['), lines.index("  ]")
    facts = [json.loads(line.strip().rstrip(",")) for line in lines[start + 1:end]]
    assert len(facts) == end - start - 1 and len(facts) > 500
    keys = {json.dumps(f, sort_keys=True) for f in facts}
    assert len(keys) == len(facts)
    for f in facts:
        assert f["since"] in ALL_RELEASES and (f["until"] is None or A.release_key(f["until"]) > A.release_key(f["since"]))
    # every release's parameter chains are complete (signature() checks the 'after' links)
    for r in ALL_RELEASES:
        for func in A.functions(r):
            A.signature(func, r)


if os.environ.get("HUGECTR_CLONE"):
    def test_table_reproduces_from_clone(tmp_path):
        """tools/hugectr_api.py run on $HUGECTR_CLONE writes the committed table byte for byte."""
        clone = os.environ["HUGECTR_CLONE"]
        assert os.path.isdir(clone), f"HUGECTR_CLONE={clone} is not a directory"
        out = tmp_path / "api_table.json"
        subprocess.run([sys.executable, str(REPO / "tools" / "hugectr_api.py"), clone, "-o", str(out)], check=True,
                       timeout=600)
        assert out.read_bytes() == TABLE.read_bytes()


def test_dense_layer_argument_types_come_from_the_api_table():
    """DenseLayer's C++ types are api_table.json's (read from each release's pybind sources), with the spec's bound of
    2**31-1 on every integer: num_layers is an int, index and shape are int64 lists, num_output a size_t."""
    from codegen.hugectr.api import cpp_type
    from codegen.hugectr.arg_types import dense_layer_problem

    assert [cpp_type("DenseLayer", "23.08", a) for a in ("num_layers", "index", "shape", "num_output")] == \
        ["int32", "list[int64]", "list[int64]", "uint64"]
    assert dense_layer_problem("23.08", "num_layers", "2") == "must be an integer (int), not a string '2'"
    assert dense_layer_problem("23.08", "num_output", -1) == "-1 is out of range (size_t: from 0 to 2**31-1)"
    assert dense_layer_problem("23.08", "shape", [4, 2**31]) == \
        "[1] 2147483648 is out of range (int64_t: from -2**31 to 2**31-1)"
    assert dense_layer_problem("23.08", "eps", 1e39).startswith("1e+39 does not fit the C++ float")
    assert dense_layer_problem("23.08", "ranges", [[0, 1], [1]]) == "must be a list of [start, end] pairs"
    assert dense_layer_problem("23.08", "shape", [1, -2]) == ""


def test_given_or_default_reads_the_table_and_refuses_what_the_release_lacks():
    """The renderers' defaults (issue 42): a given argument wins; else the release's own default from the table, and
    a release without the argument is refused, never given a guessed value."""
    assert A.given_or_default((("dropout_rate", 0.25),), "DenseLayer", "dropout_rate", "23.06") == 0.25
    assert A.given_or_default({}, "DenseLayer", "dropout_rate", "23.06") == 0.5
    assert A.given_or_default({}, "Model.fit", "snapshot", "3.2") == 10000
    assert A.given_or_default({}, "DenseLayer", "use_bias", "4.2") is True
    with pytest.raises(A.ApiError, match="use_bias"):
        A.given_or_default({}, "DenseLayer", "use_bias", "4.1")    # MLP's use_bias came in 4.2
    with pytest.raises(A.ApiError, match="dim"):
        A.given_or_default({}, "DenseLayer", "dim", "23.06")       # Select's dim came in 23.08
