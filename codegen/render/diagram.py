"""The model graph (and a saved workflow's operator graph, codegen.workflow_graph) as a Mermaid flowchart (renders
on GitHub and GitLab) or Graphviz DOT."""

from __future__ import annotations

from ..graph.ir import TrainingJob
from ..graph.shapes import LOSS_LAYERS, fmt_shape
from .text import visible


def _label(text: str) -> str:
    # Mermaid labels are quoted; tensor names are identifiers already, but never trust that here.
    return visible(text).replace("&", "&amp;").replace('"', "#quot;").replace("<", "&lt;").replace(">", "&gt;")


def nodes_and_edges(job: TrainingJob) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """[(node id, label lines joined by '<br/>', shape kind)], [(from id, to id)] in a stable order."""
    g = job.graph
    ids: dict[str, str] = {}
    nodes: list[tuple[str, str, str]] = []

    def node(tensor: str, label: str, kind: str) -> None:
        ids[tensor] = f"n{len(nodes)}"
        nodes.append((ids[tensor], label, kind))

    for name, dim in zip(g.label_names, g.label_dims):
        node(name, f"{name}<br/>label ({dim})", "input")
    node(g.dense_name, f"{g.dense_name}<br/>dense ({g.dense_dim})", "input")
    for s in g.sparse:
        node(s.name, f"{s.name}<br/>{s.slot_num} slots, nnz {max(s.nnz_per_slot)}", "input")
    edges: list[tuple[str, str]] = []
    for e in g.embeddings:
        node(e.name, f"{e.name}<br/>{e.embedding_type}<br/>{fmt_shape(e.shape)}", "embedding")
        edges.append((ids[e.bottom], ids[e.name]))
    for lk in g.collection.lookups if g.collection is not None else ():
        node(lk.top, f"{lk.top}<br/>embedding_lookup ({lk.combiner})<br/>{fmt_shape(lk.shape)}", "embedding")
        edges.extend((ids[b], ids[lk.top]) for b in lk.bottoms)
    layers = g.analysed
    for i, layer in enumerate(layers):
        shape = "" if layer.type in LOSS_LAYERS else "<br/>" + fmt_shape(layer.out_shapes[0])
        key = f"#layer{i}"
        node(key, f"{' / '.join(layer.tops)}<br/>{layer.type}{shape}", "loss" if layer.type in LOSS_LAYERS else "layer")
        for b in layer.bottoms:
            edges.append((ids[b], ids[key]))
        for t in layer.tops:
            ids[t] = ids[key]
    return nodes, edges


def render_mermaid(job: TrainingJob) -> str:
    return mermaid(*nodes_and_edges(job))


def render_dot(job: TrainingJob) -> str:
    return dot(job.name, *nodes_and_edges(job))


def mermaid(nodes: list[tuple[str, str, str]], edges: list[tuple[str, str]]) -> str:
    """A flowchart of (id, label, kind) nodes (kinds: input, embedding, layer, loss) and (from, to) edges."""
    shapes = {"input": ('[/"', '"/]'), "embedding": ('[("', '")]'), "layer": ('["', '"]'), "loss": ('(["', '"])')}
    lines = ["flowchart TD"]
    for nid, label, kind in nodes:
        left, right = shapes[kind]
        lines.append(f"  {nid}{left}{_label(label).replace('&lt;br/&gt;', '<br/>')}{right}")
    for a, b in edges:
        lines.append(f"  {a} --> {b}")
    return "\n".join(lines) + "\n"


def dot(name: str, nodes: list[tuple[str, str, str]], edges: list[tuple[str, str]]) -> str:
    """The same graph in Graphviz DOT; ``name`` is an identifier (a spec name, or "workflow")."""
    shape = {"input": "parallelogram", "embedding": "cylinder", "layer": "box", "loss": "ellipse"}
    lines = [f"digraph {name} {{", "  rankdir=TB;", "  node [fontname=Helvetica, fontsize=10];"]
    for nid, label, kind in nodes:
        text = visible(label).replace("\\", "\\\\").replace('"', '\\"').replace("<br/>", "\\n")
        lines.append(f'  {nid} [shape={shape[kind]}, label="{text}"];')
    for a, b in edges:
        lines.append(f"  {a} -> {b};")
    lines.append("}")
    return "\n".join(lines) + "\n"
