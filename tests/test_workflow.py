"""codegen.workflow.read_features on real NVTabular 23.8 output (the embedded demo's ETL, built once per session)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from codegen.errors import UserError
from codegen.features import features_from_lock
from codegen.workflow import read_features
from demo_data import built_demo

pytestmark = pytest.mark.slow      # the demo's NVTabular build and processes: not in `make test-fast`

REPO = Path(__file__).resolve().parents[1]
CRITEO_CATS = [f"C{i}" for i in range(1, 27)]
CRITEO_SLOTS = ["C1_C2", *CRITEO_CATS]   # the demo's combo-encoded C1 x C2 column (WDL's wide input) comes first
CRITEO_CONTS = [f"I{i}" for i in range(1, 14)]


@pytest.fixture(scope="module")
def demo():
    return built_demo().paths


# ---- expected values, computed from the raw data (not from any schema) ----------------------------------------------

def raw_uniques(demo, dataset: str) -> dict[str, int]:
    train = pd.read_parquet(demo[dataset]["raw"] / "train.parquet")
    if dataset == "criteo":
        return {c: train[c].dropna().nunique() for c in CRITEO_CATS}   # nulls get NVTabular's reserved id 1
    out = {"userId": train["userId"].nunique(), "movieId": train["movieId"].nunique()}
    if dataset == "movielens_genres":
        movies = pd.read_parquet(demo[dataset]["raw"] / "movies_converted.parquet")
        joined = train.merge(movies, on="movieId", how="left")   # what JoinExternal does before Categorify
        out["genres"] = joined["genres"].explode().nunique()
    return out


def sources(demo, dataset: str) -> dict[str, Path]:
    d = demo[dataset]
    return {"workflow": d["workflow"], "dataset": d["train"], "valid": d["valid"],
            "schema.json": d["train"] / ".merlin" / "schema.json", "schema.pbtxt": d["train"] / "schema.pbtxt"}


def read(path: Path, dataset: str, **kw):
    # The MovieLens label is an untagged LambdaOp output (as in the notebooks): name it, as the specs do.
    if dataset.startswith("movielens") and "labels" not in kw:
        kw["labels"] = ["rating"]
    return read_features(path, **kw)


# ---- cardinality, slot order, dtypes, multi-hot ---------------------------------------------------------------------

@pytest.mark.parametrize("dataset", ["movielens", "movielens_genres", "criteo"])
@pytest.mark.parametrize("source", ["workflow", "dataset", "valid", "schema.json", "schema.pbtxt"])
def test_cardinality_is_uniques_plus_three(demo, dataset, source):
    feats = read(sources(demo, dataset)[source], dataset)
    expected = {name: n + 3 for name, n in raw_uniques(demo, dataset).items()}   # environment.md §4
    got = {c.name: c.cardinality for c in feats.categorical}
    if dataset == "criteo":
        # The combo-encoded cross: one id per distinct (C1, C2) pair of the training data, nulls included.
        train = pd.read_parquet(demo[dataset]["raw"] / "train.parquet")
        expected["C1_C2"] = len(train[["C1", "C2"]].drop_duplicates()) + 3
    assert got == expected
    assert feats.slot_size_array == [expected[c.name] for c in feats.categorical]


@pytest.mark.parametrize("dataset", ["movielens", "movielens_genres", "criteo"])
def test_cardinality_bounds_the_encoded_ids(demo, dataset):
    """Every id in the written parquet is below its cardinality, and the largest seen id is cardinality - 1."""
    feats = read(demo[dataset]["train"], dataset)
    data = pd.concat([pd.read_parquet(p) for p in demo[dataset]["train"].glob("part_*.parquet")])
    for col in feats.categorical:
        values = data[col.name].explode() if col.multi_hot else data[col.name]
        assert values.astype("int64").min() >= 1                      # 0 is padding only
        assert values.astype("int64").max() == col.cardinality - 1     # fitted on this very split


def test_slot_order_follows_metadata_json(demo):
    for dataset, expected in (("movielens", ["userId", "movieId"]),
                              ("movielens_genres", ["userId", "movieId", "genres"]),
                              ("criteo", CRITEO_SLOTS)):
        meta = json.loads((demo[dataset]["train"] / "_metadata.json").read_text())
        assert [c["col_name"] for c in meta["cats"]] == expected
        for source, path in sources(demo, dataset).items():
            assert [c.name for c in read(path, dataset).categorical] == expected, (dataset, source)


def test_criteo_roles_from_tags_and_metadata(demo):
    for source, path in sources(demo, "criteo").items():
        f = read_features(path)   # no explicit roles: tags (workflow) or _metadata.json (dataset)
        assert [c.name for c in f.continuous] == CRITEO_CONTS, source
        assert [c.name for c in f.labels] == ["label"], source
        assert all(c.dtype == "float32" for c in f.continuous), source


def test_dtypes_workflow_schema_vs_dataset_on_disk(demo):
    """Categories are int64 everywhere; the label is what each schema records (module docstring, env §2.5)."""
    for dataset in ("movielens", "movielens_genres"):
        for source, path in sources(demo, dataset).items():
            f = read(path, dataset)
            assert {c.dtype for c in f.categorical} == {"int64"}, source
            assert [c.dtype for c in f.labels] == (["int8"] if source == "workflow" else ["float32"]), source
    assert [c.dtype for c in read_features(demo["criteo"]["workflow"]).labels] == ["int64"]   # AddMetadata only
    assert [c.dtype for c in read_features(demo["criteo"]["train"]).labels] == ["float32"]    # dtypes= in to_parquet
    # ... and the on-disk parquet types agree with the dataset schema.
    data = pd.read_parquet(next(demo["movielens"]["train"].glob("part_*.parquet")))
    assert str(data["rating"].dtype) == "float32" and str(data["userId"].dtype) == "int64"


def test_multi_hot_genres(demo):
    for source, path in sources(demo, "movielens_genres").items():
        cols = {c.name: c for c in read(path, "movielens_genres").categorical}
        assert cols["genres"].multi_hot and not cols["userId"].multi_hot and not cols["movieId"].multi_hot, source
        assert cols["genres"].max_len is None, source   # NVTabular records a ragged list without a max length
    for source, path in sources(demo, "movielens").items():
        assert not any(c.multi_hot for c in read(path, "movielens").categorical), source
    lists = pd.read_parquet(next(demo["movielens_genres"]["train"].glob("part_*.parquet")))["genres"]
    assert lists.map(len).max() > 1


def test_fixed_length_list_records_max_len(demo, tmp_path):
    """A schema whose value_count has a max gives max_len (hand-edited: NVTabular's ragged lists have none)."""
    text = (demo["movielens_genres"]["train"] / "schema.pbtxt").read_text()
    assert text.count("value_count {\n  }") == 1
    edited = tmp_path / "schema.pbtxt"
    edited.write_text(text.replace("value_count {\n  }", "value_count {\n    min: 1\n    max: 3\n  }"))
    genres = read_features(edited, labels=["rating"]).column("genres")
    assert genres.multi_hot and genres.max_len == 3


# ---- the readers agree ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dataset", ["movielens", "movielens_genres", "criteo"])
def test_readers_agree(demo, dataset):
    src = sources(demo, dataset)
    loaded = read(src["workflow"], dataset)
    no_import = read(src["workflow"], dataset, allow_import=False)
    assert no_import == loaded                       # output_schema.pbtxt reproduces Workflow.load exactly
    assert no_import.inputs == loaded.inputs         # input_schema.pbtxt: the request columns (compare=False)
    assert loaded.source_kind == "workflow" and "nvtabular 23.08.00" in loaded.provenance

    from_dir = read(src["dataset"], dataset)
    assert from_dir.source_kind == "schema.json"     # .merlin/schema.json preferred over schema.pbtxt
    for name in ("schema.json", "schema.pbtxt", "valid"):
        assert read(src[name], dataset).same_columns(from_dir), name
    assert read(src["schema.pbtxt"], dataset).source_kind == "schema.pbtxt"

    # Workflow and dataset agree on everything but the label dtype (int8/int64 in the workflow, float32 on disk).
    assert loaded.categorical == from_dir.categorical
    assert loaded.continuous == from_dir.continuous
    assert [replace(c, dtype="float32") for c in loaded.labels] == list(from_dir.labels)


def test_lock_round_trip(demo):
    feats = read(demo["movielens_genres"]["workflow"], "movielens_genres")
    again = features_from_lock(json.loads(feats.lock_text()), Path("x.lock.json"))
    assert again == feats
    assert "generated_timestamp" not in feats.lock_text()


def test_schema_readers_do_not_import_nvtabular(demo):
    """Schema files and the saved workflow's output_schema.pbtxt are read without nvtabular or merlin (env §5)."""
    targets = {"dataset": str(demo["movielens_genres"]["train"]),
               "schema.json": str(demo["movielens_genres"]["train"] / ".merlin" / "schema.json"),
               "schema.pbtxt": str(demo["movielens_genres"]["train"] / "schema.pbtxt"),
               "workflow": str(demo["movielens_genres"]["workflow"])}
    code = f"""
import json, sys
from pathlib import Path
from codegen.workflow import read_features
out = {{name: read_features(Path(p), labels=["rating"], allow_import=False).lock_text()
       for name, p in {targets!r}.items()}}
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("nvtabular", "merlin", "dask"))
print(json.dumps({{"locks": out, "heavy": heavy}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["heavy"] == []
    for name, path in targets.items():
        expected = read_features(Path(path), labels=["rating"], allow_import=(name == "workflow"))
        if name == "workflow":
            # The request columns (lock "inputs") come from the input_schema.pbtxt the demo saves beside the
            # workflow: the same as nvtabular's remove_inputs(labels).input_schema.
            assert [c["name"] for c in json.loads(expected.lock_text())["inputs"]] == ["userId", "movieId"]
        assert result["locks"][name] == expected.lock_text(), name


# ---- roles: explicit lists ------------------------------------------------------------------------------------------

def test_explicit_roles_override_tags(demo):
    wf = demo["criteo"]["workflow"]
    f = read_features(wf, categorical=["C3", "C1"], continuous=["I2"], labels=["label"])
    assert [c.name for c in f.categorical] == ["C3", "C1"]    # a workflow has no _metadata.json: the list decides
    assert [c.name for c in f.continuous] == ["I2"]
    f = read_features(wf, continuous=[])
    assert f.continuous == () and len(f.categorical) == 27
    # On a dataset, a list equal to _metadata.json's is accepted.
    assert read_features(demo["criteo"]["train"], categorical=CRITEO_SLOTS).categorical == \
        read_features(demo["criteo"]["train"]).categorical


# ---- errors ---------------------------------------------------------------------------------------------------------

def error_of(path: Path, **kw) -> str:
    with pytest.raises(UserError) as info:
        read_features(path, **kw)
    text = info.value.format()
    assert "\n" not in text and "Traceback" not in text
    return text


def test_error_missing_path(tmp_path):
    assert "workflow or schema not found" in error_of(tmp_path / "nope")


def test_error_not_a_workflow_or_schema(tmp_path):
    assert "not a saved NVTabular workflow" in error_of(tmp_path)           # an empty directory
    (tmp_path / "notes.txt").write_text("hello")
    assert "not a saved NVTabular workflow" in error_of(tmp_path / "notes.txt")


def test_error_malformed_schema_files(tmp_path):
    bad_json = tmp_path / "schema.json"
    bad_json.write_text('{"feature": [')
    assert "invalid JSON" in error_of(bad_json)
    bad_json.write_text('{"something": 1}')
    assert "no 'feature' list" in error_of(bad_json)
    bad_pbtxt = tmp_path / "schema.pbtxt"
    bad_pbtxt.write_text('feature {\n  name: "x"\n  typo: INT\n}\n')
    text = error_of(bad_pbtxt)
    assert "invalid schema.pbtxt" in text and f"{bad_pbtxt}:3:" in text


def test_error_unreadable_pickle(demo, tmp_path):
    broken = tmp_path / "workflow"
    shutil.copytree(demo["movielens"]["workflow"], broken)
    (broken / "workflow.pkl").write_bytes(b"not a pickle")
    text = error_of(broken, labels=["rating"])
    assert "cannot load workflow.pkl" in text and "nvtabular 23.08.00" in text


@pytest.mark.slow
def test_error_nvtabular_missing(demo):
    code = f"""
import sys
sys.modules["nvtabular"] = None          # as if it were not installed
from pathlib import Path
from codegen.errors import UserError
from codegen.workflow import read_features
try:
    read_features(Path({str(demo["movielens"]["workflow"])!r}), labels=["rating"])
except UserError as e:
    print(e.format())
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert "nvtabular is not importable" in proc.stdout and "[nvt] extra" in proc.stdout


def test_error_no_import_without_output_schema(demo, tmp_path):
    bare = tmp_path / "workflow"
    shutil.copytree(demo["movielens"]["workflow"], bare)
    (bare / "output_schema.pbtxt").unlink()
    assert "no output_schema.pbtxt" in error_of(bare, labels=["rating"], allow_import=False)


def test_error_requested_column_missing(demo):
    text = error_of(demo["movielens"]["workflow"], labels=["ratings"])
    assert "features.label" in text and "'ratings' is not in the schema" in text
    assert "available: userId, movieId, rating" in text
    text = error_of(demo["criteo"]["train"], continuous=["I14"])
    assert "features.continuous" in text and "'I14'" in text


def test_error_categorical_without_cardinality(demo):
    text = error_of(demo["criteo"]["workflow"], categorical=[*CRITEO_CATS, "I1"])
    assert "categorical column 'I1' has no cardinality" in text and "Categorify" in text


def test_error_no_label(tmp_path):
    # The notebooks' LambdaOp label carries no 'target' tag (the demo's ETL, generated by ctrgen etl, tags it).
    from codegen.demo.etl import import_nvtabular, save_workflow, scratch_cwd

    nvt = import_nvtabular()
    frame = pd.DataFrame({"userId": [1, 2, 2], "rating": [1.0, 4.0, 5.0]})
    with scratch_cwd():
        wf = nvt.Workflow((["userId"] >> nvt.ops.Categorify())
                          + (["rating"] >> nvt.ops.LambdaOp(lambda col: (col > 3).astype("int8"))))
        wf.fit(nvt.Dataset(frame, cpu=True))
        save_workflow(wf, tmp_path / "workflow")
    text = error_of(tmp_path / "workflow")
    assert "no label column" in text and "untagged columns: rating" in text and "features.label" in text


def test_error_conflicting_roles(demo):
    text = error_of(demo["movielens"]["workflow"], categorical=["userId", "movieId"], labels=["userId"])
    assert "listed under both features.categorical and features.label" in text


def test_error_order_differs_from_metadata_json(demo):
    text = error_of(demo["movielens"]["train"], categorical=["movieId", "userId"])
    assert "_metadata.json" in text and "['userId', 'movieId']" in text
