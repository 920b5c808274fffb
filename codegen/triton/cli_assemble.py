"""``ctrgen assemble``: the click command (logic in assemble.py). Exit 2 with one line per problem on bad input."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import click

from ..errors import UserError

EPILOG = """\b
Examples:
  ctrgen assemble specs/movielens.yaml --workflow data/workflow --weights train_out --out deploy/model
  ctrgen assemble .demo/specs/movielens.yaml --workflow .demo/movielens/workflow \\
      --weights .demo/train --out .demo/serve --force

\b
The result is the repository to mount at triton.model_root (default /model) in the serving container:
  <out>/ps.json, <out>/<name>/1/{<name>.json, <prefix>_dense_<N>.model, <prefix><i>_sparse_<N>.model/},
  <out>/<name>_nvt/1/{model.py, workflow/}, <out>/<name>_ens/1/
"""


@click.command("assemble", epilog=EPILOG, short_help="Build a deployable Triton repository from generated files.",
               context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.argument("spec", type=click.Path(path_type=Path))
@click.option("--workflow", type=click.Path(path_type=Path), required=True,
              help="the saved NVTabular workflow folder (Workflow.save) the preprocessing model loads")
@click.option("--weights", type=click.Path(path_type=Path), required=True,
              help="folder holding the trained files ps.json names (dense file, one sparse folder per table)")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="the repository to write")
@click.option("--generated", type=click.Path(path_type=Path),
              help="the generated repository (default: generated/<name>/triton beside specs/)")
@click.option("--force", is_flag=True, help="replace --out when it exists")
def assemble_command(spec: Path, workflow: Path, weights: Path, out: Path, generated: Path | None,
                     force: bool) -> None:
    """Copy the generated Triton repository of SPEC, add the saved workflow and the trained HugeCTR files, check
    they are the files ps.json and config.pbtxt name, and print the tritonserver command line."""
    from ..pipeline import open_spec, render_spec
    from .assemble import assemble, check_generated

    ctx = open_spec(spec)
    rendered = render_spec(ctx)
    if rendered.triton is None:
        raise UserError.one(spec, "the Triton target is off for this spec", field="triton.enabled",
                            fix="remove 'triton: {enabled: false}' and run ctrgen generate")
    generated = generated or ctx.root / "generated" / rendered.name / "triton"
    prefix = PurePosixPath("triton")
    files = {p.relative_to(prefix): t for p, t in rendered.files.items() if p.parts[0] == prefix.name}
    check_generated(generated, files, ctx.display)
    result = assemble(rendered.triton, generated, workflow=workflow, weights=weights, out=out, force=force)
    for rel in result.copied:
        click.echo(f"added {rel}", err=True)
    plan = rendered.triton
    click.echo(f"Wrote {result.out}/ ({len(result.copied)} item(s) added to the generated repository).")
    click.echo(f"Mount it at {plan.model_root} in the serving container (Merlin inference image with the HugeCTR "
               "backend) and run:")
    click.echo(f"  {result.command}")
