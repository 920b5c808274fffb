"""``ctrgen weights import`` / ``export``: the steps, every check before anything is written (cli.py is the click
layer). Optimizer states are not moved: HugeCTR's ``_opt_*`` files hold its optimizer's state in its own buffer
layout, which hugectr.md does not state; an imported checkpoint resumes with a fresh optimizer (its ``optimizer`` is
``{}``), and an export writes no ``_opt_*`` files (serving does not read them)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..atomic import stage, swap_in
from ..errors import UserError
from .convert import HugeCTRWeights, check_state, from_hugectr, to_hugectr
from .files import (DENSE, Found, find_dense, ntp_name, ntp_text, read_dense, read_ntp, read_sparse, sparse_name,
                    dense_name, write_sparse)
from ..model.types import Model
from .layout import Layout, layout_of

TRAINER, FEATURES = "train_torch.py", "features.json"
RECORD = "weights.json"        # what an import wrote: the spec, the files and iteration, rows no key set


@dataclass(frozen=True)
class Spec:
    display: str                # the spec as messages name it
    layout: Layout
    files: dict                 # the rendered files: {PurePosixPath: text}
    model: Model


def open_model(spec: Path) -> Spec:
    from ..pipeline import open_spec, render_spec

    ctx = open_spec(spec)
    rendered = render_spec(ctx)
    if PurePosixPath(TRAINER) not in rendered.files:
        raise ctx.loaded.error(("targets",), "the spec has no PyTorch trainer, so no checkpoint to move weights "
                               "to or from", fix="add torch to targets")
    return Spec(ctx.display, layout_of(rendered.model), rendered.files, rendered.model)


def _template(spec: Spec) -> tuple[dict, dict]:
    """(features.json, the state_dict of the spec's Model as train_torch.py builds it)."""
    from ..serve.offline import load_script

    features = json.loads(spec.files[PurePosixPath(FEATURES)])
    with tempfile.TemporaryDirectory(prefix="ctrgen-weights-") as tmp:
        path = Path(tmp) / TRAINER
        path.write_text(spec.files[PurePosixPath(TRAINER)], encoding="utf-8")
        model = load_script(path).Model(features)
    return features, model.state_dict()


def _uncovered(layout: Layout, keys, where: str, exporting: bool = False) -> None:
    """Every parameter of the Model (of the checkpoint, ``exporting``) has a place in HugeCTR's files (else the move
    would not be exact)."""
    covered = {p.key for p in layout.dense} | {t.key for t in layout.tables}
    for s in layout.stats:
        covered |= {s.prefix + n for n in ("running_mean", "running_var", "num_batches_tracked")}
    left = sorted(k for k in keys if k not in covered)
    if left and exporting:
        raise UserError.one(where, f"holds '{left[0]}'" + (f" (and {len(left) - 1} more)" if len(left) > 1 else "")
                            + ", which has no place in this spec's HugeCTR files", field="model",
                            fix="pass a run of this spec (--spec)")
    if left:
        raise UserError.one(where, f"the Model's tensor '{left[0]}' has no place in HugeCTR's files"
                            + (f" (and {len(left) - 1} more)" if len(left) > 1 else ""), field="model",
                            fix="ctrgen weights moves the layers docs/hugectr.md §5 lists")


def import_weights(spec_path: Path, folder: Path, iteration: int | None, out: Path, force: bool) -> dict:
    """HugeCTR's files in ``folder`` -> a run folder ``out`` (model.pt, features.json, checkpoint_<iter>.pt,
    weights.json). Returns the record written."""
    import torch

    spec = open_model(spec_path)
    _check_out(out, force, "--out")
    layout = spec.layout
    dense_file, sparse = export_names(spec, None, None)
    named = DENSE.match(dense_file)
    if iteration is None and named and (folder / dense_file).is_file():
        # the names the spec's ps.json gives (a continuous run's tables are in its cache's folders)
        found = Found(named["prefix"], int(named["iter"]))
    else:
        found = find_dense(folder, iteration)
        dense_file = dense_name(found.prefix, found.iteration)
        sparse = [sparse_name(found.prefix, t.index, found.iteration) for t in layout.tables]
    dense_path = folder / dense_file
    dense = read_dense(dense_path, layout.dense_count)
    stats = read_ntp(folder / ntp_name(dense_path.name), [(s.layer, s.width) for s in layout.stats])
    where = [str(folder / name) for name in sparse]
    dumps = [read_sparse(Path(w), t.vec_size, t.localized) for w, t in zip(where, layout.tables)]
    features, template = _template(spec)
    _uncovered(layout, template, spec.display)
    state, absent = from_hugectr(layout, HugeCTRWeights(dense, stats, dumps), template, where)
    record = {"spec": str(spec_path.resolve()), "hugectr": str(folder.resolve()), "dense_file": dense_path.name,
              "iteration": found.iteration, "optimizer": "not imported (a resumed run starts it afresh)",
              "rows_without_key": absent}
    staged = stage(out.parent, out.name)
    try:
        torch.save(state, staged / "model.pt")
        (staged / FEATURES).write_text(spec.files[PurePosixPath(FEATURES)], encoding="utf-8")
        torch.save({"model": state, "optimizer": {}, "iteration": found.iteration, "features": features},
                   staged / f"checkpoint_{found.iteration}.pt")
        (staged / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        swap_in(staged, out)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return record


def _check_out(out: Path, force: bool, option: str) -> None:
    """The output folder of import (--out) or export (--hugectr), named as the command's option."""
    if os.path.lexists(out) and not out.is_dir():
        raise UserError.one(out, "is a file, not a folder", field=option, fix="name a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UserError.one(out, "is not empty", field=option, fix="name a new folder, or pass --force to replace it")
    if not out.parent.is_dir():
        raise UserError.one(out.parent, "folder not found", field=option, fix="create it first")


def spec_of_run(run: Path) -> Path:
    """The spec a run folder names: run.json's (ctrgen train) or weights.json's (ctrgen weights import)."""
    from ..inputs import read_json

    for name in ("run.json", RECORD):
        if (run / name).is_file():
            named = read_json(run / name, name)
            if isinstance(named, dict) and isinstance(named.get("spec"), str):
                return Path(named["spec"])
    raise UserError.one(run, "no run.json or weights.json naming the spec it trained", field="RUN_DIR",
                        fix="pass --spec SPEC")


def export_names(spec: Spec, iteration: int | None, prefix: str | None) -> tuple[str, list[str]]:
    """The dense file and sparse folders to write: the names the spec's ps.json gives its HugeCTR model (so ctrgen
    assemble --weights finds them) unless --iter / --prefix choose others."""
    ps = spec.model.triton.ps if spec.model.triton is not None else None
    if ps and iteration is None and prefix is None:
        entry = ps["models"][0]
        return PurePosixPath(entry["dense_file"]).name, [PurePosixPath(s).name for s in entry["sparse_files"]]
    it = iteration if iteration is not None else 0
    pre = prefix if prefix is not None else ""
    return dense_name(pre, it), [sparse_name(pre, t.index, it) for t in spec.layout.tables]


def export_weights(spec: Spec, state: dict, where: str, out: Path, dense: str, sparse: list[str],
                   force: bool) -> HugeCTRWeights:
    """A state_dict -> HugeCTR's files in the folder ``out`` (replaced as a whole)."""
    check_state(spec.layout, state, where)
    _uncovered(spec.layout, state, where, exporting=True)
    weights = to_hugectr(spec.layout, state)
    if not DENSE.match(dense):
        raise UserError.one(dense, "not a <prefix>_dense_<iter>.model name", field="--prefix", fix="a plain prefix")
    _check_out(out, force, "--hugectr")
    staged = stage(out.parent, out.name)
    try:
        weights.dense.astype("<f4").tofile(staged / dense)
        if weights.stats:
            (staged / ntp_name(dense)).write_text(ntp_text(weights.stats), encoding="utf-8")
        for name, dump in zip(sparse, weights.tables):
            write_sparse(staged / name, dump)
        swap_in(staged, out)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return weights


__all__ = ["Found", "export_names", "export_weights", "import_weights", "open_model", "spec_of_run"]
