"""``ctrgen weights import`` / ``export``: HugeCTR's saved model files <-> the PyTorch trainer's checkpoint (logic in
run.py). Exit 2 with one line per problem on bad input, and nothing written."""

from __future__ import annotations

from pathlib import Path

import click

from ..cli_paths import out_path
from ..errors import UserError

EPILOG = """\b
Examples:
  ctrgen weights import specs/dcn.yaml --hugectr hugectr_out --out runs/dcn_from_hugectr
  ctrgen train specs/dcn.yaml --out runs/dcn_from_hugectr --resume      # fine-tune in PyTorch
  ctrgen weights export runs/dcn --hugectr deploy_weights               # the spec from run.json
  ctrgen assemble specs/dcn.yaml --workflow data/workflow --weights deploy_weights --out deploy/model

\b
HugeCTR's files (docs/hugectr.md §5): <prefix>_dense_<iter>.model, its .ntp.json (BatchNorm running statistics)
and one <prefix><i>_sparse_<iter>.model/ {key, emb_vector[, slot_id]} per table. Optimizer states are not moved:
an imported checkpoint resumes with a fresh optimizer, and an export writes no _opt_* files.
"""


@click.group("weights", epilog=EPILOG, short_help="Move trained weights between HugeCTR's files and PyTorch.",
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
def weights_command() -> None:
    """Move a trained model's weights between HugeCTR's saved files and the PyTorch trainer's checkpoint."""


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


@weights_command.command("import", short_help="HugeCTR's saved files -> a PyTorch run folder.", context_settings=CONTEXT,
                         epilog="""\b
Example:
  ctrgen weights import specs/dcn.yaml --hugectr hugectr_out --out runs/dcn_from_hugectr
""")
@click.argument("spec", type=click.Path(path_type=Path))
@click.option("--hugectr", "folder", type=click.Path(path_type=Path), required=True, metavar="DIR",
              help="the folder HugeCTR saved the model in (save_params_to_files, or fit's snapshots)")
@click.option("--iter", "iteration", type=click.IntRange(0), metavar="N",
              help="the iteration of the files to read (needed when DIR holds several)")
@click.option("--out", callback=out_path, required=True, metavar="RUN_DIR",
              help="the run folder to write: model.pt, features.json, checkpoint_<iter>.pt, weights.json")
@click.option("--force", is_flag=True, help="replace a non-empty RUN_DIR")
def import_command(spec: Path, folder: Path, iteration: int | None, out: Path, force: bool) -> None:
    """Read HugeCTR's dense and sparse files of the model SPEC describes into a run folder that train_torch.py
    --resume, ctrgen train --resume, ctrgen assemble --checkpoint and ctrgen export accept. A table's keys map to rows
    through the slot offsets of the features lock; rows no key of the file sets are zero (what HPS serves for a key
    it does not hold)."""
    from .run import import_weights

    record = import_weights(spec, folder, iteration, out, force)
    absent = ", ".join(f"{name} {rows}" for name, rows in record["rows_without_key"].items())
    click.echo(f"wrote {out} (iteration {record['iteration']} from {folder / record['dense_file']}; rows without a "
               f"key, zero: {absent or 'none'}; optimizer state not imported)")


@weights_command.command("export", short_help="A PyTorch run's weights -> HugeCTR's files.", context_settings=CONTEXT,
                         epilog="""\b
Example:
  ctrgen weights export runs/dcn --hugectr deploy_weights
""")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--hugectr", "out", callback=out_path, required=True, metavar="OUT",
              help="the folder to write HugeCTR's files into (replaced as a whole with --force)")
@click.option("--spec", type=click.Path(path_type=Path), metavar="SPEC",
              help="the spec the run trained (default: the one run.json or weights.json names)")
@click.option("--iter", "iteration", type=click.IntRange(0), metavar="N",
              help="the iteration in the file names (default: the names the spec's ps.json gives)")
@click.option("--prefix", metavar="P", help="the file names' prefix (default: the spec's ps.json's, else none)")
@click.option("--force", is_flag=True, help="replace a non-empty OUT")
def export_command(run_dir: Path, out: Path, spec: Path | None, iteration: int | None, prefix: str | None,
                   force: bool) -> None:
    """Write the trained weights of RUN_DIR (its best/ weights when the run kept them, else model.pt; RUN_DIR/last;
    RUN_DIR/checkpoint_<iter>.pt) as HugeCTR's files, for ctrgen assemble --weights, HugeCTR's load_dense_weights /
    load_sparse_weights and HPS. No optimizer state is written."""
    from ..export.trained import run_folder
    from ..serve.offline import read_checkpoint
    from ..triton.deploy.checkpoint_choice import chosen_checkpoint
    from .run import export_names, export_weights, open_model, spec_of_run

    if prefix is not None and ("/" in prefix or "\0" in prefix or prefix in (".", "..")):
        raise UserError.one(prefix, "a file name prefix may not hold '/'", field="--prefix", fix="a plain prefix")
    model = open_model(spec if spec is not None else spec_of_run(run_folder(run_dir)))
    with chosen_checkpoint(run_dir, field="RUN_DIR") as choice:
        _, state = read_checkpoint(choice.folder, field="RUN_DIR")
        dense, sparse = export_names(model, iteration, prefix)
        if not isinstance(state, dict):
            raise UserError.one(choice.folder / "model.pt", "holds no state_dict (a map of tensor names to tensors)",
                                field="RUN_DIR", fix="pass a run folder train_torch.py wrote")
        weights = export_weights(model, state, str(choice.folder / "model.pt"), out, dense, sparse, force)
    click.echo(f"wrote {out}: {dense} ({weights.dense.size} weights), "
               + ", ".join(f"{s}/ ({len(d.keys)} keys)" for s, d in zip(sparse, weights.tables))
               + f" from the {choice.manifest['weights']} weights; no optimizer state")
