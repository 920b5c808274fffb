"""``ctrgen export``: a trained PyTorch run as an ONNX file (logic in onnx.py and trained.py). Exit 2 with one line on
bad input, and nothing written."""

from __future__ import annotations

from pathlib import Path

import click

from ..cli_paths import check_out_file, out_path
from ..errors import UserError

EPILOG = """\b
Examples:
  ctrgen export runs/movielens                           # runs/movielens/best.onnx (or last.onnx without best/)
  ctrgen export runs/movielens/last --out movielens.onnx
  ctrgen export runs/movielens/checkpoint_200.pt         # runs/movielens/checkpoint_200.onnx
  ctrgen export my_run --generated generated/movielens --data data/valid   # a run train_torch.py wrote itself

\b
The file's inputs: dense float32 [batch, continuous columns] (when the model has any) and one int64 [batch, slots,
nnz] per sparse input, named as in the spec (-1 pads a multi-hot list); its outputs: one float32 [batch] score per
label column, named as the label. The batch dimension is dynamic.
"""


def _need_packages() -> None:
    import importlib.util

    missing = [name for name in ("onnx", "onnxruntime") if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError.one("--format", f"{' and '.join(missing)} not installed", field="onnx",
                            fix="pip install -c requirements/constraints.txt -e '.[onnx]' (make venv installs it)")


@click.command("export", epilog=EPILOG, short_help="Export a trained PyTorch run as an ONNX model.",
               context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["onnx"]), default="onnx", show_default=True,
              help="the file format")
@click.option("--out", callback=out_path, metavar="FILE",
              help="the file to write (default: RUN_DIR/<weights>.onnx: best.onnx, last.onnx, checkpoint_<iter>.onnx);"
                   " replaced when it exists")
@click.option("--generated", type=click.Path(path_type=Path), metavar="DIR",
              help="the model's generated folder, holding train_torch.py (default: the one run.json's command ran)")
@click.option("--data", metavar="PATH",
              help="validation data to check the export on: the transformed Parquet (folder, _file_list.txt or "
                   "file) the trainer's --eval reads (default: run.json's --eval)")
@click.option("--rows", type=click.IntRange(1, 1_000_000), default=1000, show_default=True, metavar="N",
              help="validation rows to check on")
def export_command(run_dir: Path, fmt: str, out: Path | None, generated: Path | None, data: str | None,
                   rows: int) -> None:
    """Export the trained model of RUN_DIR (a `ctrgen train` run folder: its best/ weights when the run kept them,
    else its model.pt; RUN_DIR/last the last weights; RUN_DIR/checkpoint_<iter>.pt a snapshot) as an ONNX file with
    named inputs and outputs and a dynamic batch dimension; it returns scores (the sigmoid the served model applies).

    Before anything is written, onnxruntime scores validation rows with the file and the largest difference from the
    PyTorch model's scores is printed; above 1e-5 the export is refused."""
    from .onnx import TOLERANCE, export_bytes, largest_difference, signature
    from .trained import default_out, run_folder, trained_model, validation_rows, validation_source

    _need_packages()
    with trained_model(run_dir, generated) as trained:
        target = out if out is not None else default_out(run_dir, trained.weights)
        check_out_file(target)
        arrays = validation_rows(validation_source(run_folder(run_dir), data), trained.features, rows)
        onnx_bytes = export_bytes(trained.model, trained.features, arrays)
        difference = largest_difference(onnx_bytes, trained.model, trained.features, arrays)
        n = len(arrays["labels"])
        if not difference <= TOLERANCE:
            raise UserError.one(run_dir, f"onnxruntime's scores differ from PyTorch's by up to {difference:.3g} over "
                                f"{n} validation rows (at most {TOLERANCE:g} accepted); nothing written", field=fmt,
                                fix="report the spec's layers: one of them runs differently in ONNX")
    from ..output import replace_file

    replace_file(target, onnx_bytes)
    sig = signature(trained.features)
    at = f", iteration {trained.iteration}" if trained.iteration is not None else ""
    click.echo(f"wrote {target} ({trained.weights} weights{at}; {len(onnx_bytes):,} bytes)")
    click.echo(f"inputs  {', '.join(_shapes(sig.inputs, trained.features))}")
    click.echo(f"outputs {', '.join(f'{name} float32 [batch]' for name in sig.outputs)}")
    click.echo(f"checked with onnxruntime on {n} validation rows: largest difference from PyTorch {difference:.2e} "
               f"(at most {TOLERANCE:g})")


def _shapes(inputs: list[str], features: dict) -> list[str]:
    sparse = {s["input"]: s for s in features["sparse"]}
    return [f"{name} int64 [batch, {len(sparse[name]['columns'])}, {sparse[name]['nnz']}]" if name in sparse else
            f"{name} float32 [batch, {len(features['continuous'])}]" for name in inputs]
