"""`ctrgen demo`: the embedded default job that `make demo` runs.

It builds the synthetic datasets with the real NVTabular ETL (build.py), then walks the user's own flow on them:
for each example spec it writes a copy under ``<root>/specs/`` whose ``workflow:`` and data paths point at the demo,
records its features lock from the saved workflow (``ctrgen lock``), generates the outputs into
``<root>/generated/`` (``ctrgen generate``) and checks them (``ctrgen check``). The committed specs keep the
notebooks' numbers; the demo copies show the same specs with numbers that flow from a real ETL.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import UserError
from .build import DATASETS, DEFAULT_SEED, build_demo
from .serve_job import SERVE_SPEC, print_report, run_serve_job

# Example spec -> demo dataset it runs on. Specs that are absent from the checkout are skipped with a note.
DEMO_SPECS: dict[str, str] = {
    "movielens": "movielens",
    "movielens_genres": "movielens_genres",
    "movielens_seed001": "movielens_genres",
    "wdl": "criteo",
    "dcn": "criteo",
    "dlrm": "criteo",
    "deepfm": "criteo",
    "wdl_continuous_etc": "criteo",
}

EPILOG = """\b
Examples:
  ctrgen demo                      # build .demo/ (once) and generate every example spec against it
  ctrgen demo --only movielens     # one spec
  ctrgen demo --force              # rebuild the synthetic data and the ETL from scratch
  ctrgen demo --serve              # the whole job (make demo): ... then train movielens on the CPU, assemble,
                                   # serve, query 1,000 raw rows, compare with offline scores, stop, report
"""


class _Progress:
    """click's progress bar on a terminal; one line per step otherwise (CI logs stay readable)."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last, self.done = "", 0
        self.bar: Any = None      # click.progressbar, made at the first step (its length is the step count)

    def __call__(self, label: str, done: int, total: int) -> None:
        if self.tty:
            if self.bar is None:
                self.bar = click.progressbar(length=total, file=self.stream, show_eta=False, show_pos=True,
                                             item_show_func=lambda item: item)
            self.bar.update(done - self.done, label)
            if done == total:
                self.bar.render_finish()
        elif label != self.last:
            self.stream.write(f"[{done:>2}/{total}] {label}\n")
            self.stream.flush()
        self.last, self.done = label, done


def demo_spec_text(spec_text: str, *, spec_name: str, dataset_dir: Path, spec_dir: Path,
                   cpu_serving: bool = False) -> str:
    """The committed spec with workflow and data paths pointing at the demo (YAML round trip keeps comments);
    ``cpu_serving``: the PyTorch model's Triton instances on the CPU (the served demo)."""
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.preserve_quotes = True
    doc = yaml.load(spec_text)
    rel = Path("..") / dataset_dir.relative_to(spec_dir.parent)
    doc["workflow"] = (rel / "workflow").as_posix()
    doc.pop("features_lock", None)
    # The demo's data comes from its own ETL (build.py), not the spec's etl: section, whose output ctrgen train
    # would otherwise read: data: names it.
    doc.pop("etl", None)
    data = doc.setdefault("data", {})
    data["train"] = [str(dataset_dir / "train" / "_file_list.txt")]
    data["eval"] = str(dataset_dir / "valid" / "_file_list.txt")
    if doc.get("continuous_training") is not None:
        # One pass over the demo's training split, its keyset beside the file list (the demo writes it).
        doc["continuous_training"]["passes"] = [{"keyset": [str(dataset_dir / "train" / "_file_list.keyset")]}]
    if cpu_serving:
        doc["triton"] = {"torch": {"instance": {"kind": "KIND_CPU"}}}
    doc.yaml_set_start_comment(f"Demo copy of specs/{spec_name}.yaml, written by 'ctrgen demo': workflow and data "
                               "point at the synthetic dataset.")
    buf = io.StringIO()
    yaml.dump(doc, buf)
    return buf.getvalue()


@click.command(epilog=EPILOG, short_help="Build the demo datasets (real NVTabular ETL), run the example specs.")
@click.option("--root", type=click.Path(path_type=Path), default=Path(".demo"), show_default=True,
              help="where the demo data, specs and outputs go")
@click.option("--specs", "specs_dir", type=click.Path(path_type=Path), default=Path("specs"), show_default=True,
              help="folder holding the example specs")
@click.option("--only", multiple=True, type=click.Choice(sorted(DEMO_SPECS)), help="run only these example specs")
@click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="seed of the synthetic data")
@click.option("--force", is_flag=True, help="rebuild the demo data even when it is up to date")
@click.option("--serve", is_flag=True, help=f"then train {SERVE_SPEC} on the CPU, assemble, serve, query and compare "
              "(the whole job; exit 1 when served and offline scores differ)")
