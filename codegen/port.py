"""``ctrgen port SPEC --to V``: retarget a spec to another HugeCTR release, or say what cannot move.

The spec text keeps its comments and layout (ruamel round trip); only ``hugectr_version`` changes. The result is
checked by the same loader and builder as ``generate`` (the target release's API table and construction checks);
every problem is reported at once, naming the first release that has what the spec uses, and nothing is written.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from pathlib import Path

from .cli_paths import check_out_file
from .errors import Problem, UserError
from .hugectr import versions as V
from .inputs import MAX_LOCK_BYTES, MAX_SPEC_BYTES, read_bytes
from .output import MANIFEST, owned_files


def _with_version(loaded, to: str) -> str:
    """The spec text with only the hugectr_version value replaced (same bytes elsewhere)."""
    line, col = loaded.tree.lc.value("hugectr_version")
    lines = loaded.text.splitlines(keepends=True)
    row = lines[line]
    rest = row[col:]
    # A tag (hugectr_version: !!str 3.3) goes with its value: the new value is a plain quoted string.
    m = re.match(r"""(?:![^\s]*\s+)?("[^"]*"|'[^']*'|[^\s#]+)""", rest)
    if m is None:  # pragma: no cover - the loader accepted a value here
        raise UserError.one(loaded.path, "cannot find the hugectr_version value", field="hugectr_version")
    lines[line] = row[:col] + json.dumps(to) + rest[m.end():]
    return "".join(lines)


def port(spec_path: Path, to: str, out: Path | None = None) -> list[Path]:
    """Write the retargeted spec (to ``out``, else in place) and, where ``out`` puts it beside another lock path,
    its features lock, so that ``ctrgen generate OUT`` works at once. Returns the paths written."""
    from .importer.release_facts import problems as release_problems
    from .lock import load_features
    from .model.build import build_job as build
    from .render.script import render_model_py
    from .specfile.context import open_spec

    ctx = open_spec(spec_path)           # the spec must be valid for its own release first
    if V.profile(to) is None:
        raise UserError.one(spec_path, f"unknown HugeCTR release {to!r}", field="--to",
                            fix="use one of " + ", ".join(V.SUPPORTED))
    text = _with_version(ctx.loaded, to)
    try:
        tctx = open_spec(spec_path, text)
        features, _ = load_features(tctx, check_stale=False)
        job = build(tctx, features)
    except UserError as exc:
        problems = [Problem(str(spec_path), f"cannot move to HugeCTR {to}: {p.message}", p.field, p.line, p.col,
                            p.fix) for p in exc.problems]
        raise UserError(problems) from None
    facts = release_problems(render_model_py(job, ""), to)
    if facts:
        raise UserError([Problem(str(spec_path), f"cannot move to HugeCTR {to}: {m}", "hugectr_version", None, None,
                                 "keep the release, or change what the spec uses") for m in facts])
    target = out or spec_path
    check_out_file(target, "--out" if out is not None else "SPEC")
    lock_to = open_spec(target, text).lock_path if out is not None else ctx.lock_path
    _check_not_owned(target, ctx.lock_path, lock_to)
    written = []
    if lock_to.resolve() != ctx.lock_path.resolve():
        lock_bytes = read_bytes(ctx.lock_path, "features lock", MAX_LOCK_BYTES)
        if os.path.lexists(lock_to):
            check_out_file(lock_to, "--out")
            if read_bytes(lock_to, "features lock", MAX_LOCK_BYTES) != lock_bytes:
                raise UserError.one(lock_to, "a different features lock is already where the ported spec reads its "
                                    "lock", field="--out", fix="choose another --out, or remove that lock")
        else:
            _replace(lock_to, lock_bytes, os.stat(ctx.lock_path).st_mode)
            written.append(lock_to)
    source = read_bytes(spec_path, "spec", MAX_SPEC_BYTES)
    if b"\r\n" in source:           # the spec's own line ends (the loader reads them as \n)
        text = text.replace("\n", "\r\n")
    _replace(target, text.encode("utf-8"), os.stat(spec_path).st_mode)
    return [target, *written]


def _check_not_owned(target: Path, lock: Path, lock_to: Path) -> None:
    """--out never replaces another file ctrgen owns: a features lock, or a file a MANIFEST.json lists."""
    real = Path(os.path.realpath(target))
    locks = {Path(os.path.realpath(p)) for p in (lock, lock_to)}
    if real in locks or target.name.endswith(".features.lock.json"):
        raise UserError.one(target, "is a features lock; a ported spec never replaces it", field="--out",
                            fix="give a .yaml path")
    if target.name in owned_files(target.parent) or target.name == MANIFEST:
        raise UserError.one(target, "is a file ctrgen generated (listed in MANIFEST.json)", field="--out",
                            fix="write the spec outside the generated folder")


def _replace(target: Path, data: bytes, mode: int) -> None:
    """Write ``data`` beside ``target`` with the source's permission bits (mkstemp makes 0600), then rename."""
    with tempfile.NamedTemporaryFile("wb", dir=target.parent, prefix=".ctrgen-port-", delete=False) as fh:
        fh.write(data)
    try:
        os.chmod(fh.name, stat.S_IMODE(mode))
        os.replace(fh.name, target)
    except BaseException:
        os.unlink(fh.name)
        raise
