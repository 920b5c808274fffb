"""The ``ctrgen`` command. Exit status: 0 ok, 1 drift or defects, 2 bad input (one line per problem), 130 Ctrl-C."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from . import __version__
from .cli_paths import out_path
from .errors import UserError

EPILOG_GENERATE = """\b
Examples:
  ctrgen generate specs/movielens.yaml
  ctrgen generate specs/*.yaml --out generated
  ctrgen generate specs/movielens.yaml --workflow .demo/movielens/workflow --out .demo/generated
"""

EPILOG_CHECK = """\b
Examples:
  ctrgen check                      # every specs/*.yaml against generated/
  ctrgen check specs/movielens.yaml
Use it in CI or pre-commit: it never writes, and exits 1 when generated/ is out of date.
"""


# Commands that live in their own packages, imported only when run (or when their own --help is asked for), so
# that `ctrgen --help` and `ctrgen check` do not load numpy, pyarrow or the demo's ETL. The short help is the one the
# command declares (tests/test_startup.py keeps them equal).
LAZY_COMMANDS = {
    "assemble": ("codegen.triton.commands.assemble", "assemble_command",
                 "Build a deployable Triton repository from generated files."),
    "demo": ("codegen.demo.cli", "demo_command",
             "Build the demo datasets (real NVTabular ETL), run the example specs."),
    "keysets": ("codegen.keysets.cli", "keysets_command",
                "Write the keyset file of each training source."),
    "validate": ("codegen.triton.commands.validate", "validate_command", "Lint a Triton repository of HugeCTR models."),
    "etl": ("codegen.etl.cli", "etl_command", "Generate etl.py from the spec's etl: section and run it."),
    "export": ("codegen.export.cli", "export_command", "Export a trained PyTorch run as an ONNX model."),
    "serve": ("codegen.serve.cli_serve", "serve_command", "Run the Triton server on an assembled repository."),
    "query": ("codegen.serve.cli_query", "query_command",
              "Send raw rows through a served ensemble and print the scores."),
    "train": ("codegen.train.cli", "train_command",
              "Train the spec's generated PyTorch model (progress, curves, report)."),
    "report": ("codegen.train.cli", "report_command",
               "Write one self-contained HTML page of one or more training runs."),
    "weights": ("codegen.weights.cli", "weights_command",
                "Move trained weights between HugeCTR's files and PyTorch."),
}


class Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            import importlib

            module, attr, _ = LAZY_COMMANDS[cmd_name]
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of --help without importing the lazy commands."""
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                cmd = self.commands[name]
                if cmd.hidden:
                    continue
                limit = formatter.width - 6 - max(len(n) for n in self.list_commands(ctx))
                rows.append((name, cmd.get_short_help_str(limit)))
            else:
                rows.append((name, LAZY_COMMANDS[name][2]))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except UserError as exc:
            click.echo(exc.format(), err=True)
            ctx.exit(2)
        except (KeyboardInterrupt, click.Abort):
            # Ctrl-C: one line and the shell's status for SIGINT; writes are staged, so nothing is half written.
            click.echo("ctrgen: interrupted", err=True)
            ctx.exit(130)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="ctrgen")
def main() -> None:
    """Generate HugeCTR training scripts, graph JSON and Triton repositories from a model spec
    and a saved NVTabular workflow.

    \b
    Quick start:
      ctrgen schema > spec.schema.json        # JSON Schema for editors
      ctrgen lock specs/movielens.yaml        # record the workflow's features beside the spec
      ctrgen generate specs/movielens.yaml    # write generated/movielens/
      ctrgen check                            # CI: fail when generated/ is out of date
    """


def _specs(paths: tuple[Path, ...]) -> list[Path]:
    if paths:
        return list(paths)
    found = sorted(Path("specs").glob("*.yaml"))
    if not found:
        raise UserError.one("specs", "no spec given and no specs/*.yaml found", fix="pass a spec path")
    return found


def _out_root(ctx_root: Path, out: Path | None) -> Path:
    return out if out is not None else ctx_root / "generated"


@main.command(epilog=EPILOG_GENERATE)
@click.argument("specs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", callback=out_path, metavar="DIR", help="output root (default: generated/ beside specs/)")
@click.option("--workflow", type=click.Path(path_type=Path),
              help="read features from this saved workflow instead of the features lock")
@click.option("--force", is_flag=True, help="overwrite files ctrgen did not generate")
def generate(specs: tuple[Path, ...], out: Path | None, workflow: Path | None, force: bool) -> None:
    """Render SPECS into OUT/<name>/ (model.py, <name>.json, summary.txt, triton/, MANIFEST.json; task.py, vertex/,
    cluster/, train_torch.py + features.json + triton_torch/ when the spec lists those targets).

    Every spec and every output folder is checked before anything is written; each output folder is replaced as
    a whole (staged beside it, then swapped), so it is always the old folder or the new one.
    """
    from .output import apply_write, check_out_root, plan_write
    from .pipeline import open_spec, render_spec

    if out is not None:
        check_out_root(out)
    if workflow is not None and not workflow.exists():
        raise UserError.one(workflow, "workflow not found", field="--workflow", fix="check the path")
    rendered = []
    for path in specs:  # render all first: a bad spec writes nothing at all
        ctx = open_spec(path)
        rendered.append((ctx, render_spec(ctx, workflow_override=workflow)))
    plans: list = []
    seen: dict = {}
    for ctx, r in rendered:
        folder = _out_root(ctx.root, out) / r.name
        key = os.path.normcase(os.path.abspath(folder))
        if key in seen:
            raise ctx.loaded.error(("name",), f"{r.name!r} is also the name of {seen[key]}; both would write "
                                   f"{folder}", fix="give each spec its own name")
        seen[key] = ctx.display
        plans.append((ctx, plan_write(folder, r.files, force=force)))   # every check before the first write
    for ctx, plan in plans:
        changed = apply_write(plan)
        state = f"{len(changed)} file(s) updated" if changed else "up to date"
        click.echo(f"{ctx.display} -> {plan.folder}: {state}")


@main.command(epilog=EPILOG_CHECK)
@click.argument("specs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--out", callback=out_path, metavar="DIR", help="output root to compare with (default: generated/)")
def check(specs: tuple[Path, ...], out: Path | None) -> None:
    """Regenerate in memory and compare with the files on disk; print a unified diff; never write."""
    from .output import compare
    from .pipeline import open_spec, render_spec

    dirty = 0
    for path in _specs(specs):
        ctx = open_spec(path)
        r = render_spec(ctx)
        folder = _out_root(ctx.root, out) / r.name
        drift = compare(folder, r.files, display=f"generated/{r.name}" if out is None else str(folder))
        if drift.clean:
            click.echo(f"ok: {ctx.display}")
        else:
            dirty += 1
            click.echo(drift.report(str(folder)))
            click.echo(f"drift: {ctx.display} (run 'ctrgen generate {ctx.display}')", err=True)
    sys.exit(1 if dirty else 0)


@main.command()
@click.argument("spec", type=click.Path(path_type=Path))
def summary(spec: Path) -> None:
    """Print the model.summary() table as the spec's target HugeCTR release prints it.

    \b
    Example:
      ctrgen summary specs/movielens_genres.yaml
    """
    from .lock import load_features
    from .model.build import build_job
    from .specfile.context import open_spec
    from .render.summary import render_summary

    ctx = open_spec(spec)
    features, _ = load_features(ctx)
    job = build_job(ctx, features)
    if job.graph.collection is not None:
        raise ctx.loaded.error(("embedding_collection",), "what model.summary() prints for an embedding collection "
                               "is not established", fix="run model.py on HugeCTR to see it")
    click.echo(render_summary(job), nl=False)


@main.command()
@click.argument("spec", type=click.Path(path_type=Path), required=False)
@click.option("--workflow", type=click.Path(path_type=Path), metavar="DIR",
              help="draw this saved NVTabular workflow's operator graph instead (the folder Workflow.save wrote)")
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid", show_default=True)
def graph(spec: Path | None, workflow: Path | None, fmt: str) -> None:
    """Draw the model graph (after HugeCTR's automatic Slice insertion), or with --workflow a saved NVTabular
    workflow's operator graph (what the seed notebooks' (output).graph shows), as Mermaid or Graphviz DOT.

    \b
    Examples:
      ctrgen graph specs/movielens.yaml                    # paste into Markdown as a ```mermaid block
      ctrgen graph specs/movielens.yaml --format dot | dot -Tsvg > movielens.svg
      ctrgen graph --workflow data/movielens/workflow      # input columns -> operators -> output columns
    """
    from .render.diagram import dot, mermaid, render_dot, render_mermaid

    if (spec is None) == (workflow is None):
        raise UserError.one("ctrgen graph", "give a SPEC or --workflow DIR, one of the two",
                            fix="ctrgen graph specs/NAME.yaml, or ctrgen graph --workflow DIR")
    if workflow is not None:
        from .workflow_graph import operator_graph

        nodes, edges = operator_graph(workflow)
        click.echo(mermaid(nodes, edges) if fmt == "mermaid" else dot("workflow", nodes, edges), nl=False)
        return
    assert spec is not None
    from .lock import load_features
    from .model.build import build_job
    from .specfile.context import open_spec

    ctx = open_spec(spec)
    features, _ = load_features(ctx)
    job = build_job(ctx, features)
    click.echo(render_mermaid(job) if fmt == "mermaid" else render_dot(job), nl=False)


@main.command()
def schema() -> None:
    """Print the spec's JSON Schema (for editor completion and validation).

    \b
    Example (VS Code YAML extension):
      ctrgen schema > .vscode/ctrgen.schema.json
    """
    from .specfile.model import Spec

    click.echo(json.dumps(Spec.model_json_schema(), indent=2, sort_keys=True))


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--workflow", type=click.Path(path_type=Path), help="workflow to read (default: the spec's workflow:)")
@click.option("--check", "check_only", is_flag=True, help="only report whether the lock is stale (exit 1 if so)")
def lock(specs: tuple[Path, ...], workflow: Path | None, check_only: bool) -> None:
    """Write the features lock beside each spec from its NVTabular workflow or dataset schema.

    \b
    Examples:
      ctrgen lock specs/movielens.yaml
      ctrgen lock specs/movielens.yaml --workflow /data/movielens/workflow
      ctrgen lock --check specs/*.yaml
    """
    from .features import read_lock
    from .output import replace_file
    from .lock import lock_drift, select_columns
    from .specfile.context import open_spec
    from .stale import fresh_features
    from .workflow import read_workflow_features

    stale = 0
    writes = []
    for path in specs:      # every spec and workflow is read before the first lock is written
        ctx = open_spec(path)
        source = workflow or ctx.workflow_path
        if source is None:
            raise UserError.one(path, "the spec names no workflow", field="workflow",
                                fix="set workflow: in the spec or pass --workflow")
        if not source.exists():
            raise UserError.one(path, f"workflow {str(source)!r} not found", field="workflow",
                                fix="run the ETL first (make demo builds the embedded one) or fix the path")
        if check_only:
            if not ctx.lock_path.exists():
                click.echo(f"missing: {ctx.lock_path}")
                stale += 1
                continue
            locked = read_lock(ctx.lock_path)
            drift = lock_drift(ctx, locked, fresh_features(ctx, source, select_columns(locked, ctx.spec)))
            click.echo(f"{'stale' if drift else 'ok'}: {ctx.lock_path}" + "".join(f"\n  {d}" for d in drift))
            stale += bool(drift)
            continue
        writes.append((ctx.lock_path, read_workflow_features(ctx, source).lock_text()))
    for lock_path, text in writes:
        replace_file(lock_path, text)
        click.echo(f"wrote {lock_path}")
    sys.exit(1 if stale else 0)


EPILOG_IMPORT = """\b
Examples:
  ctrgen import samples/dcn/dcn.py --hugectr-version 23.06 --out specs
  ctrgen import notebooks/movielens.ipynb --hugectr-version 3.3 --name movielens --out specs
  ctrgen import dcn.json --out specs              # a graph JSON names its release itself
  ctrgen import dlrm_train.py --hugectr-version 23.06 --args "--shard_plan uniform --use_dynamic_hash_table"
Then: ctrgen generate specs/<name>.yaml
"""


@main.command("import", epilog=EPILOG_IMPORT)
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--hugectr-version", "version", help="the release the source was written for (e.g. 3.3, 23.06); "
                                                    "a graph JSON reveals it, a script must be told")
@click.option("--out", callback=out_path, metavar="DIR", default=".", show_default=True,
              help="folder for NAME.yaml and NAME.features.lock.json")
@click.option("--name", help="model name (default: the script's or graph JSON's model_name, else its file "
                                     "name)")
@click.option("--force", is_flag=True, help="overwrite an existing spec or lock")
@click.option("--args", "args", metavar="'ARGS'", help="the command line the script runs with, as a shell would "
              "split it: argparse arguments and sys.argv take these values (default: a notebook's own run of a "
              "%%writefile script, else the argparse defaults)")
def import_(source: Path, version: str | None, out: Path, name: str | None, force: bool, args: str | None) -> None:
    """Read a HugeCTR training script (.py), a notebook (.ipynb) or a graph JSON written by graph_to_json and
    write the spec and features lock that make `ctrgen generate` reproduce it.

    The source is read statically: it is never imported or run. Values it computes at run time are refused with
    their line; hugectr calls or arguments without a spec field are refused, never dropped. Nothing is written
    unless the spec validates.

    A graph JSON names its release through its fields (Concat "axis", the automatic Slice layers,
    max_vocabulary_size_global's formula, model_name); when several supported releases fit, the newest is taken
    and named, and --hugectr-version chooses (one the JSON contradicts is refused with the field). The spec
    regenerates the JSON byte for byte, or the import is refused with the first field that would differ. The
    JSON names no data files, batch sizes or training loop: those get placeholders, printed as assumed.
    """
    from .importer import import_source
    from .importer.argv import split
    from .importer.write import write_import

    from .errors import Located

    try:
        argv = None if args is None else split(args)
    except Located as exc:
        raise exc.at(source, field="--args") from None
    result = import_source(source, version, name, argv)
    written = write_import(result, out, force=force)
    for path in written:
        click.echo(f"wrote {path}")
    for note in result.assumptions:
        click.echo(f"assumed: {note}")


@main.command(epilog="""\b
Examples:
  ctrgen port specs/dcn.yaml --to 3.3                 # rewrite in place, or say what cannot move
  ctrgen port specs/dcn.yaml --to 23.06 --out specs/dcn_2306.yaml
""")
@click.argument("spec", type=click.Path(path_type=Path))
@click.option("--to", "to", required=True, help="target HugeCTR release, e.g. 3.3 or 23.06")
@click.option("--out", callback=out_path, metavar="FILE", help="write the ported spec here (default: rewrite SPEC)")
def port(spec: Path, to: str, out: Path | None) -> None:
    """Retarget SPEC to another HugeCTR release: only hugectr_version changes (comments kept), and the result must
    pass every check of that release; otherwise each thing that cannot move is listed and nothing is written."""
    from .port import port as do_port

    for path in do_port(spec, to, out):
        click.echo(f"wrote {path}")


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="ctrgen")
