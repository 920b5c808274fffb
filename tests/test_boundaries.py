"""Every validation rule with a boundary, on both sides of it (issue 17 item 2): the value at the boundary is
accepted, one step past it is refused with the rule's own message on the field's line. In-process and fast: the spec
is loaded (pydantic rules) or built into the typed model (the build's rules) from a project in tmp_path, nothing is
rendered. docs/testing.md lists every rule and the tests that pin it (this module and the older ones).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from codegen.errors import UserError
from codegen.features import read_lock
from codegen.lock import load_features
from codegen.model.build import build_job as build
from codegen.specfile.context import open_spec
from codegen.specfile.load import load_spec
from conftest import REPO

BASE = yaml.safe_load((REPO / "specs" / "movielens.yaml").read_text())
for _key in ("workflow", "features_lock", "etl"):
    BASE.pop(_key, None)
LOCK = json.loads((REPO / "specs" / "movielens.features.lock.json").read_text())


def spec_with(changes: dict[str, object], base: dict | None = None) -> dict:
    """BASE with dotted paths set (``solver.args.num_samples``; a number part indexes a list); None deletes."""
    spec = copy.deepcopy(base if base is not None else BASE)
    for dotted, value in changes.items():
        node: object = spec
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})  # type: ignore[index,union-attr]
        key: object = int(leaf) if isinstance(node, list) else leaf
        if value is None:
            node.pop(key, None)  # type: ignore[union-attr]
        else:
            node[key] = value  # type: ignore[index]
    return spec


def project(tmp_path: Path, spec: dict, lock: dict | None = None) -> Path:
    folder = tmp_path / "specs"
    folder.mkdir(parents=True, exist_ok=True)
    spec = {**spec, "name": "m"}
    (folder / "m.features.lock.json").write_text(json.dumps(lock or LOCK))
    path = folder / "m.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def load(tmp_path: Path, spec: dict) -> None:
    load_spec(project(tmp_path, spec))


def build_job(tmp_path: Path, spec: dict, lock: dict | None = None):
    ctx = open_spec(project(tmp_path, spec, lock))
    features, _ = load_features(ctx, check_stale=False)
    return build(ctx, features)


def refused(call, field: str, fragment: str) -> None:
    """``call()`` fails with one problem: on ``field`` (dotted; list indexes are shown as ``[0]``), at a line of the
    spec, with ``fragment`` in the message."""
    field = re.sub(r"\.(\d+)", r"[\1]", field)
    with pytest.raises(UserError) as info:
        call()
    # All problems of an input are reported at once: the rule's own is among them (others follow from the change).
    assert any(p.field == field and fragment in p.message and p.line is not None for p in info.value.problems), \
        info.value.format()


def both_sides(tmp_path: Path, step, field: str, ok: dict, bad: dict, fragment: str) -> None:
    step(tmp_path / "ok", spec_with(ok))
    refused(lambda: step(tmp_path / "bad", spec_with(bad)), field, fragment)


# ---- the spec's own types (codegen/specfile/model.py, pydantic) -------------------------------------------------------------

INT32 = 2**31 - 1
FLT_MAX = 3.4028234663852886e38                 # the largest finite C++ float
LE_INT32 = "less than or equal to 2147483647 (2**31-1, the C++ int it becomes)"

# (field as reported, accepted value, refused value, message fragment)
SPEC_BOUNDS = [
    ("solver.batchsize", 1, 0, "greater than 0"),
    ("solver.batchsize", INT32, INT32 + 1, LE_INT32),
    ("solver.batchsize_eval", INT32, INT32 + 1, LE_INT32),
    ("solver.max_eval_batches", 1, 0, "greater than 0"),
    ("solver.warmup_steps", 0, -1, "greater than or equal to 0"),     # 0 before 23.04: test_lr_schedule_rules.py
    ("solver.decay_start", 0, -1, "greater than or equal to 0"),
    ("solver.decay_steps", INT32, INT32 + 1, LE_INT32),
    ("solver.seed", 0, -1, "greater than or equal to 0"),
    ("solver.seed", 2**64 - 1, 2**64, "(2**64-1, the C++ uint64 it becomes)"),
    ("solver.lr", 1e-300, 0.0, "greater than 0"),
    ("solver.lr", FLT_MAX, 3.5e38, "(FLT_MAX, the C++ float it becomes)"),
    ("solver.end_lr", -FLT_MAX, -3.5e38, "(FLT_MAX, the C++ float it becomes)"),
    ("optimizer.beta1", FLT_MAX, 3.5e38, "(FLT_MAX, the C++ float it becomes)"),
    ("optimizer.epsilon", -FLT_MAX, -3.5e38, "(FLT_MAX, the C++ float it becomes)"),
    ("triton.hugectr.default_value_for_each_table", FLT_MAX, 3.5e38, "(FLT_MAX, the C++ float it becomes)"),
    ("solver.vvgpu.0.0", 0, -1, "greater than or equal to 0"),
    ("data.num_workers", 1, 0, "greater than 0"),
    ("data.train_files", INT32, INT32 + 1, LE_INT32),
    ("input.label_dim", 1, 0, "greater than or equal to 1"),
    ("input.label_dim", 4096, 4097, "less than or equal to 4096"),
    ("input.sparse.0.nnz_per_slot", 1, 0, "greater than 0"),
    ("embeddings.0.embedding_vec_size", 1, 0, "greater than or equal to 1"),
    ("embeddings.0.embedding_vec_size", 1024, 1025, "less than or equal to 1024"),
    ("embeddings.0.workspace_size_per_gpu_in_mb", INT32, INT32 + 1, LE_INT32),
    ("model.units.0", 1, 0, "greater than 0"),
    ("model.dropout", 0.0, -1e-9, "greater than or equal to 0"),
    ("model.dropout", 0.999999, 1.0, "less than 1"),
    ("training.max_iter", 0, -1, "greater than or equal to 0"),
    ("training.display", 1, 0, "greater than 0"),
    ("training.eval_interval", INT32, INT32 + 1, LE_INT32),
    ("training.snapshot", 0, -1, "greater than or equal to 0"),
    ("triton.max_batch_size", 1, 0, "greater than 0"),
    ("triton.version", 1, 0, "greater than 0"),
    ("triton.hugectr.count", 1, 0, "greater than 0"),
    ("triton.hugectr.gpucacheper", 1.0, 1.000001, "less than or equal to 1"),
    ("triton.hugectr.gpucacheper", 1e-9, 0.0, "greater than 0"),
    ("triton.hugectr.hit_rate_threshold", 0.0, -1e-9, "greater than or equal to 0"),
    ("triton.hugectr.hit_rate_threshold", 1.0, 1.000001, "less than or equal to 1"),
    ("triton.hugectr.cache_refresh_percentage_per_iteration", 1.0, 1.000001, "less than or equal to 1"),
    ("triton.hugectr.num_of_refresher_buffer_in_pool", 1, 0, "greater than 0"),
    ("triton.preprocessing.instance.count", 1, 0, "greater than 0"),
    ("triton.preprocessing.dynamic_batching.max_queue_delay_microseconds", 0, -1, "greater than or equal to 0"),
    ("triton.preprocessing.dynamic_batching.max_queue_delay_microseconds", 1_000_000, 1_000_001,
     "less than or equal to 1000000"),
    ("triton.torch.threads", 1, 0, "greater than or equal to 1"),
    ("triton.torch.threads", 256, 257, "less than or equal to 256"),
]


@pytest.mark.parametrize("field, ok, bad, fragment", SPEC_BOUNDS,
                         ids=[f"{f}={bad}" for f, _, bad, _ in SPEC_BOUNDS])
def test_spec_number_bounds(tmp_path, field, ok, bad, fragment):
    both_sides(tmp_path, load, field, {field: ok}, {field: bad}, fragment)


NAME_64, NAME_65 = "n" * 64, "n" * 65


@pytest.mark.parametrize("field, ok, bad, fragment", [
    ("embeddings.0.name", NAME_64, NAME_65, "at most 64 characters"),
    ("input.label_name", "t" * 128, "t" * 129, "at most 128 characters"),
    ("embeddings.0.name", "_a1", "1a", "should match pattern"),                 # an identifier
    ("input.dense_name", "a.b-c", "a b", "should match pattern"),               # a tensor name
    ("triton.model_root", "/", "model", "should match pattern"),                 # absolute
    ("triton.hugectr.snapshot_prefix", "a-b.c_", "a/b", "should match pattern"),
], ids=["name-64", "tensor-name-128", "identifier", "tensor-name", "model-root", "snapshot-prefix"])
def test_spec_name_bounds(tmp_path, field, ok, bad, fragment):
    changes_ok, changes_bad = {field: ok}, {field: bad}
    if field == "embeddings.0.name":    # the model names its embedding: keep the preset's wiring out of the way
        changes_ok["embeddings.0.input"] = changes_bad["embeddings.0.input"] = "data1"
    both_sides(tmp_path, load, field, changes_ok, changes_bad, fragment)


@pytest.mark.parametrize("field, one", [("data.train", ["a"]), ("solver.vvgpu", [[0]]),
                                       ("input.sparse", [{"name": "data1"}]), ("features.label", ["rating"])])
def test_spec_lists_need_one_item(tmp_path, field, one):
    both_sides(tmp_path, load, field, {field: one}, {field: []}, "must have at least 1 item")


def test_worker_buffers_at_least_the_instance_count(tmp_path):
    both_sides(tmp_path, load, "triton.hugectr",
               {"triton.hugectr.count": 2, "triton.hugectr.num_of_worker_buffer_in_pool": 2},
               {"triton.hugectr.count": 2, "triton.hugectr.num_of_worker_buffer_in_pool": 1},
               "num_of_worker_buffer_in_pool must be >= count")


def test_instance_gpus_only_with_kind_gpu(tmp_path):
    both_sides(tmp_path, load, "triton.preprocessing.instance",
               {"triton.preprocessing.instance": {"kind": "KIND_GPU", "gpus": [0]}},
               {"triton.preprocessing.instance": {"kind": "KIND_CPU", "gpus": [0]}},
               "gpus is only valid with kind: KIND_GPU")


# ---- args: maps (generic JSON-like values, then the C++ type of the HugeCTR parameter) -----------------------------------

@pytest.mark.parametrize("ok, bad", [(-(2**63), -(2**63) - 1), (2**64 - 1, 2**64)], ids=["low", "high"])
def test_args_integers_without_a_known_type_fit_64_bits(tmp_path, ok, bad):
    # checked when the spec is read, before the argument is looked up in the release (x is none of HugeCTR's)
    both_sides(tmp_path, load, "solver.args.x", {"solver.args.x": ok}, {"solver.args.x": bad},
               f"{bad} does not fit a 64-bit integer")


def test_args_nesting_depth(tmp_path):
    def nested(n):
        value: object = 1
        for _ in range(n):
            value = [value]
        return value
    both_sides(tmp_path, load, "solver.args.x", {"solver.args.x": nested(8)}, {"solver.args.x": nested(9)},
               "nested too deeply")


# (the spec's args: map, argument, C++ type as the message names it, accepted, refused) at HugeCTR 3.3; the types
# are api_table.json's, read from the release's pybind sources (DataReaderParams(..., long long num_samples, ...)).
ARG_TYPES = [
    ("data.args", "num_samples", "long long", 2**63 - 1, 2**63),
    ("data.args", "num_samples", "long long", -(2**63), -(2**63) - 1),
    ("data.args", "cache_eval_data", "int", INT32, INT32 + 1),
    ("data.args", "cache_eval_data", "int", -(2**31), -(2**31) - 1),
    ("solver.args", "num_iterations_statistics", "size_t / uint64", 0, -1),
    ("solver.args", "num_iterations_statistics", "size_t / uint64", 2**64 - 1, 2**64),
    ("training.args", "snapshot_prefix", None, "x", None),
]


@pytest.mark.parametrize("section, arg, cpp, ok, bad", ARG_TYPES[:-1],
                         ids=[f"{a}={bad}" for _, a, _, _, bad in ARG_TYPES[:-1]])
def test_args_integers_fit_the_cpp_type_they_become(tmp_path, section, arg, cpp, ok, bad):
    field = f"{section}.{arg}"
    fragment = "does not fit a 64-bit integer" if not -(2**63) <= bad <= 2**64 - 1 else \
        f"{bad} does not fit the C++ {cpp} it becomes"
    step = load if "64-bit" in fragment else build_job
    both_sides(tmp_path, step, field, {field: ok}, {field: bad}, fragment)


@pytest.mark.parametrize("value, fragment", [
    (1.0, "must be an integer (int), not 1.0"), (True, "must be an integer (int), not a boolean"),
    ("1", "must be an integer (int), not a string '1'"),
])
def test_args_strict_types_where_the_cpp_type_is_an_int(tmp_path, value, fragment):
    build_job(tmp_path / "ok", spec_with({"data.args.cache_eval_data": 1}))
    refused(lambda: build_job(tmp_path / "bad", spec_with({"data.args.cache_eval_data": value})),
            "data.args.cache_eval_data", fragment)


def test_args_floats_fit_the_cpp_float(tmp_path):
    # DataGeneratorParams(..., float alpha, ...)
    gen = {"format": "DataReaderType_t.Parquet", "label_dim": 1, "dense_dim": 0, "num_slot": 2,
           "source": "a/_file_list.txt", "eval_source": "b/_file_list.txt", "slot_size_array": [10, 10]}
    both_sides(tmp_path, build_job, "data.generate.alpha",
               {"data.generate": {**gen, "alpha": 3.4028234663852886e38}},
               {"data.generate": {**gen, "alpha": 3.5e38}}, "does not fit the C++ float it becomes")
    refused(lambda: build_job(tmp_path / "str", spec_with({"data.generate": {**gen, "alpha": "1.2"}})),
            "data.generate.alpha", "must be a number (float), not a string")


def test_args_lists_are_checked_per_element(tmp_path):
    # DataReaderParams(..., std::vector<long long>& slot_size_array, ...) is its own field here: a DataGeneratorParams
    # list instead (const std::vector<size_t>& slot_size_array)
    gen = {"format": "DataReaderType_t.Parquet", "label_dim": 1, "dense_dim": 0, "num_slot": 2,
           "source": "a/_file_list.txt", "eval_source": "b/_file_list.txt"}
    both_sides(tmp_path, build_job, "data.generate.slot_size_array",
               {"data.generate": {**gen, "slot_size_array": [0, 2**64 - 1]}},
               {"data.generate": {**gen, "slot_size_array": [0, -1]}},
               "[1] -1 does not fit the C++ size_t / uint64 it becomes")


# ---- the build (codegen/graph/build.py) --------------------------------------------------------------------------------

def test_max_iter_above_zero_in_iteration_mode(tmp_path):
    both_sides(tmp_path, build_job, "training.max_iter", {"training.max_iter": 1}, {"training.max_iter": 0},
               "Require max_iter>0 under non-epoch mode")


def test_num_epochs_above_zero_in_epoch_mode(tmp_path):
    epoch = {"solver.repeat_dataset": False, "training.max_iter": None}
    both_sides(tmp_path, build_job, "training.num_epochs", {**epoch, "training.num_epochs": 1},
               {**epoch, "training.num_epochs": 0}, "Require num_epochs>0 under epoch mode")


def test_parquet_needs_a_file_per_gpu(tmp_path):
    gpus = {"solver.vvgpu": [[0, 1]]}
    both_sides(tmp_path, build_job, "data.train_files", {**gpus, "data.train_files": 2},
               {**gpus, "data.train_files": 1}, "1 Parquet file(s) for 2 GPUs")


@pytest.mark.parametrize("dtype, total_ok", [("int32", 2**32), ("int64", 2**63)])
def test_slot_offsets_fit_the_key_type_at_the_boundary(tmp_path, dtype, total_ok):
    """Keys are ids plus the slot's offset (the sum of the cardinalities before it, hugectr.md §1.2): the largest
    key is the sum of all cardinalities minus one, so the sum may equal 2**32 (unsigned int) or 2**63 (long long)."""
    def lock_of(total):
        lock = copy.deepcopy(LOCK)
        first = total // 2
        for column, card in zip(lock["categorical"], (first, total - first)):
            column["cardinality"], column["dtype"] = card, dtype
        return lock
    build_job(tmp_path / "ok", BASE, lock_of(total_ok))
    refused(lambda: build_job(tmp_path / "bad", BASE, lock_of(total_ok + 1)), "features.categorical",
            f"the cardinalities add up to {total_ok + 1}, more keys than")


# ---- the features lock (codegen/features.py) ---------------------------------------------------------------------------

@pytest.mark.parametrize("key, ok, bad, fragment", [
    ("cardinality", 1, 0, "cardinality must be a positive integer of at most 2**63-1"),
    ("max_len", 1, 0, "max_len must be a positive integer of at most 2**31-1"),
    ("max_len", INT32, INT32 + 1, "max_len must be a positive integer of at most 2**31-1"),
])
def test_lock_column_bounds(tmp_path, key, ok, bad, fragment):
    def write(value, name):
        lock = copy.deepcopy(LOCK)
        lock["categorical"][0][key] = value
        if key == "max_len":
            lock["categorical"][0]["multi_hot"] = True
        path = tmp_path / f"{name}.features.lock.json"
        path.write_text(json.dumps(lock, indent=2))
        return path
    assert getattr(read_lock(write(ok, "ok")).categorical[0], key) == ok
    refused(lambda: read_lock(write(bad, "bad")), "categorical[0]", fragment)


# ---- other example specs as the base: launch targets, continuous training, the ETL section --------------------------

CRITEO_LOCK = json.loads((REPO / "specs" / "criteo.features.lock.json").read_text())


def example(name: str, keep_etl: bool = False) -> dict:
    spec = yaml.safe_load((REPO / "specs" / f"{name}.yaml").read_text())
    for key in ("workflow", "features_lock") + (() if keep_etl else ("etl",)):
        spec.pop(key, None)
    return spec


def loaded_job(tmp_path: Path, spec: dict, lock: dict):
    ctx = open_spec(project(tmp_path, spec, lock))
    features, _ = load_features(ctx, check_stale=False)
    return ctx.loaded, build(ctx, features)


@pytest.mark.parametrize("param, ok, bad, field, fragment", [
    ({"type": "double", "min": 0.001}, {"max": 0.0011}, {"max": 0.001}, "max", "max 0.001 must be greater than min"),
    ({"type": "double", "max": 0.01, "scale": "log"}, {"min": 1e-12}, {"min": 0.0}, "min", "a log scale needs min > 0"),
    ({"type": "discrete"}, {"values": [0.4, 0.5]}, {"values": [0.5, 0.5]}, "values",
     "discrete values must be distinct numbers in increasing order"),
], ids=["max-above-min", "log-min-above-0", "discrete-increasing"])
def test_vertex_study_parameter_bounds(tmp_path, param, ok, bad, field, fragment):
    from codegen.model.launch import vertex_launch

    def check(folder, extra):
        spec = example("deepfm_vertex")
        spec["vertex"]["study"]["parameters"] = [{"name": "lr", **param, **extra}]
        loaded, job = loaded_job(folder, spec, CRITEO_LOCK)
        vertex_launch(loaded, job)
    check(tmp_path / "ok", ok)
    refused(lambda: check(tmp_path / "bad", bad), f"vertex.study.parameters.0.{field}", fragment)


@pytest.mark.parametrize("changes, field, fragment", [
    ({"cluster.gpus_per_node": 7}, "cluster.gpus_per_node", "7, but each solver.vvgpu row lists 8 GPU(s)"),
    ({"cluster.hosts": ["node0", "node1", "node2"]}, "cluster.hosts", "3 host(s) for 2 node(s)"),
    ({"cluster.hosts": ["node0"]}, "cluster.hosts", "1 host(s) for 2 node(s)"),
    ({"solver.vvgpu": [[0, 1], [0, 1, 2]]}, "solver.vvgpu", "rows of [2, 3] GPUs"),
    ({"solver.vvgpu": [[0, 0], [0, 1]], "cluster.gpus_per_node": 2}, "solver.vvgpu.0", "GPU listed twice in [0, 0]"),
], ids=["gpus-per-node", "hosts-over", "hosts-under", "rows-differ", "gpu-twice"])
def test_cluster_launch_rules(tmp_path, changes, field, fragment):
    from codegen.model.launch import cluster_launch

    ok = example("deepfm_multinode")
    ok["cluster"]["gpus_per_node"] = 8          # equal to the rows: accepted
    cluster_launch(load_spec(project(tmp_path / "ok", ok, CRITEO_LOCK)))
    refused(lambda: cluster_launch(load_spec(project(tmp_path / "bad", spec_with(changes, ok), CRITEO_LOCK))),
            field, fragment)


def test_hmem_cache_hit_rate_bounds(tmp_path):
    base = example("wdl_continuous_etc")
    for ok, bad, fragment in ((1.0, 1.000001, "less than or equal to 1"), (1e-9, 0.0, "greater than 0")):
        field = "continuous_training.hmem_cache.target_hit_rate"
        load_spec(project(tmp_path / "ok", spec_with({field: ok}, base), CRITEO_LOCK))
        refused(lambda: load_spec(project(tmp_path / "bad", spec_with({field: bad}, base), CRITEO_LOCK)),  # noqa: B023
                field, fragment)


@pytest.mark.parametrize("field, ok, bad, fragment", [
    ("etl.split.valid_fraction", 1e-9, 0.0, "greater than 0"),
    ("etl.split.valid_fraction", 0.999999, 1.0, "less than 1"),
    ("etl.split.seed", 0, -1, "greater than or equal to 0"),
    ("etl.output.out_files_per_proc", 1, 0, "greater than 0"),
    ("etl.inputs.sep", "|" * 8, "|" * 9, "at most 8 characters"),
    ("etl.groups.0.columns.0", "u" * 256, "u" * 257, "at most 256 characters"),
    ("etl.output.part_size", "1KB", "1023B", "a partition is between 1KB and 64GB"),
    ("etl.output.part_size", "64GB", "65GB", "a partition is between 1KB and 64GB"),
    ("etl.output.part_size", "1GB", "1TB", "should match pattern"),
], ids=["fraction-low", "fraction-high", "split-seed", "files-per-proc", "separator", "column-name", "part-size-low",
        "part-size-high", "part-size-unit"])
def test_etl_bounds(tmp_path, field, ok, bad, fragment):
    base = example("movielens", keep_etl=True)
    load_spec(project(tmp_path / "ok", spec_with({field: ok}, base)))
    refused(lambda: load_spec(project(tmp_path / "bad", spec_with({field: bad}, base))), field, fragment)


def test_etl_clip_bounds_may_be_equal(tmp_path):
    base = example("movielens", keep_etl=True)
    field = "etl.groups.1.ops"
    load_spec(project(tmp_path / "ok", spec_with({field: [{"Clip": {"min_value": 3, "max_value": 3}}]}, base)))
    refused(lambda: load_spec(project(tmp_path / "bad", spec_with(
        {field: [{"Clip": {"min_value": 3.000001, "max_value": 3}}]}, base))), field, "min_value is greater than max_value")


def test_etl_cross_needs_two_columns(tmp_path):
    base = example("movielens", keep_etl=True)
    load_spec(project(tmp_path / "ok", spec_with({"etl.cross": [{"columns": ["userId", "movieId"]}]}, base)))
    refused(lambda: load_spec(project(tmp_path / "bad", spec_with({"etl.cross": [{"columns": ["userId"]}]}, base))),
            "etl.cross.0.columns", "must have at least 2 items")


def test_offline_inference_max_mse_not_negative(tmp_path):
    section = {"params": {}, "predict": {}}
    both_sides(tmp_path, load, "offline_inference.max_mse", {"offline_inference": {**section, "max_mse": 0.0}},
               {"offline_inference": {**section, "max_mse": -1e-12}}, "greater than or equal to 0")


def test_reader_check_reads_at_least_one_batch(tmp_path):
    section = {"each_batch": [{"of": "reader", "method": "read_a_batch_to_device"}]}
    both_sides(tmp_path, load, "reader_check.batches", {"reader_check": {**section, "batches": 1}},
               {"reader_check": {**section, "batches": 0}}, "greater than 0")


def test_torch_target_trains_a_label_of_dimension_one(tmp_path):
    """Reachable with explicit layers only (a preset's last layer has one unit, so HugeCTR's loss refuses it first).
    A label of dimension 2 would need two Parquet label columns, which the features name as two labels."""
    from codegen.pipeline import render_spec

    def graph(width):
        return {"model": {"preset": "layers", "layers": [
            {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32},
            {"type": "InnerProduct", "bottom": "r", "top": "fc", "num_output": width},
            {"type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}]},
            "input.label_dim": width}
    assert "train_torch.py" in {str(k) for k in render_spec(open_spec(project(tmp_path / "ok", spec_with(graph(1))))).files}
    refused(lambda: render_spec(open_spec(project(tmp_path / "bad", spec_with(graph(2))))), "input.label_dim",
            "the torch target reads one Parquet label column per label")


# ---- the embedding collection's tables: the C++ int of max_vocabulary_size up to 23.09, long long from 23.12 ---------

@pytest.mark.parametrize("version, ok, bad, cpp", [("23.06", 2**31 - 1, 2**31, "int"),
                                                   ("23.12", 2**63 - 1, 2**63, "long long")])
def test_collection_table_size_fits_the_release_type(tmp_path, version, ok, bad, cpp):
    from test_embedding_collection import CONFIG, _import

    _, path = _import(tmp_path, CONFIG, "23.06")
    spec = yaml.safe_load(path.read_text())
    spec["hugectr_version"] = version
    field = "embedding_collection.tables.0.max_vocabulary_size"

    def build_with(folder, size):
        changed = spec_with({field: size}, spec)
        folder.mkdir()
        path = folder / "ebc.yaml"
        path.write_text(yaml.safe_dump(changed, sort_keys=False))
        (folder / "ebc.features.lock.json").write_text((tmp_path / "specs" / "ebc.features.lock.json").read_text())
        ctx = open_spec(path)
        features, _ = load_features(ctx, check_stale=False)
        build(ctx, features)
    build_with(tmp_path / "ok", ok)
    refused(lambda: build_with(tmp_path / "bad", bad), field, f"{bad} does not fit the C++ {cpp} it becomes")
    build_with(tmp_path / "dynamic", -1)                     # -1: a dynamic table (4.2+), the spec's lower bound
    refused(lambda: build_with(tmp_path / "below", -2), field, "greater than or equal to -1")


# ---- rules without a number: the valid input next to the smallest invalid change --------------------------------------

TWO_SPARSE = [{"name": "data1", "columns": ["userId"]}, {"name": "data2", "columns": ["movieId"]}]
EMB2 = {"name": "sparse_embedding2", "input": "data1", "embedding_type": "LocalizedSlotSparseEmbeddingHash",
        "workspace_size_per_gpu_in_mb": 100, "embedding_vec_size": 16}

GROUP_FUSED = {"hugectr_version": "23.06", "targets": ["hugectr"], "model": {"preset": "layers", "layers": [
    {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32},
    {"type": "GroupFusedInnerProduct", "bottom": "r", "top": ["g1", "g2"], "num_outputs": [16, 1]},
    {"type": "BinaryCrossEntropyLoss", "bottom": ["g2", "label"], "top": "loss"}]}}

# (id, step, accepted changes, refused changes, field, message fragment); BASE is specs/movielens.yaml at HugeCTR 3.3
RULES = [
    ("column-in-output", build_job, {"features.categorical": ["userId", "movieId"]},
     {"features.categorical": ["userId", "nope"]}, "features.categorical.1", "'nope' is not in the workflow's output"),
    ("vvgpu-lists-a-gpu", build_job, {"solver.vvgpu": [[0]]}, {"solver.vvgpu": [[]]}, "solver.vvgpu",
     "no GPU listed"),
    ("i64-asserted", build_job, {"solver.i64_input_key": True}, {"solver.i64_input_key": False},
     "solver.i64_input_key", "is False, but the categorical columns are ['int64']"),
    ("names-differ", build_job, {"input.dense_name": "dense"}, {"input.dense_name": "label"}, "input",
     "label, dense, sparse input and embedding names must all differ"),
    ("tf32-or-mixed", build_job, {"solver.use_mixed_precision": True, "solver.scaler": 1024},
     {"solver.use_mixed_precision": True, "solver.scaler": 1024, "solver.enable_tf32_compute": True},
     "solver.enable_tf32_compute", "use_mixed_precision and enable_tf32_compute cannot be true at the same time"),
    ("scaler-up-to-4.3", build_job, {"solver.use_mixed_precision": True, "solver.scaler": 1024},
     {"solver.use_mixed_precision": True, "solver.scaler": 2048}, "solver.scaler",
     "requires a mixed-precision scaler of 128/256/512/1024, got 2048"),
    ("scaler-checked-at-4.3", build_job, {"solver.use_mixed_precision": True, "solver.scaler": 1024,
                                          "hugectr_version": "4.3"},
     {"solver.use_mixed_precision": True, "solver.scaler": 2048, "hugectr_version": "4.3"}, "solver.scaler",
     "HugeCTR 4.3 requires a mixed-precision scaler"),
    ("model-name-from-3.3", build_job, {"solver.model_name": True},
     {"solver.model_name": True, "hugectr_version": "3.2"}, "solver.model_name", "CreateSolver(model_name=...) needs"),
    ("num-epochs-needs-epoch-mode", build_job, {"training.num_epochs": None},
     {"training.num_epochs": 1}, "training.num_epochs", "num_epochs needs epoch mode"),
    ("args-own-field", build_job, {"solver.args": {"use_algorithm_search": True}},
     {"solver.args": {"batchsize": 2048}}, "solver.args.batchsize", "'batchsize' has its own field"),
    ("args-unknown", build_job, {"solver.args": {"use_algorithm_search": True}},
     {"solver.args": {"use_algorithm_serch": True}}, "solver.args.use_algorithm_serch", "use_algorithm_serch"),
    ("sparse-inputs-cover-the-slots", build_job, {"input.sparse": TWO_SPARSE,
                                                  "embeddings": [{**EMB2, "name": "sparse_embedding1"},
                                                                 {**EMB2, "input": "data2"}]},
     {"input.sparse": [{"name": "data1", "columns": ["userId"]}]}, "input.sparse", "the sparse inputs cover 1 of 2"),
    ("sparse-names-unique", build_job, {"input.sparse": TWO_SPARSE,
                                        "embeddings": [{**EMB2, "name": "sparse_embedding1"}, {**EMB2, "input": "data2"}]},
     {"input.sparse": [TWO_SPARSE[0], {**TWO_SPARSE[1], "name": "data1"}],
      "embeddings": [{**EMB2, "name": "sparse_embedding1"}, EMB2]}, "input.sparse", "sparse input names must be unique"),
    ("embedding-reads-a-sparse-input", build_job, {"embeddings.0.input": "data1"}, {"embeddings.0.input": "data9"},
     "embeddings.0.input", "'data9' is not a sparse input"),
    ("embedding-names-unique", build_job, {"embeddings": [{**EMB2, "name": "sparse_embedding1"}]},
     {"embeddings": [{**EMB2, "name": "sparse_embedding1"}, {**EMB2, "name": "sparse_embedding1"}]}, "embeddings",
     "embedding names must be unique"),
    ("hybrid-needs-raw-async", build_job, {"embeddings.0.embedding_type": "DistributedSlotSparseEmbeddingHash"},
     {"embeddings.0.embedding_type": "HybridSparseEmbedding"}, "embeddings.0.embedding_type",
     "Raw async reader and hybrid embedding must come together"),
    ("then-method-supported", build_job, {"training.then": []}, {"training.then": [{"method": "fly"}]},
     "training.then.0.method", "Model.fly has no spec support"),
    ("last-layer-a-loss", build_job, {"model": {"preset": "layers", "layers": [
        {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32},
        {"type": "InnerProduct", "bottom": "r", "top": "fc", "num_output": 1},
        {"type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}]}},
     {"model": {"preset": "layers", "layers": [
         {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32},
         {"type": "InnerProduct", "bottom": "r", "top": "fc", "num_output": 1}]}}, "model",
     "the last layer must be a loss"),
    ("layer-parameter-known", build_job, {"model": {"preset": "layers", "layers": [
        {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32},
        {"type": "InnerProduct", "bottom": "r", "top": "fc", "num_output": 1},
        {"type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}]}},
     {"model": {"preset": "layers", "layers": [
         {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32},
         {"type": "InnerProduct", "bottom": "r", "top": "fc", "num_output": 1, "num_outputs": 1},
         {"type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}]}},
     "model.layers.1.num_outputs", "layer 'fc': DenseLayer argument 'num_outputs' is not in HugeCTR 3.3"),
    ("setup-names-each-once", load, {"script.setup": ["reader", "solver", "optimizer"]},
     {"script.setup": ["solver", "solver", "optimizer"]}, "script", "setup must name solver, reader and optimizer"),
    ("after-compile-once", load, {"script.after_compile": ["fit"]}, {"script.after_compile": ["fit", "fit"]},
     "script", "after_compile names a call twice"),
    ("before-or-after-compile", load, {"script.before_compile": ["summary"], "script.after_compile": ["fit"]},
     {"script.before_compile": ["summary"], "script.after_compile": ["summary", "fit"]}, "script",
     "a call is named both before and after compile"),
    ("an-embedding-needed", load, {"embeddings": [EMB2]}, {"embeddings": []}, "",
     "embeddings: at least one embedding"),
    ("a-layer-needed", load, {"model": {"preset": "layers", "layers": [
        {"type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}]}},
     {"model": {"preset": "layers", "layers": []}}, "", "model.layers: at least one layer is needed"),
    ("group-fused-needs-mixed-precision", build_job, {**GROUP_FUSED, "solver.use_mixed_precision": True},
     {**GROUP_FUSED, "solver.use_mixed_precision": False}, "model.layers.1",
     "GroupFusedInnerProduct can only be used when use_mixed_precision is set true"),
    ("group-fused-widths", build_job, {**GROUP_FUSED, "solver.use_mixed_precision": True},
     {**GROUP_FUSED, "solver.use_mixed_precision": True, "model.layers.1.num_outputs": [1]}, "model.layers.1",
     "takes num_outputs (one width per top, at least two)"),
    ("args-finite", load, {"solver.args": {"x": 1e308}}, {"solver.args": {"x": float("inf")}}, "solver.args.x",
     "must be a finite number"),
    ("args-argument-names", load, {"solver.args": {"x_1": 1}}, {"solver.args": {"x-1": 1}}, "solver.args",
     "'x-1' is not an argument name"),
]


@pytest.mark.parametrize("step, ok, bad, field, fragment", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_rule_on_both_sides(tmp_path, step, ok, bad, field, fragment):
    both_sides(tmp_path, step, field, ok, bad, fragment)


def test_scaler_is_free_from_23_02(tmp_path):
    """The release after 4.3 no longer checks the scaler (its check is commented out in v23.02.00)."""
    build_job(tmp_path, spec_with({"solver.use_mixed_precision": True, "solver.scaler": 2048,
                                   "hugectr_version": "23.02", "embeddings.0.workspace_size_per_gpu_in_mb": 100}))


# ---- codegen/triton/lint: file sizes of the trained weights (hugectr.md §5) --------------------------------------------

def _clean_lint_repo(tmp_path: Path) -> Path:
    from lint_repos import CLEAN, write_case

    return write_case(CLEAN, tmp_path / "repo")


def _lint_errors(repo: Path) -> list[str]:
    from codegen.triton import validate_repository
    from codegen.triton.lint.findings import ERROR

    return [f"{f.field}: {f.message}" for f in validate_repository(repo) if f.severity == ERROR]


def test_dense_weights_are_whole_float32_values(tmp_path):
    repo = _clean_lint_repo(tmp_path)
    dense = repo / "movielens" / "1" / "_dense_1900.model"
    data = dense.read_bytes()
    dense.write_bytes(data + bytes(4))                           # one more float: still whole values
    assert _lint_errors(repo) == []
    dense.write_bytes(data + bytes(5))
    assert [e for e in _lint_errors(repo) if f"holds {len(data) + 5} bytes, not whole float32 values" in e]


def test_sparse_keys_are_whole_int64_values(tmp_path):
    repo = _clean_lint_repo(tmp_path)
    folder = repo / "movielens" / "1" / "0_sparse_1900.model"
    key, emb = folder / "key", folder / "emb_vector"
    keys, vectors = key.read_bytes(), emb.read_bytes()
    per_key = len(vectors) // (len(keys) // 8)
    key.write_bytes(keys + bytes(8))                             # one more key with its vector: consistent
    emb.write_bytes(vectors + bytes(per_key))
    assert _lint_errors(repo) == []
    key.write_bytes(keys + bytes(9))
    assert [e for e in _lint_errors(repo) if f"key holds {len(keys) + 9} bytes, not whole int64 keys" in e]


# ---- input files (codegen/inputs.py): size limits and the YAML caps ------------------------------------------------------

@pytest.mark.parametrize("what, limit_name", [("spec", "MAX_SPEC_BYTES"), ("features lock", "MAX_LOCK_BYTES"),
                                              ("schema", "MAX_SCHEMA_BYTES")])
def test_input_file_size_limits(tmp_path, what, limit_name):
    import os

    from codegen import inputs

    limit = getattr(inputs, limit_name)
    path = tmp_path / "f"
    path.write_bytes(b"")
    os.truncate(path, limit)                                    # sparse: only the size matters before reading
    inputs.check_regular(path, what, limit)
    os.truncate(path, limit + 1)
    with pytest.raises(UserError) as info:
        inputs.check_regular(path, what, limit)
    assert f"{what} is {limit + 1} bytes, more than the {limit} a {what} may have" in info.value.format()


def test_yaml_depth_cap():
    from codegen.inputs import MAX_YAML_DEPTH, check_yaml_tree

    def doc(levels):                                            # the root mapping is level 1
        node: object = 1
        for _ in range(levels - 1):
            node = [node]
        return {"a": node} if levels > 1 else {}
    check_yaml_tree(doc(MAX_YAML_DEPTH), "x.yaml")
    with pytest.raises(UserError, match=f"nested more than {MAX_YAML_DEPTH} levels deep"):
        check_yaml_tree(doc(MAX_YAML_DEPTH + 1), "x.yaml")


def test_yaml_value_cap_counts_aliases_without_expanding():
    from codegen.inputs import MAX_YAML_NODES, check_yaml_tree

    shared = [0] * 40_000                                      # one list referenced twice (an alias): counted twice
    doc: dict = {"a": shared, "b": shared}
    pads = MAX_YAML_NODES - (1 + 2 * (1 + len(shared)))        # the root, the two lists with their items, the pads
    doc.update({f"k{i}": 0 for i in range(pads)})              # exactly MAX_YAML_NODES values once expanded
    check_yaml_tree(doc, "x.yaml")
    doc["one_more"] = 0
    with pytest.raises(UserError, match=f"expands to more than {MAX_YAML_NODES} values"):
        check_yaml_tree(doc, "x.yaml")


def test_the_api_table_gives_the_cpp_types_of_the_release():
    import sys

    from codegen.hugectr import api as A

    assert A.cpp_type("DataReaderParams", "23.06", "num_samples") == "int64"        # long long
    assert A.cpp_type("DataReaderParams", "23.06", "num_workers") == "int32"        # int
    assert A.cpp_type("CreateSolver", "3.3", "seed") == "uint64"                     # unsigned long long
    assert A.cpp_type("CreateSolver", "23.06", "vvgpu") == "list[list[int32]]"
    assert A.cpp_type("EmbeddingTableConfig", "23.09", "max_vocabulary_size") == "int32"
    assert A.cpp_type("EmbeddingTableConfig", "23.12", "max_vocabulary_size") == "int64"
    assert A.cpp_type("DataReaderParams", "23.06", "source") is None                 # a string: no number type
    sys.path.insert(0, str(REPO / "tools"))
    try:
        from hugectr_api import cpp_kind
    finally:
        sys.path.pop(0)
    assert [cpp_kind(t) for t in ("const size_t", "std::vector<long long>&", "const std::vector<float>&", "double",
                                  "unsigned int", "std::string", "Check_t")] == [
        "uint64", "list[int64]", "list[float32]", "float64", "uint32", None, None]


def test_an_args_value_beyond_its_cpp_type_is_one_line_exit_2_and_nothing_written(tmp_path):
    from conftest import run_ctrgen

    path = project(tmp_path, spec_with({"data.args.num_samples": 2**63}))
    result = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line = path.read_text().splitlines().index("    num_samples: 9223372036854775808") + 1
    assert result.stderr.splitlines() == [
        f"{path}:{line}:5: data.args.num_samples: DataReaderParams argument 'num_samples': 9223372036854775808 does "
        "not fit the C++ long long it becomes (-2**63 to 2**63-1) (fix: give a value of that type)"]
    assert not (tmp_path / "out").exists()


# ---- continuous training (codegen/graph/continuous.py), from specs/wdl_continuous_etc.yaml (3.3, CreateETC) and
# specs/wdl_continuous.yaml (3.2, CreateMOS) ----------------------------------------------------------------------------

CT = "continuous_training"
PASS2 = {"source": ["/d/3/_file_list.txt", "/d/4/_file_list.txt"], "keyset": ["/d/3/k", "/d/4/k"]}

CONTINUOUS_RULES = [
    ("epoch-mode", "wdl_continuous_etc", {"solver.repeat_dataset": False}, {"solver.repeat_dataset": True},
     "solver.repeat_dataset", "continuous training needs epoch mode"),
    ("etc-kinds", "wdl_continuous_etc", {f"{CT}.ps": ["staged", "cached"]}, {f"{CT}.ps": ["staged", "host_memory"]},
     f"{CT}.ps", "are CreateMOS parameter servers"),
    ("etc-one-kind-per-table", "wdl_continuous_etc", {f"{CT}.ps": ["staged", "cached"]},
     {f"{CT}.ps": ["staged", "cached", "staged"]}, f"{CT}.ps", "3 parameter servers for 2 embeddings"),
    ("mos-kinds", "wdl_continuous", {f"{CT}.ps": "ssd"}, {f"{CT}.ps": "staged"}, f"{CT}.ps",
     "are CreateETC parameter servers"),
    ("mos-one-server", "wdl_continuous", {f"{CT}.ps": ["host_memory"]}, {f"{CT}.ps": ["host_memory", "ssd"]},
     f"{CT}.ps", "CreateMOS takes one parameter server for all tables"),
    ("mos-no-hmem-cache", "wdl_continuous", {f"{CT}.hmem_cache": None}, {f"{CT}.hmem_cache": {"num_blocks": 1}},
     f"{CT}.hmem_cache", "CreateMOS has no hmem_cache"),
    ("a-sparse-model-per-table", "wdl_continuous_etc", {f"{CT}.sparse_models": ["./a", "./b"]},
     {f"{CT}.sparse_models": ["./a"]}, f"{CT}.sparse_models", "1 sparse model for 2 embeddings"),
    ("sparse-models-differ", "wdl_continuous_etc", {f"{CT}.sparse_models": ["./a", "./b"]},
     {f"{CT}.sparse_models": ["./a", "./a"]}, f"{CT}.sparse_models", "two embeddings share a sparse model folder"),
    ("hmem-cache-needs-a-cached-table", "wdl_continuous_etc", {f"{CT}.ps": ["staged", "cached"]},
     {f"{CT}.ps": ["staged", "staged"]}, f"{CT}.hmem_cache", "only cached tables use it, and no table is cached"),
    ("a-local-path-per-node", "wdl_continuous_etc", {f"{CT}.local_paths": ["./"]},
     {f"{CT}.local_paths": ["./", "./"]}, f"{CT}.local_paths", "2 local paths for 1 node"),
    ("dense-model-when-continuing", "wdl_continuous_etc",
     {f"{CT}.train_from_scratch": False, f"{CT}.dense_model": "d.model"},
     {f"{CT}.train_from_scratch": True, f"{CT}.dense_model": "d.model"}, f"{CT}.dense_model",
     "a dense model is loaded only when continuing"),
    ("first-pass-reads-the-reader-source", "wdl_continuous_etc",
     {f"{CT}.passes.0.source": ["/data/criteo/day_0/_file_list.txt", "/data/criteo/day_1/_file_list.txt"]},
     {f"{CT}.passes.0.source": ["/data/criteo/day_0/_file_list.txt", "/data/criteo/day_9/_file_list.txt"]},
     f"{CT}.passes.0.source", "the first pass trains on the reader's source"),
    ("first-pass-evaluates-the-reader-eval", "wdl_continuous_etc",
     {f"{CT}.passes.0.eval_source": "/data/criteo/day_2/_file_list.txt"},
     {f"{CT}.passes.0.eval_source": "/data/criteo/day_9/_file_list.txt"}, f"{CT}.passes.0.eval_source",
     "the first pass evaluates on the reader's eval_source"),
    ("later-passes-name-their-source", "wdl_continuous_etc", {f"{CT}.passes.1.source": PASS2["source"]},
     {f"{CT}.passes.1.source": None}, f"{CT}.passes.1.source", "field required (passes after the first"),
    ("a-keyset-per-source", "wdl_continuous_etc", {f"{CT}.passes.1.keyset": PASS2["keyset"]},
     {f"{CT}.passes.1.keyset": PASS2["keyset"][:1]}, f"{CT}.passes.1.keyset", "1 keyset file for 2 training sources"),
    ("first-pass-fits", "wdl_continuous_etc", {f"{CT}.passes.0.fit": True}, {f"{CT}.passes.0.fit": False},
     f"{CT}.passes.0.fit", "the first pass trains on the reader's source"),
    ("no-launch-targets", "wdl_continuous_etc", {"targets": ["hugectr"]}, {"targets": ["hugectr", "task"]},
     "targets", "run task.py, one fit without the incremental passes"),
]


@pytest.mark.parametrize("base, ok, bad, field, fragment", [r[1:] for r in CONTINUOUS_RULES],
                         ids=[r[0] for r in CONTINUOUS_RULES])
def test_continuous_training_rule_on_both_sides(tmp_path, base, ok, bad, field, fragment):
    spec = example(base)

    def step(folder, changes):
        build_job(folder, spec_with(changes, spec), CRITEO_LOCK)
    step(tmp_path / "ok", ok)
    refused(lambda: step(tmp_path / "bad", bad), field, fragment)


# ---- the torch target (codegen/model/torch_rules.py): what train_torch.py cannot translate --------------------------

def _render(folder: Path, spec: dict, lock: dict | None = None):
    """A fresh render with the torch target, without the Triton repositories (not what these rules are about)."""
    from codegen.pipeline import render_spec

    return render_spec(open_spec(project(folder, spec_with({"triton.enabled": False}, spec), lock)))


def _layers(middle: dict) -> dict:
    return {"model": {"preset": "layers", "layers": [
        {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32}, middle,
        {"type": "InnerProduct", "bottom": "s", "top": "fc", "num_output": 1},
        {"type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}]}, "hugectr_version": "23.06"}


def _multi_loss(weights: list | None) -> dict:
    return {"model": {"preset": "layers", "layers": [
        {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32},
        {"type": "InnerProduct", "bottom": "r", "top": "fc", "num_output": 1},
        {"type": "MultiCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss",
         **({"target_weight_vec": weights} if weights is not None else {})}]}, "hugectr_version": "23.06"}


TORCH_RULES = [
    ("optimizer", {"optimizer.type": "RMSProp", "hugectr_version": "23.06"},
     {"optimizer.type": "Ftrl", "hugectr_version": "23.06"}, "optimizer.type",
     "HugeCTR's SparseEmbedding has no Ftrl update"),
    # MultiCrossEntropyLoss translates; without a target weight per input column HugeCTR's constructor throws
    ("loss-target-weights", _multi_loss([0.5]), _multi_loss(None), "model.layers.2",
     "layer 'loss': the torch target cannot translate this MultiCrossEntropyLoss (its target_weight_vec holds 0"),
]


@pytest.mark.parametrize("ok, bad, field, fragment", [r[1:] for r in TORCH_RULES], ids=[r[0] for r in TORCH_RULES])
def test_torch_target_rule_on_both_sides(tmp_path, ok, bad, field, fragment):
    assert "train_torch.py" in {str(k) for k in _render(tmp_path / "ok", spec_with(ok)).files}
    refused(lambda: _render(tmp_path / "bad", spec_with(bad)), field, fragment)


def test_torch_target_trains_several_labels(tmp_path):
    """Two label columns (each a label of dimension 1) translate (a label of dimension 2 stays refused:
    test_torch_target_trains_a_label_of_dimension_one)."""
    two = copy.deepcopy(LOCK)
    two["labels"] = [{"name": "rating", "dtype": "float32"}, {"name": "liked", "dtype": "float32"}]
    labels = {"hugectr_version": "23.06", "model.units": [128, 2]}      # a two-wide output for two labels
    text = _render(tmp_path / "ok", spec_with({**labels, "features.label": ["rating", "liked"]}), two).files
    assert "train_torch.py" in {str(k) for k in text}


def test_torch_continuous_training_needs_a_row_sparse_optimizer(tmp_path):
    spec = example("wdl_continuous_etc")
    _render(tmp_path / "ok", spec_with({"optimizer.type": "AdaGrad"}, spec), CRITEO_LOCK)
    refused(lambda: _render(tmp_path / "bad", spec_with({"optimizer.type": "MomentumSGD"}, spec), CRITEO_LOCK),
            "optimizer.type", "continuous training with the torch target updates only the embedding rows")


# ---- Vertex AI (codegen/render/vertex.py): the section, the targets and each tuned parameter -------------------------

VERTEX_RULES = [
    ("needs-the-section", {}, {"vertex": None}, "targets", "the vertex target needs a vertex: section"),
    ("needs-task-py", {}, {"targets": ["hugectr", "vertex"]}, "targets", "the vertex target runs task.py"),
    ("one-node", {"solver.vvgpu": [[0, 1]]}, {"solver.vvgpu": [[0], [0]]}, "solver.vvgpu", "2 nodes"),
    ("tuned-once", {"vertex.study.parameters": [{"name": "lr", "type": "double", "min": 0.001, "max": 0.01}]},
     {"vertex.study.parameters": [{"name": "lr", "type": "double", "min": 0.001, "max": 0.01}] * 2},
     "vertex.study.parameters.1.name", "'lr' is tuned twice"),
    ("tunable", {"vertex.study.parameters": [{"name": "lr", "type": "double", "min": 0.001, "max": 0.01}]},
     {"vertex.study.parameters": [{"name": "momentum", "type": "double", "min": 0.1, "max": 0.9}]},
     "vertex.study.parameters.0.name", "'momentum' is not a tunable task.py argument"),
    ("double-takes-min-max", {"vertex.study.parameters": [{"name": "lr", "type": "double", "min": 0.001, "max": 0.01}]},
     {"vertex.study.parameters": [{"name": "lr", "type": "double", "values": [0.001, 0.01]}]},
     "vertex.study.parameters.0.type", "a double parameter takes min and max (no values)"),
    ("discrete-takes-values", {"vertex.study.parameters": [{"name": "lr", "type": "discrete", "values": [0.1, 0.2]}]},
     {"vertex.study.parameters": [{"name": "lr", "type": "discrete", "min": 0.1, "max": 0.2}]},
     "vertex.study.parameters.0.values", "a discrete parameter takes values (no min/max)"),
    ("categorical-no-scale", {"vertex.study.parameters": [{"name": "lr", "type": "categorical",
                                                            "values": ["0.1", "0.2"]}]},
     {"vertex.study.parameters": [{"name": "lr", "type": "categorical", "values": ["0.1", "0.2"], "scale": "log"}]},
     "vertex.study.parameters.0.scale", "a categorical parameter has no scale"),
    ("categorical-values-parse", {"vertex.study.parameters": [{"name": "lr", "type": "categorical",
                                                                "values": ["0.1", "0.2"]}]},
     {"vertex.study.parameters": [{"name": "lr", "type": "categorical", "values": ["0.1", "fast"]}]},
     "vertex.study.parameters.0.values", "they must be distinct float strings, not ['fast']"),
    ("float-arg-not-integer", {"vertex.study.parameters": [{"name": "lr", "type": "double", "min": 0.001, "max": 0.01}]},
     {"vertex.study.parameters": [{"name": "lr", "type": "integer", "min": 1, "max": 2}]},
     "vertex.study.parameters.0.type", "task.py argument 'lr' takes a float"),
]


@pytest.mark.parametrize("ok, bad, field, fragment", [r[1:] for r in VERTEX_RULES], ids=[r[0] for r in VERTEX_RULES])
def test_vertex_rule_on_both_sides(tmp_path, ok, bad, field, fragment):
    from codegen.model.launch import vertex_launch

    base = example("deepfm_vertex")

    def check(folder, changes):
        loaded, job = loaded_job(folder, spec_with(changes, base), CRITEO_LOCK)
        vertex_launch(loaded, job)
    check(tmp_path / "ok", ok)
    refused(lambda: check(tmp_path / "bad", bad), field, fragment)


# ---- the embedding collection section (codegen/specfile/embedding_collection.py) ------------------------------------------

@pytest.fixture(scope="module")
def collection_spec(tmp_path_factory) -> tuple[dict, str]:
    """specs of test_embedding_collection's 4.2+ script (3 tables, 4 lookups), imported once; and its lock."""
    from test_embedding_collection import CONFIG, _import

    folder = tmp_path_factory.mktemp("ebc")
    _, path = _import(folder, CONFIG, "23.06")
    return yaml.safe_load(path.read_text()), (folder / "specs" / "ebc.features.lock.json").read_text()


