"""The model card of a repository ``ctrgen assemble --checkpoint`` writes (README.md at its root): the generated card
(generated/<name>/README.md) and a section on the deployed run, from its run folder's metrics.json as the trainer
wrote it: which weights, the best and the last evaluation, the training settings and the data statistics (the rows
of ``ctrgen report``'s summary, each fact written there once)."""

from __future__ import annotations

from ...errors import UserError
from ...inputs import read_json
from ...render.card import md_cell, md_code
from ...train.report_summary import summary_rows
from .checkpoint_choice import Choice

# The rows of the report's summary that describe the model and its data (not the machine it trained on).
CARD_ROWS = ("iterations", "batch", "optimizer, learning rate", "learning-rate schedule", "training / evaluation rows",
             "label mean (CTR)", "best evaluation", "eval AUC (last)", "eval loss",
             "eval normalized entropy / calibration / PR-AUC")


def run_section(choice: Choice) -> str:
    """Markdown: the deployed weights and their run's metrics (a run folder without a readable metrics.json: said)."""
    m = choice.manifest
    at = f" (iteration {m['iteration']})" if m.get("iteration") is not None else ""
    lines = ["", "## The deployed run", "",
             f"Weights: `{md_code(m['weights'])}`{at}, deployed by `ctrgen assemble --checkpoint "
             f"{md_code(m['asked'])}` (MANIFEST.json's `checkpoint`).", ""]
    path = choice.run_dir / "metrics.json" if choice.run_dir is not None else None
    try:
        metrics = read_json(path, "metrics.json", finite=False) if path is not None and path.is_file() else None
    except UserError as exc:
        metrics, why = None, exc.problems[0].message
    else:
        why = "the run folder has no metrics.json (a run that did not finish, or weights from elsewhere)"
    if not isinstance(metrics, dict):
        return "\n".join(lines + [f"No run metrics: {md_code(why)}.", ""])
    lines += ["| | the run (its metrics.json) |", "|---|---|"]
    lines += [f"| {label} | {md_cell(values[0])} |" for label, values in summary_rows([metrics]) if label in CARD_ROWS]
    return "\n".join(lines + [""])
