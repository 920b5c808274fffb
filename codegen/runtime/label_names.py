"""Label columns named by the data, as HugeCTR's Parquet reader names them: an imported script's reader with one label
of ``label_dim`` k > 1 names no columns (features.json: k labels ``"name": null, "name_from": "_metadata.json"``).

HugeCTR (v23.06.01) opens ``_metadata.json`` in the folder of the first file each file list names
(``src/pybind/add_input.cpp`` get_meta_path, ``include/data_readers/file_source_parquet.hpp``
get_metada_filename); ``src/data_readers/metadata.cpp`` (lines 111-131) reads its "cats", "conts" and "labels" lists of
``{"col_name", "index"}``; ``src/data_readers/row_group_reading_thread.cpp`` (lines 210-229) orders the label columns
by ``index`` then the continuous ones by ``index``, and ``src/data_readers/dataframe_container.cu`` (line 548) reads
each at that position of the Parquet file. The label tensor is the first label_dim of those values, the dense one the
next dense_dim (``parquet_data_reader_worker.cpp`` refuses other totals).

The trainer does the same with names: the k label columns are "labels" ordered by index, each of which must be the
Parquet file's column at that position; "conts" ordered by index must be features.json's continuous columns. Exact or
refused: HugeCTR also takes list columns whose widths add up to label_dim + dense_dim across the two lists, which the
trainer refuses (one column per label and per continuous value)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .checks import read_json
from .contract import HUGECTR_METADATA
from .errors import DataError

FIX = ("write the data folder's _metadata.json as NVTabular's to_parquet or HugeCTR's data generator does, or name "
       "the label columns in the spec (features.label) and remove input.label_dim")


def unnamed(features: dict) -> bool:
    """Labels features.json leaves to the data's _metadata.json, not named yet."""
    return any(c.get("name_from") == HUGECTR_METADATA and c["name"] is None for c in features["labels"])


def _columns(doc: dict, key: str, path: Path) -> list[tuple[int, str]]:
    """(index, col_name) of the metadata's list ``key``, ordered by index (HugeCTR's std::set of indices)."""
    entries = doc.get(key)
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("col_name"), str) and isinstance(e.get("index"), int)
            and not isinstance(e.get("index"), bool) for e in entries):
        raise DataError(f"{path}: \"{key}\" is not a list of objects with \"col_name\" and \"index\" (fix: {FIX})")
    out = sorted((e["index"], e["col_name"]) for e in entries)
    if len({i for i, _ in out}) != len(out):
        raise DataError(f"{path}: \"{key}\" gives two columns one index (fix: {FIX})")
    return out


def _read(folder: Path, first: Path, features: dict) -> list[str]:
    """The label names of one data set: its _metadata.json's "labels" by index, checked against ``first``'s columns
    and against label_dim and the continuous columns features.json lists."""
    path = folder / HUGECTR_METADATA
    k = len(features["labels"])
    if not path.is_file():
        raise DataError(f"{path}: missing; the script's Parquet reader takes its {k} label columns (label_dim {k}) "
                        f"from the data's {HUGECTR_METADATA}, as HugeCTR does (fix: {FIX})")
    doc = read_json(path, "HugeCTR Parquet metadata", FIX)
    if not isinstance(doc, dict):
        raise DataError(f"{path}: not a HugeCTR Parquet metadata file (an object with \"labels\" and \"conts\") "
                        f"(fix: {FIX})")
    labels, conts = _columns(doc, "labels", path), _columns(doc, "conts", path)
    if len(labels) != k:
        raise DataError(f"{path}: \"labels\" lists {len(labels)} column(s), the script's label_dim is {k} (fix: {FIX})")
    want = [c["name"] for c in features["continuous"]]
    if [n for _, n in conts] != want:
        raise DataError(f"{path}: \"conts\" by index are {[n for _, n in conts]}, the script's {len(want)} continuous "
                        f"columns (dense_dim {len(want)}) are {want} (fix: {FIX})")
    try:
        names = pq.read_schema(first).names
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{first}: not a Parquet file ({exc})") from None
    for index, name in labels:
        at = names[index] if 0 <= index < len(names) else None
        if at != name:
            where = f"column {index} is {at!r}" if at is not None else f"it has {len(names)} columns"
            raise DataError(f"{path}: label column {name!r} has index {index}, but in {first} {where} (HugeCTR reads "
                            f"the column at that index) (fix: {FIX})")
    return [n for _, n in labels]


def name_labels(features: dict, data_sets: list[list[Path]]) -> dict:
    """Name the labels features.json leaves to the data from each data set's _metadata.json (``data_sets``: the files
    of each training and evaluation source, in order; HugeCTR reads the folder of a list's first file). Every data set
    must name the same columns. ``features`` is changed in place; returns what metrics.json records."""
    found: dict[Path, list[str]] = {}
    for files in data_sets:
        if files and files[0].parent not in found:
            found[files[0].parent] = _read(files[0].parent, files[0], features)
    names = next(iter(found.values()), None)
    if names is None:
        raise DataError(f"no data files to read the label columns' names from (fix: {FIX})")
    for folder, other in found.items():
        if other != names:
            raise DataError(f"{folder / HUGECTR_METADATA}: labels {other}, but {next(iter(found)) / HUGECTR_METADATA} "
                            f"names {names} (fix: give every data set the same label columns)")
    taken = {c["name"] for c in features["continuous"]} | {c["name"] for s in features["sparse"] for c in s["columns"]}
    if len(set(names)) != len(names) or taken & set(names):
        raise DataError(f"{next(iter(found)) / HUGECTR_METADATA}: labels {names} name a column twice or a column "
                        f"features.json gives another role (fix: {FIX})")
    for col, name in zip(features["labels"], names):
        col["name"] = name
    return {"names": names, "from": HUGECTR_METADATA}


def named_terms(terms: tuple | None, features: dict) -> tuple | None:
    """The loss layers (runtime.losses.LossTerm) with each target of a label named by the data called by its column's
    name (the generated code calls them label[j]): the keys of auc_per_label, as for labels the spec names."""
    if terms is None or not any(c.get("name_from") == HUGECTR_METADATA for c in features["labels"]):
        return terms
    names = [c["name"] for c in features["labels"]]
    return tuple(dataclasses.replace(t, names=tuple(names[t.labels[0]:t.labels[1]]))
                 if len(t.names) == t.labels[1] - t.labels[0] else t for t in terms)


def describe(report: dict) -> str:
    return (f"label columns from {HUGECTR_METADATA} (label_dim {len(report['names'])}, by index, as HugeCTR's Parquet "
            f"reader takes them): " + ", ".join(report["names"]))
