"""`ctrgen keysets` on real NVTabular output (the demo's Criteo ETL, int64 ids; the same saved workflow writing int32
ids) and on Norm files written here from the format description. Expected keys are computed independently with
pandas: every categorical id plus its slot's offset (exclusive prefix sum of the slot sizes, in slot order)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, run_ctrgen
from demo_data import built_demo, read_parts
from norm_data import random_records, write_file_list, write_norm

pytestmark = pytest.mark.slow      # the demo's NVTabular build and processes: not in `make test-fast`

LOCK = json.loads((REPO / "specs" / "criteo.features.lock.json").read_text())
SLOT_COLUMNS = [c["name"] for c in LOCK["categorical"]]
SLOT_SIZES = [c["cardinality"] for c in LOCK["categorical"]]


def expected_keys(frame: pd.DataFrame) -> np.ndarray:
    offsets = np.concatenate([[0], np.cumsum(SLOT_SIZES)[:-1]])
    keys = [frame[c].to_numpy(np.int64) + off for c, off in zip(SLOT_COLUMNS, offsets)]
    return np.unique(np.concatenate(keys))


@pytest.fixture(scope="module")
def criteo():
    return built_demo().paths["criteo"]


@pytest.fixture(scope="module")
def criteo_int32(criteo, tmp_path_factory):
    """The demo's saved Criteo workflow run again with to_parquet(dtypes=int32) for the id columns."""
    import dask

    from codegen.demo import criteo as demo_criteo
    from codegen.demo import etl

    nvt = etl.import_nvtabular()
    out = tmp_path_factory.mktemp("criteo_int32") / "valid"
    cats = demo_criteo.CROSSED_NAMES + demo_criteo.CATEGORICAL
    dtypes = {**{c: np.int32 for c in cats},
              **{c: np.float32 for c in demo_criteo.CONTINUOUS + demo_criteo.LABELS}}
    with etl.scratch_cwd(), dask.config.set(scheduler="synchronous"), etl.quiet():
        workflow = nvt.Workflow.load(str(criteo["workflow"]))
        data = nvt.Dataset(str(criteo["raw"] / "valid.parquet"), engine="parquet", cpu=True)
        workflow.transform(data).to_parquet(output_path=str(out), shuffle=False, cats=cats,
                                            conts=demo_criteo.CONTINUOUS, labels=demo_criteo.LABELS, dtypes=dtypes,
                                            out_files_per_proc=2)
    return out


