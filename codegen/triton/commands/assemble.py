"""``ctrgen assemble``: the click command (logic in assemble.py). Exit 2 with one line per problem on bad input."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path, PurePosixPath

import click

from ...cli_paths import out_path
from ...errors import UserError

ONNX_ROWS = 1000        # validation rows the ONNX model step is checked on, as ctrgen export checks


def lock_checker(ctx) -> Callable[[Path], None]:
    """The workflow check ``assemble`` runs once the workflow folder is known to hold a workflow: the spec's lock and
    the workflow are read here and compared in deploy/lock_check.py."""

    def check(workflow: Path) -> None:
        from ...features import read_lock
        from ...lock import select_columns
        from ...workflow import WORKFLOW_SCHEMA, read_workflow_features
        from ..deploy.lock_check import check_workflow_against_lock

        locked = select_columns(read_lock(ctx.lock_path), ctx.spec)
        # The schema ctrgen's ETL helpers save beside the workflow is read without importing nvtabular (seconds).
        fresh = read_workflow_features(ctx, workflow, allow_import=not (workflow / WORKFLOW_SCHEMA).is_file())
        check_workflow_against_lock(locked, fresh, workflow, lock_name=ctx.lock_path.name, spec_display=ctx.display)

    return check


EPILOG = """\b
Examples:
  ctrgen assemble specs/movielens.yaml --workflow data/workflow --weights train_out --out deploy/model
  ctrgen assemble .demo/specs/movielens.yaml --workflow .demo/movielens/workflow \\
      --weights .demo/train --out .demo/serve --force

\b
  # the PyTorch model (targets: [..., torch]): generated/<name>/triton_torch/ + train_torch.py's output folder
  ctrgen assemble specs/movielens.yaml --workflow data/workflow --checkpoint torch_out --out deploy/model

\b
The result is the repository to mount at triton.model_root (default /model) in the serving container:
  <out>/ps.json, <out>/<name>/1/{<name>.json, <prefix>_dense_<N>.model, <prefix><i>_sparse_<N>.model/},
  <out>/<name>_nvt/1/{model.py, workflow/}, <out>/<name>_ens/1/
With --checkpoint: <out>/<name>/1/{model.py, train_torch.py, model.pt, features.json} (python backend), no ps.json;
--checkpoint RUN_DIR deploys RUN_DIR/best when the run kept it, RUN_DIR/last its last weights, RUN_DIR/checkpoint_200.pt
a snapshot; MANIFEST.json's "checkpoint" records which;
the preprocessing model and the ensemble are triton/'s (generated/<name>/triton_torch/ holds only the model step).
Either way <out>/codegen/runtime/ is ctrgen's runtime (one copy for every python model) and <out>/MANIFEST.json
records its version.

\b
Instances with 'count: auto' (the default of <name>_nvt and of the PyTorch model) get a count for this machine
(one <name>_nvt instance per core; one PyTorch instance per 2 x 'threads' cores, or one per GPU); --cores N chooses
for a server of N cores. A count set in the spec is kept.
  ctrgen assemble specs/movielens.yaml --workflow data/workflow --checkpoint torch_out --out deploy/model --cores 16
