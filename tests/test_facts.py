"""The facts the generator owns, asserted on a fresh render (never on the committed generated/ files), and every
validation rule on both sides of its boundary (issue 17 item 2). `make mutate` (tools/mutate.py) changes each fact
in codegen/ or templates/ one at a time and runs this module: a change that no test notices is a survivor.

Expected values are written from the references, not from the code: hugectr.md §2.8 (vocabulary), environment.md
§4-5 (cardinality = int_domain.max + 1), triton.md §2, §6 (tensors, max_batch_size), HugeCTR's keyset format (32-bit
keys are ``unsigned int``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from google.protobuf import text_format

from codegen.errors import UserError
from codegen.features import Column, Features, describe_lock_drift
from codegen.pipeline import open_spec, render_spec
from codegen.triton.pb import mc
from conftest import REPO

MOVIELENS_LOCK = json.loads((REPO / "specs" / "movielens.features.lock.json").read_text())


def spec_of(name: str) -> dict:
    return yaml.safe_load((REPO / "specs" / f"{name}.yaml").read_text())


def write_project(tmp_path: Path, spec: dict, lock: dict, name: str = "m") -> Path:
    folder = tmp_path / "specs"
    folder.mkdir(parents=True, exist_ok=True)
    spec = {**spec, "name": name}
    spec.pop("workflow", None)
    spec.pop("features_lock", None)
    spec.pop("etl", None)       # not a fact here; and PyYAML (YAML 1.1) would turn its join `on:` key into True
    (folder / f"{name}.features.lock.json").write_text(json.dumps(lock))
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def render(tmp_path: Path, spec: dict, lock: dict | None = None) -> dict[str, str]:
    """{relative path: text} of a fresh render (in memory; nothing is written)."""
    r = render_spec(open_spec(write_project(tmp_path, spec, lock or MOVIELENS_LOCK)))
    return {str(k): v for k, v in r.files.items()}


def movielens(**changes) -> dict:
    spec = spec_of("movielens")
    for dotted, value in changes.items():
        node = spec
        *parents, leaf = dotted.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return spec


def embedding_hparams(files: dict[str, str], name: str = "m") -> dict:
    layers = json.loads(files[f"{name}.json"])["layers"]
    return next(layer for layer in layers if "sparse_embedding_hparam" in layer)["sparse_embedding_hparam"]


# ---- vocabulary: max_vocabulary_size_global (hugectr.md §2.8) --------------------------------------------------------

STATES = {("Adam", "Global"): 2, ("Adam", "Local"): 2, ("Adam", "LazyGlobal"): 3, ("AdaGrad", "Global"): 1,
          ("MomentumSGD", "Global"): 1, ("Nesterov", "Global"): 1, ("SGD", "Global"): 0}


@pytest.mark.parametrize("optimizer,update_type", sorted(STATES))
@pytest.mark.parametrize("gpus", [[0], [0, 1, 2, 3]])
def test_vocabulary_at_35_and_later_divides_by_the_optimizer_states(tmp_path, optimizer, update_type, gpus):
    ws, vec = 100, 16
    spec = movielens(hugectr_version="23.06", optimizer={"type": optimizer, "update_type": update_type},
                     solver__vvgpu=[gpus])
    hp = embedding_hparams(render(tmp_path, spec))
    k = STATES[optimizer, update_type]
    assert hp["max_vocabulary_size_global"] == ws * 1024 * 1024 // ((1 + k) * 4 * vec) * len(gpus)


@pytest.mark.parametrize("optimizer,update_type", [("Adam", "LazyGlobal"), ("SGD", "Global")])
def test_vocabulary_before_35_ignores_the_optimizer(tmp_path, optimizer, update_type):
    spec = movielens(optimizer={"type": optimizer, "update_type": update_type})    # movielens is HugeCTR 3.3
    assert embedding_hparams(render(tmp_path, spec))["max_vocabulary_size_global"] == 100 * 1024 * 1024 // (4 * 16)


# ---- cardinality and slot order ----------------------------------------------------------------------------------

def _schema_json(tmp_path: Path, features: list[dict]) -> Path:
    """A .merlin/schema.json as NVTabular writes it (environment.md §5.1: int64 as strings, Struct numbers floats)."""
    path = tmp_path / "ds" / ".merlin" / "schema.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"feature": features}))
    return path


def _cat(name: str, domain_max: str | None, cardinality: float | None = None) -> dict:
    extra: dict = {"is_list": False, "is_ragged": False, "dtype_item_size": 64.0}
    if cardinality is not None:
        extra["embedding_sizes"] = {"cardinality": cardinality, "dimension": 16.0}
    f: dict = {"name": name, "type": "INT", "annotation": {"tag": ["categorical"], "extraMetadata": [extra]}}
    if domain_max is not None:
        f["intDomain"] = {"name": name, "max": domain_max, "isCategorical": True}
    return f


LABEL = {"name": "rating", "type": "FLOAT", "annotation": {"tag": ["target"],
                                                           "extraMetadata": [{"dtype_item_size": 32.0}]}}


def test_cardinality_is_int_domain_max_plus_one(tmp_path):
    from codegen.workflow import read_features

    path = _schema_json(tmp_path, [_cat("a", "52"), _cat("b", "0"), _cat("c", "9", cardinality=70.0), LABEL])
    cards = {c.name: c.cardinality for c in read_features(path).categorical}
    assert cards == {"a": 53, "b": 1, "c": 70}      # embedding_sizes.cardinality wins where the schema has it


def test_cardinality_below_one_is_refused(tmp_path):
    from codegen.workflow import read_features

    with pytest.raises(UserError, match="cardinality of 'a' must be positive, got 0"):
        read_features(_schema_json(tmp_path, [_cat("a", "-1"), LABEL]))


def test_slot_order_is_the_lock_order_everywhere(tmp_path):
    lock = json.loads(json.dumps(MOVIELENS_LOCK))
    lock["categorical"] = [{"name": "movieId", "dtype": "int64", "cardinality": 900},
                           {"name": "userId", "dtype": "int64", "cardinality": 30}]
    lock.pop("inputs", None)
    files = render(tmp_path, movielens(), lock)
    assert "slot_size_array=[900, 30]" in files["model.py"].replace(" ", "").replace(",", ", ")
    features = json.loads(files["features.json"])
    assert [(c["name"], c["cardinality"]) for s in features["sparse"] for c in s["columns"]] == [
        ("movieId", 900), ("userId", 30)]
    # Serving: each column's ids shifted by the cardinalities of the slots before it.
    nvt = files["triton/m_nvt/1/model.py"]
    assert '("movieId", 0, 1, 900)' in nvt and '("userId", 900, 1, 30)' in nvt


def test_slot_size_array_is_the_categorical_cardinalities_in_order():
    cols = tuple(Column(n, "int64", c) for n, c in (("z", 5), ("a", 50), ("m", 7)))
    assert Features(cols, (), (Column("y", "float32"),)).slot_size_array == [5, 50, 7]


# ---- lock drift: every column property, order included ------------------------------------------------------------

BASE = Features(categorical=(Column("u", "int64", 10), Column("g", "int64", 5, multi_hot=True, max_len=3)),
                continuous=(Column("x", "float32"),), labels=(Column("y", "float32"),))


@pytest.mark.parametrize("change,expected", [
    (lambda f: replace(f, categorical=f.categorical[::-1]), "categorical: lock has ['u', 'g'], workflow has"),
    (lambda f: replace(f, categorical=(replace(f.categorical[0], cardinality=11), f.categorical[1])),
     "categorical.u: lock has int64, cardinality 10, workflow has int64, cardinality 11"),
    (lambda f: replace(f, categorical=(replace(f.categorical[0], dtype="int32"), f.categorical[1])),
     "categorical.u: lock has int64"),
    (lambda f: replace(f, categorical=(f.categorical[0], replace(f.categorical[1], multi_hot=False))),
     "categorical.g: lock has int64, cardinality 5, multi-hot, max_len 3, workflow has int64, cardinality 5, max_len"),
    (lambda f: replace(f, categorical=(f.categorical[0], replace(f.categorical[1], max_len=4))),
     "workflow has int64, cardinality 5, multi-hot, max_len 4"),
    (lambda f: replace(f, continuous=(replace(f.continuous[0], multi_hot=True),)), "continuous.x:"),
    (lambda f: replace(f, continuous=()), "continuous: lock has ['x'], workflow has []"),
    (lambda f: replace(f, labels=(Column("y", "int8"),)), "labels.y: lock has float32, workflow has int8"),
    (lambda f: replace(f, inputs=(Column("u", "int64"),)), None),       # one side unknown: not compared
])
def test_lock_drift_names_every_changed_property(change, expected):
    drift = describe_lock_drift(BASE, change(BASE))
    if expected is None:
        assert drift == []
    else:
        assert any(expected in d for d in drift), drift
    assert describe_lock_drift(BASE, BASE) == []


def test_lock_drift_in_request_columns():
    a = replace(BASE, inputs=(Column("u", "int64"), Column("g", "int64", multi_hot=True)))
    assert describe_lock_drift(a, a) == []
    for other in ((Column("g", "int64", multi_hot=True), Column("u", "int64")),       # order
                  (Column("u", "int64"), Column("g", "int64"))):                        # list-ness
        assert any(d.startswith("inputs:") for d in describe_lock_drift(a, replace(a, inputs=other)))


# ---- batch size and key width rules (HugeCTR's checks, both sides) --------------------------------------------------

@pytest.mark.parametrize("batch,ok", [(2048, True), (2046, True), (2047, False), (2045, False)])
def test_batchsize_must_divide_by_the_gpu_count(tmp_path, batch, ok):
    spec = movielens(solver__vvgpu=[[0, 1]], solver__batchsize=batch, solver__batchsize_eval=2048)
    if ok:
        assert f"batchsize={batch}" in render(tmp_path, spec)["model.py"].replace(" ", "")
    else:
        with pytest.raises(UserError, match="is not divisible by the 2 GPUs"):
            render(tmp_path, spec)


@pytest.mark.parametrize("dtype,i64", [("int64", True), ("uint64", True), ("int32", False), ("uint32", False)])
def test_i64_input_key_follows_the_categorical_dtype(tmp_path, dtype, i64):
    lock = json.loads(json.dumps(MOVIELENS_LOCK))
    for c in lock["categorical"]:
        c["dtype"] = dtype
    files = render(tmp_path, movielens(), lock)
    assert f"i64_input_key={i64}" in files["model.py"].replace(" ", "")
    configs = _configs(files)
    want = "TYPE_INT64" if i64 else "TYPE_UINT32"   # HugeCTR's backend: long long or unsigned int keys
    key = next(t for t in configs["m"].input if t.name == "CATCOLUMN")
    assert mc.DataType.Name(key.data_type) == want
    produced = next(t for t in configs["m_nvt"].output if t.name == "CATCOLUMN")   # what the ensemble feeds it
    assert mc.DataType.Name(produced.data_type) == want


# ---- spec bounds, both sides ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("field,good,bad", [
    ("embeddings.0.embedding_vec_size", 1, 0), ("embeddings.0.embedding_vec_size", 1024, 1025),
    ("model.dropout", 0.0, -0.01), ("model.dropout", 0.99, 1.0),
    ("solver.max_eval_batches", 1, 0), ("training.display", 1, 0), ("triton.max_batch_size", 1, 0),
    ("embeddings.0.workspace_size_per_gpu_in_mb", 1, -1), ("solver.seed", 0, -1),
])
def test_spec_bounds(tmp_path, field, good, bad):
    def spec_with(value):
        spec = movielens()
        spec.setdefault("triton", {})
        node = spec
        *parents, leaf = field.split(".")
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[leaf] = value
        return spec

    assert "model.py" in render(tmp_path / "good", spec_with(good))
    with pytest.raises(UserError) as err:
        render(tmp_path / "bad", spec_with(bad))
    assert field.split(".")[-1] in err.value.format()


# ---- multi-hot columns: nnz_per_slot against the schema's max_len --------------------------------------------------

GENRES_LOCK = json.loads((REPO / "specs" / "movielens_genres.features.lock.json").read_text())


def _genres(max_len: int | None, nnz) -> tuple[dict, dict]:
    lock = json.loads(json.dumps(GENRES_LOCK))
    genres = next(c for c in lock["categorical"] if c["name"] == "genres")
    if max_len is not None:
        genres["max_len"] = max_len
    spec = spec_of("movielens_genres")
    if nnz is None:
        spec["input"]["sparse"][0].pop("nnz_per_slot")
    else:
        spec["input"]["sparse"][0]["nnz_per_slot"] = nnz
    return spec, lock


def _sparse_input(files: dict[str, str]) -> dict:
    return json.loads(files["m.json"])["layers"][0]["sparse"][0]


@pytest.mark.parametrize("nnz,ok", [([1, 1, 3], True), ([1, 1, 4], True), ([1, 1, 2], False), (3, True),
                                    (2, False)])
def test_nnz_per_slot_must_hold_the_longest_list(tmp_path, nnz, ok):
    spec, lock = _genres(3, nnz)
    if ok:
        want = nnz if isinstance(nnz, list) else [nnz] * 3
        assert _sparse_input(render(tmp_path, spec, lock))["nnz_per_slot"] == want
    else:
        with pytest.raises(UserError, match=r"is less than the longest 'genres' list \(3\)"):
            render(tmp_path, spec, lock)


def test_nnz_per_slot_defaults_to_one_per_one_hot_slot_and_max_len_per_list(tmp_path):
    spec, lock = _genres(4, None)
    assert _sparse_input(render(tmp_path, spec, lock))["nnz_per_slot"] == [1, 1, 4]
    spec, lock = _genres(None, None)        # a ragged list without a recorded maximum: the spec must say
    with pytest.raises(UserError, match="'genres' is multi-hot and its schema records no maximum length"):
        render(tmp_path / "b", spec, lock)


@pytest.mark.parametrize("ws,slot_size_array,ok", [(0, False, False), (1, False, True), (0, True, True)])
def test_workspace_or_slot_size_array_is_required(tmp_path, ws, slot_size_array, ok):
    spec = movielens(hugectr_version="23.06")
    spec["embeddings"][0].update(workspace_size_per_gpu_in_mb=ws, slot_size_array=slot_size_array)
    if ok:
        hp = embedding_hparams(render(tmp_path, spec))
        assert hp["max_vocabulary_size_global"] == ws * 1024 * 1024 // (3 * 4 * 16)    # Adam: k = 2
    else:
        with pytest.raises(UserError, match="need workspace_size_per_gpu_in_mb or slot_size_array"):
            render(tmp_path, spec)


# ---- Triton tensors: dims [-1], dtypes, max_batch_size --------------------------------------------------------------

def _configs(files: dict[str, str]) -> dict[str, "mc.ModelConfig"]:
    out = {}
    for path, text in files.items():
        if path.startswith("triton/") and path.endswith("/config.pbtxt"):
            cfg = text_format.Parse(text, mc.ModelConfig())
            out[cfg.name] = cfg
    return out


def test_every_triton_tensor_is_variable_length_with_its_dtype(tmp_path):
    files = render(tmp_path, movielens(triton={"max_batch_size": 96}))
    configs = _configs(files)
    assert set(configs) == {"m", "m_nvt", "m_ens"}
    for cfg in configs.values():
        for t in (*cfg.input, *cfg.output):
            assert list(t.dims) == [-1], (cfg.name, t.name)
    types = {(cfg.name, t.name): mc.DataType.Name(t.data_type)
             for cfg in configs.values() for t in (*cfg.input, *cfg.output)}
    assert types == {
        ("m", "DES"): "TYPE_FP32", ("m", "CATCOLUMN"): "TYPE_INT64", ("m", "ROWINDEX"): "TYPE_INT32",
        ("m", "OUTPUT0"): "TYPE_FP32",
        ("m_nvt", "userId"): "TYPE_INT64", ("m_nvt", "movieId"): "TYPE_INT64",
        ("m_nvt", "DES"): "TYPE_FP32", ("m_nvt", "CATCOLUMN"): "TYPE_INT64", ("m_nvt", "ROWINDEX"): "TYPE_INT32",
        ("m_ens", "userId"): "TYPE_INT64", ("m_ens", "movieId"): "TYPE_INT64", ("m_ens", "OUTPUT0"): "TYPE_FP32",
    }


def test_request_dtypes_follow_the_lock(tmp_path):
    lock = json.loads(json.dumps(MOVIELENS_LOCK))
    lock["inputs"] = [{"name": "userId", "dtype": "int32"}, {"name": "movieId", "dtype": "float64"}]
    ens = _configs(render(tmp_path, movielens(), lock))["m_ens"]
    assert {t.name: mc.DataType.Name(t.data_type) for t in ens.input} == {"userId": "TYPE_INT32",
                                                                         "movieId": "TYPE_FP64"}


@pytest.mark.parametrize("mbs", [1, 96])
def test_max_batch_size_is_equal_in_every_config_and_ps_json(tmp_path, mbs):
    files = render(tmp_path, movielens(triton={"max_batch_size": mbs}))
    assert {cfg.name: cfg.max_batch_size for cfg in _configs(files).values()} == {"m": mbs, "m_nvt": mbs,
                                                                                  "m_ens": mbs}
    ps = json.loads(files["triton/ps.json"])
    assert [int(m["max_batch_size"]) for m in ps["models"]] == [mbs]


def test_config_text_parses_back_to_the_same_message(tmp_path):
    """config.pbtxt goes through text_format only (no per-run parse-back): the round trip is this test."""
    from codegen.triton.plan.configs import config_text, model_config

    hostile = 'x" }\ninput { name: "evil'
    lock = json.loads(json.dumps(MOVIELENS_LOCK))
    lock["inputs"] = [{"name": hostile, "dtype": "int64"}, {"name": "movieId", "dtype": "int64"}]
    r = render_spec(open_spec(write_project(tmp_path, movielens(), lock)))
    for plan in r.triton.models:
        text = config_text(plan, "# header\n")
        assert text_format.Parse(text, mc.ModelConfig()) == model_config(plan)
    ens = _configs({str(k): v for k, v in r.files.items()})["m_ens"]
    assert [t.name for t in ens.input] == [hostile, "movieId"]


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "out"
    for rel, text in files.items():
        if rel.startswith("triton/"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    return root / "triton"


@pytest.mark.parametrize("delta,defect", [(0, False), (-1, False), (1, True), (2, True)])
def test_validate_ensemble_batch_must_fit_every_step(tmp_path, delta, defect):
    from codegen.triton import validate_repository

    repo = _repo(tmp_path, render(tmp_path, movielens(triton={"max_batch_size": 64})))
    path = repo / "m_ens" / "config.pbtxt"
    path.write_text(path.read_text().replace("max_batch_size: 64", f"max_batch_size: {64 + delta}"))
    found = [f for f in validate_repository(repo) if f.file.startswith("m_ens") and f.field == "max_batch_size"]
    assert bool(found) == defect, found


# ---- keysets: 32-bit keys are unsigned ------------------------------------------------------------------------------

def test_32_bit_keysets_are_unsigned(tmp_path):
    from codegen.keysets.write import read_keyset, to_keyset, write_keyset

    keys = to_keyset(np.array([2**32 - 1, 0, 2**31 + 5, 7]), "int32", where="t")
    assert keys.dtype == np.dtype("<u4") and keys.tolist() == [0, 7, 2**31 + 5, 2**32 - 1]
    write_keyset(tmp_path / "k", keys)
    raw = (tmp_path / "k").read_bytes()
    assert len(raw) == 16 and int.from_bytes(raw[8:12], "little", signed=False) == 2**31 + 5
    assert read_keyset(tmp_path / "k", "int32").tolist() == [0, 7, 2**31 + 5, 2**32 - 1]
    wide = to_keyset(np.array([2**40, 3]), "int64", where="t")
    assert wide.dtype == np.dtype("<i8") and wide.tolist() == [3, 2**40]


@pytest.mark.parametrize("key_type,key,ok", [("int32", 2**32 - 1, True), ("int32", 2**32, False),
                                             ("int32", 0, True), ("int32", -1, False),
                                             ("int64", 2**63 - 1, True), ("int64", -1, False)])
def test_keyset_key_range(key_type, key, ok):
    from codegen.keysets.write import to_keyset

    if ok:
        assert to_keyset(np.array([key], dtype=np.int64), key_type, where="t").tolist() == [key]
    else:
        with pytest.raises(UserError, match=f"key {key} does not fit a {key_type} keyset"):
            to_keyset(np.array([key], dtype=np.int64), key_type, where="t")


# ---- the PyTorch trainer: eval mode, seeds --------------------------------------------------------------------------

def _trainer(tmp_path: Path, spec: dict):
    files = render(tmp_path, spec)
    path = tmp_path / "train_torch_under_test.py"
    path.write_text(files["train_torch.py"])
    module_spec = importlib.util.spec_from_file_location("train_torch_under_test", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    try:
        module_spec.loader.exec_module(module)
    finally:
        del sys.modules[module_spec.name]
    return module, files


def test_evaluate_runs_the_model_in_eval_mode_and_restores_training(tmp_path):
    import torch

    class Probe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dropout = torch.nn.Dropout(0.5)
            self.modes: list[bool] = []

        def forward(self, dense, *sparse):
            self.modes.append(self.training)
            return self.dropout(torch.ones(dense.shape[0], 1))

    n = 10
    arrays = {"labels": np.arange(n, dtype=np.float32).reshape(n, 1) % 2, "dense": np.zeros((n, 0), np.float32),
              "sparse": [np.zeros((n, 2), np.int64)]}
    from codegen.runtime.data import Columns
    from codegen.runtime.evaluation import evaluate

    columns = Columns(arrays, torch.device("cpu"), on_device=True)
    model = Probe()
    model.train()
    auc, loss = evaluate(model, columns, 4)
    assert model.modes == [False, False, False]          # 3 batches, every one without dropout
    assert model.training                                  # back to training afterwards
    assert loss == pytest.approx(float(torch.nn.functional.binary_cross_entropy_with_logits(
        torch.ones(n), torch.from_numpy(arrays["labels"][:, 0]))))


def test_seed_of_the_spec_reaches_both_trainers(tmp_path):
    tt, files = _trainer(tmp_path, movielens(solver__seed=1234))
    assert "seed=1234" in files["model.py"].replace(" ", "")
    from codegen.runtime.cli import parse_args

    assert parse_args(tt.JOB, tt.__file__, []).seed == 1234
    other, _ = _trainer(tmp_path / "b", movielens())
    assert parse_args(other.JOB, other.__file__, []).seed == 0                  # HugeCTR's default seed when the spec sets none