def _ok(*args, cwd=None):
    r = run_ctrgen("keysets", "-q", *args, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r


def _bad(*args, cwd=None) -> str:
    r = run_ctrgen("keysets", "-q", *args, cwd=cwd)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    return r.stderr


# ---- Parquet (real NVTabular output) --------------------------------------------------------------------------------

def test_int64_file_list_with_spec(criteo, tmp_path):
    out = tmp_path / "train.keyset"
    r = _ok(str(criteo["train"] / "_file_list.txt"), "--spec", str(REPO / "specs" / "wdl_continuous_etc.yaml"),
            "-o", str(out))
    want = expected_keys(read_parts(criteo["train"]))
    got = np.fromfile(out, dtype="<i8")
    assert out.stat().st_size == 8 * want.size
    np.testing.assert_array_equal(got, want)
    assert f"{want.size} keys (int64)" in r.stdout and "(2 file(s), parquet)" in r.stdout
    # Offsets matter: the raw ids alone overlap across slots and give fewer keys.
    raw_ids = np.unique(read_parts(criteo["train"])[SLOT_COLUMNS].to_numpy().ravel())
    assert raw_ids.size < want.size


def test_layout_from_the_dataset_schema_matches_the_spec(criteo, tmp_path):
    """Without --spec the slot order and sizes come from the folder's schema and _metadata.json."""
    _ok(str(criteo["valid"] / "_file_list.txt"), "--out-dir", str(tmp_path))
    got = np.fromfile(tmp_path / "_file_list.keyset", dtype="<i8")
    np.testing.assert_array_equal(got, expected_keys(read_parts(criteo["valid"])))


def test_one_keyset_per_data_file(criteo, tmp_path):
    parts = sorted(criteo["train"].glob("part_*.parquet"))
    _ok(*map(str, parts), "--out-dir", str(tmp_path))
    union = []
    for p in parts:
        got = np.fromfile(tmp_path / f"{p.stem}.keyset", dtype="<i8")
        np.testing.assert_array_equal(got, expected_keys(pd.read_parquet(p)))
        union.append(got)
    np.testing.assert_array_equal(np.unique(np.concatenate(union)), expected_keys(read_parts(criteo["train"])))


def test_int32_ids_give_a_4_byte_keyset(criteo_int32, tmp_path):
    """NVTabular bug #1264 was the reverse: an int32-only keyset writer. Here the width follows the data / model."""
    assert str(pd.read_parquet(criteo_int32 / "part_0.parquet")["C1"].dtype) == "int32"
    _ok(str(criteo_int32 / "_file_list.txt"), "--out-dir", str(tmp_path))
    path = tmp_path / "_file_list.keyset"
    want = expected_keys(read_parts(criteo_int32))
    assert path.stat().st_size == 4 * want.size
    np.testing.assert_array_equal(np.fromfile(path, dtype="<u4").astype(np.int64), want)
    _ok(str(criteo_int32 / "_file_list.txt"), "--key-type", "int32", "-o", str(tmp_path / "explicit.keyset"))
    assert (tmp_path / "explicit.keyset").read_bytes() == path.read_bytes()


def test_width_mismatch_names_file_and_column(criteo_int32):
    err = _bad(str(criteo_int32 / "_file_list.txt"), "--spec", str(REPO / "specs" / "wdl_continuous_etc.yaml"))
    assert "part_0.parquet: C1_C2: column 'C1_C2'" in err and "holds int32 ids, but the keys are int64" in err
    assert "i64_input_key=True of specs/wdl_continuous_etc.yaml" in err


def test_missing_column_and_out_of_range_ids(criteo, tmp_path):
    folder = tmp_path / "specs"
    folder.mkdir()
    spec = (REPO / "specs" / "wdl_continuous_etc.yaml").read_text()
    (folder / "x.yaml").write_text(spec)
    lock = json.loads(json.dumps(LOCK))
    lock["categorical"][5]["name"] = "C99"
    (folder / "criteo.features.lock.json").write_text(json.dumps(lock))
    err = _bad(str(criteo["train"] / "part_0.parquet"), "--spec", str(folder / "x.yaml"))
    assert "part_0.parquet: C99: has no column 'C99'" in err
    lock = json.loads(json.dumps(LOCK))
    lock["categorical"][3]["cardinality"] = 2            # C3 ids go beyond this slot size
    (folder / "criteo.features.lock.json").write_text(json.dumps(lock))
    err = _bad(str(criteo["train"] / "part_0.parquet"), "--spec", str(folder / "x.yaml"))
    assert "part_0.parquet: C3: column 'C3' holds id" in err and "outside its slot size 2" in err


def test_spec_passes_write_every_keyset_where_the_spec_says(criteo, tmp_path):
    """Without SOURCES, every (source, keyset) pair of continuous_training.passes, relative to the cwd."""
    data = tmp_path / "data"
    for name, src in (("day_0", criteo["train"]), ("day_1", criteo["valid"])):
        shutil.copytree(src, data / name)
        files = sorted((data / name).glob("part_*.parquet"))
        write_file_list(data / name / "_file_list.txt", [f.relative_to(tmp_path) for f in files])
    spec = (REPO / "specs" / "wdl_continuous_etc.yaml").read_text().replace("/data/criteo/", "data/")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "x.yaml").write_text(spec.replace("day_3", "day_0").replace("day_4", "day_1"))
    shutil.copy(REPO / "specs" / "criteo.features.lock.json", tmp_path / "specs")
    r = _ok("--spec", "specs/x.yaml", cwd=tmp_path)
    assert r.stdout.count("wrote data/day_") == 4          # two passes, two sources each
    for name, src in (("day_0", criteo["train"]), ("day_1", criteo["valid"])):
        got = np.fromfile(data / name / "_file_list.keyset", dtype="<i8")
        np.testing.assert_array_equal(got, expected_keys(read_parts(src)))


# ---- Norm ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key_type", ["int32", "int64"])
@pytest.mark.parametrize("check_sum", [True, False])
def test_norm_keys(tmp_path, key_type, check_sum):
    rng = np.random.default_rng(7)
    base = 3_000_000_000 if key_type == "int32" else 2**40   # beyond int32 / beyond 32 bits
    sizes = [50, 7, 300]
    files, want = [], []
    for i in range(2):
        recs = random_records(rng, 40, slot_sizes=sizes, max_nnz=3, dense_dim=2, base=base)
        files.append(write_norm(tmp_path / f"f{i}.data", recs, label_dim=1, dense_dim=2, key_type=key_type,
                                check_sum=check_sum))
        want += [k for _, slots in recs for keys in slots for k in keys]
    listing = write_file_list(tmp_path / "file_list.0.txt", files)
    r = _ok(str(listing), "--key-type", key_type)
    out = tmp_path / "file_list.0.keyset"                     # the notebook's naming
    dtype = "<u4" if key_type == "int32" else "<i8"
    np.testing.assert_array_equal(np.fromfile(out, dtype=dtype).astype(np.int64), np.unique(want))
    assert f"({key_type}) from {listing} (2 file(s), norm)" in r.stdout


