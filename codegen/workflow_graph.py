"""A saved NVTabular workflow's operator graph, as seed 000's notebook draws it with ``(output).graph``: the input
column selections, each operator with the columns it writes, and the output columns (``ctrgen graph --workflow``).

The workflow is loaded as ``ctrgen lock`` loads it (``nvtabular.Workflow.load``: unpickling runs the code the pickle
holds, so point it at workflows you trust). Unlike merlin's own drawing, the nodes come in one stable order (parents
first, as the workflow lists them), so the same workflow always gives the same text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import UserError
from .workflow import WORKFLOW_PICKLE, read_schema

# (node id, label lines joined by "<br/>", kind), (from id, to id): what codegen.render.diagram draws.
Nodes = list[tuple[str, str, str]]
Edges = list[tuple[str, str]]


def operator_graph(path: Path) -> tuple[Nodes, Edges]:
    """The operator graph of the workflow saved in ``path`` (a folder holding workflow.pkl)."""
    path = Path(path)
    if not path.exists():
        raise UserError.one(path, "workflow not found", fix="check the path (the folder Workflow.save wrote)")
    if not (path / WORKFLOW_PICKLE).is_file():
        raise UserError.one(path, f"not a saved NVTabular workflow (no {WORKFLOW_PICKLE})",
                            fix="point --workflow at the folder Workflow.save wrote (e.g. the ETL's workflow/)")
    workflow = read_schema(path).workflow
    return _graph(workflow.output_node)


def _columns(node: Any) -> str:
    return ", ".join(str(c) for c in node.output_schema.column_names)


def _graph(output: Any) -> tuple[Nodes, Edges]:
    ids: dict[int, str] = {}
    nodes: Nodes = []
    edges: Edges = []
    stack: list[tuple[Any, bool]] = [(output, False)]
    while stack:                      # parents first (post-order), without recursion: graphs may be deep
        node, parents_done = stack.pop()
        if id(node) in ids:
            continue
        parents = list(node.parents_with_dependencies)
        if not parents_done:
            stack.append((node, True))
            stack.extend((p, False) for p in reversed(parents) if id(p) not in ids)
            continue
        ids[id(node)] = nid = f"n{len(nodes)}"
        if not parents:
            nodes.append((nid, f"input<br/>{_columns(node)}", "input"))
        else:
            nodes.append((nid, f"{node.label}<br/>{_columns(node)}", "layer"))
            edges.extend((ids[id(p)], nid) for p in parents)
    final = f"n{len(nodes)}"
    nodes.append((final, f"output cols<br/>{_columns(output)}", "loss"))
    edges.append((ids[id(output)], final))
    return nodes, edges
