"""tools/busy.py (`make test-busy`): the command runs with the burners beside it, they are gone afterwards, and
its exit status is the command's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO

COUNT = """
import sys
from pathlib import Path
def burners():
    n = 0
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and b"while time." + b"monotonic() < end" in (p / "cmdline").read_bytes():
                n += 1
        except OSError:
            pass
    return n
print("burners", burners())
sys.exit(3)
"""


def _burners() -> int:
    n = 0
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and b"while time." + b"monotonic() < end" in (p / "cmdline").read_bytes():
                n += 1
        except OSError:
            pass
    return n


def test_the_command_runs_beside_the_burners_and_they_stop_after_it():
    before = _burners()
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "busy.py"), "--burners", "2", "--limit", "120", "--",
                           sys.executable, "-c", COUNT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"burners {before + 2}\n" in proc.stdout
    assert "busy: exit 3 after " in proc.stdout and "(2 burner(s) stopped)" in proc.stdout
    assert _burners() == before


def test_a_command_is_required():
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "busy.py")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "give a command after --" in proc.stderr
