"""tools/import_corpus.py on a tiny synthetic upstream: collect finds, classifies and deduplicates the units of each
release tag; run imports, regenerates and compares them; report writes the per-release table."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

MLP = """\
import hugectr

solver = hugectr.CreateSolver(max_eval_batches=100, batchsize_eval=512, batchsize=512, lr=0.001,
                              vvgpu=[[0]], repeat_dataset=True)
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm,
                                  source=["./train/list.txt"], eval_source="./val/list.txt",
                                  check_type=hugectr.Check_t.Sum)
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=4, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("cats", 1, True, 3)]))
model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                  workspace_size_per_gpu_in_mb=10, embedding_vec_size=8, combiner="sum",
                                  sparse_embedding_name="emb", bottom_name="cats", optimizer=optimizer))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["emb"], top_names=["flat"],
                             leading_dim=24))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["flat", "dense"],
                             top_names=["both"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["both"], top_names=["fc1"],
                             num_output=UNITS))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["fc1"], top_names=["relu1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["relu1"], top_names=["fc2"],
                             num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc2", "label"],
                             top_names=["loss"]))
model.compile()
model.summary()
model.fit(max_iter=100, display=10, eval_interval=50, snapshot=1000000, snapshot_prefix="mlp")
"""

FROM_JSON = """\
import hugectr as hc
solver = hc.CreateSolver(batchsize=64, vvgpu=[[0]])
reader = hc.DataReaderParams(data_reader_type=hc.DataReaderType_t.Norm, source=["a"], eval_source="b",
                             check_type=hc.Check_t.Sum)
model = hc.Model(solver, reader, hc.CreateOptimizer(optimizer_type=hc.Optimizer_t.SGD))
model.construct_from_json(graph_config_file="g.json", include_dense_network=True)
"""

INFERENCE = """\
from hugectr.inference import InferenceParams, CreateInferenceSession
params = InferenceParams(model_name="m", max_batchsize=8, hit_rate_threshold=1.0, dense_model_file="d",
                         sparse_model_files=["s"], device_id=0, use_gpu_embedding_cache=False,
                         cache_size_percentage=0.5, i64_input_key=False)
