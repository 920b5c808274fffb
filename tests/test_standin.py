"""Every committed generated/<name>/model.py runs against the HugeCTR stand-in at its spec's release: exit 0, the
graph JSON it writes is byte-identical to generated/<name>/<name>.json, and the summary it prints equals
generated/<name>/summary.txt. The stand-in (tests/standin/hugectr) is written from the HugeCTR facts of docs/hugectr.md
without ctrgen's code, so agreement here is two independent implementations agreeing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from hugectr_run import calls_named, run_with_standin, summary_block

REPO = Path(__file__).resolve().parents[1]
SPECS = sorted((REPO / "specs").glob("*.yaml"))


def _spec(path: Path) -> tuple[str, str]:
    doc = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    return doc.get("name", path.stem), str(doc["hugectr_version"])


def _passes(path: Path) -> int:
    """fit() calls model.py makes: one, or one per incremental pass of continuous training."""
    doc = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    return len((doc.get("continuous_training") or {}).get("passes") or [None])


def _json_path(result, root: Path, cwd: Path, script: Path) -> Path:
    if result.real:  # a real HugeCTR records nothing and writes where the script says
        name = re.search(r'graph_to_json\(graph_config_file="([^"]+)"\)', script.read_text()).group(1)
        return Path(name) if Path(name).is_absolute() else cwd / name
    (call,) = calls_named(result, "Model.graph_to_json")
    name = call["kwargs"].get("graph_config_file") or call["args"][0]
    p = Path(name)
    return root / p.relative_to(p.anchor) if p.is_absolute() else cwd / p


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_generated_script_runs_on_standin(spec: Path, tmp_path: Path):
    name, version = _spec(spec)
    out = REPO / "generated" / name
    cwd, root = tmp_path / "cwd", tmp_path / "root"
    cwd.mkdir()
    result = run_with_standin(out / "model.py", version, cwd=cwd,
                              env={"CTRGEN_STANDIN_SKIP_DATA": "1", "CTRGEN_STANDIN_ROOT": str(root)})
    assert result.returncode == 0, result.stderr
    assert _json_path(result, root, cwd, out / "model.py").read_bytes() == (out / f"{name}.json").read_bytes()
    assert summary_block(result.stdout) == (out / "summary.txt").read_text(encoding="utf-8")
    if result.real:
        return
    assert result.stdout == (out / "summary.txt").read_text(encoding="utf-8")  # the stand-in prints nothing else
    # The spec's statement order: the samples' solver, reader, optimizer unless script.setup says otherwise.
    from codegen.specfile.load import load_spec
    order = load_spec(spec).spec.script.setup
    names = {"solver": "hugectr.CreateSolver", "reader": "hugectr.DataReaderParams",
             "optimizer": "hugectr.CreateOptimizer"}
    assert [c["call"] for c in result.calls[:3]] == [names[k] for k in order]
    assert len(calls_named(result, "Model.fit")) == _passes(spec)


def _file_lists(root: Path, result_calls: list[dict]) -> list[str]:
    (reader,) = [c for c in result_calls if c["call"] == "hugectr.DataReaderParams"]
    src = reader["kwargs"]["source"]
    return [*(src if isinstance(src, list) else [src]), reader["kwargs"]["eval_source"]]


def test_fit_checks_the_data_file_lists(tmp_path: Path):
    """Without CTRGEN_STANDIN_SKIP_DATA, fit() opens the reader's file lists and the files they list."""
    spec = REPO / "specs" / "movielens.yaml"
    name, version = _spec(spec)
    script = REPO / "generated" / name / "model.py"
    root = tmp_path / "root"
    env = {"CTRGEN_STANDIN_ROOT": str(root)}
    missing = run_with_standin(script, version, cwd=tmp_path, env=env)
    assert not missing.real, "the data-check path is the stand-in's (a real HugeCTR needs real Parquet files)"
    assert missing.returncode != 0
    assert "_file_list.txt" in missing.stderr and "does not exist" in missing.stderr
    assert calls_named(missing, "Model.fit") and not calls_named(missing, "Model.graph_to_json")

    for lst in _file_lists(root, missing.calls):
        p = root / Path(lst).relative_to("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        part = p.parent / "part_0.parquet"
        part.write_bytes(b"")
        p.write_text(f"1\n/{part.relative_to(root)}\n")  # container paths, mapped below the root as well
    ok = run_with_standin(script, version, cwd=tmp_path, env=env)
    assert ok.returncode == 0, ok.stderr
    # fit(max_iter=2000, snapshot=1900) writes the iteration-1900 snapshot (hugectr.md §5), with the dense file's
    # real size: 4 bytes x (32*128+128 + 128*128+128 + 128*1+1) weights.
    assert (tmp_path / "_dense_1900.model").stat().st_size == 4 * (32 * 128 + 128 + 128 * 128 + 128 + 128 + 1)
    assert (tmp_path / "0_sparse_1900.model" / "key").is_file()


RELEASES = ["3.2", "3.3", "4.3", "23.06"]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_every_spec_at_every_release(spec: Path, release: str, tmp_path: Path):
    """Each spec retargeted to each supported release: what ctrgen renders (in-process) is what the stand-in writes
    and prints. A release that lacks something the spec needs must be refused by ctrgen with a message naming the
    releases (that refusal is the correct output, so the combination ends there)."""
    from codegen.errors import UserError
    from codegen.pipeline import open_spec, render_spec

    specs = tmp_path / "specs"
    specs.mkdir()
    for lock in spec.parent.glob("*.features.lock.json"):
        (specs / lock.name).write_bytes(lock.read_bytes())
    text, n = re.subn(r'^hugectr_version: .*$', f'hugectr_version: "{release}"', spec.read_text(encoding="utf-8"),
                      count=1, flags=re.M)
    assert n == 1
    (specs / spec.name).write_text(text, encoding="utf-8")
    try:
        rendered = render_spec(open_spec(specs / spec.name))
    except UserError as e:
        assert "HugeCTR" in str(e), str(e)
        return
    out = tmp_path / "out"
    out.mkdir()
    for rel, content in rendered.files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(content, encoding="utf-8")
    cwd, root = tmp_path / "cwd", tmp_path / "root"
    cwd.mkdir()
    result = run_with_standin(out / "model.py", release, cwd=cwd,
                              env={"CTRGEN_STANDIN_SKIP_DATA": "1", "CTRGEN_STANDIN_ROOT": str(root)})
    assert result.returncode == 0, result.stderr
    assert _json_path(result, root, cwd, out / "model.py").read_bytes() == (out / f"{rendered.name}.json").read_bytes()
    assert summary_block(result.stdout) == (out / "summary.txt").read_text(encoding="utf-8")
