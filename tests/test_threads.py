"""The trainer's CPU threads (codegen/runtime/threads.py): the cores this process may use (its affinity, capped by
its cgroup's CPU quota) shared by the ranks of its machine; OMP_NUM_THREADS when the user set it; --threads over
both. torch's own default, the machine's core count, oversubscribes a container with a quota or several ranks."""

from __future__ import annotations

import os

import pytest

from codegen.runtime import threads as T
from codegen.runtime.errors import DataError


def test_a_cgroup_v2_quota_caps_the_cores(tmp_path):
    (tmp_path / "cpu.max").write_text("250000 100000\n")
    assert T.cgroup_cores(tmp_path) == 3                 # 2.5 cores: rounded up
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert T.cgroup_cores(tmp_path) is None


def test_a_cgroup_v1_quota_caps_the_cores(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert T.cgroup_cores(tmp_path) == 1
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert T.cgroup_cores(tmp_path) is None
    assert T.cgroup_cores(tmp_path / "none") is None


def test_the_default_shares_the_usable_cores_among_the_ranks(monkeypatch):
    monkeypatch.setattr(T, "usable_cores", lambda: 16)
    assert T.choose_threads(None, 1, environ={}) == (16, "16 usable core(s) / 1 rank(s) on this machine")
    assert T.choose_threads(None, 4, environ={})[0] == 4
    assert T.choose_threads(None, 32, environ={})[0] == 1     # never 0
    monkeypatch.setattr(T, "usable_cores", lambda: 2)
    assert T.choose_threads(None, 3, environ={})[0] == 1


def test_omp_num_threads_and_the_flag_take_precedence(monkeypatch):
    monkeypatch.setattr(T, "usable_cores", lambda: 16)
    assert T.choose_threads(None, 1, environ={"OMP_NUM_THREADS": "3"}) == (3, "OMP_NUM_THREADS")
    assert T.choose_threads(None, 1, environ={"OMP_NUM_THREADS": "x"})[0] == 16    # not a count: ignored
    assert T.choose_threads(5, 1, environ={"OMP_NUM_THREADS": "3"}) == (5, "--threads")
    for bad in (0, -1, 1025):
        with pytest.raises(DataError, match=f"--threads {bad}: between 1 and 1024"):
            T.choose_threads(bad, 1, environ={})


def test_usable_cores_is_this_process_affinity_at_most():
    assert 1 <= T.usable_cores() <= len(os.sched_getaffinity(0))
