"""etl.output.format: norm: the ETL's Parquet rows as HugeCTR Norm files and file lists (seed 003's data), read back
here by an independent reader of the format: the values, the keys (ids plus slot offsets), the framing."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from codegen.etl.run import run_etl
from codegen.keysets.norm import norm_keys
from conftest import run_ctrgen
from specfactory import write_spec

pytestmark = pytest.mark.slow

MODEL = {"version": 1, "name": "normetl", "hugectr_version": "3.2",
         "data": {"format": "norm", "train": ["out/norm/train/file_list.0.txt"], "eval": "out/norm/valid/file_list.txt"},
         "model": {"preset": "mlp", "units": [8]}}


def _etl(folder: Path, *, check: str = "Sum", i64: bool = False) -> Path:
    rng = np.random.default_rng(7)
    n = 230
    (folder / "raw").mkdir(parents=True)
    pd.DataFrame({"C1": rng.choice([f"a{k}" for k in range(9)], n), "C2": rng.integers(0, 5, n).astype("int64"),
                  "I1": rng.normal(0, 1, n), "y": rng.integers(0, 2, n).astype("int64")}
                 ).to_parquet(folder / "raw" / "train.parquet", index=False)
    etl = {"inputs": {"train": ["raw/train.parquet"], "columns": {"C1": "str", "C2": "int64", "I1": "float64",
                                                                   "y": "int64"}},
           "groups": [{"columns": ["C1", "C2"], "ops": ["Categorify"]},
                      {"columns": ["I1"], "ops": ["FillMissing"]},
                      {"columns": ["y"], "ops": [{"LambdaOp": {"compare": ">=", "value": 1, "dtype": "int8"}}]}],
           "output": {"dir": "out", "out_files_per_proc": 2, "shuffle": False, "reader": "hugectr", "format": "norm",
                      "norm": {"rows_per_file": 40, "files_per_list": 2, "check_type": check}}}
    spec = {**MODEL, "etl": etl}
    if i64:
        spec["solver"] = {"i64_input_key": True}
    return write_spec(folder, spec, name="normetl")


def _read_norm(path: Path, key: str, slots: int):
    """(check_sum, label_dim, dense_dim, [(floats, [keys per slot])]) of one Norm file."""
    data = path.read_bytes()
    framed = struct.unpack_from("<i", data, 0)[0] == 64
    pos = 4 if framed else 0
    check, n, label_dim, dense_dim, slot_num = struct.unpack_from("<8q", data, pos)[:5]
    pos += 64 + (1 if framed else 0)
    assert check == int(framed) and slot_num == slots
    width = struct.calcsize(key)
    records = []
    for _ in range(n):
        if framed:
            length = struct.unpack_from("<i", data, pos)[0]
            body = data[pos + 4:pos + 4 + length]
            assert data[pos + 4 + length] == sum(body) & 0xFF
            pos += 4 + length + 1
        else:
            body = data[pos:]
        floats = struct.unpack_from(f"<{label_dim + dense_dim}f", body, 0)
        p = 4 * (label_dim + dense_dim)
        keys = []
        for _ in range(slot_num):
            nnz = struct.unpack_from("<i", body, p)[0]
            keys.append(list(struct.unpack_from(f"<{nnz}{key[1]}", body, p + 4)))
            p += 4 + nnz * width
        if not framed:
            pos += p
        records.append((floats, keys))
    assert pos == len(data)
    return check, label_dim, dense_dim, records


@pytest.mark.parametrize("check,i64", [("Sum", False), ("Non", True)])
def test_norm_output_holds_the_parquet_rows(tmp_path, check, i64):
    result = run_etl(_etl(tmp_path, check=check, i64=i64), out_root=tmp_path / "generated")
    out = tmp_path / "out"
    cards = {c.name: c.cardinality for c in result.features.categorical}
    slots = [c.name for c in result.features.categorical]
    offsets = dict(zip(slots, np.concatenate([[0], np.cumsum([cards[s] for s in slots])[:-1]])))
    rows = result.rows_out
    assert rows["train"] > 160 and rows["valid"] > 0
    files = {split: -(-rows[split] // 40) for split in rows}       # rows_per_file 40
    assert result.norm_files == files and files["train"] == 5
    # Training lists of files_per_list files each, absolute paths in the final folder.
    lists = sorted((out / "norm" / "train").glob("file_list.*.txt"))
    assert [p.name for p in lists] == ["file_list.0.txt", "file_list.1.txt", "file_list.2.txt"]
    named = [Path(line) for p in lists for line in p.read_text().splitlines()[1:]]
    assert [p.read_text().splitlines()[0] for p in lists] == ["2", "2", "1"]
    assert named == [out / "norm" / "train" / f"part_{i}.data" for i in range(files["train"])]
    # Every record: the Parquet row's label and dense value, its ids plus the slot offsets.
    frame = pd.concat([pq.read_table(f).to_pandas() for f in sorted((out / "train").glob("part_*.parquet"),
                                                                    key=lambda p: int(p.stem.split("_")[1]))])
    key = "<q" if i64 else "<I"
    records = [r for f in named for r in _read_norm(f, key, len(slots))[3]]
    assert len(records) == len(frame) == rows["train"]
    for (floats, keys), (_, row) in zip(records, frame.iterrows()):
        assert floats == pytest.approx([float(row["y"]), float(row["I1"])], rel=1e-6)
        for slot, got in zip(slots, keys):
            ids = list(row[slot]) if isinstance(row[slot], (list, np.ndarray)) else [row[slot]]
            assert got == [int(i) + int(offsets[slot]) for i in ids]
    # The keysets tool reads the same lists (and their check sums) in the same width.
    keys, header = norm_keys(named[0], "int64" if i64 else "int32", slot_num=len(slots), check_sum=check == "Sum")
    assert header.records == 40 and keys.size > 0
    r = run_ctrgen("keysets", "-q", str(lists[0]), "--format", "norm", "--key-type", "int64" if i64 else "int32",
                   "-o", str(tmp_path / "k0.keyset"))
    assert r.returncode == 0, r.stderr


def test_multi_hot_slots_hold_every_id(tmp_path):
    """A list column (multi-hot) becomes one slot of nnz keys per record; an empty list is nnz 0."""
    import pyarrow as pa

    from codegen.etl.norm_output import NormLayout, write_norm

    for split in ("train", "valid"):
        (tmp_path / split).mkdir()
        pq.write_table(pa.table({"y": pa.array([1.0, 0.0, 1.0], pa.float32()), "u": pa.array([2, 0, 1], pa.int64()),
                                 "g": pa.array([[1, 3], [], [0]], pa.list_(pa.int64()))}),
                       tmp_path / split / "part_0.parquet")
    layout = NormLayout(labels=("y",), dense=(), slots=("u", "g"), cardinalities=(3, 4), key_type="int32",
                        check_sum=True)
    assert write_norm(tmp_path, layout, rows_per_file=2, files_per_list=100) == {"train": 2, "valid": 2}
    first = _read_norm(tmp_path / "norm" / "train" / "part_0.data", "<I", 2)[3]
    second = _read_norm(tmp_path / "norm" / "train" / "part_1.data", "<I", 2)[3]
    assert [keys for _, keys in first + second] == [[[2], [4, 6]], [[0], []], [[1], [3]]]
    assert (tmp_path / "norm" / "train" / "file_list.0.txt").read_text().splitlines()[0] == "2"
