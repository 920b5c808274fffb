"""What docs/seeds.md claims about the seeds, checked where it is cheap (issue 46): each test names the claim.

Reads the committed generated/ and the runtime's sources; trains nothing.
"""

from __future__ import annotations

import ast
import json
import re

from conftest import REPO, run_ctrgen

GENERATED = REPO / "generated"


def test_multi_gpu_docstrings_say_what_the_runtime_does():
    """Seed 001, multi-GPU: the runtime averages gradients itself (GradientSync), not DistributedDataParallel; every
    generated train_torch.py and docs/seeds.md say so and none claims DDP."""
    runtime = "\n".join(p.read_text() for p in sorted((REPO / "codegen" / "runtime").glob("*.py")))
    assert "GradientSync(" in runtime and "DistributedDataParallel(" not in runtime
    scripts = sorted(GENERATED.glob("*/train_torch.py"))
    assert len(scripts) >= 10
    for path in scripts:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert "without DistributedDataParallel" in doc and "GradientSync" in doc, path
        assert not re.search(r"#\s*DistributedDataParallel", doc), path
    seeds = (REPO / "docs" / "seeds.md").read_text()
    row = next(line for line in seeds.splitlines() if line.startswith("| `hvd.DistributedOptimizer`"))
    assert "GradientSync" in row and "DistributedDataParallel (" not in row, row


def _seed001_job():
    """train_torch.py's JOB of the seed-001 spec, its literals read from the committed file (no torch model built)."""
    from types import SimpleNamespace
    tree = ast.parse((GENERATED / "movielens_seed001" / "train_torch.py").read_text())
    values = {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Name) and t.id in ("MODEL_NAME", "DEFAULTS", "SCHEDULE")}
    return SimpleNamespace(name=values["MODEL_NAME"], doc="seed 001", defaults=values["DEFAULTS"], passes=None,
                           schedule=values["SCHEDULE"], optimizer=SimpleNamespace(rows=False))


def test_seed001_trains_16384_rows_per_gpu_on_two_ranks(monkeypatch, tmp_path):
    """Seed 001, batch: the seed's `horovodrun -np 2 ... --batch_size 16384` is 16,384 rows per GPU, 32,768 a step,
    610 steps an epoch. The spec's solver.batchsize is the global batch (HugeCTR's), so the two ranks of
    cluster/torchrun.sh default to 16,384 each; --batch-size given is per rank; ranks that do not divide the spec's
    batch are one line."""
    import pytest

    from codegen.runtime.cli import parse_args
    from codegen.runtime.errors import DataError
    job = _seed001_job()
    assert job.defaults["batch_size"] == 32768 and job.defaults["max_iter"] == 610
    assert 'NPROC_PER_NODE=${NPROC_PER_NODE:-2}' in (GENERATED / "movielens_seed001" / "cluster" / "torchrun.sh").read_text()
    script = str(tmp_path / "train_torch.py")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert parse_args(job, script, []).batch_size == 16384
    assert parse_args(job, script, ["--batch-size", "100"]).batch_size == 100
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert parse_args(job, script, []).batch_size == 32768
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(DataError, match=r"^the spec's solver\.batchsize 32768 is the global batch and 3 ranks do not "
                                        r"divide it \(fix: --batch-size ROWS per rank"):
        parse_args(job, script, [])


