"""The torch target's embedding collection (runtime/collection.py, model/torch_collection.py): each lookup against a
numpy reference written from HugeCTR's definition, a collection spec trained through its generated train_torch.py,
and the refusals, one line each.

The reference follows HugeCTR 23.06: a key of a table is its row (embedding/operators/keys_to_indices.cu,
keys_to_indices_kernel: row = table start + key, no offset per slot), the Parquet reader adds the sums of
slot_size_array before a slot (src/pybind/add_input.cpp), average divides a sample's sum by its number of keys
(embedding/operators/model_forward.cu, get_average_pooling_factor), concat writes the keys' vectors side by side.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from codegen.errors import UserError
from codegen.pipeline import open_spec, render_spec
from codegen.runtime.collection import CollectionTable
from test_embedding_collection import CONFIG, PLACEHOLDER, PLANNER_38, _import

REPO = Path(__file__).resolve().parents[1]
# One table for all keys: the reader's offsets (1000, 1200, 4200) keep every input's keys below its rows.
SHARED = CONFIG.replace("max_vocabulary_size=SIZES[i]", "max_vocabulary_size=sum(SIZES)")


def _reference(weight: np.ndarray, ids: np.ndarray, offset: int, combiner: str) -> np.ndarray:
    """HugeCTR's lookup of one-slot ``ids`` (batch, 1, nnz; -1: no key) in a table of rows ``weight``."""
    out = []
    for sample in ids[:, 0, :]:
        keys = [int(k) + offset for k in sample if k >= 0]
        vecs = weight[keys] if keys else np.zeros((0, weight.shape[1]))
        if combiner == "concat":
            row = np.zeros((len(sample), weight.shape[1]))
            row[:len(keys)] = vecs
            out.append(row.reshape(-1))
        else:
            total = vecs.sum(axis=0) if keys else np.zeros(weight.shape[1])
            if combiner == "average":   # generic_lookup.cuh: accum /= the sample's number of keys, 0 / 0 with none
                with np.errstate(invalid="ignore"):
                    total = total / np.float64(len(keys))
            out.append(total)
    return np.stack(out)


@pytest.mark.parametrize("combiner", ["sum", "average", "concat"])
def test_lookups_equal_hugectrs_definition(combiner):
    """Two inputs share one table (their keys meet in its rows, offset as the reader offsets them); tolerance 1e-6
    (float32 sums of at most three vectors)."""
    torch.manual_seed(0)
    table = CollectionTable(40, 4, name="t")
    w = table.weight.detach().numpy()[:40].astype(np.float64)
    assert np.abs(w).max() <= np.sqrt(1 / 40) and not table.weight[40].any()   # Default init; the padding row
    a = torch.tensor([[[3, 7, -1]], [[5, -1, -1]], [[-1, -1, -1]], [[0, 1, 2]]])
    b = torch.tensor([[[9, -1, -1]], [[3, 3, 4]], [[1, -1, -1]], [[-1, -1, -1]]])
    out_a, out_b = table(a, 0, combiner), table(b, 20, combiner)
    np.testing.assert_allclose(out_a.detach().numpy(), _reference(w, a.numpy(), 0, combiner), atol=1e-6)
    np.testing.assert_allclose(out_b.detach().numpy(), _reference(w, b.numpy(), 20, combiner), atol=1e-6)
    assert out_a.shape == (4, 12 if combiner == "concat" else 4)
    # backward: the shared rows take both lookups' gradients; a key repeated in a sample counts twice
    assert np.isnan(out_a[2].detach().numpy()).all() == (combiner == "average")   # sample 2 of a has no key
    (out_a.nan_to_num().sum() + out_b.sum()).backward()
    grad = table.weight.grad.numpy()[:, 0]
    counts = np.zeros(41)
    for ids, off in ((a.numpy(), 0), (b.numpy(), 20)):
        for sample in ids[:, 0, :]:
            keys = [int(k) + off for k in sample if k >= 0]
            for k in keys:
                counts[k] += 1.0 / len(keys) if combiner == "average" else 1.0
    counts[40] = 0.0                                               # the padding row never trains
    np.testing.assert_allclose(grad, counts, atol=1e-6)


def torch_spec(tmp_path: Path, text: str, edit=None, version: str = "23.06") -> Path:
    """The spec `ctrgen import` writes for the script ``text`` at ``version``, with the torch target added and
    ``edit(data)`` applied to it."""
    _, spec = _import(tmp_path, text, version)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["targets"] = ["hugectr", "torch"]
    if edit:
        edit(data)
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


def test_generated_model_reads_each_lookup_with_its_reader_offset(tmp_path):
    rendered = render_spec(open_spec(torch_spec(tmp_path, SHARED)))
    text = rendered.files[next(k for k in rendered.files if str(k) == "train_torch.py")]
    assert text.count("CollectionTable(4250, 16") == 3              # one module per EmbeddingTableConfig
    assert 'e1 = self.table_t1(s1, 1000, "sum").reshape(-1, 1, 16)' in text   # t1 read by s1 and s2
    assert 'e2 = self.table_t1(s2, 1200, "average").reshape(-1, 1, 16)' in text
    assert 'e3 = self.table_t2(s3, 4200, "concat").reshape(-1, 1, 48)' in text   # 3 keys x 16, HugeCTR's 3D top


