"""What a hostile-input case is and how its run is judged: the outcome of one run (tools/hostile.py,
tests/test_hostile.py) and the checks every accepted output passes (well formed and inert)."""

from __future__ import annotations

import ast
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

# Whose files a case's outcome depends on: "" this change's; the others are being rewritten in parallel (issue 28's
# importer and assemble parts) and are reported separately until they are merged.
MINE = ""
# The importer's and assemble's cases were reported apart while those files were being rewritten; merged, they
# count with every other case (an area name here puts a case in the table's "other areas" rows).
IMPORT = RUNTIME = MINE


@dataclass
class Run:
    """What a case runs: ``argv`` (ctrgen's arguments) or ``call`` (a function that raises UserError to refuse),
    in ``cwd``. ``refusal_codes``: the exit statuses that mean "refused" (validate and check exit 1 on findings)."""

    cwd: Path
    argv: list[str] | None = None
    call: Callable[[], Any] | None = None
    refusal_codes: tuple[int, ...] = (2,)
    accepted_code: int = 0


@dataclass
class Case:
    kind: str
    name: str
    build: Callable[[Path], Run]
    expect: str                                        # "refused", "accepted" or "either"
    check: Callable[[Path], str] | None = None         # for an accepted run: "" or what is wrong ("injection: ...")
    area: str = MINE
    quick: bool = False
    reason: str = ""                                   # a refusal must say this (a regular expression)

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.name}"


# ---- output checks --------------------------------------------------------------------------------------------------

_DANGEROUS_CALLS = {"system", "popen", "exec", "eval", "__import__", "run", "Popen", "check_output", "call"}


def injection_in_python(text: str, where: str) -> str:
    """'' when ``text`` parses and calls nothing that runs commands or code; else what it does."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return f"injection: {where} is no valid Python ({exc.msg}, line {exc.lineno})"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            base = node.func.value if isinstance(node.func, ast.Attribute) else None
            if name in ("system", "popen", "__import__") or (
                    name in _DANGEROUS_CALLS and isinstance(base, ast.Name) and base.id in ("os", "subprocess")):
                return f"injection: {where} calls {name}() (line {node.lineno})"
    return ""


def check_outputs(out: Path) -> str:
    """Every generated file well formed and inert: Python parses without command calls, JSON parses, config.pbtxt
    parses as a Triton ModelConfig, the model card's header comment stays one comment."""
    from google.protobuf import text_format

    from codegen.triton.pb import mc

    files = [p for p in sorted(out.rglob("*")) if p.is_file()]
    if not files:
        return "silent wrong: exit 0 but nothing was written"
    for p in files:
        rel = p.relative_to(out).as_posix()
        text = p.read_text(encoding="utf-8")
        if p.suffix == ".py":
            if problem := injection_in_python(text, rel):
                return problem
        elif p.suffix == ".json":
            try:
                json.loads(text)
            except ValueError as exc:
                return f"injection: {rel} is no JSON ({exc})"
        elif p.name == "config.pbtxt":
            try:
                text_format.Parse(text, mc.ModelConfig())
            except text_format.ParseError as exc:
                return f"injection: {rel} is no ModelConfig ({exc})"
        elif p.name == "README.md":
            first = text.splitlines()[0]
            if not re.fullmatch(r"<!-- [^<>]*-->", first) or first.count("-->") != 1:
                return f"injection: {rel}'s header comment is broken: {first[:80]!r}"
            outside_code = re.sub(r"`[^`\n]*`", "", text)
            if re.search(r"<(img|script|iframe|a |svg)", outside_code, re.I):
                return f"injection: raw HTML in {rel}"
    return ""


# ---- the outcome of one run -----------------------------------------------------------------------------------------

OUTCOMES = ("refused", "accepted", "traceback", "hang", "unbounded read", "partial write", "injection",
            "silent wrong", "over-refused", "other refusal")


@dataclass
class Result:
    code: int | None            # None: killed after the time limit
    stdout: str
    stderr: str
    memory_exceeded: bool = False
    file_too_large: bool = False
    notes: list[str] = field(default_factory=list)


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed, nothing opened but small regular files)."""
    out: dict[str, tuple] = {}
    for base, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            p = Path(base) / name
            st = os.lstat(p)
            key = p.relative_to(root).as_posix()
            if stat.S_ISREG(st.st_mode) and st.st_size < (1 << 20):
                out[key] = ("file", st.st_size, p.read_bytes())
            elif stat.S_ISLNK(st.st_mode):
                out[key] = ("link", os.readlink(p))
            else:
                out[key] = (stat.S_IFMT(st.st_mode), st.st_size if stat.S_ISREG(st.st_mode) else 0)
        dirs[:] = [x for x in dirs if not (Path(base) / x).is_symlink()]
    return out


def classify(c: Case, run: Run, result: Result, before: dict, after: dict, folder: Path) -> tuple[str, str]:
    """(outcome, detail) of one run."""
    err = result.stderr
    if result.code is None:
        return "hang", "killed after the time limit"
    if result.memory_exceeded or "MemoryError" in err:
        return "unbounded read", "ran out of the memory limit"
    if result.file_too_large or "File too large" in err:
        return "unbounded read", "wrote past the file-size limit"
    if "Traceback" in err or "RecursionError" in err:
        return "traceback", (err.strip().splitlines() or [""])[-1][:200]
    if result.code in run.refusal_codes and result.code != run.accepted_code:
        # validate prints its findings on stdout; every other refusal is on stderr
        lines = [line for line in (err if err.strip() else result.stdout).splitlines() if line.strip()]
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        if changed:
            return "partial write", f"refused, but changed {changed[:3]}"
        if run.argv is not None and (not lines or any(re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]",
                                                                  line) for line in lines)):
            return "injection", "a refusal line holds a raw control or bidi character"
        if c.kind == "names" and not all(re.match(r"[^\s:]+(:\d+)*: ", line) for line in lines):
            return "injection", "a refusal line does not start with its file: a name split it"
        if c.expect == "accepted":
            return "over-refused", (lines or [""])[0][:200]
        if c.reason and not re.search(c.reason, "\n".join(lines)):
            return "other refusal", f"no line says {c.reason!r}: {(lines or [''])[0][:160]}"
        return "refused", " | ".join(line[:300] for line in lines[:3])
    if result.code == run.accepted_code:
        if c.expect == "refused":
            return "silent wrong", "accepted; a refusal was expected"
        try:
            problem = c.check(folder) if c.check is not None else ""
        except Exception as exc:      # the output is not what the check reads: wrong, whatever it is
            problem = f"silent wrong: the output check failed ({type(exc).__name__}: {exc})"
        if problem:
            kind, _, detail = problem.partition(": ")
            return (kind if kind in OUTCOMES else "silent wrong"), detail
        return "accepted", ""
    return "traceback", f"exit status {result.code}: {(err.strip().splitlines() or [''])[-1][:200]}"


def expected_outcome(c: Case, outcome: str) -> bool:
    return outcome == c.expect or (c.expect == "either" and outcome in ("refused", "accepted"))
