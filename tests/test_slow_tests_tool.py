"""tools/slow_tests.py: pytest's --durations lines added up per test, ranked, and the rule that a test of seconds
says why in its docstring."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

LOG = """\
============================= slowest durations =============================
12.50s setup    tests/test_slow_tests_tool.py::test_durations_of_setup_call_and_teardown_add_up[a]@group
3.00s call     tests/test_slow_tests_tool.py::test_durations_of_setup_call_and_teardown_add_up[a]@group
6.00s call     tests/test_slow_tests_tool.py::test_without_a_docstring
0.50s teardown tests/test_slow_tests_tool.py::test_without_a_docstring
"""


def test_durations_of_setup_call_and_teardown_add_up(tmp_path):
    """The parser reads a --durations log like pytest writes it."""
    sys.path.insert(0, str(REPO / "tools"))
    import slow_tests

    found = slow_tests.durations(LOG)
    assert found == {("tests/test_slow_tests_tool.py", "test_durations_of_setup_call_and_teardown_add_up", "[a]"): 15.5,
                     ("tests/test_slow_tests_tool.py", "test_without_a_docstring", ""): 6.5}


def test_without_a_docstring(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(LOG)
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "slow_tests.py"), str(log), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[2] == ("| 15.5 | `test_slow_tests_tool.py::test_durations_of_setup_call_and_teardown_add_up[a]` | "
                        "The parser reads a --durations log like pytest writes it. |")
    assert lines[3] == "| 6.5 | `test_slow_tests_tool.py::test_without_a_docstring` |  |"
    assert "1 test(s) over 5 s without a docstring" in proc.stderr
    assert "test_without_a_docstring (6.5 s)" in proc.stderr
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "slow_tests.py"), str(log), "--over", "7",
                           "--check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
