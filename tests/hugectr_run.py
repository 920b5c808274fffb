"""Run a HugeCTR Python script against the HugeCTR stand-in (tests/standin) or, where installed, the real HugeCTR.

    result = run_with_standin(Path("generated/dcn/model.py"), "23.06", cwd=tmp_path,
                              env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert result.returncode == 0, result.stderr
    fits = calls_named(result, "Model.fit")

The script runs as ``sys.executable script *args`` in a subprocess with ``tests/standin`` first on PYTHONPATH and
``CTRGEN_HUGECTR_VERSION=<version>``; every HugeCTR call it makes comes back in ``result.calls`` (one dict per call:
``{"call": "hugectr.CreateSolver" | "Model.fit" | ..., "args": [...], "kwargs": {...}}``).

Real HugeCTR: when the interpreter can import a real ``hugectr`` (checked once, in a fresh interpreter without the
stand-in on its path), the script runs against it instead and ``result.real`` is True. The real module records
nothing (``calls`` is empty), is whatever release is installed (``version`` is only exported), and prints log lines
around its summary (``summary_block(stdout)`` extracts the table either way). Set ``CTRGEN_FORCE_STANDIN=1`` to use
the stand-in anyway.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

STANDIN = Path(__file__).resolve().parent / "standin"
FORCE_ENV = "CTRGEN_FORCE_STANDIN"


@dataclass
class StandinResult:
    returncode: int
    stdout: str
    stderr: str
    calls: list[dict] = field(default_factory=list)
    real: bool = False  # ran against a real HugeCTR (no calls recorded)


@functools.cache
def real_hugectr_available() -> bool:
    """Whether a real ``hugectr`` is importable here, asked of a fresh interpreter without the stand-in path."""
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve() != STANDIN]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    probe = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('hugectr') else 1)"
    return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True).returncode == 0


def run_with_standin(script: Path, version: str, *, cwd: Path, args: Sequence[str] = (), env: dict | None = None,
                     timeout: float = 120) -> StandinResult:
    use_real = real_hugectr_available() and os.environ.get(FORCE_ENV, "") in ("", "0")
    full_env = {**os.environ, **(env or {})}
    path = [p for p in full_env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if not use_real:
        path.insert(0, str(STANDIN))
    full_env["PYTHONPATH"] = os.pathsep.join(path)
    full_env["CTRGEN_HUGECTR_VERSION"] = version
    fd, record = tempfile.mkstemp(prefix="hugectr-calls-", suffix=".jsonl")
    os.close(fd)
    full_env["CTRGEN_STANDIN_RECORD"] = record
    try:
        proc = subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=full_env, capture_output=True,
                              text=True, timeout=timeout)
        lines = Path(record).read_text(encoding="utf-8").splitlines()
    finally:
        os.unlink(record)
    return StandinResult(proc.returncode, proc.stdout, proc.stderr, [json.loads(ln) for ln in lines], use_real)


_LOG_PREFIX = re.compile(r"^\[HCTR\]\[[^\]]*\]\[[A-Z]+\]\[RK0\]\[main\]: ")
_BANNER = "=" * 51 + "Model Summary" + "=" * 51


def summary_block(stdout: str) -> str:
    """The model.summary() table in stdout, as the stand-in prints it: from the banner to the last rule line, with
    a real HugeCTR's log prefixes removed (the stand-in prints only the table, so this is its whole output)."""
    lines = stdout.splitlines()
    start = lines.index(_BANNER)
    block = []
    for line in lines[start:]:
        if block and line.startswith("[HCTR]") and not _LOG_PREFIX.match(line):
            break
        block.append(_LOG_PREFIX.sub("", line))
    while block and not block[-1].startswith(("-", "\u2014")):
        block.pop()
    return "\n".join(block) + "\n"


def calls_named(result: StandinResult, name: str) -> list[dict]:
    """The recorded calls of one function or method, e.g. "hugectr.CreateSolver" or "Model.fit", in call order."""
    return [c for c in result.calls if c["call"] == name]