def demo_command(root: Path, specs_dir: Path, only: tuple[str, ...], seed: int, force: bool, serve: bool) -> None:
    """Build the embedded synthetic datasets with real NVTabular ETL, then lock, generate and check the example
    specs against them; with --serve, train, serve and query one of them too."""
    from ..features import read_lock
    from ..output import compare, write
    from ..keysets.cli import spec_keysets
    from ..lock import lock_drift
    from ..pipeline import open_spec, render_spec
    from ..workflow import read_workflow_features

    if not specs_dir.is_dir():
        raise UserError.one(specs_dir, "folder of example specs not found", field="--specs",
                            fix="run from the ctrgen checkout or pass --specs")
    click.echo(f"Building the demo datasets under {root}/ (synthetic data + NVTabular ETL) ...", err=True)
    paths = build_demo(root, progress=_Progress(), seed=seed, force=force)
    root = root.resolve()
    spec_dir, out_root = root / "specs", root / "generated"
    spec_dir.mkdir(parents=True, exist_ok=True)

    wanted = only or tuple(DEMO_SPECS)
    if serve and SERVE_SPEC not in wanted:
        raise UserError.one(specs_dir / f"{SERVE_SPEC}.yaml", f"--serve serves {SERVE_SPEC}, which --only leaves out",
                            field="--only", fix=f"add --only {SERVE_SPEC}")
    results = []
    for name in wanted:
        committed = specs_dir / f"{name}.yaml"
        if not committed.is_file():
            click.echo(f"skip {name}: {committed} is not in this checkout", err=True)
            continue
        dataset = DEMO_SPECS[name]
        demo_spec = spec_dir / f"{name}.yaml"
        demo_spec.write_text(demo_spec_text(committed.read_text(encoding="utf-8"), spec_name=name,
                                            dataset_dir=root / dataset, spec_dir=spec_dir,
                                            cpu_serving=serve and name == SERVE_SPEC), encoding="utf-8")
        ctx = open_spec(demo_spec)
        fresh = read_workflow_features(ctx, ctx.workflow_path)                      # ctrgen lock
        ctx.lock_path.write_text(fresh.lock_text(), encoding="utf-8")
        rendered = render_spec(ctx)                                                 # ctrgen generate
        folder = out_root / rendered.name
        write(folder, rendered.files, force=False)
        drift = compare(folder, render_spec(ctx).files, ctx.display)               # ctrgen check
        if not drift.clean:
            raise click.ClickException(f"demo outputs of {name} drifted right after generation:\n"
                                       + drift.report(str(folder)))
        keysets = spec_keysets(demo_spec) if rendered.job.continuous else []   # ctrgen keysets --spec
        committed_ctx = open_spec(committed)
        changes = []
        if committed_ctx.lock_path.is_file():
            changes = lock_drift(committed_ctx, read_lock(committed_ctx.lock_path), fresh)
        results.append((name, dataset, folder, rendered.job, changes, keysets))
        if serve and name == SERVE_SPEC:
            served = (ctx, rendered, root / dataset)

    click.echo("")
    for name, dataset, folder, job, changes, keysets in results:
        click.echo(f"{name}: {folder}/ (spec {spec_dir / (name + '.yaml')}, data {root / dataset})")
        for inp in job.graph.sparse:
            click.echo(f"  {inp.name}: slot cardinalities from the ETL {list(inp.cardinalities)}")
        for line in keysets:
            click.echo(f"  keysets: {line}")
        if changes:
            click.echo(f"  ({len(changes)} column(s) differ from the committed {name} lock, which records the real "
                       "dataset's numbers; the demo copy has its own lock)")
    truth_lines = []
    for dataset in DATASETS:
        truth = paths[dataset]["truth"]
        if truth.is_file():
            t = json.loads(truth.read_text(encoding="utf-8"))
            if "suggested_min_auc" in t:
                truth_lines.append(f"  {dataset}: a model that learns the planted structure reaches "
                                   f"AUC >= {t['suggested_min_auc']}")
    if truth_lines:
        click.echo("Planted structure (raw/truth.json):")
        for line in truth_lines:
            click.echo(line)
    click.echo(f"\nDone: {len(results)} spec(s) locked, generated and checked under {out_root}/")
    if serve:
        ctx, rendered, _dataset_dir = served
        truth = json.loads(paths[DEMO_SPECS[SERVE_SPEC]]["truth"].read_text(encoding="utf-8"))
        report = run_serve_job(ctx, rendered, root, ctx.workflow_path,
                               paths[DEMO_SPECS[SERVE_SPEC]]["raw"] / "valid.parquet")
        print_report(report, rendered.name, truth.get("suggested_min_auc"))
        if not report.agrees:
            sys.exit(1)
