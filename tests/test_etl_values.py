"""The values the generated etl.py computes, on its own functions (rendered from a spec and imported, no ETL run):
the validation split (each row drawn by its number and the spec's seed, the spec's fraction, partitions placed by
their offsets), the training shuffle (a permutation per partition seeded by the spec's seed and the partition
number), the on-disk dtypes and slot order, and the Categorify / HashedCross options as the workflow's operators hold
them. `make mutate` changes each of these facts (tools/mutate.py, the etl-* mutants)."""

from __future__ import annotations

import copy
import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_etl import ETL, LISTS, _frame, _spec

from codegen.etl.run import etl_plan, render_for
from codegen.pipeline import open_spec

MASK64 = (1 << 64) - 1


def splitmix_uniform(row: int, seed: int) -> float:
    """The split's number for one row, written out with Python integers: splitmix64's finaliser (Steele, Lea and
    Flood's constants) of row + (seed + 1) x the golden-ratio increment, its top 53 bits as a fraction of 1."""
    z = (row + (seed + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return (z >> 11) / 2.0**53


def etl_module(tmp_path: Path, etl: dict, name: str = "etltest"):
    """The etl.py ctrgen renders for ``etl``, imported as a module."""
    ctx = open_spec(_spec(tmp_path, etl, name=name))
    path = tmp_path / f"{name}_etl.py"
    path.write_text(render_for(ctx, etl_plan(ctx)), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"etl_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def held_out(fraction: float, seed: int, shuffle: bool = True, shuffle_seed: int = 11) -> dict:
    """ETL without validation files: the split holds out ``fraction`` of the training rows."""
    etl = copy.deepcopy(ETL)
    del etl["inputs"]["valid"]
    etl["split"] = {"valid_fraction": fraction, "seed": seed}
    etl["output"].update(shuffle=shuffle, seed=shuffle_seed)
    return etl


ROWS = 3000


def test_split_draws_each_row_by_its_number_and_the_spec_seed(tmp_path):
    m = etl_module(tmp_path, held_out(0.25, 7))
    assert (m.VALID_FRACTION, m.SPLIT_SEED) == (0.25, 7)
    expected = np.array([splitmix_uniform(r, 7) for r in range(ROWS)])
    np.testing.assert_array_equal(m.uniform(np.arange(ROWS, dtype=np.int64), 7), expected)

    raw = _frame(ROWS, 3)          # I2 (normal floats) tells the rows apart: the hashing ETL resets the index
    valid = m.prepare(raw, [0], True, {"number": 0})
    train = m.prepare(raw, [0], False, {"number": 0})
    held = expected < 0.25
    np.testing.assert_array_equal(valid["I2"].to_numpy(), raw["I2"].to_numpy()[held])
    np.testing.assert_array_equal(train["I2"].to_numpy(), raw["I2"].to_numpy()[~held])
    assert 0.22 < held.mean() < 0.28                         # the fraction asked for: 25 % of 3000 rows, give or take
    assert "extra" not in valid.columns and "tags" not in train.columns     # dropped columns

    # A partition is placed by its offset: splitting the rows in two partitions draws the same rows.
    first, second = raw.iloc[:1100], raw.iloc[1100:]
    parts = [m.prepare(part, [0, 1100], True, {"number": i}) for i, part in enumerate((first, second))]
    np.testing.assert_array_equal(pd.concat(parts)["I2"].to_numpy(), raw["I2"].to_numpy()[held])

    # Another seed, another draw.
    other = etl_module(tmp_path / "seed8", held_out(0.25, 8))
    assert not np.array_equal(other.prepare(raw, [0], True, {"number": 0})["I2"].to_numpy(),
                              valid["I2"].to_numpy())


def test_training_rows_are_shuffled_per_partition_with_the_spec_seed(tmp_path):
    m = etl_module(tmp_path, held_out(0.2, 0, shuffle=True, shuffle_seed=11))
    assert m.SHUFFLE is True and m.SHUFFLE_SEED == 11
    raw = _frame(500, 4)
    for number in (0, 3):
        got = m.shuffle_partition(raw, {"number": number})
        order = np.random.default_rng([11, number]).permutation(len(raw))
        np.testing.assert_array_equal(got["I2"].to_numpy(), raw["I2"].to_numpy()[order])
    three, four = (m.shuffle_partition(raw, {"number": n})["I2"].to_numpy() for n in (3, 4))
    assert not np.array_equal(three, four)                    # each partition its own order
    np.testing.assert_array_equal(np.sort(three), np.sort(raw["I2"].to_numpy()))     # the same rows
    assert etl_module(tmp_path / "off", held_out(0.2, 0, shuffle=False)).SHUFFLE is False


def test_validation_rows_are_shuffled_where_the_spec_says_so(tmp_path):
    """output.shuffle_valid (seed 001's Shuffle.PER_WORKER on both splits): off by default (seed 000's); on, each
    validation partition is permuted by a seed stream of its own ([seed, partition, 1]), not the training rows'."""
    assert etl_module(tmp_path / "off", held_out(0.2, 0)).SHUFFLE_VALID is False
    etl = held_out(0.2, 0, shuffle_seed=11)
    etl["output"]["shuffle_valid"] = True
    m = etl_module(tmp_path, etl)
    assert m.SHUFFLE_VALID is True
    raw = _frame(500, 4)
    got = m.shuffle_partition(raw, {"number": 3}, split=1)["I2"].to_numpy()
    np.testing.assert_array_equal(got, raw["I2"].to_numpy()[np.random.default_rng([11, 3, 1]).permutation(500)])
    assert not np.array_equal(got, m.shuffle_partition(raw, {"number": 3})["I2"].to_numpy())


def test_on_disk_dtypes_and_slot_order(tmp_path):
    m = etl_module(tmp_path, ETL)
    # The slot order: crossed columns first, then the categorical groups in spec order.
    assert m.CATEGORICAL == ["C1_C2", "C2_X_C3", "C1", "C2", "C3"]
    assert (m.CONTINUOUS, m.LABELS) == (["I1", "I2"], ["y"])
    # HugeCTR's Parquet reader: int64 ids, float32 continuous columns and labels.
    assert m.OUTPUT_DTYPES == {"C1_C2": "int64", "C2_X_C3": "int64", "C1": "int64", "C2": "int64", "C3": "int64",
                               "I1": "float32", "I2": "float32", "y": "float32"}
    lists = etl_module(tmp_path / "lists", LISTS, name="lists")
    # A list column stays list<int64>: NVTabular cannot cast it on the CPU, so it is left out of the map.
    assert lists.OUTPUT_DTYPES == {"C3": "int64", "grp": "int64", "y": "float32"}
    assert lists.MULTI_HOT == {"tags": "|"} and lists.CATEGORICAL == ["C3", "grp", "tags"]
    plain = copy.deepcopy(ETL)
    plain["output"]["reader"] = "none"
    assert etl_module(tmp_path / "none", plain, name="plain").OUTPUT_DTYPES == {}


def _operators(workflow) -> dict[tuple[str, ...], object]:
    """The workflow's Categorify / HashedCross operators by the columns they read."""
    out, seen, todo = {}, set(), [workflow.output_node]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        todo.extend(p for p in [*node.parents, *(node.dependencies or [])] if hasattr(p, "op"))
        if type(node.op).__name__ in ("Categorify", "HashedCross"):
            (parent,) = node.parents
            out[tuple(parent.selector.names)] = node.op
    return out


@pytest.mark.slow
def test_categorify_and_cross_options_reach_the_operators(tmp_path):
    """The real NVTabular workflow etl.py builds (nvtabular imported, nothing fitted)."""
    etl = copy.deepcopy(ETL)
    etl["groups"][2] = {"columns": ["C3"], "ops": [{"Categorify": {"num_buckets": 5}}]}
    etl["cross"][0]["freq_threshold"] = 2
    m = etl_module(tmp_path, etl)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # NVTabular's notices about hashing
        ops = _operators(m.build_workflow(m.import_nvtabular(), None, "./"))
    assert set(ops) == {("C1", "C2"), ("C2", "C3"), ("C1",), ("C2",), ("C3",)}
    combo, hashed = ops[("C1", "C2")], ops[("C2", "C3")]
    assert (type(combo).__name__, combo.encode_type, combo.freq_threshold) == ("Categorify", "combo", 2)
    assert (type(hashed).__name__, hashed.num_buckets) == ("HashedCross", 11)
    settings = {c[0]: (op.encode_type, op.freq_threshold, op.max_size, op.num_buckets)
                for c, op in ops.items() if len(c) == 1}
    assert settings == {"C1": ("joint", 20, 0, None), "C2": ("joint", 0, 3, None), "C3": ("joint", 0, 0, 5)}