EC = "embedding_collection"
COLLECTION_RULES = [
    ("table-index", {f"{EC}.lookups.3.table": 2}, {f"{EC}.lookups.3.table": 3}, EC,
     "lookups[3].table is 3, but there are 3 tables"),
    ("every-table-looked-up", {f"{EC}.lookups.1.table": 0}, {f"{EC}.lookups.1.table": 0, f"{EC}.lookups.2.table": 0}, EC,
     "tables [1] are not looked up by any lookup"),
    ("tops-differ", {f"{EC}.lookups.1.top": "e1"}, {f"{EC}.lookups.1.top": "e0"}, EC, "lookup tops must all differ"),
    ("grouped-all-lists", {}, {f"{EC}.lookups.0.table": [0]}, f"{EC}.lookups.0",
     "the grouped form gives table, bottom and combiner as lists (all three)"),
    ("grouped-one-per-lookup", {}, {f"{EC}.lookups.0": {"table": [0, 1], "bottom": ["s0"], "combiner": ["sum", "sum"],
                                                        "top": "g"}},
     f"{EC}.lookups.0", "table, bottom and combiner lists must have one entry per lookup"),
    ("grouped-is-the-only-lookup", {}, {f"{EC}.lookups.0": {"table": [0], "bottom": ["s0"], "combiner": ["sum"],
                                                            "top": "g"}},
     EC, "lookups[0] is grouped (lists): HugeCTR takes it as the only lookup"),
    ("combiner-names", {f"{EC}.lookups.0.combiner": "average"}, {f"{EC}.lookups.0.combiner": "mean"},
     f"{EC}.lookups.0.combiner", "'mean' is not a combiner of the embedding collection"),
]