"""


@click.command("assemble", epilog=EPILOG, short_help="Build a deployable Triton repository from generated files.",
               context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.argument("spec", type=click.Path(path_type=Path))
@click.option("--workflow", type=click.Path(path_type=Path), required=True,
              help="the saved NVTabular workflow folder (Workflow.save) the preprocessing model loads")
@click.option("--weights", type=click.Path(path_type=Path),
              help="HugeCTR: folder holding the trained files ps.json names (dense file, one sparse folder per table)")
@click.option("--checkpoint", type=click.Path(path_type=Path),
              help="PyTorch: the --output-dir of train_torch.py (its best/ weights when it kept them, else "
                   "model.pt), RUN_DIR/last (the last weights), RUN_DIR/best, or a checkpoint_<iter>.pt; assembles "
                   "triton_torch/")
@click.option("--out", callback=out_path, metavar="DIR", required=True, help="the repository to write")
@click.option("--generated", type=click.Path(path_type=Path),
              help="the model's generated folder, holding triton/ and triton_torch/ (default: generated/<name>/ "
                   "beside specs/)")
@click.option("--onnx", is_flag=True, help="with --checkpoint: the model step as an onnxruntime model (model.onnx, "
              "checked against PyTorch on validation rows) in place of the python-backend one; served where the "
              "server has the onnxruntime backend (not the venv's)")
@click.option("--force", is_flag=True, help="replace --out when it exists")
@click.option("--cores", type=click.IntRange(1, 4096), metavar="N",
              help="choose the 'count: auto' instance counts for a server of N cores (default: this machine's)")
def assemble_command(spec: Path, workflow: Path, weights: Path | None, checkpoint: Path | None, out: Path,
                     generated: Path | None, onnx: bool, force: bool, cores: int | None) -> None:
    """Copy the generated Triton repository of SPEC, add the saved workflow and the trained files, check them, and
    print the tritonserver command line. --weights: the HugeCTR model (generated/<name>/triton/; the files ps.json
    and config.pbtxt name). --checkpoint: the PyTorch model (generated/<name>/triton_torch/; model.pt and the
    features.json it was trained on, which must equal the generated one)."""
    from ...pipeline import open_spec, render_spec
    from ..deploy.assemble import assemble, check_generated
    from ..deploy.checkpoint_choice import chosen_checkpoint
    from ..deploy.run_card import run_section

    if (weights is None) == (checkpoint is None):
        raise UserError.one(spec, "pass exactly one of --weights (HugeCTR) and --checkpoint (PyTorch)",
                            field="--weights/--checkpoint", fix="--weights SNAPSHOT_DIR or --checkpoint TORCH_OUT_DIR")
    ctx = open_spec(spec)
    rendered = render_spec(ctx)
    if rendered.triton is None:
        raise UserError.one(spec, "the Triton target is off for this spec", field="triton.enabled",
                            fix="remove 'triton: {enabled: false}' and run ctrgen generate")
    torch = checkpoint is not None
    if torch and rendered.triton_torch is None:
        raise UserError.one(spec, "--checkpoint serves the PyTorch model, but 'torch' is not among the spec's targets",
                            field="targets", fix="add torch to targets and run ctrgen generate, or pass --weights")
    plan = rendered.triton_torch if torch else rendered.triton
    assert plan is not None
    generated = generated or ctx.root / "generated" / rendered.name
    check_generated(generated, rendered.files, plan.step, ctx.display)
    features_json = rendered.files.get(PurePosixPath("features.json"), "")
    if onnx and checkpoint is None:
        raise UserError.one(spec, "--onnx exports the PyTorch model: it needs --checkpoint", field="--onnx",
                            fix="--checkpoint RUN_DIR --onnx")
    step = onnx_step_bytes(plan, checkpoint, generated) if onnx and checkpoint is not None else None
    with ExitStack() as stack:
        choice = stack.enter_context(chosen_checkpoint(checkpoint)) if checkpoint is not None else None
        result = assemble(plan, generated, workflow=workflow, weights=choice.folder if choice else weights, out=out,
                          force=force, features_json=features_json,
                          train_torch=rendered.files.get(PurePosixPath("train_torch.py"), ""),
                          check_workflow=lock_checker(ctx), cores=cores,
                          manifest={"checkpoint": choice.manifest} if choice else None,
                          card=rendered.files.get(PurePosixPath("README.md"), "") + run_section(choice)
                          if choice else "", onnx=step[0] if step else None)
    if choice is not None:
        m = choice.manifest
        click.echo(f"weights: {m['weights']}" + (f" (iteration {m['iteration']})" if m["iteration"] is not None
                                                 else "") + f" from {m['path']}", err=True)
    for rel in result.copied:
        click.echo(f"added {rel}", err=True)
    if step is not None:
        click.echo(f"model step {plan.name}: onnxruntime ({len(step[0]):,} bytes; checked with onnxruntime on "
                   f"{step[1]} validation rows as one request: largest difference from PyTorch {step[2]:.2e})",
                   err=True)
    for note in result.counts:
        click.echo(f"instances {note} (count: auto)", err=True)
    click.echo(f"Wrote {result.out}/ ({len(result.copied)} item(s) added to the generated repository).")
    image = ("Triton image with the onnxruntime backend and a python backend that can import nvtabular" if step
             else "Triton image whose python backend can import torch and nvtabular" if torch
             else "Merlin inference image with the HugeCTR backend")
    click.echo(f"Mount it at {plan.model_root} in the serving container ({image}) and run:")
    click.echo(f"  {result.command}")
    if torch and step is None:
        click.echo(f"Or serve it on this machine with the venv's Triton server: ctrgen serve {result.out}")
    elif step is not None:
        click.echo("Its model step needs a server with the onnxruntime backend (NVIDIA's Triton image); the venv's "
                   "server has the python backend only.")


def onnx_step_bytes(plan, checkpoint: Path, generated: Path) -> tuple[bytes, int, float]:
    """The ONNX model step of the run's chosen weights (codegen/export/vcsr.py), its rows checked and the largest
    difference from PyTorch; refused above the export's tolerance, before anything is written."""
    from ...export.cli import _need_packages
    from ...export.onnx import TOLERANCE, torch_scores
    from ...export.trained import run_folder, trained_model, validation_rows, validation_source
    from ...export.vcsr import export_vcsr, tables_of, to_vcsr, vcsr_scores

    _need_packages()
    with trained_model(checkpoint, generated) as trained:
        arrays = validation_rows(validation_source(run_folder(checkpoint), None), trained.features, ONNX_ROWS)
        tables = tables_of(plan, trained.features)
        outputs = [o.name for o in plan.model("").outputs]
        data = export_vcsr(trained.model, trained.features, tables, outputs, arrays)
        ours = vcsr_scores(data, to_vcsr(arrays, trained.features, tables), outputs).astype("float64")
        theirs = torch_scores(trained.model, trained.features, arrays).reshape(-1).astype("float64")
    difference = float(abs(ours - theirs).max(initial=0.0)) if ours.shape == theirs.shape else float("inf")
    if not difference <= TOLERANCE:        # NaN too
        raise UserError.one(checkpoint, f"the ONNX model step's scores differ from PyTorch's by up to "
                            f"{difference:.3g} over {len(theirs)} validation rows (at most {TOLERANCE:g}); nothing "
                            "written", field="--onnx", fix="assemble without --onnx (the python-backend model)")
    return data, len(arrays["labels"]), difference
