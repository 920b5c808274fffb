"""Write an import's spec and lock: validated first (load + build, as ``generate`` does), then moved into place."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..errors import Problem, UserError, sort_problems
from .result import ImportResult


def write_import(result: ImportResult, out: Path, *, force: bool = False) -> list[Path]:
    if str(out) == "":
        raise UserError.one("--out", "empty output folder", fix="give a folder, e.g. --out specs")
    if out.exists() and not out.is_dir():
        raise UserError.one(out, "--out is not a folder", fix="give a folder")
    spec_path = out / f"{result.name}.yaml"
    lock_path = out / f"{result.name}.features.lock.json"
    for p in (spec_path, lock_path):
        if (p.exists() or p.is_symlink()) and not force:
            raise UserError.one(p, "already exists", fix="pass --force to overwrite, or --name / --out")
    # The folders this call creates are removed again when the import is refused: nothing is left behind.
    created = next((p for p in reversed([out, *out.parents]) if not os.path.lexists(p)), None)
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _write_checked(result, out, spec_path, lock_path)
    except BaseException:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise


def _write_checked(result: ImportResult, out: Path, spec_path: Path, lock_path: Path) -> list[Path]:
    from ..features import read_lock
    from ..model.build import build_job as build
    from ..render.script import render_model_py
    from ..specfile.context import open_spec
    from .release_facts import problems as release_problems

    with tempfile.TemporaryDirectory(prefix=".ctrgen-import-", dir=out) as tmp:
        tspec, tlock = Path(tmp) / spec_path.name, Path(tmp) / lock_path.name
        tspec.write_text(result.spec_text, encoding="utf-8")
        tlock.write_text(result.features.lock_text(), encoding="utf-8")
        # The spec must load and build exactly as `ctrgen generate` will read it.
        try:
            ctx = open_spec(tspec)
            job = build(ctx, read_lock(tlock))
        except UserError as exc:
            # A spec the mapper wrote but the builder refuses: the source uses something ctrgen cannot check or
            # generate. Name the source, not the temporary file.
            raise UserError([Problem(result.source, "the imported model does not validate: "
                                     f"{p.field + ': ' if p.field else ''}{p.message}", "", None, None, p.fix)
                             for p in sort_problems(exc.problems)]) from None
        # Every function, argument and enum member the generated script uses must exist in the target release.
        model_py = render_model_py(job, "")
        facts = release_problems(model_py, job.hugectr_version)
        if facts:
            raise UserError([Problem(result.source, m, "hugectr_version", None, None,
                                     "import for a release that has it (--hugectr-version)") for m in facts])
        _same_calls(result, model_py, job.hugectr_version)
        if result.torch_text:
            _add_torch(result, tspec, tlock)
        for src, dst in ((tlock, lock_path), (tspec, spec_path)):
            if dst.is_symlink():
                dst.unlink()
            os.replace(src, dst)
    return [spec_path, lock_path]


def _same_calls(result: ImportResult, model_py: str, release: str) -> None:
    """The generated model.py must make the source's hugectr calls, argument for argument (compare.py): a difference
    is an error, never a silent import."""
    from .calls import extract
    from .compare import compare_with

    if result.origin is None:
        return
    text, argv = result.origin[:2]
    modules = result.origin[2] if len(result.origin) > 2 else None     # the script's own modules it read
    diffs = compare_with(extract(text, result.source, argv, modules), extract(model_py, "model.py"), release)
    if diffs:
        raise UserError([Problem(result.source, f"the generated model.py would not make the source's calls: {d}", "",
                                 None, None, "report it: ctrgen should reproduce this script or refuse it")
                         for d in diffs])


def _add_torch(result: ImportResult, tspec: Path, tlock: Path) -> None:
    """Write the spec with the torch target when the model builds and translates with it (its tables sized by
    workspace_size_per_gpu_in_mb take their rows from the data at training time), else keep it without, saying why."""
    from ..features import read_lock
    from ..model.build import build_job as build
    from ..model.torch_rules import torch_problems
    from ..specfile.context import open_spec

    tspec.write_text(result.torch_text, encoding="utf-8")
    try:
        problems = [message for _, message, _ in torch_problems(build(open_spec(tspec), read_lock(tlock)))]
    except UserError as exc:
        problems = [p.message for p in sort_problems(exc.problems)]
    if problems:
        tspec.write_text(result.spec_text, encoding="utf-8")
        result.assumptions.append(f"targets: no torch ({problems[0]})")
    else:
        result.spec_text = result.torch_text
        fmt = open_spec(tspec).spec.data.format
        result.assumptions.append("targets: torch added (ctrgen train runs generated/<name>/train_torch.py on the "
                                  "Parquet data" + ("" if fmt == "parquet" else f"; the reader reads HugeCTR {fmt} "
                                  "files, so pass the same columns as Parquet: ctrgen train SPEC --train PATH --eval "
                                  "PATH") + ")")