@pytest.mark.parametrize("ok, bad, field, fragment", [r[1:] for r in COLLECTION_RULES],
                         ids=[r[0] for r in COLLECTION_RULES])
def test_collection_rule_on_both_sides(tmp_path, collection_spec, ok, bad, field, fragment):
    spec, _ = collection_spec
    load(tmp_path / "ok", spec_with(ok, spec))
    refused(lambda: load(tmp_path / "bad", spec_with(bad, spec)), field, fragment)


# ---- the build's rules on the features and on the target release ----------------------------------------------------

def _lock_with(dtypes=("int64", "int64"), labels=("rating",)) -> dict:
    lock = copy.deepcopy(LOCK)
    for column, dtype in zip(lock["categorical"], dtypes):
        column["dtype"] = dtype
    lock["labels"] = [{"name": n, "dtype": "float32"} for n in labels]
    return lock


# (id, spec changes, lock accepted, lock refused or None (the same), spec changes refused, field, fragment)
FEATURE_RULES = [
    ("ids-one-width", {}, _lock_with(("int32", "uint32")), _lock_with(("int64", "int32")), {}, "features.categorical",
     "categorical columns mix 32- and 64-bit ids"),
    ("single-label-before-multi-label", {"features.label": ["rating"]}, _lock_with(labels=("rating", "liked")), None,
     {"features.label": ["rating", "liked"]}, "features.label", "2 labels, but HugeCTR 3.3 takes a single label"),
    ("label-dim-one-label", {"hugectr_version": "23.06", "input.label_dim": 2, "features.label": ["rating"],
                             "targets": ["hugectr"], "model": {"preset": "layers", "layers": [
                                 {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32},
                                 {"type": "InnerProduct", "bottom": "r", "top": "fc", "num_output": 2},
                                 {"type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}]}},
     _lock_with(labels=("rating", "liked")), None, {"features.label": ["rating", "liked"]}, "input.label_dim",
     "label_dim applies to a single label"),
    ("a-target-column", {"features.label": None}, LOCK, _lock_with(labels=()), {}, "features.label",
     "the workflow tags no target column"),
    ("optimizer-in-release", {"optimizer.type": "AdaGrad"}, LOCK, None, {"optimizer.type": "Ftrl"},
     "optimizer.type", "Ftrl"),
    ("model-class-in-release", {"script.model_class": "ModelPerfExt"}, LOCK, None, {"hugectr_version": "23.06"},
     "script.model_class", "ModelPerfExt is not in HugeCTR 23.06"),
    ("inference-api-in-release", {"offline_inference": {"params": {}, "predict": {}}, "hugectr_version": "3.4"}, LOCK,
     None, {"hugectr_version": "3.3", "offline_inference.api": "InferenceModel"}, "offline_inference",
     "inference.InferenceModel"),
]


@pytest.mark.parametrize("ok, lock_ok, lock_bad, bad, field, fragment", [r[1:] for r in FEATURE_RULES],
                         ids=[r[0] for r in FEATURE_RULES])
def test_feature_and_release_rule_on_both_sides(tmp_path, ok, lock_ok, lock_bad, bad, field, fragment):
    base = spec_with(ok)
    build_job(tmp_path / "ok", base, lock_ok)
    refused(lambda: build_job(tmp_path / "bad", spec_with(bad, base), lock_bad or lock_ok), field, fragment)


# ---- reader_check (codegen/graph/reader_check.py) and what the pipeline renders (codegen/pipeline.py) ---------------

READER = {"hugectr_version": "23.06", "model": {"preset": "layers", "layers": []}, "training": None,
          "targets": ["hugectr"], "triton": {"enabled": False},
          "reader_check": {"batches": 2, "each_batch": [
              {"of": "reader", "method": "read_a_batch_to_device"},
              {"of": "model", "method": "check_out_tensor",
               "args": {"tensor_name": "dense", "tensor_type": "Tensor_t.Train"}}]}}
RC = "reader_check.each_batch"

READER_RULES = [
    ("reads-only", {}, {"training": {"max_iter": 10}}, "training", "a reader_check spec reads batches only"),
    ("reader-method", {f"{RC}.0.method": "read_a_batch_to_device"}, {f"{RC}.0.method": "read_everything"},
     f"{RC}.0.method", "the data reader has no method 'read_everything' in HugeCTR 23.06"),
    ("method-args", {f"{RC}.1.args.tensor_name": "dense"}, {f"{RC}.1.args.tensor_nam": "dense"},
     f"{RC}.1.args.tensor_nam", "Model.check_out_tensor has no argument 'tensor_nam'"),
    ("required-args", {f"{RC}.1.args.tensor_name": "dense"}, {f"{RC}.1.args.tensor_name": None}, f"{RC}.1.args",
     "Model.check_out_tensor needs 'tensor_name'"),
]


@pytest.mark.parametrize("ok, bad, field, fragment", [r[1:] for r in READER_RULES], ids=[r[0] for r in READER_RULES])
def test_reader_check_rule_on_both_sides(tmp_path, ok, bad, field, fragment):
    base = spec_with(READER)
    build_job(tmp_path / "ok", spec_with(ok, base))
    refused(lambda: build_job(tmp_path / "bad", spec_with(bad, base)), field, fragment)


PIPELINE_RULES = [
    ("reader-check-renders-model-py-only", spec_with(READER), spec_with({"triton.enabled": True}, spec_with(READER)),
     "triton", "a model with reader_check renders model.py only"),
    ("triton-torch-needs-the-torch-target", spec_with({"triton.torch": {"threads": 2}}),
     spec_with({"triton.torch": {"threads": 2}, "targets": ["hugectr"]}), "triton.torch",
     "triton.torch configures generated/<name>/triton_torch/, which is rendered only for the torch target"),
    ("triton-torch-needs-triton", spec_with({"targets": ["hugectr", "torch"], "triton.enabled": False}),
     spec_with({"targets": ["hugectr", "torch"], "triton.enabled": False, "triton.torch": {"threads": 2}}),
     "triton.torch", "triton.torch configures the PyTorch Triton repository, but the Triton target is off"),
]


@pytest.mark.parametrize("ok, bad, field, fragment", [r[1:] for r in PIPELINE_RULES],
                         ids=[r[0] for r in PIPELINE_RULES])
def test_pipeline_rule_on_both_sides(tmp_path, ok, bad, field, fragment):
    from codegen.pipeline import render_spec

    render_spec(open_spec(project(tmp_path / "ok", ok)))
    refused(lambda: render_spec(open_spec(project(tmp_path / "bad", bad))), field, fragment)


# ---- the features lock's structure (codegen/features.py) ---------------------------------------------------------------

def _set(path: tuple, value):
    def change(lock):
        node = lock
        for p in path[:-1]:
            node = node[p]
        if value is None:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return change


LOCK_RULES = [
    ("lock-version", _set(("ctrgen_features_lock",), 1), _set(("ctrgen_features_lock",), 2), "",
     'not a ctrgen features lock (expected "ctrgen_features_lock": 1)'),
    ("known-keys", _set(("categorical", 0, "max_len"), 3), _set(("categorical", 0, "maxlen"), 3), "categorical[0]",
     "unknown keys ['maxlen']"),
    ("name-and-dtype", _set(("categorical", 0, "name"), "userId"), _set(("categorical", 0, "name"), None),
     "categorical[0]", "each column needs a string 'name' and 'dtype'"),
    ("multi-hot-bool", _set(("categorical", 0, "multi_hot"), False), _set(("categorical", 0, "multi_hot"), 0),
     "categorical[0]", "multi_hot must be true or false, got 0"),
    ("groups-are-lists", _set(("continuous",), []), _set(("continuous",), {}), "continuous", "must be a list"),
    ("categorical-cardinality",   # an imported script's lock may hash its keys: no cardinality; a recorded one may not
     lambda lock: (_set(("source",), "imported")(lock), _set(("categorical", 0, "cardinality"), None)(lock)),
     _set(("categorical", 0, "cardinality"), None),
     "categorical[0]", "categorical column 'userId' has no cardinality"),
]


@pytest.mark.parametrize("ok, bad, field, fragment", [r[1:] for r in LOCK_RULES], ids=[r[0] for r in LOCK_RULES])
def test_lock_rule_on_both_sides(tmp_path, ok, bad, field, fragment):
    def write(change, name):
        lock = copy.deepcopy(LOCK)
        change(lock)
        path = tmp_path / f"{name}.features.lock.json"
        path.write_text(json.dumps(lock, indent=2))
        return path
    read_lock(write(ok, "ok"))
    with pytest.raises(UserError) as info:
        read_lock(write(bad, "bad"))
    assert any(p.field == field and fragment in p.message and p.line is not None for p in info.value.problems), \
        info.value.format()
