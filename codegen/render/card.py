"""generated/<name>/README.md: a model card for reviewers (inputs, graph, summary, provenance)."""

from __future__ import annotations

from .. import __version__
from ..features import Features
from ..graph.ir import TrainingJob
from .diagram import render_mermaid
from .env import render
from .summary import render_summary
from .text import visible

PRESET_LINES = {
    "mlp": "An MLP over the embeddings (NVIDIA's MovieLens notebooks)",
    "wdl": "Wide & Deep (HugeCTR samples/wdl)",
    "dcn": "Deep & Cross Network (HugeCTR samples/dcn)",
    "dlrm": "DLRM (HugeCTR samples/dlrm)",
    "deepfm": "DeepFM (HugeCTR samples/deepfm)",
    "dlrm_mlp": "DLRM with Layer_t.MLP (HugeCTR samples/dlrm/dgx_a100_mlp.py)",
    "ncf": "NCF (HugeCTR samples/ncf/ncf.py)",
    "gmf": "GMF (HugeCTR samples/ncf/gmf.py)",
    "neumf": "NeuMF (HugeCTR samples/ncf/neumf.py)",
    "din": "Deep Interest Network (HugeCTR samples/din)",
    "bst": "Behavior Sequence Transformer (HugeCTR samples/bst)",
    "mmoe": "Multi-gate Mixture-of-Experts (HugeCTR samples/mmoe)",
    "shared_bottom": "Shared-bottom multi-task model (HugeCTR samples/mmoe/shared_bottom.py)",
    "layers": "An explicit layer graph",
}


def md_code(text: object) -> str:
    """The inside of a Markdown code span in a table cell: no pipes, backticks, line breaks, control or bidi
    characters (those are shown as escapes)."""
    s = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("`", "'")
    return visible(" ".join(s.split()))


def md_cell(text: object) -> str:
    """A value safe inside a Markdown table cell: code-quoted (:func:`md_code`)."""
    s = md_code(text)
    return f"`{s}`" if s else ""


def html_comment(text: object) -> str:
    """A value safe inside an HTML comment on one line: no ``<`` or ``>`` (a name holding ``-->`` would close the
    comment and leave raw HTML in the card), no line breaks, hidden characters shown as escapes."""
    return md_code(text).replace("<", "&lt;").replace(">", "&gt;")


def render_model_card(job: TrainingJob, features: Features, *, spec: str, lock: str, digest: str,
                      preset: str) -> str:
    g = job.graph
    slots, n = [], 0
    for s in g.sparse:
        for col, card, multi in zip(s.columns, s.cardinalities, s.multi_hot or (False,) * s.slot_num):
            slots.append({"slot": n, "column": md_cell(col), "cardinality": card, "multi_hot": "yes" if multi else "",
                          "input": md_cell(s.name)})
            n += 1
    dense_cols = [c.name for c in features.continuous]
    return render(
        # The spec path stands in the header's HTML comment and in code spans: safe in both (a hostile file name
        # then shows &lt; in the code spans; ordinary paths have no < or >).
        "model_card.md.j2", name=job.name, spec=html_comment(spec), lock=html_comment(lock), digest16=digest[:16], version=job.hugectr_version,
        tool_version=__version__, preset_line=PRESET_LINES.get(preset, preset), provenance=md_cell(
            features.provenance or features.source_kind), gpus=job.gpu_count, batch=job.batchsize,
        mixed=job.mixed_precision, slots=slots, dense_dim=g.dense_dim,
        dense_columns=", ".join(md_cell(c) for c in dense_cols[:8]) + (", ..." if len(dense_cols) > 8 else ""),
        # the label columns (the data's names), not the graph's label tensor (input.label_name, often "label")
        label=", ".join(md_cell(x) for x in [c.name for c in features.labels] or g.label_names),
        mermaid=render_mermaid(job),
        summary=None if g.collection is not None or job.reader_check is not None else render_summary(job),
        continuous=_continuous_card(job), reader_check=job.reader_check)


def _continuous_card(job: TrainingJob) -> dict | None:
    c = job.continuous
    if c is None:
        return None
    if c.cache == "mos":
        api = "`CreateMOS` (model oversubscriber)"
        tables = [(e.name, c.ps_types[0].replace("_", " "), m) for e, m in zip(job.graph.embeddings, c.sparse_models)]
    else:
        api = "`CreateETC` (embedding training cache)"
        tables = [(e.name, t.lower(), m) for e, t, m in zip(job.graph.embeddings, c.ps_types, c.sparse_models)]
    return {
        "api": api, "epochs": c.num_epochs, "from_scratch": c.train_from_scratch,
        "tables": [{"name": md_cell(n), "ps": ps, "model": md_cell(m)} for n, ps, m in tables],
        "passes": [{"n": i + 1, "sources": "<br>".join(md_cell(x) for x in p.source),
                    "keysets": "<br>".join(md_cell(x) for x in p.keyset), "eval": md_cell(p.eval_source)}
                   for i, p in enumerate(c.passes)],
        "save_prefix": md_cell(c.save_prefix), "low_level": c.low_level,
    }
