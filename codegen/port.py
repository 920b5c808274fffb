"""``ctrgen port SPEC --to V``: retarget a spec to another HugeCTR release, or say what cannot move.

The spec text keeps its comments and layout (ruamel round trip); only ``hugectr_version`` changes. The result is
checked by the same loader and builder as ``generate`` (the target release's API table and construction checks);
every problem is reported at once, naming the first release that has what the spec uses, and nothing is written.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from .errors import Problem, UserError
from .hugectr import versions as V


def _with_version(loaded, to: str) -> str:
    """The spec text with only the hugectr_version value replaced (same bytes elsewhere)."""
    line, col = loaded.tree.lc.value("hugectr_version")
    lines = loaded.text.splitlines(keepends=True)
    row = lines[line]
    rest = row[col:]
    m = re.match(r"""("[^"]*"|'[^']*'|[^\s#]+)""", rest)
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
    from .spec.context import open_spec

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
    if target.exists() and not target.is_file():
        raise UserError.one(target, "--out is not a file", fix="give a file path")
    written = []
    lock_to = open_spec(target, text).lock_path if out is not None else ctx.lock_path
    if lock_to.resolve() != ctx.lock_path.resolve():
        lock_bytes = ctx.lock_path.read_bytes()
        if lock_to.exists() and lock_to.read_bytes() != lock_bytes:
            raise UserError.one(lock_to, "a different features lock is already where the ported spec reads its "
                                "lock", field="--out", fix="choose another --out, or remove that lock")
        _replace(lock_to, lock_bytes)
        written.append(lock_to)
    _replace(target, text.encode("utf-8"))
    return [target, *written]


def _replace(target: Path, data: bytes) -> None:
    with tempfile.NamedTemporaryFile("wb", dir=target.resolve().parent, prefix=".ctrgen-port-", delete=False) as fh:
        fh.write(data)
    os.replace(fh.name, target)
