"""A graph JSON read into what it says before a release is chosen (:class:`Reading`): the Data layer, the
embeddings, their optimizer block and the dense layers (hugectr.md §2).

The document is read once, by codegen/hugectr/graph_reader.py (the reader ``ctrgen validate`` uses too, lenient as
a hand-written repository needs); what this module adds is graph_to_json's exact shape on top of that reading: no key
it does not write, none missing, the Data layer first and alone, the embeddings before the dense layers, every value
of the type the writer gives it. What fails is refused with its field (the caller adds the line)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..hugectr import versions as V
from ..hugectr.graph_reader import Graph, SparseInput, Table, read_graph
from ..hugectr.graph_reader import read_bool as _bool, read_int as _int, read_str as _str, show as _show
from .graph_fields import EMBEDDING_TYPES, HPARAM_BLOCKS, OPTIMIZER_DEFAULTS, Bad, _keys, decimal_of_f32
from .graph_layers import _read_dense


@dataclass
class Reading:
    """What the JSON says, before a release is chosen."""

    graph: Graph                  # the shared reading: Data layer inputs, embedding tables
    model_name: str | None
    labels: list[str]
    label_dims: list[int]
    label_arrays: bool
    dense_name: str
    embeddings: list[dict]        # {name, input, type, vec, combiner, ws, vocab, sizes, index}
    optimizer: dict               # the OptimizerSpec fields
    optimizer_type: str
    update_type: str
    layers: list[dict]            # {type, bottom, top, params, index, json}
    first_dense: int              # index of the first dense layer in "layers"

    @property
    def sparse(self) -> tuple[SparseInput, ...]:
        return self.graph.sparse

    @property
    def dense_dim(self) -> int:
        return self.graph.dense_dim


def read_document(doc: object, path: Path) -> Reading:
    if isinstance(doc, dict) and ({"solver", "optimizer", "inference"} & set(doc)):
        raise Bad("", "a hand-written HugeCTR JSON config (solver/optimizer blocks), not what model.graph_to_json "
                      "writes", "import the script that trains the model, or the JSON its graph_to_json writes")
    if not isinstance(doc, dict):
        raise Bad("", f"a JSON {type(doc).__name__.replace('dict', 'object').replace('list', 'array')}, not a graph "
                      "JSON (an object with \"layers\")", "give the file model.graph_to_json wrote")
    if "layers" not in doc:
        raise Bad("", "a JSON object without \"layers\": not what model.graph_to_json writes",
                  "give the file model.graph_to_json wrote")
    _keys(doc, "", {"layers"}, {"model_name"}, "a graph JSON")
    model_name = None
    if "model_name" in doc:
        model_name = _str(doc["model_name"], "model_name")
    layers = doc["layers"]
    if not isinstance(layers, list):
        raise Bad("layers", f"expected an array of layers, got {_show(layers)}")
    for i, layer in enumerate(layers):
        if not isinstance(layer, dict) or not isinstance(layer.get("type"), str):
            raise Bad(f"layers[{i}]", f"expected a layer object with a \"type\", got {_show(layer)}")
        if "name" in layer:
            raise Bad(f"layers[{i}].name", "layers with a \"name\" are a hand-written HugeCTR JSON config, not what "
                                           "model.graph_to_json writes",
                      "import the script that trains the model, or the JSON its graph_to_json writes")
    data_at = [i for i, layer in enumerate(layers) if layer["type"] == "Data"]
    if not data_at:
        raise Bad("layers", "no Data layer: graph_to_json writes the Data layer first",
                  "give the file model.graph_to_json wrote")
    if data_at != [0]:
        raise Bad(f"layers[{data_at[-1] if data_at[0] == 0 else data_at[0]}]",
                  "the Data layer must be the first layer and the only one")
    graph = read_graph(doc, path)
    r = _read_data(graph)
    tables = {t.layer: t for t in graph.tables}
    i = 1
    embeddings = []
    while i < len(layers) and layers[i]["type"] in EMBEDDING_TYPES:
        embeddings.append(_read_embedding(layers[i], i, tables.get(i)))
        i += 1
    if not embeddings:
        raise Bad(f"layers[{i}]" if i < len(layers) else "layers",
                  "no embedding layer after the Data layer: a HugeCTR model has at least one SparseEmbedding")
    first_dense = i
    dense = []
    for j in range(first_dense, len(layers)):
        t = layers[j]["type"]
        if t in EMBEDDING_TYPES:
            raise Bad(f"layers[{j}]", f"embedding layer {t} after a dense layer: graph_to_json writes all embeddings "
                                      "first")
        if t not in V.LAYERS:
            raise Bad(f"layers[{j}].type", f"unknown layer type {t!r} (no HugeCTR release has it)")
        dense.append(_read_dense(layers[j], j))
    if not dense:
        raise Bad("layers", "no dense layers: a HugeCTR model ends with a loss layer")
    opt, opt_type, update = _read_optimizers(layers, embeddings)
    return Reading(graph=graph, model_name=model_name, optimizer=opt, optimizer_type=opt_type, update_type=update,
                   embeddings=embeddings, layers=dense, first_dense=first_dense, **r)


def _read_data(graph: Graph) -> dict:
    """The Data layer as graph_to_json writes it, on top of the shared reading of its inputs."""
    w = "layers[0]"
    layer = _keys(graph.data, w, {"type", "label", "dense", "sparse"}, set(), "the Data layer")
    label = _keys(layer["label"], f"{w}.label", {"label_dim", "top"}, set(), "label")
    if isinstance(label["top"], list):
        labels = [_str(x, f"{w}.label.top") for x in label["top"]]
        if not graph.label_array or len(graph.label_dims) != len(labels) or len(labels) < 2:
            raise Bad(f"{w}.label", "label arrays must name two or more labels with one label_dim each")
        arrays = True
    else:
        labels = [_str(label["top"], f"{w}.label.top")]
        if graph.label_array:
            raise Bad(f"{w}.label", "label arrays must name two or more labels with one label_dim each")
        arrays = False
    for n, d in zip(labels, graph.label_dims):
        if d != 1:
            raise Bad(f"{w}.label.label_dim", f"label {n!r} has dimension {d}; only labels of dimension 1 have a spec "
                                              "field")
    dense = _keys(layer["dense"], f"{w}.dense", {"dense_dim", "top"}, set(), "dense")
    if not graph.sparse:
        raise Bad(f"{w}.sparse", "expected a non-empty array of sparse inputs")
    for s in graph.sparse:
        ws = f"{w}.sparse[{s.index}]"
        _keys(s.json, ws, {"is_fixed_length", "nnz_per_slot", "slot_num", "top"}, {"type"}, "a sparse input")
        if "type" in s.json and s.json["type"] != "DistributedSlot":
            raise Bad(f"{ws}.type", f"graph_to_json writes \"DistributedSlot\" here, not {_show(s.json['type'])}")
        if not isinstance(s.json["nnz_per_slot"], list):
            raise Bad(f"{ws}.nnz_per_slot", f"graph_to_json writes one value per slot ({s.slot_num}), got "
                                            f"{_show(s.json['nnz_per_slot'])}")
        _bool(s.json["is_fixed_length"], f"{ws}.is_fixed_length")
    if len({"type" in s.json for s in graph.sparse}) > 1:
        raise Bad(f"{w}.sparse", "some sparse inputs have a \"type\" and some do not; every release writes it on all "
                                 "or none")
    return {"labels": labels, "label_dims": list(graph.label_dims), "label_arrays": arrays,
            "dense_name": _str(dense["top"], f"{w}.dense.top")}


def _read_embedding(layer: dict, i: int, table: Table | None) -> dict:
    w = f"layers[{i}]"
    _keys(layer, w, {"type", "bottom", "top", "sparse_embedding_hparam", "optimizer"}, set(), layer["type"])
    if layer["type"] == "HybridSparseEmbedding":
        raise Bad(f"{w}.type", "HybridSparseEmbedding needs the RawAsync reader, which ctrgen does not generate")
    h = _keys(layer["sparse_embedding_hparam"], f"{w}.sparse_embedding_hparam",
              {"combiner", "embedding_vec_size", "max_vocabulary_size_global", "workspace_size_per_gpu_in_mb"},
              {"slot_size_array"}, "an embedding")
    assert table is not None        # an object sparse_embedding_hparam: the shared reader's table of this layer
    wh = f"{w}.sparse_embedding_hparam"
    if h["combiner"] not in ("sum", "mean"):
        raise Bad(f"{wh}.combiner", f"expected \"sum\" or \"mean\", got {_show(h['combiner'])}")
    if "slot_size_array" in h and not table.slot_size_array:      # the shared reader takes null and [] too
        raise Bad(f"{wh}.slot_size_array", f"expected a non-empty array, got {_show(h['slot_size_array'])}")
    return {"name": table.top, "input": table.bottom, "type": table.type, "vec": table.vec_size,
            "combiner": h["combiner"],
            "ws": _int(h["workspace_size_per_gpu_in_mb"], f"{wh}.workspace_size_per_gpu_in_mb"),
            "vocab": _int(h["max_vocabulary_size_global"], f"{wh}.max_vocabulary_size_global"),
            "sizes": None if table.slot_size_array is None else list(table.slot_size_array),
            "index": i, "optimizer": layer["optimizer"]}


def _read_optimizers(layers: list[dict], embeddings: list[dict]) -> tuple[dict, str, str]:
    first = embeddings[0]
    for e in embeddings[1:]:
        if e["optimizer"] != first["optimizer"]:
            raise Bad(f"layers[{e['index']}].optimizer", "differs from the first embedding's: per-embedding optimizers "
                                                         "have no spec field", "import the script that trains it")
    w = f"layers[{first['index']}].optimizer"
    block = first["optimizer"]
    if not isinstance(block, dict) or block.get("update_type") not in ("Global", "Local", "LazyGlobal"):
        raise Bad(f"{w}.update_type", "expected \"Global\", \"Local\" or \"LazyGlobal\"")
    out: dict = {}
    if "type" not in block:  # RMSProp: the writer has no case for it, only update_type is written (§2.5)
        _keys(block, w, {"update_type"}, set(), "an RMSProp optimizer")
        out["type"] = "RMSProp"
    else:
        t = block["type"]
        if t not in HPARAM_BLOCKS:
            raise Bad(f"{w}.type", f"unknown optimizer type {_show(t)}")
        name, fields = HPARAM_BLOCKS[t]
        _keys(block, w, {"type", "update_type", name}, set(), f"a {t} optimizer")
        hp = _keys(block[name], f"{w}.{name}", set(fields), set(), name)
        out["type"] = t
        for f in fields:
            if f == "atomic_update":
                value: object = _bool(hp[f], f"{w}.{name}.{f}")
            else:
                value = decimal_of_f32(hp[f], f"{w}.{name}.{f}")
            if value != OPTIMIZER_DEFAULTS[f]:
                out[f] = value
    out["update_type"] = block["update_type"]
    ordered = {"type": out.pop("type"), "update_type": out.pop("update_type"), **out}
    return ordered, ordered["type"], ordered["update_type"]


