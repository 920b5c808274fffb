"""The trained model of a run folder, as ``ctrgen export`` reads it: the weights ``ctrgen assemble --checkpoint``
would choose (triton/deploy/checkpoint_choice.py: ``best/`` by default, ``RUN_DIR/last``, a checkpoint_<iter>.pt),
the generated train_torch.py whose ``Model`` they fit, and validation rows to check the export on.

Where train_torch.py and the validation rows come from: ``--generated DIR`` and ``--data PATH`` when given, else the
run's run.json (``ctrgen train`` records the trainer's command line: its train_torch.py and its ``--eval`` data). A
run that train_torch.py wrote by itself has no run.json: both options are needed then.

Every file is read as the other commands read it: features.json through codegen/inputs.py, model.pt a regular zip
file loaded with ``torch.load(weights_only=True)`` (a checkpoint is data: no code in it runs); train_torch.py is
imported (it is generated code, as ``ctrgen query --compare`` and the Triton model import it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..inputs import read_json
from ..runtime.contract import BEST_DIR, layout_of
from ..serve.offline import load_script, read_checkpoint
from ..triton.deploy.checkpoint_choice import LAST, chosen_checkpoint

FIELD = "RUN_DIR"
TRAINER = "train_torch.py"
RUN_FILE = "run.json"


@dataclass
class Trained:
    """A run's chosen weights in their Model (eval mode) and what the export and its check read."""

    model: Any                 # the generated Model, weights loaded
    features: dict             # the run's features.json
    weights: str               # "best", "last" or the checkpoint's file name (MANIFEST.json's "weights")
    iteration: int | None      # the weights' iteration where the run's metrics tell it
    script: Path               # the train_torch.py whose Model it is


def run_folder(path: Path) -> Path:
    """The run folder of RUN_DIR, RUN_DIR/best, RUN_DIR/last or RUN_DIR/checkpoint_<iter>.pt."""
    if path.suffix == ".pt" or path.name == LAST and not path.exists() or path.name == BEST_DIR:
        return path.parent
    return path


def default_out(path: Path, weights: str) -> Path:
    """RUN_DIR/<weights>.onnx: best.onnx, last.onnx or checkpoint_<iter>.onnx, beside the run's other files."""
    return run_folder(path) / f"{Path(weights).stem}.onnx"


def _run_record(run: Path) -> dict | None:
    path = run / RUN_FILE
    if not path.is_file():
        return None
    record = read_json(path, RUN_FILE)
    return record if isinstance(record, dict) else None


def script_path(run: Path, generated: Path | None) -> Path:
    """train_torch.py: in ``--generated``, else the one run.json's command ran."""
    if generated is not None:
        path = generated / TRAINER
        if not path.is_file():
            raise UserError.one(path, "not found", field="--generated",
                                fix="pass the model's generated folder (ctrgen generate writes train_torch.py there)")
        return path
    record = _run_record(run)
    command = record.get("command") if record else None
    named = [Path(a) for a in command if isinstance(a, str) and Path(a).name == TRAINER] if isinstance(command, list) \
        else []
    if not named:
        raise UserError.one(run, f"no {RUN_FILE} naming the {TRAINER} that trained this run", field=FIELD,
                            fix="pass --generated DIR, the model's generated folder (e.g. generated/<name>)")
    if not named[0].is_file():
        raise UserError.one(run / RUN_FILE, f"the {TRAINER} it names, {named[0]}, is not found from this folder",
                            field="command", fix="run ctrgen export where ctrgen train ran, or pass --generated DIR")
    return named[0]


def validation_source(run: Path, data: str | None) -> str:
    """The validation data: ``--data``, else the ``--eval`` data of run.json's command."""
    if data is not None:
        return data
    record = _run_record(run)
    evals = (record.get("data") or {}).get("--eval") if record and isinstance(record.get("data"), dict) else None
    if not isinstance(evals, list) or not evals or not isinstance(evals[0], str):
        raise UserError.one(run, f"no {RUN_FILE} naming the run's validation data", field=FIELD,
                            fix="pass --data PATH, the transformed validation Parquet the trainer's --eval read")
    return evals[0]


def validation_rows(source: str, features: dict, rows: int) -> dict:
    """The first ``rows`` rows of the validation data, as the trainer reads them (runtime.data.read_split)."""
    from ..runtime.data import data_files, read_split
    from ..runtime.errors import DataError

    try:
        arrays = read_split(data_files(source), features, max_rows=rows)
    except DataError as exc:    # the runtime's own message names the file and, mostly, the fix
        message = str(exc).removeprefix(f"{source}: ")
        raise UserError.one(source, message, field="--data", fix="" if "(fix:" in message else
                            "pass the transformed validation data of this run (train_torch.py's --eval)") from None
    if not len(arrays["labels"]):
        raise UserError.one(source, "holds no rows", field="--data", fix="pass validation data with rows")
    return arrays


@contextmanager
def trained_model(path: Path, generated: Path | None) -> Iterator[Trained]:
    """The Model of train_torch.py with the weights RUN_DIR ``path`` chooses, eval mode, on the CPU."""
    with chosen_checkpoint(path, field=FIELD) as choice:
        features, state = read_checkpoint(choice.folder, field=FIELD)
        script_file = script_path(run_folder(path), generated)
        try:
            script = load_script(script_file)
        except Exception as exc:     # noqa: BLE001  (a damaged file fails in many ways)
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else "damaged"
            raise UserError.one(script_file, f"does not import ({type(exc).__name__}: {first})", field="--generated",
                                fix="regenerate it with 'ctrgen generate'") from None
        from ..runtime import RuntimeMismatch, require

        try:
            require(getattr(script, "RUNTIME", "?"), str(script_file))
        except RuntimeMismatch as exc:
            raise UserError.one(script_file, str(exc), field="--generated",
                                fix="regenerate it with this ctrgen ('ctrgen generate'), then train again") from None
        layout = getattr(script, "LAYOUT", None)
        try:
            same = isinstance(features, dict) and layout_of(features) == layout
        except (KeyError, TypeError):
            same = False
        if not same:
            raise UserError.one(choice.folder / "features.json", f"its columns are not the ones {script_file} was "
                                "generated for", field=FIELD,
                                fix="pass the generated folder of the model this run trained (--generated)")
        try:
            model = script.Model(features)
            model.load_state_dict(state)
        except (RuntimeError, KeyError, TypeError, ValueError) as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
            first = " ".join(lines[:2] if lines[0].endswith(":") else lines[:1])[:300]   # "Error(s) ...:" + the first
            raise UserError.one(choice.folder / "model.pt", f"the weights do not fit the Model of {script_file} "
                                f"({first})", field=FIELD,
                                fix="pass the generated folder of the model this run trained (--generated)") from None
        manifest = choice.manifest
        yield Trained(model.eval(), features, str(manifest["weights"]), manifest.get("iteration"), script_file)