def test_norm_errors(tmp_path):
    rng = np.random.default_rng(1)
    recs = random_records(rng, 5, slot_sizes=[10, 10], max_nnz=2, dense_dim=1)
    f = write_norm(tmp_path / "a.data", recs, label_dim=1, dense_dim=1, key_type="int64")
    assert "Norm files do not record their key width" in _bad(str(f))
    err = _bad(str(f), "--key-type", "int32")                    # wrong width: the framing does not add up
    assert err.startswith(f"{f}: ") and "check the key width" in err
    data = bytearray(f.read_bytes())
    data[-3] ^= 0x01                                              # flip a bit inside the last record
    f.write_bytes(bytes(data))
    assert "record 4 fails its check sum" in _bad(str(f), "--key-type", "int64")
    g = write_norm(tmp_path / "b.data", recs, label_dim=1, dense_dim=1, key_type="int64")
    # The spec's model has 27 slots; this file has 2 (HugeCTR: DataHeaderError).
    err = _bad(str(g), "--spec", str(REPO / "specs" / "wdl_continuous.yaml"))
    assert "slot_num 2, the model 27" in err
    listing = tmp_path / "list.txt"
    listing.write_text("2\nb.data\nmissing.data\n")
    err = _bad(str(listing), "--key-type", "int64", cwd=tmp_path)
    assert err.startswith(f"{listing}:3: data file 'missing.data' not found")


def test_help_has_examples():
    r = run_ctrgen("keysets", "--help")
    assert r.returncode == 0 and "Examples:" in r.stdout and "ctrgen keysets --spec" in r.stdout


def test_norm_sum_reader_in_chunks(tmp_path, monkeypatch):
    """The Check_t.Sum reader works on chunks of records; chunk edges must not lose or misplace anything."""
    from codegen.errors import UserError
    from codegen.keysets import norm

    monkeypatch.setattr(norm, "CHUNK", 7)
    rng = np.random.default_rng(11)
    recs = random_records(rng, 30, slot_sizes=[5, 1000, 3], max_nnz=3, dense_dim=3, base=2**33)
    f = write_norm(tmp_path / "a.data", recs, label_dim=1, dense_dim=3)
    keys, header = norm.norm_keys(f, "int64", slot_num=3, check_sum=True)
    np.testing.assert_array_equal(keys, np.unique([k for _, slots in recs for ks in slots for k in ks]))
    assert (header.records, header.slot_num, header.dense_dim) == (30, 3, 3)
    unframed = write_norm(tmp_path / "b.data", recs, label_dim=1, dense_dim=3, check_sum=False)
    np.testing.assert_array_equal(norm.norm_keys(unframed, "int64")[0], keys)
    data = bytearray(f.read_bytes())
    offset = len(data) - 1                                   # the last record's check byte (record 29, chunk 5)
    data[offset] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(UserError, match="record 29 fails its check sum"):
        norm.norm_keys(f, "int64")


def test_int32_model_spec_on_int32_output(criteo_int32, tmp_path):
    """A lock with int32 ids makes i64_input_key False in the scripts and 4-byte keys in the keysets."""
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "x.yaml").write_text((REPO / "specs" / "wdl_continuous_etc.yaml").read_text())
    lock = json.loads(json.dumps(LOCK))
    for c in lock["categorical"]:
        c["dtype"] = "int32"
    (folder / "criteo.features.lock.json").write_text(json.dumps(lock))
    gen = run_ctrgen("generate", str(folder / "x.yaml"), "--out", str(tmp_path / "out"))
    assert gen.returncode == 0, gen.stderr
    assert "i64_input_key=False," in (tmp_path / "out" / "wdl_continuous_etc" / "model.py").read_text()
    _ok(str(criteo_int32 / "_file_list.txt"), "--spec", str(folder / "x.yaml"), "-o", str(tmp_path / "k.keyset"))
    want = expected_keys(read_parts(criteo_int32))
    assert (tmp_path / "k.keyset").stat().st_size == 4 * want.size


