"""The best evaluation of a run and early stopping: after each evaluation the monitored metric (``--early-stop
METRIC:PATIENCE``, AUC when not given) is compared with the best so far; a better one has its weights written to
<output-dir>/best/ (model.pt and features.json, as the run writes its last weights), and with a patience the run
stops once that many evaluations in a row have not improved on the best."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch.nn as nn

from .checkpoint import save
from .contract import BEST_DIR, FEATURES_FILE
from .distributed import world
from .sharding import model_state

if TYPE_CHECKING:
    from .evaluation import Evaluation

# metric -> True when higher is better
MONITORED = {"auc": True, "loss": False}


def parse_early_stop(text: str) -> tuple[str, int]:
    """'auc:3' -> ('auc', 3): the argparse type of --early-stop."""
    metric, _, patience = text.partition(":")
    if metric not in MONITORED or not patience.isdigit() or int(patience) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: METRIC:PATIENCE, METRIC one of {', '.join(MONITORED)} and PATIENCE the evaluations without "
            "improvement before stopping, 1 or more (e.g. auc:3)")
    return metric, int(patience)


@dataclass
class BestTracker:
    """The best evaluation so far of ``metric``; ``patience`` None: never stops early."""

    folder: Path
    features: dict
    metric: str = "auc"
    patience: int | None = None
    value: float | None = None
    iteration: int | None = None
    behind: int = 0             # evaluations in a row without improvement
    stopped: bool = False

    @classmethod
    def from_args(cls, args, features: dict) -> BestTracker:
        metric, patience = args.early_stop if args.early_stop is not None else ("auc", None)
        return cls(args.output_dir / BEST_DIR, features, metric, patience)

    def improves(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if self.value is None:
            return True
        return value > self.value if MONITORED[self.metric] else value < self.value

    def observe(self, result: Evaluation, it: int, model: nn.Module) -> bool:
        """Note the evaluation at iteration ``it`` (every rank: the weights of sharded tables are gathered); True
        when the run stops here."""
        value = result.auc if self.metric == "auc" else result.loss
        if self.improves(value):
            self.value, self.iteration, self.behind = value, it, 0
            state = model_state(model)     # whole tables: every rank takes part
            if world()[0] == 0:
                self.folder.mkdir(parents=True, exist_ok=True)
                save(self.folder / "model.pt", state)
                (self.folder / FEATURES_FILE).write_text(json.dumps(self.features, indent=2) + "\n",
                                                          encoding="utf-8")
        else:
            self.behind += 1
        self.stopped = self.patience is not None and self.behind >= self.patience
        return self.stopped

    def text(self) -> str:
        return (f"no improvement of eval {self.metric} in {self.behind} evaluations: stopped early; best "
                f"{self.value:.4f} at iteration {self.iteration}, weights in {self.folder}")

    def record(self, metrics: dict) -> None:
        """metrics.json's account: the best evaluation and whether the run stopped early."""
        metrics["best"] = {"metric": self.metric, "iteration": self.iteration,
                           "value": None if self.value is None else round(self.value, 6),
                           "folder": BEST_DIR if self.iteration is not None else None}
        metrics["early_stop"] = None if self.patience is None else f"{self.metric}:{self.patience}"
        metrics["stopped_early"] = self.stopped