def test_a_collection_spec_trains_through_its_trainer():
    """Import, generate, synthetic Parquet, two steps of the generated train_torch.py in this process (the corpus
    tool's own run; about a second), with two static tables and a dynamic one."""
    sys.path.insert(0, str(REPO))
    from tools.corpus_trains import train_unit

    dynamic_t1 = SHARED.replace('max_vocabulary_size=sum(SIZES)', 'max_vocabulary_size=-1 if i == 1 else sum(SIZES)')
    assert train_unit(dynamic_t1, "23.06", None, name="ebc_smoke") == {"status": "trained", "stage": "train",
                                                                       "torch_added": True}


def _refusal(tmp_path: Path, text: str, edit=None) -> str:
    with pytest.raises(UserError) as exc:
        render_spec(open_spec(torch_spec(tmp_path, text, edit)))
    lines = [line for line in str(exc.value).splitlines() if line.strip()]
    return "\n".join(lines)


def test_keys_past_their_tables_rows_are_refused(tmp_path):
    """Tables sized per slot under a Parquet reader that offsets the keys: HugeCTR overflows; refused, not wrapped."""
    msg = _refusal(tmp_path, CONFIG)
    assert "embedding_collection.lookups[1].table" in msg
    assert "input 's1''s keys reach 1200 (the Parquet reader's slot_size_array offset 1000 + cardinality 200), " \
           "past the 200 rows of table 1" in msg


def test_a_dynamic_table_holds_the_keys_its_inputs_can_hold(tmp_path):
    """max_vocabulary_size -1: the keys of s1 (offset 1000, 200 ids) and s2 (offset 1200, 3000 ids) share table t1,
    which holds keys 1000 .. 4199: 3200 rows from base 1000, each key its own row, as the hash table gives it."""
    def edit(d):
        d["embedding_collection"]["tables"][1]["max_vocabulary_size"] = -1

    rendered = render_spec(open_spec(torch_spec(tmp_path, SHARED, edit)))
    text = rendered.files[next(k for k in rendered.files if str(k) == "train_torch.py")]
    assert 'self.table_t1 = CollectionTable(3200, 16, name="t1", bound=0.05)' in text   # cuco's U(-0.05, 0.05)
    assert 'self.table_t1(s1, 0, "sum")' in text and 'self.table_t1(s2, 200, "average")' in text
    assert 'CollectionTable(4250, 16, name="t0")' in text                               # static: unchanged


def test_keys_outside_a_tables_key_range_and_other_optimizers_are_refused(tmp_path):
    """3.8's tables of keys 0 .. SIZES[i] - 1 read through the Parquet reader's offsets (1000, 1200, 4200): HugeCTR's
    lookup would read the last row (past max_key); refused, naming the range. A static table takes SGD, AdaGrad or
    Ftrl only."""
    with pytest.raises(UserError) as exc:
        render_spec(open_spec(torch_spec(tmp_path, PLANNER_38, lambda d: d["optimizer"].update(type="Adam"), "3.8")))
    msg = str(exc.value)
    assert "embedding_collection.lookups[1].table" in msg
    assert "input 's1''s keys run from 1000 to 1199, outside table 1's keys 0 .. 199 (min_key, max_key)" in msg
    assert "HugeCTR updates a table of max_vocabulary_size > 0 with SGD or AdaGrad only, not Adam" in msg


def _hugectr_row(key: int, min_key: int, max_key: int) -> int:
    """The row HugeCTR 3.7 - 4.0 reads for ``key`` in a table of one shard: its keys min_key .. max_key - 1 in order
    (ragged_static_embedding.cu), the index of the last one <= key (embedding/view.hpp,
    binary_search_index_lower_bound)."""
    keys = list(range(min_key, max_key))
    return sum(1 for k in keys if k <= key) - 1


