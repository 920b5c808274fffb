"""The trained-parameter files of hugectr.md §5, as the stand-in keeps them (it trains nothing, so its values are
what a load_* call read, else placeholders):

* ``<prefix>_dense_<iter>.model``: 4 bytes per trainable dense weight in network order, no header; zeros until
  ``load_dense_weights`` read a file, whose size must be exactly that (HugeCTR reads that many bytes).
* ``<dense file>.ntp.json``: written when the model has BatchNorm layers, one ``{"type": "BatchNorm", "mean": [...],
  "var": [...]}`` per BatchNorm in network order; the one beside the loaded dense file, else mean 0 and var 1.
* ``<prefix><i>_sparse_<iter>.model/``: ``key`` (int64 each), ``emb_vector`` (float32 x vec each) and, for the
  localized embeddings, ``slot_id`` (size_t each); the files ``load_sparse_weights`` read for that table (their sizes
  checked against each other and the table's vec size), else empty.

Where the reference is silent: HugeCTR does not say what it does with a dense file of another size or a sparse
folder whose files disagree (it reads raw bytes); the stand-in refuses them with a message naming the gap.
"""

from __future__ import annotations

import json
from pathlib import Path

from ._api import HugeCTRError


class Params:
    def __init__(self) -> None:
        self.dense: bytes | None = None
        self.ntp: str | None = None
        self.tables: dict[int, dict[str, bytes]] = {}    # embedding index -> file name -> bytes


def _need(ok: bool, text: str) -> None:
    if not ok:
        raise HugeCTRError(f"stand-in: {text} (HugeCTR reads raw bytes here; the stand-in refuses what would be "
                           "garbage)")


def load_dense(params: Params, path: Path, count: int, bn_widths: list[int], what: str) -> None:
    data = path.read_bytes()
    _need(len(data) == 4 * count, f"{what}: {path} holds {len(data)} bytes; the model's dense layers take "
                                  f"{4 * count} ({count} float32 weights)")
    ntp = Path(f"{path}.ntp.json")
    text = None
    if bn_widths and ntp.is_file():
        text = ntp.read_text(encoding="utf-8")
        layers = json.loads(text)["layers"]
        _need(len(layers) == len(bn_widths) and all(
            len(e["mean"]) == w and len(e["var"]) == w for e, w in zip(layers, bn_widths)),
            f"{what}: {ntp} does not hold the running statistics of the model's {len(bn_widths)} BatchNorm layers")
    params.dense, params.ntp = data, text


def load_sparse(params: Params, index: int, path: Path, vec: int, localized: bool, what: str) -> None:
    names = ["key", "emb_vector"] + (["slot_id"] if localized else [])
    files = {}
    for name in names:
        _need((path / name).is_file(), f"{what}: {path} has no '{name}' file")
        files[name] = (path / name).read_bytes()
    n, rest = divmod(len(files["key"]), 8)
    _need(rest == 0, f"{what}: {path / 'key'} is not a whole number of int64 keys")
    _need(len(files["emb_vector"]) == 4 * vec * n, f"{what}: {path / 'emb_vector'} holds "
                                                   f"{len(files['emb_vector'])} bytes, {n} keys of vec {vec} take "
                                                   f"{4 * vec * n}")
    if localized:
        _need(len(files["slot_id"]) == 8 * n, f"{what}: {path / 'slot_id'} does not hold one size_t per key")
    params.tables[index] = files


def save_dense(params: Params, path: Path, count: int, bn_widths: list[int]) -> None:
    path.write_bytes(params.dense if params.dense is not None else bytes(4 * count))
    if not bn_widths:
        return
    text = params.ntp
    if text is None:
        entries = ['    {\n      "type": "BatchNorm",\n      "mean": [' + ", ".join(["0.000000"] * w) + '],\n'
                   '      "var": [' + ", ".join(["1.000000"] * w) + "]\n    }" for w in bn_widths]
        text = '{\n  "layers": [\n' + ",\n".join(entries) + "\n  ]\n}\n"
    Path(f"{path}.ntp.json").write_text(text, encoding="utf-8")


def save_sparse(params: Params, index: int, folder: Path, localized: bool) -> None:
    folder.mkdir(exist_ok=True)
    files = params.tables.get(index, {})
    for name in ["key", "emb_vector"] + (["slot_id"] if localized else []):
        (folder / name).write_bytes(files.get(name, b""))
