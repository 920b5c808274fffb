"""tools/busy.py (`make test-busy`): the command runs with the burners beside it, they are gone afterwards, and
its exit status is the command's."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))
from busy import burners as _burners  # noqa: E402

# Run as the command: counts the burners from inside it (its own command line does not hold a burner's).
COUNT = f"import sys\nsys.path.insert(0, {str(REPO / 'tools')!r})\nfrom busy import burners\nprint('burners', burners())\nsys.exit(3)\n"


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