session = CreateInferenceSession("g.json", params)
"""

# A model the importer must refuse: its width is computed at run time.
RUNTIME = MLP.replace("UNITS", "int(input())")


def _notebook(script: str) -> str:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# training\n"]},
             {"cell_type": "code", "metadata": {}, "source": ("%%writefile train_mlp.py\n" + script).splitlines(True),
              "outputs": [], "execution_count": None},
             {"cell_type": "code", "metadata": {}, "source": ["!python3 train_mlp.py\n"], "outputs": [],
              "execution_count": None}]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _git(repo: Path, *args: str, date: str | None = None) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    if date:
        # Both dates: the tools read the committer date, which would otherwise be the wall clock (and two
        # commits a second apart on a loaded machine would order the releases by chance).
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def _commit(repo: Path, files: dict[str, str], tag: str, date: str) -> None:
    for rel, text in files.items():
        p = repo / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "-c", "commit.gpgsign=false", "commit", "-q", "-m", tag, date=f"{date}T12:00:00+00:00")
    _git(repo, "-c", "tag.gpgsign=false", "tag", tag)


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("import_corpus", REPO / "tools" / "import_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["import_corpus"] = mod          # dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop("import_corpus", None)


@pytest.fixture()
def upstream(tmp_path: Path) -> Path:
    repo = tmp_path / "hugectr"
    repo.mkdir()
    _git(repo, "init", "-q")
    mlp = MLP.replace("UNITS", "16")
    _commit(repo, {"samples/mlp/mlp.py": mlp, "samples/json/from_json.py": FROM_JSON,
                   "test/inference/infer.py": INFERENCE, "docs/ignored.py": mlp,
                   "notebooks/train.ipynb": _notebook(mlp)}, "v3.2", "2021-10-01")
    # 23.06: the sample reformatted (same syntax tree: the same distinct unit), a second model added, a refused one.
    _commit(repo, {"samples/mlp/mlp.py": "# reformatted\n" + mlp.replace("lr=0.001,\n", "lr=0.001,  \n"),
                   "samples/wide/mlp32.py": MLP.replace("UNITS", "32"), "test/runtime.py": RUNTIME},
            "v23.06.00", "2023-06-01")
    _commit(repo, {"test/extra.txt": "not python"}, "v23.06.01", "2023-06-20")
    return repo


def test_collect_run_report(tool, upstream: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    base = ["--cache", str(cache)]
    tool.main([*base, "collect", "--hugectr", str(upstream), "--release", "3.2", "--release", "23.06"])
    index = json.loads((cache / "index.json").read_text(encoding="utf-8"))
    assert index["releases"] == ["3.2", "23.06"]
    assert index["tags"]["23.06"] == {"HugeCTR": "v23.06.01"}          # the newest patch tag of the release
    kinds = {}
    for u in index["units"]:
        for m in u["members"]:
            kinds[(m["release"], m["path"], m["unit"])] = u["kind"]
    assert kinds[("3.2", "samples/mlp/mlp.py", "")] == "single"
    assert kinds[("3.2", "notebooks/train.ipynb", "cell 2 (%%writefile train_mlp.py)")] == "single"
    assert kinds[("3.2", "samples/json/from_json.py", "")].startswith("Model.construct_from_json")
    assert kinds[("3.2", "test/inference/infer.py", "")] == "inference only"
    assert not any(path.startswith("docs/") for _, path, _ in kinds)    # only samples/ test/ notebooks/ tools/
    single = [u for u in index["units"] if u["kind"] == "single"]
    # mlp.py (both releases, reformatted in 23.06) == the notebook cell: one distinct unit; + mlp32 + runtime.
    assert len(single) == 3
    mlp = next(u for u in single if any(m["path"] == "samples/mlp/mlp.py" for m in u["members"]))
    assert {m["release"] for m in mlp["members"]} == {"3.2", "23.06"}
    assert len(mlp["members"]) == 4                                     # 3.2: .py + notebook; 23.06: .py + notebook

    failures = tmp_path / "failures.md"
    tool.main([*base, "run", "--failures", str(failures)])
    results = json.loads((cache / "results.json").read_text(encoding="utf-8"))
    status = {k: v["status"] for k, v in results.items()}
    assert status[f"{mlp['hash']}@3.2"] == "reproduced", results[f"{mlp['hash']}@3.2"]
    assert status[f"{mlp['hash']}@23.06"] == "reproduced", results[f"{mlp['hash']}@23.06"]
    runtime = next(u for u in single if any(m["path"] == "test/runtime.py" for m in u["members"]))
    assert status[f"{runtime['hash']}@23.06"] == "refused"
    assert results[f"{runtime['hash']}@23.06"]["message"]
    assert "crashed" not in status.values()
    assert "refused (1)" in failures.read_text(encoding="utf-8")

    doc = tmp_path / "import_corpus.md"
    tool.main([*base, "report", "-o", str(doc)])
    text = doc.read_text(encoding="utf-8")
    assert "| 3.2 | HugeCTR v3.2 | 1 | 1 | 0 | 0 | 0 | 100.0 |" in text
    assert "| 23.06 | HugeCTR v23.06.01 | 3 | 2 | 1 | 0 | 0 | 66.7 |" in text
    assert "| **distinct** | | **3** | **2** | **1** | **0** | **0** | **66.7** |" in text
    tool.main([*base, "report", "-o", str(tmp_path / "again.md")])
    assert (tmp_path / "again.md").read_text(encoding="utf-8") == text   # deterministic

    inv = tmp_path / "inventory.md"
    tool.main([*base, "inventory", "-o", str(inv)])
    assert "| `Model.fit` | 3 | 3 |" in inv.read_text(encoding="utf-8")


def test_release_3_2_is_read_at_the_tag_of_the_api_table(tool):
    # v3.2.1 changed the API (auto Slices, CreateMOS(ps_types)): 3.2 is read at v3.2 like codegen/hugectr/api_table.json
    assert tool.release_tag(["v3.2", "v3.2.1", "v3.3", "v3.3.1"], "3.2") == "v3.2"
    assert tool.release_tag(["v3.2", "v3.2.1", "v3.3", "v3.3.1"], "3.3") == "v3.3.1"
    assert tool.release_tag(["v3.2.1"], "3.2") == "v3.2.1"          # a repository without v3.2: its newest 3.2 tag


def test_refusals_the_release_itself_makes_are_told_apart(tool):
    def refused(message):
        return {"status": "refused", "message": message}

    assert tool.source_rejected(refused("the imported model does not validate: training.args.data_source_params: "
                                        "Model.fit argument 'data_source_params' is not in HugeCTR 4.3; it exists in "
                                        "HugeCTR 3.4 up to (not including) 3.5"))
    assert tool.source_rejected(refused('model.layers[4]: HugeCTR rejects this: "Empty slice ranges is not allowed"'))
    assert not tool.source_rejected(refused("hugectr.EmbeddingPlanner(...) has no spec field yet"))
    assert not tool.source_rejected({"status": "differing", "message": "is not in HugeCTR 4.3"})


# A model whose width is a required command-line argument: reproducible only with the command line it is run with.
ARGS_MLP = MLP.replace("import hugectr\n", "import argparse\nimport hugectr\nparser = argparse.ArgumentParser()\n"
                       "parser.add_argument('--units', type=int, required=True)\nargs = parser.parse_args()\n") \
    .replace("UNITS", "args.units")


def test_units_run_with_the_command_line_their_repository_uses(tool, tmp_path: Path):
    repo = tmp_path / "hugectr"
    repo.mkdir()
    _git(repo, "init", "-q")
    nb = _notebook(ARGS_MLP).replace("train_mlp.py\\n\"]", "train_mlp.py --units 8\\n\"]")
    _commit(repo, {"samples/args/args_mlp.py": ARGS_MLP, "samples/args/README.md": "Run:\n\n$ python3 args_mlp.py "
                   "--units 24\n", "test/args/other_mlp.py": "# other\n" + ARGS_MLP.replace("lr=0.001", "lr=0.01"),
                   "notebooks/args.ipynb": nb}, "v23.06.00", "2023-06-01")
    cache = tmp_path / "cache"
    tool.main(["--cache", str(cache), "collect", "--hugectr", str(repo), "--release", "23.06"])
    index = json.loads((cache / "index.json").read_text(encoding="utf-8"))
    argv = {(m["path"], m["unit"]): m.get("argv") for u in index["units"] for m in u["members"]}
    assert argv[("samples/args/args_mlp.py", "")] == ["--units", "24"]          # the README next to it
    assert argv[("notebooks/args.ipynb", "cell 2 (%%writefile train_mlp.py)")] == ["--units", "8"]
    assert argv[("test/args/other_mlp.py", "")] is None                          # run nowhere
    tool.main(["--cache", str(cache), "run"])
    results = json.loads((cache / "results.json").read_text(encoding="utf-8"))
    by_path = {m["path"]: results[f"{u['hash']}@23.06"] for u in index["units"] for m in u["members"]}
    assert by_path["samples/args/args_mlp.py"]["status"] == "reproduced"
    assert by_path["notebooks/args.ipynb"]["status"] == "reproduced"
    assert by_path["test/args/other_mlp.py"]["status"] == "refused"


def test_a_release_that_runs_a_unit_nowhere_takes_the_nearest_release_s_command_line(tool):
    u = {"members": [{"release": "23.06", "argv": ["--a", "1"]}, {"release": "23.12"}, {"release": "24.04"},
                     {"release": "4.3", "argv": ["--a", "0"]}, {"release": "25.03", "argv": ["--a", "2"]}]}
    assert tool.argv_of(u, "23.06") == ["--a", "1"]                 # its own
    assert tool.argv_of(u, "23.12") == ["--a", "1"]                 # nearest; the earlier one on a tie
    assert tool.argv_of(u, "24.04") == ["--a", "2"]
    assert tool.argv_of({"members": [{"release": "3.2"}]}, "3.2") is None


def test_a_required_option_no_command_line_gives_is_the_source_s_refusal(tool):
    res = tool.import_and_compare(ARGS_MLP, "23.06", "unit")
    assert res["status"] == "refused" and "the script requires --units on its command line" in res["message"]
    assert tool.source_rejected(res)
    assert tool.import_and_compare(ARGS_MLP, "23.06", "unit", ["--units", "8"])["status"] == "reproduced"


def test_a_script_no_release_runs_takes_the_run_line_of_a_commit_with_the_same_file(tool, tmp_path: Path):
    # v23.06.00 ships the script without any run line; the repository's CI ran the same bytes later on a branch (used)
    # and ran an edited copy elsewhere (not used: another file).
    repo = tmp_path / "hugectr"
    repo.mkdir()
    _git(repo, "init", "-q")
    _commit(repo, {"test/args/req_mlp.py": ARGS_MLP}, "v23.06.00", "2023-06-01")
    _git(repo, "checkout", "-q", "-b", "ci")
    _commit(repo, {"ci/args/run.sub": "python3 /workdir/test/args/req_mlp.py --units 24 &&\n"}, "ci-1", "2023-07-01")
    _git(repo, "checkout", "-q", "-b", "edited")
    _commit(repo, {"test/args/req_mlp.py": "# edited\n" + ARGS_MLP.replace("lr=0.001", "lr=0.01"),
                   "ci/args/run.sub": "python3 /workdir/test/args/req_mlp.py --units 99\n"}, "ci-2", "2023-08-01")
    for t in ("ci-1", "ci-2"):
        _git(repo, "tag", "-d", t)          # only the release is a tag
    cache = tmp_path / "cache"
    tool.main(["--cache", str(cache), "collect", "--hugectr", str(repo), "--release", "23.06"])
    index = json.loads((cache / "index.json").read_text(encoding="utf-8"))
    (member,) = [m for u in index["units"] for m in u["members"] if m["path"] == "test/args/req_mlp.py"]
    assert member["argv"] == ["--units", "24"] and len(member["argv_commit"]) == 12
    tool.main(["--cache", str(cache), "run"])
    results = json.loads((cache / "results.json").read_text(encoding="utf-8"))
    assert results[f"{index['units'][0]['hash']}@23.06"]["status"] == "reproduced"


@pytest.mark.parametrize("binding,use", [
    ("import mlperf_logging.mllog.constants as mllog_constants", "mllog_constants.DLRM_DCNv2"),
    ("from mlperf_logging.mllog import constants", "constants.DLRM_DCNv2"),
    ("import mlperf_logging.mllog.constants", "mlperf_logging.mllog.constants.DLRM_DCNv2"),
])
def test_known_constants_of_mlperf_logging_are_values(tool, binding, use):
    src = MLP.replace("UNITS", "16").replace("import hugectr\n", f"import hugectr\n{binding}\n") \
        .replace("hugectr.CreateSolver(", f"hugectr.CreateSolver(model_name={use}, ")
    assert tool.import_and_compare(src, "23.06", "unit")["status"] == "reproduced"
    # any other attribute of the module stays unknown, and a hugectr argument given one is refused with its text
    res = tool.import_and_compare(src.replace("DLRM_DCNv2", "GNMT"), "23.06", "unit")
    assert res["status"] == "refused" and "GNMT" in res["message"] and "cannot be known" in res["message"]


def test_external_repositories_are_imported_beside_their_folder_for_the_release_of_their_date(tool, tmp_path: Path):
    """tools/import_external.py: a results repository read at its newest commit, its release the HugeCTR release
    current at its first commit; a script reading its width from a sibling module reproduces (the module is read
    beside it), one computing it at run time is refused as "a run-time value", identical paths are one row."""
    spec = importlib.util.spec_from_file_location("import_external", REPO / "tools" / "import_external.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    hug = tmp_path / "hugectr"
    hug.mkdir()
    _git(hug, "init", "-q")
    _commit(hug, {"README.md": "3.2\n"}, "v3.2", "2021-10-01")
    _commit(hug, {"README.md": "23.06\n"}, "v23.06.00", "2023-06-01")
    results = tmp_path / "results"
    results.mkdir()
    _git(results, "init", "-q")
    sibling = MLP.replace("import hugectr\n", "import hugectr\nfrom widths import UNITS\n")
    _commit(results, {"a/dlrm/train.py": sibling, "a/dlrm/widths.py": "UNITS = 16\n",
                      "b/dlrm/train.py": sibling, "b/dlrm/widths.py": "UNITS = 16\n",
                      "c/dlrm/runtime.py": RUNTIME}, "first", "2022-01-10")
    _commit(results, {"LICENSE": "header\n"}, "later", "2023-12-01")     # a later commit does not move the release
    out = tmp_path / "external.md"
    assert ext.main(["--hugectr", str(hug), "--clone", f"mlcommons/training_results_v3.1={results}",
                     "--cache", str(tmp_path / "no-corpus"), "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "2 distinct units: 1 reproduced, 1 refused, 0 differing, 0 crashed" in text
    assert "| mlcommons/training_results_v3.1 | `a/dlrm/train.py` and 1 other path(s) | 3.2 | reproduced |" in text
    assert "| `c/dlrm/runtime.py` | 3.2 | refused | a run-time value |" in text
    assert tool.refusal_class({"status": "refused", "message": "hugectr.X is not in HugeCTR 3.2; ..."}) == \
        "the release rejects it"
    assert tool.refusal_class({"status": "refused", "message": "ctrgen refuses this: rows would mix"}) == \
        "a named gap of ctrgen"


def test_trains_trains_each_unit_that_imports_and_lists_every_exception(tool, tmp_path: Path):
    """`trains`: the Norm-reader MLP imports with the torch target and trains 2 steps on its columns as Parquet (through
    `ctrgen train --train/--eval`'s plan, in this process); a two-dimensional label is the torch target's refusal, its
    one line recorded and listed in the report. 3-5 s: two imports, torch imported (its first import in a
    process), one 2-step training."""
    repo = tmp_path / "hugectr"
    repo.mkdir()
    _git(repo, "init", "-q")
    two = MLP.replace("UNITS", "16").replace("label_dim=1", "label_dim=2").replace("num_output=1)", "num_output=2)")
    _commit(repo, {"samples/mlp/mlp.py": MLP.replace("UNITS", "16"), "samples/two/two.py": two,
                   "test/runtime.py": RUNTIME}, "v23.06.00", "2023-06-01")
    cache = tmp_path / "cache"
    base = ["--cache", str(cache)]
    tool.main([*base, "collect", "--hugectr", str(repo), "--release", "23.06"])
    tool.main([*base, "run"])
    tool.main([*base, "trains"])
    index = json.loads((cache / "index.json").read_text(encoding="utf-8"))
    trained = json.loads((cache / "trains.json").read_text(encoding="utf-8"))
    by_path = {m["path"]: trained.get(u["hash"]) for u in index["units"] for m in u["members"]}
    assert by_path["test/runtime.py"] is None                   # it does not import: not a unit to train
    assert by_path["samples/mlp/mlp.py"] == {"status": "trained", "stage": "train", "torch_added": False,
                                             "release": "23.06"}
    refused = by_path["samples/two/two.py"]
    assert refused["status"] == "refused" and refused["torch_added"]
    assert refused["message"].startswith("input.label_dim: the torch target reads one Parquet label column per label")
    doc = tmp_path / "import_corpus.md"
    tool.main([*base, "report", "-o", str(doc)])
    text = doc.read_text(encoding="utf-8")
    assert "| 23.06 | HugeCTR v23.06.00 | 3 | 2 | 1 | 0 | 0 | 66.7 | 0 | 1 |" in text
    assert "Of 2 units that import, **1 train** (50.0%), 1 refused." in text
    assert "| 1 | refused | input.label_dim: the torch target reads one Parquet label column per label" in text
    assert f"  - `{next(u['hash'] for u in index['units'] if u['members'][0]['path'] == 'samples/two/two.py')}` " \
           "`HugeCTR:samples/two/two.py` (23.06)\n" in text


def test_trains_gives_each_slot_ids_below_the_rows_hugectr_sizes(tool):
    """Cardinalities bound their slot's ids; slots sized from the data share the smallest table's max_vocabulary_size
    (so that the trainer's capacity check passes for all of them together)."""
    from tools.corpus_trains import slot_rows        # the tool put the repository on sys.path

    cards = [{"name": "C1", "cardinality": 7}, {"name": "C2", "cardinality": 5}]
    from_data = [{"name": "C3", "cardinality": None}, {"name": "C4", "cardinality": None}]
    features = {"sparse": [{"input": "a", "columns": cards},
                           {"input": "b", "columns": from_data,
                            "hugectr_tables": [{"max_vocabulary_size": 9}, {"max_vocabulary_size": 30}]}]}
    assert slot_rows(features) == {"C1": 7, "C2": 5, "C3": 4, "C4": 4}
