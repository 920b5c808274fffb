"""ctrgen weights (issue 47): a PyTorch checkpoint -> HugeCTR's files -> a PyTorch checkpoint is the same bit for bit
for every preset family; the files are what an independent reader written from the format (hugectr.md §5, read as
hugectr2onnx reads them) finds; keys map to rows through the lock's slot offsets. Small models: each spec's lock cut
to 3-6 rows a slot (tests/weights_cases.py); everything in this process."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from weights_cases import read_dense_as_hugectr2onnx, read_table, seeded, tiny_spec

from codegen.weights.run import _template, export_names, export_weights, import_weights, open_model

# One spec per preset family (model.preset), with every layer type that has weights among them: InnerProduct (all),
# MultiCross (dcn), WeightMultiply (deepfm), MLP (dlrm_mlp), BatchNorm (movielens_seed001), LayerNorm (bst);
# localized tables (dlrm, movielens, mmoe), several tables (wdl, din, bst), multi-hot slots (movielens_seed001).
FAMILIES = ("wdl", "dcn", "deepfm", "dlrm", "dlrm_mlp", "movielens", "movielens_seed001", "ncf", "gmf", "neumf",
            "din", "bst", "mmoe", "shared_bottom")
READABLE = ("wdl", "dcn", "deepfm", "dlrm", "dlrm_mlp", "movielens_seed001", "ncf")   # the reader's layer types


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{family: (spec path, Spec, seeded state, HugeCTR folder)}, each exported once."""
    root = tmp_path_factory.mktemp("weights")
    (root / "hugectr").mkdir()
    cases = {}
    for i, name in enumerate(FAMILIES):
        path = tiny_spec(root / "specs", name)
        spec = open_model(path)
        _, template = _template(spec)
        state = seeded(template, i, [t.key for t in spec.layout.tables])
        dense, sparse = export_names(spec, 7, None)
        export_weights(spec, state, name, root / "hugectr" / name, dense, sparse, force=False)
        cases[name] = (path, spec, state, root / "hugectr" / name)
    return cases


@pytest.mark.parametrize("name", FAMILIES)
def test_torch_to_hugectr_to_torch_is_bit_identical(exported, tmp_path, name):
    path, spec, state, folder = exported[name]
    record = import_weights(path, folder, None, tmp_path / "run", force=False)
    back = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert sorted(back) == sorted(state)
    for key, value in state.items():
        if key.endswith("num_batches_tracked"):      # not in HugeCTR's files: 0 after an import
            assert back[key].item() == 0
        else:
            assert torch.equal(back[key], value), key
    assert record["iteration"] == 7 and set(record["rows_without_key"].values()) == {0}
    checkpoint = torch.load(tmp_path / "run" / "checkpoint_7.pt", weights_only=True)
    assert checkpoint["optimizer"] == {} and checkpoint["iteration"] == 7
    assert checkpoint["features"] == json.loads((tmp_path / "run" / "features.json").read_text())


@pytest.mark.parametrize("name", READABLE)
def test_the_dense_file_is_what_a_reader_of_the_format_finds(exported, name):
    """Each weight layer's arrays at its place in network order, in HugeCTR's orientation (kernel (in, out))."""
    path, spec, state, folder = exported[name]
    graph = path.parent / "graph.json"
    graph.write_text(spec.files[next(p for p in spec.files if p.name == f"{spec.model.name}.json")])
    found = read_dense_as_hugectr2onnx(graph, folder / "_dense_7.model")
    attrs = {p.layer: p.key.split(".")[0] for p in spec.layout.dense if p.key}   # the layer's module
    assert found
    for top, arrays in found.items():
        layer = next(la for la in spec.model.job.graph.layers if la.tops[0] == top)
        if layer.type == "MultiCross":
            weight, bias = state[f"{attrs[top]}.weight"], state[f"{attrs[top]}.bias"]   # the runtime's (layers, width)
            assert all(np.array_equal(arrays[2 * i], weight[i].numpy()) and
                       np.array_equal(arrays[2 * i + 1], bias[i].numpy()) for i in range(len(weight)))
        elif layer.type == "MLP":
            linears = [k for k in state if k.startswith(f"{attrs[top]}.") and k.endswith(".weight")]
            for j, key in enumerate(sorted(linears, key=lambda k: int(k.split(".")[-2]))):
                assert np.array_equal(arrays[2 * j], state[key].numpy().T)
                bias = state.get(key.replace(".weight", ".bias"))
                assert np.array_equal(arrays[2 * j + 1], bias.numpy() if bias is not None else 0 * arrays[2 * j + 1])
        elif layer.type in ("InnerProduct", "FusedInnerProduct"):
            assert np.array_equal(arrays[0], state[f"{attrs[top]}.weight"].numpy().T)
            assert np.array_equal(arrays[1], state[f"{attrs[top]}.bias"].numpy())
        else:   # BatchNorm / LayerNorm (gamma, beta), WeightMultiply
            assert all(np.array_equal(a, state[f"{attrs[top]}.{n}"].numpy()) for a, n in zip(arrays, ("weight", "bias")))
    if name == "movielens_seed001":      # the BatchNorm's running statistics beside it, as HugeCTR lays them out
        ntp = json.loads((folder / "_dense_7.model.ntp.json").read_text())
        bn = next(p.prefix for p in [*spec.layout.stats])
        assert ntp["layers"][0]["type"] == "BatchNorm"
        assert np.array_equal(np.float32(ntp["layers"][0]["mean"]), state[bn + "running_mean"].numpy())
        assert np.array_equal(np.float32(ntp["layers"][0]["var"]), state[bn + "running_var"].numpy())


@pytest.mark.parametrize("name", ["wdl", "dlrm", "movielens_seed001"])
def test_each_key_is_the_id_plus_its_slots_offset_over_every_slot_of_the_model(exported, name):
    """HugeCTR's keys: slot s's ids plus the cardinalities of every slot before it (all tables; hugectr.md §1.2);
    the PyTorch row: the id plus the cardinalities of the table's slots before it. Offsets from the lock here."""
    path, spec, state, folder = exported[name]
    lock = json.loads(next(path.parent.glob("*.features.lock.json")).read_text())
    cards = {c["name"]: c["cardinality"] for c in lock["categorical"]}
    order = [c for s in spec.model.job.graph.sparse for c in s.columns]
    start = dict(zip(order, np.cumsum([0] + [cards[c] for c in order])[:-1].tolist()))
    for i, e in enumerate(spec.model.job.graph.embeddings):
        table = read_table(folder / f"{i}_sparse_7.model", e.vec_size)
        columns = next(s.columns for s in spec.model.job.graph.sparse if s.name == e.bottom)
        weight = next(v for k, v in state.items() if k.endswith(".weight") and v.shape[1] == e.vec_size
                      and v.shape[0] == sum(cards[c] for c in columns) + 1)
        row = 0
        for column in columns:
            for ident in range(cards[column]):
                assert np.array_equal(table[start[column] + ident], weight[row + ident].numpy())
            row += cards[column]
        assert len(table) == row            # one key per row; none for the padding row
        if "Localized" in e.embedding_type:
            slots = np.fromfile(folder / f"{i}_sparse_7.model" / "slot_id", dtype="<u8")
            assert slots.tolist() == [k for k, c in enumerate(columns) for _ in range(cards[c])]
