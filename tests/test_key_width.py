"""The key width comes from the data: Parquet ids are the workflow's columns (the lock decides, a spec value only
asserts it); Norm and Raw files record none, so the spec's i64_input_key decides (default false, HugeCTR's)."""

from __future__ import annotations

import json
import shutil

import pytest

from codegen.errors import UserError
from codegen.lock import load_features
from codegen.model.build import build_job as build
from codegen.specfile.context import open_spec
from conftest import REPO, run_ctrgen
from specfactory import CRITEO_LOCK, dcn_spec, write_spec


def _job(tmp_path, fmt: str, i64: bool | None):
    spec = dcn_spec("23.06", gpus=[0])
    spec["data"]["format"] = fmt
    if fmt == "parquet":
        spec["data"].update(train=["/d/train/_file_list.txt"], eval="/d/valid/_file_list.txt")
    if i64 is not None:
        spec["solver"]["i64_input_key"] = i64
    ctx = open_spec(write_spec(tmp_path, spec, CRITEO_LOCK, name="dcn"))   # the lock's ids are int64
    return build(ctx, load_features(ctx)[0])


@pytest.mark.parametrize("fmt", ["norm", "raw"])
def test_norm_and_raw_take_the_spec_width(tmp_path, fmt):
    assert _job(tmp_path / "a", fmt, None).i64_input_key is False      # HugeCTR's default, whatever the lock says
    assert _job(tmp_path / "b", fmt, True).i64_input_key is True
    assert _job(tmp_path / "c", fmt, False).i64_input_key is False


def test_parquet_takes_the_lock_width_and_refuses_another(tmp_path):
    assert _job(tmp_path / "a", "parquet", None).i64_input_key is True
    with pytest.raises(UserError) as exc:
        _job(tmp_path / "b", "parquet", False)
    assert "solver.i64_input_key" in exc.value.format() and "['int64']" in exc.value.format()


def test_validate_with_the_spec_checks_the_norm_width(tmp_path):
    """A repository serving 64-bit keys for the seed-003 spec (32-bit Norm keys) is a defect validate --spec names."""
    repo = tmp_path / "triton"
    shutil.copytree(REPO / "generated" / "wdl_continuous" / "triton", repo)
    ps = json.loads((repo / "ps.json").read_text())
    assert ps["supportlonglong"] is False
    ok = run_ctrgen("validate", str(repo), "--spec", "specs/wdl_continuous.yaml")
    assert "i64_input_key" not in ok.stdout, ok.stdout
    # Every file of the repository says 64-bit keys, consistently: only the spec knows they are wrong.
    ps["supportlonglong"] = True
    (repo / "ps.json").write_text(json.dumps(ps, indent=2))
    for config in repo.glob("*/config.pbtxt"):
        text = config.read_text().replace("TYPE_UINT32", "TYPE_INT64")
        config.write_text(text.replace('key: "embeddingkey_long_type"\n  value {\n    string_value: "false"',
                                       'key: "embeddingkey_long_type"\n  value {\n    string_value: "true"'))
    bad = run_ctrgen("validate", str(repo), "--spec", "specs/wdl_continuous.yaml")
    assert bad.returncode == 1
    assert any("embeddingkey_long_type" in ln and "the spec trains with i64_input_key=False" in ln
               for ln in bad.stdout.splitlines()), bad.stdout