def test_batch_size_help_says_per_rank_and_global(capsys, tmp_path):
    import pytest

    from codegen.runtime.cli import parse_args
    with pytest.raises(SystemExit):
        parse_args(_seed001_job(), str(tmp_path / "train_torch.py"), ["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("--batch-size ROWS rows per rank a step; the global batch is ROWS x the ranks (default: the spec's "
            "solver.batchsize, 32768, is the global batch as in HugeCTR: divided by the ranks)") in text


def _substitute(value, subs: dict):
    """Cloud Build's substitution of $_NAME / ${_NAME} in a build's values (strings, lists, mappings)."""
    if isinstance(value, list):
        return [_substitute(v, subs) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, subs) for k, v in value.items()}
    return re.sub(r"\$\{?(_[A-Z0-9_]+)\}?", lambda m: subs[m.group(1)], value) if isinstance(value, str) else value


def test_seed004_cloudbuild_takes_the_seeds_substitutions():
    """Seed 004: `gcloud builds submit --config src/cloudbuild.yaml --substitutions
    _DOCKERNAME=$DOCKERNAME,_IMAGE_URI=$IMAGE_URI,_FILE_LOCATION=$FILE_LOCATION` builds `docker build -t $_IMAGE_URI
    $_FILE_LOCATION -f $_FILE_LOCATION/Dockerfile.$_DOCKERNAME`. The generated cloudbuild.yaml takes _IMAGE_URI and
    _FILE_LOCATION with defaults (the image the custom job runs, `.`); there is one Dockerfile, so no _DOCKERNAME."""
    import yaml

    build = yaml.safe_load((GENERATED / "deepfm_vertex" / "vertex" / "cloudbuild.yaml").read_text())
    subs = build["substitutions"]
    assert subs == {"_IMAGE_URI": "gcr.io/$PROJECT_ID/hugectr-training", "_FILE_LOCATION": "."}
    used = set(re.findall(r"\$\{?(_[A-Z0-9_]+)", json.dumps([build["steps"], build["images"]])))
    assert used == set(subs)      # Cloud Build's MUST_MATCH: every substitution used, every one used defined
    assert build["options"]["dynamicSubstitutions"] is True     # a default that names $PROJECT_ID
    seed = {"_IMAGE_URI": "gcr.io/my-project/hugectr-training", "_FILE_LOCATION": "./src"}
    assert _substitute(build["steps"], seed)[0]["args"] == [
        "build", "-t", "gcr.io/my-project/hugectr-training", "./src", "-f", "./src/vertex/Dockerfile"]
    assert _substitute(build["images"], seed) == ["gcr.io/my-project/hugectr-training"]
    job = json.loads((GENERATED / "deepfm_vertex" / "vertex" / "custom_job_spec.json").read_text())
    assert job["worker_pool_specs"][0]["container_spec"]["image_uri"] == \
        subs["_IMAGE_URI"].replace("$PROJECT_ID", "{project}")     # the default builds the image the job runs


# ---- seed 003: the Norm files the ETL writes are framed as the model's reader reads them ---------------------------

_NORM_LOCK = {"ctrgen_features_lock": 1, "source": "recorded", "provenance": "test",
              "categorical": [{"name": "C1", "dtype": "int64", "cardinality": 9},
                              {"name": "C2", "dtype": "int64", "cardinality": 5}],
              "continuous": [{"name": "I1", "dtype": "float32"}], "labels": [{"name": "y", "dtype": "float32"}]}


def _norm_spec(tmp_path, reader: str | None, files: str | None):
    """A spec whose ETL writes Norm files (etl.output.norm.check_type: files) that its reader reads (data.check_type:
    reader); None leaves the field out."""
    from specfactory import write_spec

    data = {"format": "norm", "train": ["out/norm/train/file_list.0.txt"], "eval": "out/norm/valid/file_list.txt"}
    if reader is not None:
        data["check_type"] = reader
    norm = {"rows_per_file": 40} if files is None else {"rows_per_file": 40, "check_type": files}
    etl = {"inputs": {"train": ["raw/train.parquet"], "columns": {"C1": "str", "C2": "int64", "I1": "float64",
                                                                   "y": "int64"}},
           "groups": [{"columns": ["C1", "C2"], "ops": ["Categorify"]}, {"columns": ["I1"], "ops": ["FillMissing"]},
                      {"columns": ["y"], "ops": [{"LambdaOp": {"compare": ">=", "value": 1, "dtype": "int8"}}]}],
           "output": {"dir": "out", "format": "norm", "norm": norm}}
    spec = {"version": 1, "name": "normcheck", "hugectr_version": "23.06", "data": data,
            "embeddings": [{"embedding_vec_size": 4, "workspace_size_per_gpu_in_mb": 1}],
            "model": {"preset": "mlp", "units": [8]}, "etl": etl}
    return write_spec(tmp_path / f"{reader}-{files}", spec, lock=_NORM_LOCK, name="normcheck")


def test_seed003_norm_files_are_framed_as_the_reader_reads_them(tmp_path):
    """Both sides from one value: the check type of the Norm files etl.py writes (the ETL plan, which
    codegen/etl/run.py hands to the writer) and the one model.py's DataReaderParams reads them with."""
    from codegen.pipeline import render_spec
    from codegen.specfile.context import open_spec

    for reader, files, both in ((None, None, "Sum"), ("Non", None, "Non"), (None, "Non", "Non"), ("Sum", "Sum", "Sum")):
        rendered = render_spec(open_spec(_norm_spec(tmp_path, reader, files)))
        assert rendered.model.etl.output.norm.check_type == both, (reader, files)
        model_py = rendered.files[next(p for p in rendered.files if str(p) == "model.py")]
        assert f"check_type=hugectr.Check_t.{both}," in model_py, (reader, files)


def test_seed003_a_norm_check_type_the_reader_does_not_read_is_refused(tmp_path):
    """A mismatch cannot be written: one line naming the spec's field and line, exit 2, nothing written."""
    proc = run_ctrgen("generate", str(_norm_spec(tmp_path, "Sum", "Non")), "--out", str(tmp_path / "gen"))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert re.fullmatch(r".*normcheck\.yaml:\d+:\d+: etl\.output\.norm\.check_type: the Norm files would be written "
                        r"for Check_t\.Non, but the model's reader reads them with data\.check_type Check_t\.Sum "
                        r"\(fix: remove etl\.output\.norm\.check_type \(data\.check_type decides for both\), or set "
                        r"both to Non\)\n", proc.stderr), proc.stderr
    assert not (tmp_path / "gen").exists()


def test_seed001_cluster_devices_alone_start_one_worker_per_gpu(tmp_path):
    """Seed 001's LocalCUDACluster(CUDA_VISIBLE_DEVICES="0,1") starts a worker per GPU: etl.cluster.devices alone
    gives etl.py two workers (it started none: workers stayed unset)."""
    from codegen.etl.plan import build_plan
    from codegen.etl.render import render_etl_py
    from codegen.specfile.load import load_spec

    path = _norm_spec(tmp_path, None, None)
    text = path.read_text().replace("etl:\n", "etl:\n  cluster: {devices: [0, 1], device_memory_limit: 0.5}\n", 1)
    path.write_text(text)
    plan = build_plan(load_spec(path))
    assert (plan.cluster.workers, plan.cluster.devices) == (2, (0, 1))
    etl_py = render_etl_py(plan, spec_display="normcheck.yaml", spec_text=text, name="normcheck")
    assert re.search(r'CLUSTER = \{[^}]*"workers": 2,[^}]*"devices": "0,1"', etl_py), etl_py[:3000]


def test_seed001_model_has_a_batchnorm_after_each_hidden_relu():
    """Seed 001's NVTabular Model: Linear -> ReLU -> BatchNorm1d (torch's defaults) -> Dropout(0.0) per hidden layer,
    then one Linear; the spec's `batch_norm: true` gives the same tower in train_torch.py (and model.py's BatchNorm
    layers with factor = torch's momentum)."""
    script = (GENERATED / "movielens_seed001" / "train_torch.py").read_text()
    forward = script[script.index("    def forward("):]
    steps = re.findall(r"^\s+(\w+) = (self\.\w+|F\.relu)\((\w+)\)", forward, flags=re.M)
    tower = [(out, call, arg) for out, call, arg in steps if re.fullmatch(r"(fc|relu|bn)\d", out)]
    assert [(out, call) for out, call, _ in tower] == [
        (f"{kind}{k}", {"fc": f"self.fc{k}", "relu": "F.relu", "bn": f"self.bn{k}"}[kind])
        for k in (1, 2, 3) for kind in ("fc", "relu", "bn")] + [("fc4", "self.fc4")]
    assert all(arg == prev for (_, _, arg), (prev, _, _) in zip(tower[1:], tower))      # each feeds the next
    for k in (1, 2, 3):
        assert f"self.bn{k} = nn.BatchNorm1d(128, eps=1e-05, momentum=0.1)" in script
    model_py = (GENERATED / "movielens_seed001" / "model.py").read_text()
    assert model_py.count("layer_type=hugectr.Layer_t.BatchNorm") == 3 and model_py.count("factor=0.1,") == 3


def test_seed001_embeddings_start_as_nn_embedding_does():
    """Seed 001's Model starts its tables as torch's nn.Embedding: N(0, 1). `embeddings[].init: normal` gives the
    runtime's tables that distribution (uniform ±0.05 by default, padding row zero either way); the seed-001 spec
    sets it on both tables."""
    import torch

    from codegen.runtime.layers import SparseEmbedding
    torch.manual_seed(0)
    normal = SparseEmbedding([3000, 1000], 16, "sum", name="t", init="normal").weight.detach()
    uniform = SparseEmbedding([3000, 1000], 16, "sum", name="t").weight.detach()
    assert abs(float(normal[:-1].std()) - 1.0) < 0.02 and abs(float(normal[:-1].mean())) < 0.02
    assert float(normal[:-1].abs().max()) > 3.0 and float(uniform[:-1].abs().max()) <= 0.05
    assert not normal[-1].any() and not uniform[-1].any()
    script = (GENERATED / "movielens_seed001" / "train_torch.py").read_text()
    assert script.count('init="normal", placement=placement)') == 2


def test_seed000_workflow_graph_is_drawn_from_the_saved_workflow(tmp_path):
    """Seed 000 draws its workflow with ``(output).graph``: ``ctrgen graph --workflow DIR`` draws a saved workflow's
    operator graph (the demo's seed-001/002 ETL, which ctrgen's etl.py saved) in Mermaid and DOT, in one stable order:
    the input selections, JoinExternal then Categorify, the label's LambdaOp (merlin labels it UDF), the concatenation
    and the output columns. Anything but one saved workflow folder is one line, exit 2."""
    from click.testing import CliRunner
    from demo_data import built_demo

    from codegen.cli import main

    workflow = str(built_demo().paths["movielens_genres"]["workflow"])
    runner = CliRunner()
    res = runner.invoke(main, ["graph", "--workflow", workflow])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "flowchart TD" and '  n0[/"input<br/>userId, movieId"/]' in lines
    assert '  n1["JoinExternal<br/>userId, movieId, genres"]' in lines and "  n0 --> n1" in lines
    labels = [line.split("[", 1)[1] for line in lines if line.startswith("  n") and "-->" not in line]
    assert [label.split("<br/>")[0].strip('"/(') for label in labels] == [
        "input", "JoinExternal", "['userId', 'movieId', 'genres']", "Categorify", "input", "UDF", "AddMetadata", "+",
        "output cols"]
    assert lines[-1] == "  n7 --> n8" and '  n8(["output cols<br/>userId, movieId, genres, rating"])' in lines
    dot = runner.invoke(main, ["graph", "--workflow", workflow, "--format", "dot"])
    assert dot.exit_code == 0 and dot.output.startswith("digraph workflow {\n") and dot.output.endswith("}\n")
    assert '  n3 [shape=box, label="Categorify\\nuserId, movieId, genres"];' in dot.output.splitlines()
    assert runner.invoke(main, ["graph", "--workflow", workflow]).output == res.output
    for args, why in ((["graph"], "give a SPEC or --workflow DIR"),
                      (["graph", "specs/movielens.yaml", "--workflow", workflow], "give a SPEC or --workflow DIR"),
                      (["graph", "--workflow", str(tmp_path)], "not a saved NVTabular workflow (no workflow.pkl)")):
        bad = runner.invoke(main, args)
        assert bad.exit_code == 2 and why in bad.output and len(bad.output.strip().splitlines()) == 1, bad.output


def test_every_test_docs_seeds_names_exists():
    """docs/seeds.md names the test of each claim (``FILE.py::test_name``, then more names of the same file): each is
    a test function of that file, and the page names at least one per seed."""
    seeds = (REPO / "docs" / "seeds.md").read_text()
    defined = {p.name: set(re.findall(r"^def (test_\w+)\(", p.read_text(), re.M))
               for p in (REPO / "tests").glob("test_*.py")}
    named = 0
    for m in re.finditer(r"(test_\w+\.py)::(test_\w+)((?:,\s*(?:and\s+)?test_\w+(?![\w.]))*)", seeds):
        file, names = m.group(1), [m.group(2), *re.findall(r"test_\w+", m.group(3))]
        assert file in defined, m.group(0)
        for name in names:
            assert name in defined[file], f"docs/seeds.md names {file}::{name}, which is not a test there"
            named += 1
    assert named >= 40
    for seed in ("## Seed 000", "## Seed 001", "## Seed 002", "## Seed 003", "## Seed 004"):
        section = seeds.split(seed, 1)[1].split("\n## ", 1)[0]
        assert "::test_" in section, seed


EPOCH_SEEDS = """
import json
import torch
import torch.distributed as dist
from codegen.runtime import distributed as D
dist.init_process_group("gloo")
print(json.dumps([D.epoch_seed(5, epoch, torch.device("cpu")) for epoch in (0, 1)]))
D.close_process_group()
"""


def test_seed001_ranks_agree_on_each_epochs_shuffle_seed(tmp_path):
    """Seed 001's seed_fn: each rank contributes a fragment and the all-reduced sum is every rank's shuffle seed. Two
    ranks (forked from the warm Python, torch's gloo) get the same seed, the sum of both fragments modulo the
    fragments' bound, and a new one each epoch."""
    import os
    import sys

    import numpy as np
    from warm_python import run_job

    script = tmp_path / "epoch_seeds.py"
    script.write_text(EPOCH_SEEDS)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "PYTHONPATH": str(REPO)}
    done = run_job([sys.executable, str(script)], cwd=tmp_path, env=env, ranks=2, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    ranks = [json.loads(line) for line in done.stdout.splitlines()]
    bound = (2**31 - 1) // 2
    want = [sum(int(np.random.default_rng([5, epoch, rank]).integers(0, bound)) for rank in (0, 1)) % bound
            for epoch in (0, 1)]
    assert ranks == [want, want] and want[0] != want[1]
