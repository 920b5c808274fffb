"""tests/warm_python.py: a run forked from the warm Python gives what subprocess.run gives for the same command
(exit status, stdout, stderr, argv, cwd, environment, ``__main__``, sys.path[0]), and falls back to a real process
where a fork could not be the same."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO
from warm_python import _STATE, rank_envs, run, run_ranks

pytestmark = pytest.mark.slow      # processes and builds of seconds each: not in `make test-fast`

SCRIPT = '''
import json, os, sys, threading
print("out", json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "name": __name__, "file": os.path.basename(__file__),
                         "path0": sys.path[0], "probe": os.environ.get("WARM_PROBE"), "pid_is_new": os.getpid() != int(sys.argv[1])}))
print("err line", file=sys.stderr)
threading.Thread(target=lambda: print("from a thread")).start()     # joined before the exit, as in a fresh Python
mode = sys.argv[2]
if mode == "raise":
    raise ValueError("boom")
if mode == "message":
    sys.exit("error: a one-line message")
if mode == "code":
    sys.exit(3)
'''


@pytest.fixture(autouse=True)
def warm_on(monkeypatch):
    monkeypatch.setenv("CTRGEN_TEST_WARM", "1")       # these tests are about the warm runs


def _env() -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "WARM_PROBE": "x\u00e9"}   # the trainers'
    env["PYTHONPATH"] = str(REPO)   # codegen.runtime of this checkout; besides it torch, numpy, pyarrow only
    return env


@pytest.mark.parametrize("mode", ["ok", "raise", "message", "code"])
def test_a_forked_run_gives_what_a_process_gives(tmp_path, mode):
    script = tmp_path / "scripts" / "probe.py"
    script.parent.mkdir()
    script.write_text(SCRIPT)
    cmd = [sys.executable, str(script), str(os.getpid()), mode]
    warm = run(cmd, cwd=tmp_path, env=_env(), timeout=120)
    cold = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout)
    assert warm.returncode == {"ok": 0, "raise": 1, "message": 1, "code": 3}[mode]
    assert f'"cwd": "{tmp_path}"' in warm.stdout and '"name": "__main__"' in warm.stdout
    assert f'"path0": "{script.parent}"' in warm.stdout and '"probe": "x\\u00e9"' in warm.stdout
    assert '"pid_is_new": true' in warm.stdout and warm.stdout.rstrip().endswith("from a thread")
    if mode == "raise":      # the traceback's frames differ (runpy's); its head and its last line do not
        assert warm.stderr.startswith("err line\nTraceback (most recent call last):\n")
        assert warm.stderr.splitlines()[-1] == cold.stderr.splitlines()[-1] == "ValueError: boom"
    else:
        assert warm.stderr == cold.stderr
    assert getattr(_STATE, "servers", None), "the run was not forked from a warm server"


def test_other_interpreter_settings_and_commands_run_as_real_processes(tmp_path):
    script = tmp_path / "seed.py"
    script.write_text("import os, sys\nprint(os.environ.get('PYTHONHASHSEED'), sys.flags.hash_randomization)\n")
    env = {**_env(), "PYTHONHASHSEED": "7"}            # read at interpreter start: a fork would keep the server's 0
    assert run([sys.executable, str(script)], cwd=tmp_path, env=env).stdout == "7 1\n"
    assert run([sys.executable, "-c", "print(2 + 2)"], cwd=tmp_path, env=_env()).stdout == "4\n"


def test_a_run_past_its_timeout_is_killed(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        run([sys.executable, str(script)], cwd=tmp_path, env=_env(), timeout=1)
    assert caught.value.output == b"started\n"            # bytes, as subprocess.run's TimeoutExpired has them


def test_the_ranks_of_a_job_are_forked_together_and_meet(tmp_path):
    """run_ranks starts the ranks at once (each waits at a gloo barrier for the other), each with its environment;
    they report what torchrun's ranks report: their rank, the world size, their local rank and their own exit status.
    (No cold run of the script beside them: two cold ranks cost 4 s of ``import torch`` and check torch, not the
    fork; a forked run against a real process is test_a_forked_run_gives_what_a_process_gives.)"""
    script = tmp_path / "ranks.py"
    script.write_text("import os, sys\nimport torch.distributed as dist\n"
                      "dist.init_process_group('gloo')\ndist.barrier()\n"
                      "print(dist.get_rank(), dist.get_world_size(), os.environ['LOCAL_RANK'])\n"
                      "dist.destroy_process_group()\nsys.exit(int(os.environ['RANK']) * 5)\n")
    envs = rank_envs(_env(), 2)
    warm = run_ranks([sys.executable, str(script)], cwd=tmp_path, envs=envs, timeout=120)
    assert [(p.returncode, p.stdout) for p in warm] == [(0, "0 2 0\n"), (5, "1 2 1\n")]
    assert getattr(_STATE, "servers", None), "the ranks were not forked from a warm server"
