"""The one reader of the graph JSON HugeCTR's ``Model.graph_to_json`` writes (hugectr.md §2.3-§2.5, §2.10), shared by
``ctrgen import`` (codegen/importer/graph_read.py) and ``ctrgen validate`` (codegen/triton/lint/training_side.py).

Layer 0 is the Data layer (``label``, ``dense``, ``sparse`` inputs with ``slot_num`` and ``nnz_per_slot``, the latter
an int or one int per slot); the embedding layers follow in ``add()`` order, and that order is the table order of
every per-table list in ps.json (triton.md §4). HugeCTR names the tables by the embeddings' ``top``.

The reading is lenient: it takes what a hand-written Triton repository's graph may hold and refuses only what no
reader of the file can make sense of (a :func:`GraphError` naming the field, ``layers[0].sparse[1].slot_num``, and
its line). The importer, which must reproduce the file exactly, layers graph_to_json's exact shape on top of the
:class:`Graph` read here (each part keeps the JSON object it was read from).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Located, UserError, field_path
from ..inputs import MAX_META_BYTES, json_positions, parse_json, read_text

WHAT = "graph JSON"
MISSING = object()          # a key the object does not have (shown as "nothing")


def GraphError(field: str, message: str, fix: str = "", *, line: int | None = None,  # noqa: N802 - raised like a class
               col: int | None = None) -> Located:
    """The graph JSON is not a graph_to_json graph: ``field`` (a path, ``layers[1].bottom``), its position if known."""
    return Located(message, line, fix, col=col, field=field)


# ---- values ------------------------------------------------------------------------------------------------------

def show(v: object, limit: int = 60) -> str:
    """A value as the JSON spells it, cut to ``limit`` characters."""
    if v is MISSING:
        return "nothing"
    text = json.dumps(v, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def read_int(v: object, where: str, minimum: int = 0) -> int:
    if not is_int(v) or v < minimum:  # type: ignore[operator]
        raise GraphError(where, f"expected an integer >= {minimum}, got {show(v)}")
    return v  # type: ignore[return-value]


def read_str(v: object, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise GraphError(where, f"expected a non-empty string, got {show(v)}")
    return v


def read_bool(v: object, where: str) -> bool:
    if not isinstance(v, bool):
        raise GraphError(where, f"expected true or false, got {show(v)}")
    return v


def read_obj(v: object, where: str) -> dict:
    if not isinstance(v, dict):
        raise GraphError(where, f"expected an object, got {show(v)}")
    return v


def required(obj: dict, where: str, keys: tuple[str, ...], what: str) -> None:
    """``obj`` has every key of ``keys`` (the first missing one is named)."""
    missing = [k for k in keys if k not in obj]
    if missing:
        raise GraphError(where, f"{what} without {missing[0]!r}")


# ---- what the file says ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SparseInput:
    top: str
    slot_num: int
    nnz_per_slot: tuple[int, ...]
    is_fixed_length: bool
    slot_offset: int  # index of its first slot among all slots (sparse inputs in Data-layer order)
    index: int = 0    # its place in the Data layer's "sparse" array
    json: dict = field(default_factory=dict, compare=False, repr=False)    # the object it was read from

    @property
    def keys_per_sample(self) -> int:
        """The most keys one sample can carry (HugeCTR's get_max_feature_num_per_sample_from_nnz_per_slot)."""
        return sum(self.nnz_per_slot)

    @property
    def max_nnz(self) -> int:
        return max(self.nnz_per_slot, default=0)

    @property
    def one_hot(self) -> bool:
        return all(n == 1 for n in self.nnz_per_slot)


@dataclass(frozen=True)
class Table:
    index: int        # its place among the embedding tables (ps.json's per-table lists, <index>_sparse_*.model)
    top: str
    bottom: str
    type: str
    vec_size: int
    slot_size_array: tuple[int, ...] | None
    input: SparseInput
    layer: int = 0    # its place in "layers"
    json: dict = field(default_factory=dict, compare=False, repr=False)

    def describe(self) -> str:
        return f"table {self.index} ({self.top}, bottom {self.bottom})"


@dataclass(frozen=True)
class Graph:
    path: Path                          # the file it was read from
    dense_dim: int
    label_dim: int                      # one label_dim, or the sum of a label array's (v3.5+)
    sparse: tuple[SparseInput, ...]
    tables: tuple[Table, ...]
    label_dims: tuple[int, ...] = ()    # as written: one per label
    label_array: bool = False           # "label_dim" (and "top") written as arrays
    layers: tuple[dict, ...] = field(default=(), compare=False, repr=False)    # every layer object, Data first
    doc: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def data(self) -> dict:
        """The Data layer's object."""
        return self.layers[0]

    @property
    def slots(self) -> int:
        return sum(s.slot_num for s in self.sparse)

    @property
    def keys_per_sample(self) -> int:
        return sum(s.keys_per_sample for s in self.sparse)

    @property
    def max_nnz(self) -> int:
        return max((s.max_nnz for s in self.sparse), default=0)

    @property
    def vec_sizes(self) -> list[int]:
        return [t.vec_size for t in self.tables]

    @property
    def table_names(self) -> list[str]:
        return [t.top for t in self.tables]

    def describe_tables(self) -> str:
        n = len(self.tables)
        return f"{n} embedding table{'s' * (n != 1)} ({', '.join(self.table_names)})"

    def describe_inputs(self) -> str:
        return "; ".join(f"{s.top}: {s.slot_num} slots, nnz_per_slot {list(s.nnz_per_slot)}, "
                         f"is_fixed_length {str(s.is_fixed_length).lower()}" for s in self.sparse)


# ---- reading -----------------------------------------------------------------------------------------------------

def parse_graph_text(text: str, path: Path | str) -> object:
    """The JSON document of ``text`` through the bounded reader (nesting checked before parsing; NaN and Infinity
    read as Python reads them, as before: the importer refuses them where it reads a number). Invalid JSON is a
    :func:`GraphError` on field ``syntax`` with its position; a document nested too deep or with a number too long
    to read is the reader's :class:`UserError`."""
    try:
        return parse_json(text, path, WHAT, finite=False)
    except UserError as exc:
        p = exc.problems[0]
        prefix = f"{WHAT} is not JSON: "
        if p.message.startswith(prefix):
            raise GraphError("syntax", "invalid JSON: " + p.message[len(prefix):], line=p.line, col=p.col) from None
        raise


def load_graph(path: Path) -> Graph:
    """The graph JSON at ``path``, read as every input is (a regular file of at most MAX_META_BYTES, UTF-8) and
    then :func:`read_graph`. Raises :func:`GraphError` for what the file says, :class:`UserError` for a file that
    cannot be read (a FIFO, a device, too large, too deep, not UTF-8)."""
    text = read_text(path, WHAT, MAX_META_BYTES)
    return read_graph(parse_graph_text(text, path), path, text)


def read_graph(doc: object, path: Path, text: str | None = None) -> Graph:
    """The Data layer's inputs and the embedding tables of a parsed graph JSON. With ``text`` (the JSON it was parsed
    from), a refusal names the line of its field."""
    try:
        return _read(doc, path)
    except Located as exc:
        if text is None or exc.line is not None:
            raise
        line, col = position(text, exc.field)
        raise GraphError(exc.field, exc.message, exc.fix, line=line, col=col) from None


def _read(doc: object, path: Path) -> Graph:
    layers = doc.get("layers") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not isinstance(layers, list) or not layers or not isinstance(layers[0], dict):
        raise GraphError("layers", "no \"layers\" list: not a graph written by Model.graph_to_json")
    data = layers[0]
    if data.get("type") != "Data":
        raise GraphError("layers[0].type", f"layer 0 must be the Data layer, got type {show(data.get('type'))}")
    w = "layers[0]"
    required(data, w, ("label", "dense"), "the Data layer")
    dense = read_obj(data["dense"], f"{w}.dense")
    required(dense, f"{w}.dense", ("dense_dim",), "dense")
    dense_dim = read_int(dense["dense_dim"], f"{w}.dense.dense_dim")
    label = read_obj(data["label"], f"{w}.label")
    required(label, f"{w}.label", ("label_dim",), "label")
    raw_dims = label["label_dim"]
    if isinstance(raw_dims, list):  # several labels (v3.5+): one label_dim per label
        dims = tuple(read_int(v, f"{w}.label.label_dim", 1) for v in raw_dims)
    else:
        dims = (read_int(raw_dims, f"{w}.label.label_dim", 1),)

    raw_sparse = data.get("sparse", [])
    if not isinstance(raw_sparse, list):
        raise GraphError(f"{w}.sparse", f"expected an array of sparse inputs, got {show(raw_sparse)}")
    sparse: list[SparseInput] = []
    offset = 0
    for k, s in enumerate(raw_sparse):
        ws = f"{w}.sparse[{k}]"
        s = read_obj(s, ws)
        required(s, ws, ("top", "slot_num", "nnz_per_slot"), "a sparse input")
        top = read_str(s["top"], f"{ws}.top")
        slot_num = read_int(s["slot_num"], f"{ws}.slot_num", 1)
        nnz = s["nnz_per_slot"]
        if isinstance(nnz, list):
            nnz_t = tuple(read_int(v, f"{ws}.nnz_per_slot", 1) for v in nnz)
            if len(nnz_t) != slot_num:
                raise GraphError(f"{ws}.nnz_per_slot", f"{top}: {len(nnz_t)} values for slot_num {slot_num}")
        else:       # one value for every slot (what hand-written graphs may say)
            nnz_t = (read_int(nnz, f"{ws}.nnz_per_slot", 1),) * slot_num
        sparse.append(SparseInput(top, slot_num, nnz_t, s.get("is_fixed_length") is True, offset, k, s))
        offset += slot_num

    inputs = {s.top: s for s in sparse}
    tables: list[Table] = []
    for i, layer in enumerate(layers[1:], 1):
        hparam = layer.get("sparse_embedding_hparam") if isinstance(layer, dict) else None
        if not isinstance(hparam, dict):
            continue
        wl, wh = f"layers[{i}]", f"layers[{i}].sparse_embedding_hparam"
        required(layer, wl, ("top", "bottom"), str(layer.get("type", "an embedding layer")))
        top, bottom = read_str(layer["top"], f"{wl}.top"), read_str(layer["bottom"], f"{wl}.bottom")
        if bottom not in inputs:
            raise GraphError(f"{wl}.bottom", f"embedding {json.dumps(top)} reads {show(bottom)}, which is not a "
                                             f"sparse input of the Data layer ({', '.join(inputs) or 'it has none'})")
        required(hparam, wh, ("embedding_vec_size",), "an embedding")
        ssa = hparam.get("slot_size_array")
        if ssa is not None and not isinstance(ssa, list):
            raise GraphError(f"{wh}.slot_size_array", f"{top}: expected an array, got {show(ssa)}")
        tables.append(Table(
            index=len(tables), top=top, bottom=bottom, type=str(layer.get("type")),
            vec_size=read_int(hparam["embedding_vec_size"], f"{wh}.embedding_vec_size", 1),
            slot_size_array=None if ssa is None else tuple(
                read_int(v, f"{wh}.slot_size_array", 1) for v in ssa),
            input=inputs[bottom], layer=i, json=layer))
    return Graph(path=path, dense_dim=dense_dim, label_dim=sum(dims), sparse=tuple(sparse), tables=tuple(tables),
                 label_dims=dims, label_array=isinstance(raw_dims, list), layers=tuple(layers), doc=doc)


# ---- positions ---------------------------------------------------------------------------------------------------

_PART = re.compile(r"\[(\d+)\]|\.?([^.\[\]]+)")


def position(text: str, where: str) -> tuple[int | None, int | None]:
    """(line, col) of the field ``where`` (``layers[1].sparse_embedding_hparam``) in the JSON ``text``; a field the
    document does not have is placed at the nearest object that does. (None, None) when the text does not parse."""
    if not where or where == "syntax":
        return None, None
    loc: tuple = tuple(int(m[1]) if m[1] is not None else m[2] for m in _PART.finditer(where))
    if field_path(loc) != where:
        return None, None
    try:
        found = json_positions(text)
    except (ValueError, IndexError):
        return None, None
    while loc not in found:
        loc = loc[:-1]
    return found[loc]
