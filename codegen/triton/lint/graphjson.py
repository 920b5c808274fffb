"""What serving needs from the graph JSON written by ``Model.graph_to_json`` (hugectr.md §2.3-§2.5, §2.10).

Layer 0 is the Data layer (``label``, ``dense``, ``sparse`` inputs with ``slot_num`` and ``nnz_per_slot``, the
latter an int or one int per slot); the embedding layers follow in ``add()`` order, and that order is the table
order of every per-table list in ps.json (triton.md §4). HugeCTR names the tables by the embeddings' ``top``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ...errors import Located


def GraphError(field: str, message: str, line: int | None = None,  # noqa: N802 - raised like the class it was
               col: int | None = None) -> Located:
    """The graph JSON is not a graph_to_json graph: ``field``, and the position when the JSON does not parse."""
    return Located(message, line, field=field, col=col)


@dataclass(frozen=True)
class SparseInput:
    top: str
    slot_num: int
    nnz_per_slot: tuple[int, ...]
    is_fixed_length: bool
    slot_offset: int  # index of its first slot among all slots (sparse inputs in Data-layer order)

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
    index: int
    top: str
    bottom: str
    type: str
    vec_size: int
    slot_size_array: tuple[int, ...] | None
    input: SparseInput

    def describe(self) -> str:
        return f"table {self.index} ({self.top}, bottom {self.bottom})"


@dataclass(frozen=True)
class Graph:
    path: Path
    dense_dim: int
    label_dim: int
    sparse: tuple[SparseInput, ...]
    tables: tuple[Table, ...]

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


def _int(value: object, field: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise GraphError(field, f"expected an integer >= {minimum}, got {json.dumps(value)}")
    return value


def _obj(value: object, field: str) -> dict:
    if not isinstance(value, dict):
        raise GraphError(field, f"expected an object, got {json.dumps(value)}")
    return value


def _str(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise GraphError(field, f"expected a name, got {json.dumps(value)}")
    return value


def load_graph(path: Path) -> Graph:
    """Parse the graph JSON; raises GraphError(field, message) when it is not a graph_to_json graph."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise GraphError("syntax", f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except UnicodeDecodeError:
        raise GraphError("syntax", "not UTF-8 text") from None
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list) or not layers or not isinstance(layers[0], dict):
        raise GraphError("layers", "no \"layers\" list: not a graph written by Model.graph_to_json")
    data_layer = layers[0]
    if data_layer.get("type") != "Data":
        raise GraphError("layers", f"layer 0 must be the Data layer, got type {json.dumps(data_layer.get('type'))}")
    dense_dim = _int(_obj(data_layer.get("dense"), "dense").get("dense_dim"), "dense_dim")
    label_dim_raw = _obj(data_layer.get("label"), "label").get("label_dim")
    if isinstance(label_dim_raw, list):  # several labels (v3.5+): one label_dim per label
        label_dim = sum(_int(v, "label_dim", 1) for v in label_dim_raw)
    else:
        label_dim = _int(label_dim_raw, "label_dim", 1)

    raw_sparse = data_layer.get("sparse", [])
    if not isinstance(raw_sparse, list):
        raise GraphError("sparse", f"expected a list of sparse inputs, got {json.dumps(raw_sparse)}")
    sparse: list[SparseInput] = []
    offset = 0
    for s in raw_sparse:
        s = _obj(s, "sparse")
        top = _str(s.get("top"), "top")
        slot_num = _int(s.get("slot_num"), "slot_num", 1)
        nnz = s.get("nnz_per_slot")
        if isinstance(nnz, list):
            nnz_t = tuple(_int(v, "nnz_per_slot", 1) for v in nnz)
            if len(nnz_t) != slot_num:
                raise GraphError("nnz_per_slot", f"{top}: {len(nnz_t)} values for slot_num {slot_num}")
        else:
            nnz_t = (_int(nnz, "nnz_per_slot", 1),) * slot_num
        sparse.append(SparseInput(top, slot_num, nnz_t, s.get("is_fixed_length") is True, offset))
        offset += slot_num

    inputs = {s.top: s for s in sparse}
    tables: list[Table] = []
    for layer in layers[1:]:
        hparam = layer.get("sparse_embedding_hparam") if isinstance(layer, dict) else None
        if not isinstance(hparam, dict):
            continue
        top, bottom = _str(layer.get("top"), "top"), layer.get("bottom")
        if not isinstance(bottom, str) or bottom not in inputs:
            raise GraphError("bottom", f"embedding {json.dumps(top)} reads {json.dumps(bottom)}, "
                                       f"which is not a sparse input of the Data layer ({', '.join(inputs)})")
        ssa = hparam.get("slot_size_array")
        if ssa is not None and not isinstance(ssa, list):
            raise GraphError("slot_size_array", f"{top}: expected a list, got {json.dumps(ssa)}")
        tables.append(Table(
            index=len(tables), top=top, bottom=bottom, type=str(layer.get("type")),
            vec_size=_int(hparam.get("embedding_vec_size"), "embedding_vec_size", 1),
            slot_size_array=tuple(_int(v, "slot_size_array", 1) for v in ssa) if ssa is not None else None,
            input=inputs[bottom]))
    return Graph(path=path, dense_dim=dense_dim, label_dim=label_dim, sparse=tuple(sparse), tables=tuple(tables))
