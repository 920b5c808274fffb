"""Continuous training (seed 003): the spec section, the construction checks HugeCTR makes (reported before anything
is written, with the spec line), the release rows, and both generated scripts run on the HugeCTR stand-in with real
data: Norm files for CreateMOS (3.2), the demo's NVTabular output for CreateETC (3.3), keysets from `ctrgen keysets`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from codegen.errors import UserError
from codegen.hugectr import versions as V
from codegen.pipeline import open_spec, render_spec
from conftest import REPO, run_ctrgen
from demo_data import built_demo
from hugectr_run import calls_named, run_with_standin
from norm_data import random_records, write_file_list, write_norm

MOS_SPEC = REPO / "specs" / "wdl_continuous.yaml"
ETC_SPEC = REPO / "specs" / "wdl_continuous_etc.yaml"
LOCK = REPO / "specs" / "criteo.features.lock.json"


def variant(tmp_path: Path, spec: Path, *edits: tuple[str, str], name: str | None = None) -> Path:
    """A copy of a committed spec (with text edits) beside a copy of its lock."""
    text = spec.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    folder = tmp_path / "specs"
    folder.mkdir(exist_ok=True)
    shutil.copy(LOCK, folder)
    out = folder / f"{name or spec.stem}.yaml"
    out.write_text(text)
    return out


def problems(path: Path) -> str:
    with pytest.raises(UserError) as err:
        render_spec(open_spec(path))
    return err.value.format()


def line_of(path: Path, text: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


# ---- releases ---------------------------------------------------------------------------------------------------

def test_release_rows():
    mos = {v for v in V.SUPPORTED if V.profile(v).has_api("CreateMOS")}
    etc = {v for v in V.SUPPORTED if V.profile(v).has_api("CreateETC")}
    first = {v for v in V.SUPPORTED if V.profile(v).has_api("train_is_first_batch")}
    assert mos == {"3.2"}
    assert etc == {"3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9", "4.0", "4.1", "4.2", "4.3", "23.02", "23.04",
                   "23.05", "23.06", "23.08", "23.09"}
    # The releases' own bindings (API table): train(is_first_batch=...) is gone from 23.04 (the reference said 23.06).
    assert first == {"3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9", "4.0", "4.1", "4.2", "4.3", "23.02"}
    assert not V.CONTINUOUS["CreateETC"].covers((23, 12)) and V.CONTINUOUS["CreateETC"].covers((23, 9))


def test_a_release_without_either_cache_names_the_releases_that_have_one(tmp_path, monkeypatch):
    spec = variant(tmp_path, ETC_SPEC, ('hugectr_version: "3.3"', 'hugectr_version: "23.12"'))
    msg = problems(spec)
    assert f"{spec}:{line_of(spec, 'continuous_training:')}:1: continuous_training: continuous training " \
           "(CreateMOS / CreateETC) is not in HugeCTR 23.12; it exists in HugeCTR 3.2 up to (not including) " \
           "23.12" in msg


def test_parameter_server_of_the_other_api(tmp_path):
    spec = variant(tmp_path, MOS_SPEC, ("ps: host_memory", "ps: staged"))
    msg = problems(spec)
    assert f":{line_of(spec, 'ps: staged')}:" in msg
    assert "['staged'] are CreateETC parameter servers (HugeCTR 3.3 up to (not including) 23.12); HugeCTR 3.2 " \
           "has CreateMOS" in msg
    spec = variant(tmp_path, ETC_SPEC, ("ps: [staged, cached]", "ps: host_memory"))
    assert "['host_memory'] are CreateMOS parameter servers (HugeCTR 3.2 up to (not including) 3.3)" in problems(spec)


def test_construction_checks_name_field_and_line(tmp_path):
    spec = variant(tmp_path, ETC_SPEC,
                   ("repeat_dataset: false", "repeat_dataset: true"),
                   ("  num_epochs: 1\n", "  max_iter: 1000\n"),
                   ("ps: [staged, cached]", "ps: [staged, cached, cached]"),
                   ("local_paths: [./]", "local_paths: [./, ./]"),
                   ("sparse_models: [./wdl_0_sparse_model, ./wdl_1_sparse_model]", "sparse_models: [./wdl_0]"),
                   ("keyset: [/data/criteo/day_3/_file_list.keyset, /data/criteo/day_4/_file_list.keyset]",
                    "keyset: [/data/criteo/day_3/_file_list.keyset]"))
    lines = problems(spec).splitlines()

    def one(field: str) -> str:
        (hit,) = [ln for ln in lines if f": {field}: " in ln]
        return hit

    assert one("solver.repeat_dataset").startswith(f"{spec}:{line_of(spec, 'repeat_dataset: true')}:")
    assert '"The embedding training cache can only be used under epoch mode, i.e., repeat_dataset is set False"' \
        in one("solver.repeat_dataset")
    assert '"Must specify the PS type for each embedding table"' in one("continuous_training.ps")
    assert "1 sparse model for 2 embeddings" in one("continuous_training.sparse_models")
    assert '"Num of local_paths (2) != Num of MPI ranks (1)"' in one("continuous_training.local_paths")
    keyset = one("continuous_training.passes[1].keyset")
    assert keyset.startswith(f"{spec}:{line_of(spec, 'keyset: [/data/criteo/day_3/_file_list.keyset]')}:")
    assert '"The number of training data sources should equal that of the keyset files"' in keyset


def test_first_pass_keysets_and_source(tmp_path):
    spec = variant(tmp_path, MOS_SPEC,
                   ("    - keyset: [wdl_data/file_list.0.keyset, wdl_data/file_list.1.keyset]",
                    "    - source: [wdl_data/other.txt]\n      keyset: [wdl_data/file_list.0.keyset]"),
                   ("ps: host_memory", "ps: host_memory\n  hmem_cache: {num_blocks: 2}"))
    msg = problems(spec)
    assert "continuous_training.passes[0].source: the first pass trains on the reader's source" in msg
    assert '"The number of keyset files must equal that of training data source when using embedding training ' \
           'cache"' in msg
    assert "continuous_training.hmem_cache: CreateMOS has no hmem_cache (CreateETC has" in msg


def test_launch_targets_are_refused(tmp_path):
    spec = variant(tmp_path, ETC_SPEC, ("targets: [hugectr, torch]", "targets: [hugectr, task]"))
    msg = problems(spec)
    assert f"{spec}:{line_of(spec, 'targets:')}:1: targets: ['task'] run task.py" in msg


def test_torch_target_needs_a_sparse_optimizer(tmp_path):
    """train_torch.py trains the passes with sparse embedding updates; momentum moves rows a batch does not touch."""
    assert "torch" in open_spec(ETC_SPEC).spec.targets
    spec = variant(tmp_path, ETC_SPEC, ("type: Adam", "type: MomentumSGD"))
    msg = problems(spec)
    assert "optimizer.type: continuous training with the torch target updates only the embedding rows" in msg
    assert "fix: use one of AdaGrad, Adam, SGD" in msg


def test_bad_spec_writes_nothing(tmp_path):
    spec = variant(tmp_path, MOS_SPEC, ("repeat_dataset: false", "repeat_dataset: true"),
                   ("  num_epochs: 1\n", "  max_iter: 10\n"))
    r = run_ctrgen("generate", str(spec), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{spec}:{line_of(spec, 'repeat_dataset: true')}:" in r.stderr
    assert not (tmp_path / "out").exists()


def test_scripts_by_release():
    mos = (REPO / "generated" / "wdl_continuous" / "model_low_level.py").read_text()
    etc = (REPO / "generated" / "wdl_continuous_etc" / "model_low_level.py").read_text()
    assert "model.train()" in mos and "model.eval()" in mos and "get_model_oversubscriber()" in mos
    assert "model.train(is_first_batch=first_batch)" in etc and "model.eval(is_first_batch=batches == 0)" in etc
    assert "get_embedding_training_cache()" in etc


def test_23_06_low_level_has_no_first_batch_flag(tmp_path):
    spec = variant(tmp_path, ETC_SPEC, ('hugectr_version: "3.3"', 'hugectr_version: "23.06"'))
    files = render_spec(open_spec(spec)).files
    low = files[next(p for p in files if p.name == "model_low_level.py")]
    assert "model.train()" in low and "model.eval()" in low and "first_batch" not in low


# ---- the scripts on the stand-in, with data -------------------------------------------------------------------

def _norm_data(root: Path, key_type: str = "int32") -> None:
    """wdl_data/file_list.{0..5}.txt of two Norm files each, 27 slots (the lock's), 32-bit keys (the spec's
    i64_input_key: false, as the seed's data), Check_t.Sum."""
    rng = np.random.default_rng(3)
    sizes = [c["cardinality"] for c in json.loads(LOCK.read_text())["categorical"]]
    data = root / "wdl_data"
    data.mkdir()
    for i in range(6):
        files = []
        for j in range(2):
            recs = random_records(rng, 8, slot_sizes=sizes, max_nnz=2, dense_dim=13)
            files.append(write_norm(data / f"part_{i}_{j}.data", recs, label_dim=1, dense_dim=13, key_type=key_type))
        write_file_list(data / f"file_list.{i}.txt", [f.relative_to(root) for f in files])


def _generate(spec: Path, out: Path) -> Path:
    r = run_ctrgen("generate", str(spec), "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out / open_spec(spec).spec.name


def test_mos_scripts_run_with_norm_data_and_keysets(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    _norm_data(run)
    r = run_ctrgen("keysets", "-q", "--spec", str(MOS_SPEC), cwd=run)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (run / "wdl_data").glob("*.keyset")) == \
        [f"file_list.{i}.keyset" for i in (0, 1, 3, 4)]
    # 4-byte keys, HugeCTR's unsigned int: the keys of the pass's files, read back.
    from codegen.keysets.norm import norm_keys

    keys = np.fromfile(run / "wdl_data" / "file_list.0.keyset", dtype="<u4")
    want = np.unique(np.concatenate([norm_keys(run / "wdl_data" / f"part_0_{j}.data", "int32")[0] for j in range(2)]))
    assert np.array_equal(np.sort(keys), want.astype("<u4")) and len(keys) > 0
    gen = REPO / "generated" / "wdl_continuous"

    high = run_with_standin(gen / "model.py", "3.2", cwd=run)
    assert high.returncode == 0, high.stderr
    (mos,) = calls_named(high, "hugectr.CreateMOS")
    assert mos["kwargs"] == {"train_from_scratch": True, "use_host_memory_ps": True,
                             "dest_sparse_models": ["./wdl_0_sparse_model", "./wdl_1_sparse_model"]}
    assert len(calls_named(high, "hugectr.Model")[0]["args"]) == 4
    assert [c["kwargs"] for c in calls_named(high, "Model.fit")] == [
        {"num_epochs": 1, "display": 500, "eval_interval": 1000}] * 2
    (switch,) = calls_named(high, "Model.set_source")
    assert switch["kwargs"] == {"source": ["wdl_data/file_list.3.txt", "wdl_data/file_list.4.txt"],
                                "keyset": ["wdl_data/file_list.3.keyset", "wdl_data/file_list.4.keyset"],
                                "eval_source": "wdl_data/file_list.5.txt"}
    order = [c["call"] for c in high.calls]
    assert order.index("Model.graph_to_json") < order.index("Model.fit") < order.index("Model.set_source") \
        < order.index("Model.get_incremental_model") < order.index("Model.save_params_to_files")
    # The stand-in's graph_to_json is an independent writer: same bytes as ctrgen's JSON.
    assert (run / "wdl.json").read_bytes() == (gen / "wdl_continuous.json").read_bytes()
    assert (run / "wdl_mos_dense_0.model").is_file()

    low = run_with_standin(gen / "model_low_level.py", "3.2", cwd=run)
    assert low.returncode == 0, low.stderr
    updates = [c["args"] for c in calls_named(low, "ModelOversubscriber.update")]
    evals = [c["args"] for c in calls_named(low, "DataReader.set_source") if c["args"] and c["args"][0].endswith(".2.txt")]
    assert evals == [["wdl_data/file_list.2.txt"]]       # one evaluation list, set once (the notebook's)
    assert updates == [[f"wdl_data/file_list.{i}.keyset"] for i in (0, 1, 3, 4)]
    assert all(c["args"] == [] and c["kwargs"] == {} for c in calls_named(low, "Model.train"))


@pytest.mark.parametrize("batches,eval_interval,max_eval", [(5, 2, 5000), (5, 3, 2)])
def test_low_level_control_flow(tmp_path, batches, eval_interval, max_eval):
    """Readers reaching the end of a file list (train() returns False), evaluation every N iterations, the eval
    reader rewound when it runs out, is_first_batch as Model.fit sets it (3.3)."""
    spec = variant(tmp_path, ETC_SPEC, ("  eval_interval: 1000", f"  eval_interval: {eval_interval}"),
                   ("  max_eval_batches: 5000", f"  max_eval_batches: {max_eval}"))
    gen = _generate(spec, tmp_path / "out")
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(gen / "wdl_continuous_etc.json", run / "wdl.json")   # ctrgen's JSON is the one model.py writes
    r = run_with_standin(gen / "model_low_level.py", "3.3", cwd=run,
                         env={"CTRGEN_STANDIN_SKIP_DATA": "1", "CTRGEN_STANDIN_ROOT": str(run),
                              "CTRGEN_STANDIN_BATCHES": str(batches)})
    assert r.returncode == 0, r.stderr
    sources = 4
    trains = calls_named(r, "Model.train")
    assert len(trains) == sources * (batches + 1)                  # each list: `batches` batches, then end of file
    iterations = sources * batches
    rounds = len(range(0, iterations, eval_interval))
    printed = re.findall(r"iter: (\d+), metrics", r.stdout)
    assert [int(i) for i in printed] == list(range(0, iterations, eval_interval))
    assert r.stdout.count("trained with data in") == sources

    # Simulate the eval reader: each round reads until MAX_EVAL_BATCHES or its end; at the end it is rewound.
    # A new pass sets its own eval source (fresh batches) before training.
    evals, rewinds, left, it = 0, 0, batches, 0
    for pass_sources in (2, 2):
        left = batches
        for _ in range(pass_sources):
            for _ in range(batches):
                if it % eval_interval == 0:
                    n, flag = 0, True
                    while flag and n < max_eval:
                        flag = left > 0
                        left -= 1 if flag else 0
                        evals, n = evals + 1, n + 1
                    if not flag:
                        rewinds, left = rewinds + 1, batches
                it += 1
    assert len(calls_named(r, "Model.eval")) == evals
    reader_sources = [c["args"] for c in calls_named(r, "DataReader.set_source")]
    assert reader_sources.count([]) == rewinds and rounds >= 1
    assert ["/data/criteo/day_2/_file_list.txt"] in reader_sources and ["/data/criteo/day_5/_file_list.txt"] in \
        reader_sources

    # is_first_batch: True on the first batch of each source and on the first batch after an evaluation round.
    flags = [c["kwargs"]["is_first_batch"] for c in trains]
    assert flags[0] is True and flags.count(True) == sources + rounds
    eval_flags = [c["kwargs"]["is_first_batch"] for c in calls_named(r, "Model.eval")]
    assert eval_flags[0] is True and eval_flags.count(True) == rounds


@pytest.mark.slow
def test_etc_scripts_run_on_nvtabular_output_with_its_keysets(tmp_path):
    criteo = built_demo().paths["criteo"]
    root = tmp_path / "root"
    days = {0: "train", 1: "valid", 2: "valid", 3: "train", 4: "valid", 5: "valid"}
    for day, split in days.items():
        folder = root / "data" / "criteo" / f"day_{day}"
        shutil.copytree(criteo[split], folder)
        parts = sorted(folder.glob("part_*.parquet"))
        write_file_list(folder / "_file_list.txt", [Path("/data/criteo") / f"day_{day}" / p.name for p in parts])
    # The lists name container paths (/data/...); keysets read the copies through a list of local paths.
    for day in (0, 1, 3, 4):
        folder = root / "data" / "criteo" / f"day_{day}"
        local = write_file_list(tmp_path / f"day_{day}.txt", sorted(folder.glob("part_*.parquet")))
        r = run_ctrgen("keysets", "-q", str(local), "--spec", str(ETC_SPEC), "-o", str(folder / "_file_list.keyset"))
        assert r.returncode == 0, r.stderr
    gen = REPO / "generated" / "wdl_continuous_etc"
    run = tmp_path / "run"
    run.mkdir()
    env = {"CTRGEN_STANDIN_ROOT": str(root)}
    high = run_with_standin(gen / "model.py", "3.3", cwd=run, env=env)
    assert high.returncode == 0, high.stderr
    (etc,) = calls_named(high, "hugectr.CreateETC")
    assert etc["kwargs"]["ps_types"] == ["TrainPSType_t.Staged", "TrainPSType_t.Cached"]
    assert etc["kwargs"]["local_paths"] == ["./"] and len(etc["kwargs"]["hmem_cache_configs"]) == 1
    (hmem,) = calls_named(high, "hugectr.CreateHMemCache")
    assert hmem["kwargs"] == {"num_blocks": 2, "target_hit_rate": 0.5, "max_num_evict": 0}
    assert len(calls_named(high, "Model.fit")) == 2 and len(calls_named(high, "Model.get_incremental_model")) == 1
    assert (run / "wdl.json").read_bytes() == (gen / "wdl_continuous_etc.json").read_bytes()
    # The Triton repository serves what the run saved: save_params_to_files' dense file, the cache's sparse folders.
    (entry,) = json.loads((gen / "triton" / "ps.json").read_text())["models"]
    assert Path(entry["dense_file"]).name == "wdl_etc_dense_0.model" and (run / "wdl_etc_dense_0.model").is_file()
    assert [Path(f).name for f in entry["sparse_files"]] == ["wdl_0_sparse_model", "wdl_1_sparse_model"]
    assert all((run / Path(f).name).is_dir() for f in entry["sparse_files"])
    low = run_with_standin(gen / "model_low_level.py", "3.3", cwd=run, env=env)
    assert low.returncode == 0, low.stderr
    assert [c["args"] for c in calls_named(low, "EmbeddingTrainingCache.update")] == \
        [[f"/data/criteo/day_{d}/_file_list.keyset"] for d in (0, 1, 3, 4)]
    # Without its keysets the cache cannot load a pass: the stand-in fails where HugeCTR opens them.
    (root / "data" / "criteo" / "day_3" / "_file_list.keyset").unlink()
    again = run_with_standin(gen / "model_low_level.py", "3.3", cwd=run, env=env)
    assert again.returncode != 0 and "day_3/_file_list.keyset" in again.stderr


def test_hostile_paths_stay_literals(tmp_path):
    """Paths come from the spec: in both scripts they are Python string literals, whatever they contain."""
    import ast

    evil = 'day_3/x"\\n__import__(\'os\').system(\'echo pwned\')#.txt'
    spec = variant(tmp_path, ETC_SPEC, ("source: [/data/criteo/day_3/_file_list.txt,",
                                        f"source: [{json.dumps(evil)},"),
                   ("save_prefix: wdl_etc", "save_prefix: \"a'b\\nc\""))
    files = render_spec(open_spec(spec)).files
    for name in ("model.py", "model_low_level.py"):
        text = files[next(p for p in files if p.name == name)]
        tree = ast.parse(text)
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert evil in strings and "a'b\nc" in strings, name
        assert not any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "__import__" for n in ast.walk(tree))


def test_continue_from_existing_models_on_ssd(tmp_path):
    """train_from_scratch: false reads trained_sparse_models (CreateMOS) and loads the dense model after compile."""
    spec = variant(tmp_path, MOS_SPEC, ("ps: host_memory", "ps: ssd"),
                   ("train_from_scratch: true", "train_from_scratch: false\n  dense_model: wdl_mos_dense_0.model"))
    gen = _generate(spec, tmp_path / "out")
    run = tmp_path / "run"
    run.mkdir()
    # A dense file of the model's size, as a previous run left it: 4 bytes per weight (WDL's 5 963 780, hugectr.md §5)
    (run / "wdl_mos_dense_0.model").write_bytes(bytes(5963780))
    # The models previous runs left: model.py's, and model_low_level.py's own (low_level.sparse_models).
    for folder in ("wdl_0_sparse_model", "wdl_1_sparse_model", "wdl_low_0_sparse_model", "wdl_low_1_sparse_model"):
        (run / folder).mkdir()
    env = {"CTRGEN_STANDIN_SKIP_DATA": "1"}
    high = run_with_standin(gen / "model.py", "3.2", cwd=run, env=env)
    assert high.returncode == 0, high.stderr
    (mos,) = calls_named(high, "hugectr.CreateMOS")
    assert mos["kwargs"] == {"train_from_scratch": False, "use_host_memory_ps": False,
                             "trained_sparse_models": ["./wdl_0_sparse_model", "./wdl_1_sparse_model"]}
    order = [c["call"] for c in high.calls]
    assert order.index("Model.compile") < order.index("Model.load_dense_weights") < order.index("Model.fit")
    low = run_with_standin(gen / "model_low_level.py", "3.2", cwd=run, env=env)
    assert low.returncode == 0, low.stderr
    assert calls_named(low, "Model.load_dense_weights")[0]["args"] == ["wdl_mos_dense_0.model"]
    assert calls_named(low, "hugectr.CreateMOS")[0]["kwargs"]["trained_sparse_models"] == \
        ["./wdl_low_0_sparse_model", "./wdl_low_1_sparse_model"]
    (run / "wdl_mos_dense_0.model").unlink()
    missing = run_with_standin(gen / "model.py", "3.2", cwd=run, env=env)
    assert missing.returncode != 0 and "wdl_mos_dense_0.model" in missing.stderr


# ---- seed 003 itself on the stand-in ---------------------------------------------------------------------------

def _seed003_cell(name: str) -> str:
    from test_standin_seeds import seed003_text

    return seed003_text().split(f"%%writefile {name}\n", 1)[1].split(f"\nOverwriting {name}", 1)[0]


@pytest.mark.reference
def test_seed003_scripts_and_ours_make_the_same_calls(tmp_path):
    """The notebook's two scripts (wdl_train.py, wdl_mos.py) and specs/wdl_continuous.yaml's, run on the 3.2
    stand-in: the same HugeCTR calls (32-bit keys too: Norm files record no key width, so the spec decides, and it
    says HugeCTR's default), the same graph JSON bytes; the low-level loop with its own tables (wdl_low_*) and one
    evaluation list, as the notebook keeps them (continuous_training.low_level)."""
    from collections import Counter

    env = {"CTRGEN_STANDIN_SKIP_DATA": "1"}
    seed_dir, ours_dir = tmp_path / "seed", tmp_path / "ours"
    seed_dir.mkdir()
    ours_dir.mkdir()
    for name in ("wdl_train.py", "wdl_mos.py"):
        (tmp_path / name).write_text(_seed003_cell(name))
    gen = REPO / "generated" / "wdl_continuous"
    seed_hi = run_with_standin(tmp_path / "wdl_train.py", "3.2", cwd=seed_dir, env=env)
    ours_hi = run_with_standin(gen / "model.py", "3.2", cwd=ours_dir, env=env)
    assert seed_hi.returncode == 0 and ours_hi.returncode == 0, seed_hi.stderr + ours_hi.stderr
    assert (seed_dir / "wdl.json").read_bytes() == (ours_dir / "wdl.json").read_bytes()
    assert Counter(c["call"] for c in seed_hi.calls) == Counter(c["call"] for c in ours_hi.calls)
    for name in ("hugectr.DataReaderParams", "hugectr.CreateMOS", "Model.fit", "Model.set_source",
                 "Model.get_incremental_model", "Model.save_params_to_files"):
        assert calls_named(seed_hi, name) == calls_named(ours_hi, name), name
    (seed_solver,), (our_solver,) = calls_named(seed_hi, "hugectr.CreateSolver"), calls_named(ours_hi,
                                                                                             "hugectr.CreateSolver")
    assert seed_solver["kwargs"] == our_solver["kwargs"] and our_solver["kwargs"]["i64_input_key"] is False

    seed_lo = run_with_standin(tmp_path / "wdl_mos.py", "3.2", cwd=seed_dir, env=env)
    ours_lo = run_with_standin(gen / "model_low_level.py", "3.2", cwd=ours_dir, env=env)
    assert seed_lo.returncode == 0 and ours_lo.returncode == 0, seed_lo.stderr + ours_lo.stderr
    assert Counter(c["call"] for c in seed_lo.calls) == Counter(c["call"] for c in ours_lo.calls)
    for name in ("hugectr.CreateMOS", "ModelOversubscriber.update", "Model.construct_from_json", "Model.train",
                 "Model.eval", "Model.save_params_to_files", "DataReader.set_source"):
        assert calls_named(seed_lo, name) == calls_named(ours_lo, name), name
    assert calls_named(ours_lo, "hugectr.CreateMOS")[0]["kwargs"]["dest_sparse_models"] == \
        ["./wdl_low_0_sparse_model", "./wdl_low_1_sparse_model"]


def test_low_level_tables_must_be_its_own(tmp_path):
    """low_level.sparse_models: one per embedding, and none that model.py trains (they would overwrite each other)."""
    for i, (text, fragment) in enumerate([
            ("[./wdl_low_0_sparse_model]", "1 sparse model for 2 embeddings"),
            ("[./wdl_0_sparse_model, ./wdl_low_1_sparse_model]", "a folder the other script also trains")]):
        (tmp_path / str(i)).mkdir()
        spec = variant(tmp_path / str(i), MOS_SPEC,
                       ("[./wdl_low_0_sparse_model, ./wdl_low_1_sparse_model]", text))
        r = run_ctrgen("generate", str(spec), "--out", str(tmp_path / str(i) / "out"))
        assert r.returncode == 2 and "continuous_training.low_level.sparse_models" in r.stderr, r.stderr
        assert fragment in r.stderr and not (tmp_path / str(i) / "out").exists()