def test_multi_hot_list_columns(tmp_path):
    """The demo's MovieLens with multi-hot genres: every list element is a key of its slot."""
    from codegen.workflow import read_features

    d = built_demo().paths["movielens_genres"]["train"]
    feats = read_features(d, allow_import=False)
    assert any(c.multi_hot for c in feats.categorical)
    _ok(str(d / "_file_list.txt"), "--out-dir", str(tmp_path))
    frame = read_parts(d)
    offset, keys = 0, []
    for c in feats.categorical:
        col = frame[c.name].explode() if c.multi_hot else frame[c.name]
        keys.append(col.dropna().to_numpy(np.int64) + offset)
        offset += c.cardinality
    np.testing.assert_array_equal(np.fromfile(tmp_path / "_file_list.keyset", dtype="<i8"),
                                  np.unique(np.concatenate(keys)))


def test_usage_errors(criteo, tmp_path):
    lst = str(criteo["train"] / "_file_list.txt")
    assert "names one file for 2 sources" in _bad(lst, lst, "-o", str(tmp_path / "x.keyset"))
    err = _bad("--spec", str(REPO / "specs" / "wdl.yaml"))
    assert "no sources: name file lists or data files, or a spec with a continuous_training section" in err
    assert "the spec's data is parquet" in _bad(lst, "--spec", str(REPO / "specs" / "wdl.yaml"), "--format", "norm")
    assert "source not found" in _bad(str(tmp_path / "nope.txt"))
    assert not list(tmp_path.glob("*.keyset"))


# ---- Raw data (seed 003's other binary format: one .bin file, fixed-size one-hot samples) --------------------------

def _raw_spec(tmp_path: Path, *, offsets: bool, i64: bool) -> Path:
    from specfactory import CRITEO_LOCK, dcn_spec, write_spec

    spec = dcn_spec("23.06", gpus=[0])
    spec["data"] = {"format": "raw", "train": ["./train.bin"], "eval": "./test.bin", "slot_size_array": offsets}
    spec["input"]["sparse"][0].update(nnz_per_slot=1, is_fixed_length=True)
    spec["solver"]["i64_input_key"] = i64
    return write_spec(tmp_path, spec, CRITEO_LOCK, name="dcn")


def _raw_file(path: Path, ids: np.ndarray, dense_dim: int = 13) -> None:
    """Samples of int32 label, int32 dense values and one int32 id per slot (HugeCTR's Raw, float_label_dense off)."""
    rng = np.random.default_rng(0)
    head = rng.integers(0, 100, size=(len(ids), 1 + dense_dim), dtype=np.int32)
    np.concatenate([head, ids.astype(np.int32)], axis=1).astype("<i4").tofile(path)


@pytest.mark.parametrize("offsets,i64", [(True, False), (False, True)])
def test_raw_keysets_add_the_slot_offsets_in_the_model_width(tmp_path, offsets, i64):
    from specfactory import CRITEO_LOCK

    sizes = [c["cardinality"] for c in CRITEO_LOCK["categorical"]]
    rng = np.random.default_rng(5)
    ids = np.stack([rng.integers(0, n, size=40) for n in sizes], axis=1)
    _raw_file(tmp_path / "train.bin", ids)
    spec = _raw_spec(tmp_path, offsets=offsets, i64=i64)
    r = run_ctrgen("keysets", "-q", str(tmp_path / "train.bin"), "--spec", str(spec), "-o",
                   str(tmp_path / "train.keyset"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    shift = np.cumsum([0, *sizes[:-1]]) if offsets else np.zeros(len(sizes), dtype=np.int64)
    want = np.unique(ids + shift)
    got = np.fromfile(tmp_path / "train.keyset", dtype="<i8" if i64 else "<u4")
    assert np.array_equal(got, want)
    assert f"({'int64' if i64 else 'int32'})" in r.stdout and "raw)" in r.stdout


def test_raw_keysets_need_the_layout(tmp_path):
    rng = np.random.default_rng(1)
    _raw_file(tmp_path / "train.bin", rng.integers(0, 9, size=(10, 26)))
    r = run_ctrgen("keysets", "-q", str(tmp_path / "train.bin"), "--format", "raw", "--key-type", "int32",
                   cwd=tmp_path)
    assert r.returncode == 2 and "Raw files record neither their sample layout" in r.stderr
    spec = _raw_spec(tmp_path, offsets=True, i64=False)
    (tmp_path / "short.bin").write_bytes(b"\0" * (4 * 40 * 3 + 8))
    r = run_ctrgen("keysets", "-q", str(tmp_path / "short.bin"), "--spec", str(spec), "-o", "x.keyset",
                   cwd=tmp_path)
    assert r.returncode == 2 and "no whole number of 160-byte samples" in r.stderr
    assert not (tmp_path / "x.keyset").exists()