@pytest.mark.parametrize("text,version", [(PLANNER_38, "3.8"), (PLACEHOLDER, "3.7")], ids=["3.8", "3.7"])
def test_a_tables_key_range_maps_key_to_row_as_hugectr(tmp_path, text, version):
    """Each table holds exactly its slot's keys (min_key = the reader's offset, max_key = offset + size): its rows are
    max_key - min_key (not max_vocabulary_size) and key k is row k - min_key. The generated lookups against the
    reference row of each key (exact: a gather)."""
    ranged = text.replace("min_key=0,", "min_key=sum(SIZES[:i]),").replace(
        "min_key=0, max_key=SIZES[i]", "min_key=sum(SIZES[:i]), max_key=sum(SIZES[:i + 1])").replace(
        "max_key=SIZES[i])", "max_key=sum(SIZES[:i + 1]))")
    ranged = ranged.replace("max_vocabulary_size=SIZES[i]", "max_vocabulary_size=5")   # only static vs dynamic
    assert ranged.count("sum(SIZES[:i + 1])") == 1
    rendered = render_spec(open_spec(torch_spec(tmp_path, ranged, version=version)))
    train = rendered.files[next(k for k in rendered.files if str(k) == "train_torch.py")]
    sizes, starts = [1000, 200, 3000, 50], [0, 1000, 1200, 4200]
    for i, (size, start) in enumerate(zip(sizes, starts)):
        assert f"CollectionTable({size}, 16, " in train
        offset = int(re.search(rf'\(s{i}, (-?\d+), "sum"\)', train).group(1))   # reader offset - min_key
        table = CollectionTable(size, 2, name=str(i))
        ids = torch.tensor([[[0]], [[size - 1]], [[size // 2]]])
        got = table(ids, offset, "sum").detach().numpy()
        want = table.weight.detach().numpy()[[_hugectr_row(int(k) + start, start, start + size)
                                              for k in ids.reshape(-1)]]
        assert np.array_equal(got, want)
        assert np.sqrt(1 / size) >= np.abs(table.weight.detach().numpy()[:size]).max()   # sqrt(1 / keys) bound
    if version == "3.8":   # and it trains: two steps of its generated train_torch.py in this process (about 0.5 s)
        sys.path.insert(0, str(REPO))
        from tools.corpus_trains import train_unit

        assert train_unit(ranged, version, None, name="ebc_ranged") == {"status": "trained", "stage": "train",
                                                                       "torch_added": True}


def test_a_dynamic_table_under_a_moving_optimizer_is_refused(tmp_path):
    def edit(d):
        for t in d["embedding_collection"]["tables"]:
            t["max_vocabulary_size"] = -1
        d["optimizer"]["type"] = "Adam"

    msg = _refusal(tmp_path, SHARED, edit)
    assert "optimizer.type" in msg and "the torch target's dense step of a dynamic table would move rows HugeCTR's " \
        "hash table leaves alone, not Adam" in msg


def test_without_reader_offsets_the_slots_are_sized_from_the_data(tmp_path):
    """No slot_size_array (the keys are the ids as they are): the columns need no cardinality. A dynamic table takes
    the largest of its inputs' rows from the data at start-up; an id past a static table's max_vocabulary_size is
    reported, not wrapped (runtime/row_counts.py)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from codegen.runtime.errors import DataError
    from codegen.runtime.row_counts import size_from_data

    text = SHARED.replace(", slot_size_array=SIZES", "").replace(
        "max_vocabulary_size=sum(SIZES)", "max_vocabulary_size=-1 if i == 1 else SIZES[i]")
    rendered = render_spec(open_spec(torch_spec(tmp_path, text)))
    files = {str(k): v for k, v in rendered.files.items()}
    assert 'CollectionTable(max([cardinalities["s1"][0], cardinalities["s2"][0]]), 16, name="t1", bound=0.05)' \
        in files["train_torch.py"]
    features = json.loads(files["features.json"])
    s0 = features["sparse"][0]
    assert s0["hugectr_tables"] == [{"name": "t0", "max_vocabulary_size": 1000, "embedding_collection": True}]
    data = tmp_path / "part.parquet"
    pq.write_table(pa.table({c["name"]: [0, 1000] if c["name"] == s0["columns"][0]["name"] else [0, 1]
                             for s in features["sparse"] for c in s["columns"]}), data)
    with pytest.raises(DataError, match=r"largest id 1000 needs 1001 rows of table 't0', more than its "
                                        r"max_vocabulary_size 1000 \(HugeCTR's embedding collection overflows\)"):
        size_from_data(features, [data])


def test_the_grouped_lookup_writes_its_parts_side_by_side(tmp_path):
    """23.04+'s grouped embedding_lookup (lists of tables, bottoms and combiners, one top): (batch, sum of the widths)
    (model_compile.cpp's batch-major output), read by the dense layers as it is."""
    def edit(d):
        lookups = d["embedding_collection"]["lookups"]
        d["embedding_collection"]["lookups"] = [{
            "table": [lk["table"] for lk in lookups], "bottom": [lk["bottom"] for lk in lookups], "top": "emb_all",
            "combiner": [lk.get("combiner", "sum") for lk in lookups]}]
        d["model"]["layers"] = [
            {"type": "Concat", "bottom": ["emb_all", "dense"], "top": "all"},
            {"type": "InnerProduct", "bottom": "all", "top": "fc", "num_output": 1},
            {"type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}]

    rendered = render_spec(open_spec(torch_spec(tmp_path, SHARED, edit)))
    text = rendered.files[next(k for k in rendered.files if str(k) == "train_torch.py")]
    assert 'emb_all = torch.cat([self.table_t0(s0, 0, "sum"), self.table_t1(s1, 1000, "sum"), ' \
        'self.table_t1(s2, 1200, "average"), self.table_t2(s3, 4200, "concat")], dim=1)  # (B, 96)' in text
    assert rendered.job.graph.tensor_shapes()["all"].dims == (100,)
