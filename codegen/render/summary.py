"""model.summary() as the target HugeCTR release prints it (docs/hugectr.md §1.10).

Columns are ``std::setw(40)`` then ``setw(30)``, left-aligned. Three layouts exist in the tables NVIDIA's notebooks
printed (tests/facts/summaries.json): before 3.3 (rows without rules, several names joined by ','), 3.3 - 3.x (a rule
after every row, one name per line) and 4.x and later (the same, with the built tensors' rows instead of None and the
auto-Slice rows of graph_analysis). Log prefixes with timestamps are not reproduced.
"""

from __future__ import annotations

from ..graph.ir import TrainingJob
from ..graph.shapes import LOSS_LAYERS, Shape

BANNER = "=" * 51 + "Model Summary" + "=" * 51
RULE = "-" * 114
HEAVY_RULE = "\u2014" * 114


def _shape(dims: tuple[int, ...], batch: str, compact: bool) -> str:
    parts = [batch, *map(str, dims)]
    return "(" + ("," if compact else ", ").join(parts) + ")"


def _rows(s, batch: int) -> str:
    """Rows of the built tensor on one GPU: a Reshape can move elements into the batch dimension (DeepFM's Reshape
    of (B, 27, 11) to leading_dim 11 has 27·B rows), and 4.x summaries print the built shape (hugectr.md §3)."""
    rows = batch * s.rows if isinstance(s, Shape) else batch
    return str(int(rows))  # whole: the Reshape checks reject a leading_dim that does not divide the elements


def render_summary(job: TrainingJob) -> str:
    p = job.profile
    g = job.graph
    batch_shapes = p.has("summary_batch_shapes")
    rules = p.has("summary_row_rules")
    per_gpu = job.batchsize // job.gpu_count

    def shape(s) -> str:
        batch = _rows(s, per_gpu) if batch_shapes else "None"
        dims = s.dims if isinstance(s, Shape) else s
        if batch_shapes and isinstance(s, Shape) and s.built_width is not None:   # the built tensor (MLP)
            dims = (*dims[:-1], s.built_width)
        return _shape(dims, batch, batch_shapes)

    lines = [BANNER]
    if batch_shapes:
        lines.append("Model structure on each GPU")
    head = "label" if rules and not batch_shapes else "Label"
    lines.append(head.ljust(40) + "Dense".ljust(30) + "Sparse".ljust(30))
    lines.append(",".join(g.label_names).ljust(40) + g.dense_name.ljust(30) + " "
                 + ",".join(s.name for s in g.sparse).ljust(30))
    lines.append(shape((g.label_dims[0],)).ljust(40) + shape((g.dense_dim,)).ljust(40))
    lines.append(HEAVY_RULE if rules else RULE)
    lines.append("Layer Type".ljust(40) + "Input Name".ljust(30) + "Output Name".ljust(30) + "Output Shape".ljust(30))
    lines.append(HEAVY_RULE if rules else RULE)

    rows: list[tuple[str, list[str], list[str], list[str]]] = []
    for e in g.embeddings:
        rows.append((e.embedding_type, [e.bottom], [e.name], [shape(e.shape)]))
    layers = g.analysed if p.has("auto_slice") else g.layers
    for layer in layers:
        shapes = ["" if layer.type in LOSS_LAYERS else shape(s) for s in layer.out_shapes]
        rows.append((layer.type, list(layer.bottoms), list(layer.tops), shapes))

    for kind, bottoms, tops, shapes in rows:
        if not rules:  # before 3.3: names joined on one line
            lines.append(kind.ljust(40) + ",".join(bottoms).ljust(30) + ",".join(tops).ljust(30)
                         + (shapes[0] if shapes else "").ljust(30))
            continue
        n = max(len(bottoms), len(tops))
        for i in range(n):
            lines.append((kind if i == 0 else "").ljust(40)
                         + (bottoms[i] if i < len(bottoms) else "").ljust(30)
                         + (tops[i] if i < len(tops) else "").ljust(30)
                         + (shapes[i] if i < len(shapes) else "").ljust(30))
        lines.append(RULE)
    if not rules:
        lines.append(RULE)
    return "\n".join(lines) + "\n"
