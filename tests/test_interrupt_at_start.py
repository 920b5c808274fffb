"""Ctrl-C while ctrgen is still importing its modules (before the CLI runs) is one line and exit 130, like Ctrl-C
during a command (tests/test_inputs.py): the console entry point (codegen/entry.py) installs its handler first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from pathlib import Path

from conftest import REPO


@pytest.mark.slow
def test_ctrl_c_during_the_imports_is_one_line_and_130(tmp_path):
    ctrgen = Path(sys.executable).parent / "ctrgen"            # the installed console script itself
    assert "codegen.entry" in ctrgen.read_text()
    # -X importtime reports each module as it finishes importing; an empty bytecode cache makes the imports compile
    # from source, so that the interval between codegen.entry and codegen.cli is long enough to aim at.
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # Python's own SIGINT handler in the child, also where this process ignores SIGINT (a background job): a small
    # launcher resets the disposition and execs the real command (no preexec_fn: unsafe with threads).
    launcher = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    proc = subprocess.Popen([sys.executable, "-c", launcher, sys.executable, "-X", "importtime", str(ctrgen), "check"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen, entry_done = [], False
    for line in proc.stderr:                      # aim at the first click module: inside codegen.cli's imports
        seen.append(line)
        name = line.split("|")[-1].strip()
        entry_done = entry_done or name == "codegen.entry"
        if entry_done and name.startswith("click"):
            proc.send_signal(signal.SIGINT)
            break
    out, rest = proc.communicate(timeout=60)
    lines = [line for line in seen + rest.splitlines(keepends=True) if not line.startswith("import time:")]
    assert proc.returncode == 130, "".join(seen) + rest
    assert [line.rstrip("\n") for line in lines] == ["ctrgen: interrupted"], lines
    assert out == ""
    # It landed before the CLI module finished importing (no import after codegen.entry completed).
    assert entry_done
    assert not any(line.split("|")[-1].strip() == "codegen.cli" for line in seen + rest.splitlines())
