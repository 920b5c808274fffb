"""The embedding collection API: imported from a script, checked per release, generated call for call.

The scripts here are written for these tests (no upstream code is copied). They use each form HugeCTR had:
EmbeddingPlanner with EmbeddingTablePlaceHolder and a plan file (3.7), EmbeddingPlanner with table ids and a
shard matrix (3.8 - 4.1), EmbeddingCollectionConfig with named tables and shard(...) (4.2+, comm_strategy 23.04+).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from codegen.errors import UserError
from codegen.importer import import_source
from codegen.importer.compare import compare_texts
from codegen.importer.write import write_import
from codegen.pipeline import open_spec, render_spec
from codegen.specfile.load import load_spec
from codegen.specfile.write import write_spec

REPO = Path(__file__).resolve().parents[1]

SETUP = """\
import hugectr

SIZES = [1000, 200, 3000, 50]
solver = hugectr.CreateSolver(batchsize=512, batchsize_eval=512, max_eval_batches=10, lr=0.01, vvgpu=[[0, 1]],
                              i64_input_key=True, repeat_dataset=True{solver_extra})
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Parquet,
                                  source=["./train/_file_list.txt"], eval_source="./val/_file_list.txt",
                                  check_type=hugectr.Check_t.Non, slot_size_array=SIZES)
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.SGD, update_type=hugectr.Update_t.Local,
                                    atomic_update=True)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=4, dense_name="dense",
                        data_reader_sparse_param_array=[
                            hugectr.DataReaderSparseParam("s0", 1, True, 1),
                            hugectr.DataReaderSparseParam("s1", 1, True, 1),
                            hugectr.DataReaderSparseParam("s2", 1, True, 1),
                            hugectr.DataReaderSparseParam("s3", 3, False, 1)]))
"""

DENSE = """
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["e0", "e1", "e2"],
                             top_names=["emb"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["emb"], top_names=["flat"],
                             leading_dim=48))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["e3"], top_names=["flat3"],
                             leading_dim={width3}))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["flat", "flat3", "dense"],
                             top_names=["all"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["all"], top_names=["fc"],
                             num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc", "label"],
                             top_names=["loss"]))
model.compile()
model.summary()
model.fit(max_iter=100, display=10, eval_interval=50, snapshot=1000000, snapshot_prefix="ebc")
"""

# 4.2+ form: named tables, one shared by two lookups (s1 and s2 read table "t1"), a concat combiner on the
# multi-hot input, a shard plan computed by a function, the 23.04+ communication strategy.
CONFIG = SETUP.format(solver_extra=", use_embedding_collection=True") + """
def plan(names, gpus):
    matrix = [[] for _ in range(gpus)]
    for i, name in enumerate(names):
        matrix[i % gpus].append(name)
    return matrix, [("mp", list(names))]


tables = [hugectr.EmbeddingTableConfig(name="t" + str(i), max_vocabulary_size=SIZES[i], ev_size=16)
          for i in range(3)]
ebc_config = hugectr.EmbeddingCollectionConfig(use_exclusive_keys=True,
                                               comm_strategy=hugectr.CommunicationStrategy.Hierarchical)
for i, table in enumerate([0, 1, 1, 2]):
    ebc_config.embedding_lookup(table_config=tables[table], bottom_name="s%d" % i, top_name="e%d" % i,
                                combiner="concat" if i == 3 else ("average" if i == 2 else "sum"))
shard_matrix, shard_strategy = plan(["t0", "t1", "t2"], 2)
ebc_config.shard(shard_matrix=shard_matrix, shard_strategy=shard_strategy)
model.add(ebc_config)
""" + DENSE.format(width3=48)

# 3.8 - 4.1 form: table ids, the planner, lookups by position, a 0/1 shard matrix.
PLANNER = SETUP.format(solver_extra=", use_embedding_collection=True") + """
planner = hugectr.EmbeddingPlanner()
for i in range(4):
    planner.embedding_lookup(hugectr.EmbeddingTableConfig(table_id=i, max_vocabulary_size=SIZES[i], ev_size=16),
                             "s%d" % i, "e%d" % i, "sum")
collection = planner.create_embedding_collection(
    shard_matrix=[[1, 0, 1, 0], [0, 1, 0, 1]], emb_table_group_strategy=[[0, 1, 2, 3]],
    emb_table_placement_strategy=["mp"])
model.add(collection)
""" + DENSE.format(width3=16)

# 3.8 - 4.0 form: tables with key ranges, the plan in a file.
PLANNER_38 = PLANNER.replace("ev_size=16)", "ev_size=16, min_key=0, max_key=SIZES[i])").replace(
    """shard_matrix=[[1, 0, 1, 0], [0, 1, 0, 1]], emb_table_group_strategy=[[0, 1, 2, 3]],
    emb_table_placement_strategy=["mp"])""", 'plan_file="./plan.json")')

# 3.7 form: EmbeddingTablePlaceHolder with id spaces and key ranges, a plan file.
PLACEHOLDER = SETUP.format(solver_extra=", use_embedding_collection=True") + """
planner = hugectr.EmbeddingPlanner()
for i in range(4):
    t = hugectr.EmbeddingTablePlaceHolder(id_space=i, max_vocabulary_size=SIZES[i], ev_size=16, min_key=0,
                                          max_key=SIZES[i])
    planner.embedding_lookup(t, "s%d" % i, "e%d" % i, "sum")
collection = planner.create_embedding_collection("./plan.json")
model.add(collection)
""" + DENSE.format(width3=16)


def _import(tmp_path: Path, text: str, version: str, name: str = "ebc"):
    src = tmp_path / f"{name}.py"
    src.write_text(text, encoding="utf-8")
    result = import_source(src, version, name)
    write_import(result, tmp_path / "specs")
    return src, tmp_path / "specs" / f"{name}.yaml"


def _roundtrip(tmp_path: Path, text: str, version: str):
    src, spec = _import(tmp_path, text, version)
    rendered = render_spec(open_spec(spec))
    model_py = rendered.files[next(k for k in rendered.files if str(k) == "model.py")]
    return spec, rendered, model_py, compare_texts(text, model_py, str(src), version)


CASES = [(CONFIG, "23.06"), (CONFIG, "25.03"), (CONFIG.replace(
    ",\n                                               comm_strategy=hugectr.CommunicationStrategy.Hierarchical",
    "").replace("use_exclusive_keys=True", ""), "4.2"), (PLANNER, "4.1"), (PLANNER_38, "3.8"), (PLACEHOLDER, "3.7")]


@pytest.mark.parametrize("text,version", CASES, ids=["config-23.06", "config-25.03", "config-4.2", "planner-4.1",
                                                     "planner-3.8", "placeholder-3.7"])
def test_round_trip_reproduces_every_call(tmp_path: Path, text: str, version: str):
    spec, rendered, model_py, diffs = _roundtrip(tmp_path, text, version)
    assert diffs == []
    loaded = load_spec(spec).spec
    # spec -> model -> spec is the identity
    again = tmp_path / "again.yaml"
    again.write_text(write_spec(loaded), encoding="utf-8")
    assert load_spec(again).spec == loaded
    assert loaded.embedding_collection is not None and loaded.embeddings == []


def test_what_the_spec_records(tmp_path: Path):
    _, spec = _import(tmp_path, CONFIG, "23.06")
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    ec = data["embedding_collection"]
    assert ec["args"] == {"use_exclusive_keys": True, "comm_strategy": "CommunicationStrategy.Hierarchical"}
    # the table two lookups share is one table; lookups name it by index
    assert ec["tables"] == [{"name": f"t{i}", "max_vocabulary_size": s, "ev_size": 16}
                            for i, s in enumerate([1000, 200, 3000])]
    assert [lk["table"] for lk in ec["lookups"]] == [0, 1, 1, 2]
    assert [lk.get("combiner", "sum") for lk in ec["lookups"]] == ["sum", "sum", "average", "concat"]  # sum: default
    assert ec["shard"] == {"shard_matrix": [["t0", "t2"], ["t1"]], "shard_strategy": [["mp", ["t0", "t1", "t2"]]]}
    assert "embeddings" not in data and data["solver"]["args"] == {"use_embedding_collection": True}


def test_generated_order_shapes_and_files(tmp_path: Path):
    _, rendered, model_py, _ = _roundtrip(tmp_path, CONFIG, "23.06")
    order = [model_py.index(s) for s in ("hugectr.Input(", "hugectr.EmbeddingTableConfig(",
                                         "hugectr.EmbeddingCollectionConfig(", "ebc_config.embedding_lookup(",
                                         "ebc_config.shard(", "model.add(ebc_config)", "hugectr.DenseLayer(")]
    assert order == sorted(order)
    shapes = rendered.job.graph.tensor_shapes()
    assert shapes["e0"].dims == (1, 16) and shapes["e3"].dims == (1, 48)   # concat: 3 hot x 16
    assert shapes["emb"].dims == (3, 16)
    names = {str(k) for k in rendered.files}
    # what graph_to_json and summary() write for a collection is not established: neither file is generated
    assert "ebc.json" not in names and "summary.txt" not in names and "model.py" in names
    assert "not established" in rendered.files[next(k for k in rendered.files if str(k) == "README.md")]


def test_placeholder_outputs_are_2d_in_37(tmp_path: Path):
    _, rendered, _, _ = _roundtrip(tmp_path, PLACEHOLDER, "3.7")
    shapes = rendered.job.graph.tensor_shapes()
    assert shapes["e0"].dims == (16,) and shapes["emb"].dims == (48,)


def _spec_with(tmp_path: Path, text: str, version: str, edit) -> Path:
    _, spec = _import(tmp_path, text, version)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    edit(data)
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


def _error(spec: Path) -> str:
    with pytest.raises(UserError) as exc:
        render_spec(open_spec(spec))
    return str(exc.value)


def test_a_release_without_the_api_is_refused_naming_the_first_that_has_it(tmp_path: Path):
    spec = _spec_with(tmp_path, CONFIG, "23.06", lambda d: d.update(hugectr_version="3.6"))
    msg = _error(spec)
    assert "embedding_collection" in msg and "not in HugeCTR 3.6" in msg and "3.7" in msg


@pytest.mark.parametrize("version,edit,expected", [
    ("4.3", lambda d: None, "comm_strategy"),                       # comm_strategy: 23.04+
    ("23.06", lambda d: d["embedding_collection"]["tables"][0].update(table_id=3), "3.8 up to (not including) 4.2"),
    ("4.1", lambda d: None, "not an argument of EmbeddingPlanner"),
    ("23.06", lambda d: d["solver"].pop("args"), "use_embedding_collection=True"),
    ("23.06", lambda d: d["embedding_collection"]["args"].update(comm_strategy="CommunicationStrategy.Ring"),
     "CommunicationStrategy.Ring is not a member of CommunicationStrategy"),  # the 4.2+ form on the planner's release
])
def test_arguments_a_release_lacks_are_refused(tmp_path: Path, version, edit, expected):
    def change(d):
        d["hugectr_version"] = version
        edit(d)
    msg = _error(_spec_with(tmp_path, CONFIG, "23.06", change))
    assert expected in msg, msg


def test_a_lookup_of_no_sparse_input_is_refused_with_its_field(tmp_path: Path):
    spec = _spec_with(tmp_path, CONFIG, "23.06",
                      lambda d: d["embedding_collection"]["lookups"][0].update(bottom="nope"))
    msg = _error(spec)
    assert "embedding_collection.lookups[0].bottom" in msg and "'nope' is not a sparse input" in msg


def test_layers_after_the_collection_are_shape_checked(tmp_path: Path):
    # e3 is (1, 48) with the concat combiner: a Reshape to 16 per row does not divide the batch's elements evenly
    spec = _spec_with(tmp_path, CONFIG, "23.06", lambda d: d["model"]["layers"][2].update(leading_dim=20))
    assert "flat3" in _error(spec)


def test_shard_plan_names_must_be_tables(tmp_path: Path):
    spec = _spec_with(tmp_path, CONFIG, "23.06",
                      lambda d: d["embedding_collection"]["shard"].update(shard_matrix=[["t0", "x9"], ["t1", "t2"]]))
    assert "['x9']" in _error(spec)


@pytest.mark.parametrize("edit,expected", [
    (lambda d: d.update(triton={"enabled": True}), "graph JSON is not established"),
    (lambda d: d.update(model={"preset": "mlp"}), "preset 'mlp'"),
])
def test_what_a_collection_cannot_drive_is_refused(tmp_path: Path, edit, expected):
    assert expected in _error(_spec_with(tmp_path, CONFIG, "23.06", edit))


@pytest.mark.parametrize("change,expected", [
    (lambda t: t.replace("model.add(ebc_config)\n", ""), "never added"),
    (lambda t: t.replace("model.add(ebc_config)\n", "model.add(ebc_config)\nebc_config.shard(shard_matrix=[], "
                                                     "shard_strategy=[])\n"), "after model.add"),
    (lambda t: t.replace("table_config=tables[table]", "table_config=[tables[table]]"), "a list of strings"),
    (lambda t: t.replace('combiner="concat" if i == 3 else', 'combiner="max" if i == 3 else'), "combiner='max'"),
    # the collection's combiners are sum, average and concat (SparseEmbedding's "mean" is not one of them)
    (lambda t: t.replace('("average" if i == 2', '("mean" if i == 2'), "combiner='mean'"),
])
def test_import_refusals_name_the_line(tmp_path: Path, change, expected):
    src = tmp_path / "bad.py"
    src.write_text(change(CONFIG), encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "codegen", "import", str(src), "--hugectr-version", "23.06",
                           "--out", str(out)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert expected in proc.stderr and "Traceback" not in proc.stderr and str(src) in proc.stderr
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.slow
def test_generate_refusal_is_one_line_exit_2(tmp_path: Path):
    spec = _spec_with(tmp_path, CONFIG, "23.06", lambda d: d.update(hugectr_version="3.6"))
    out = tmp_path / "gen"
    proc = subprocess.run([sys.executable, "-m", "codegen", "generate", str(spec), "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "ebc.yaml" in proc.stderr and "embedding_collection" in proc.stderr
    assert not out.exists() or not any(out.iterdir())


# ---- the generated model.py runs on the HugeCTR stand-in (4.3 and 23.06 forms) --------------------------------------

CONFIG_43 = CASES[2][0]


def test_grouped_generated_script_runs_on_standin(tmp_path: Path):
    sys.path.insert(0, str(REPO / "tests"))
    from hugectr_run import run_with_standin

    _, _, model_py, _ = _roundtrip(tmp_path, GROUPED, "23.06")
    script = tmp_path / "model.py"
    script.write_text(model_py, encoding="utf-8")
    result = run_with_standin(script, "23.06", cwd=tmp_path, env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("text,version", [(CONFIG, "23.06"), (CONFIG_43, "4.3")], ids=["23.06", "4.3"])
def test_generated_script_runs_on_standin(tmp_path: Path, text: str, version: str):
    sys.path.insert(0, str(REPO / "tests"))
    from hugectr_run import calls_named, run_with_standin

    _, rendered, model_py, _ = _roundtrip(tmp_path, text, version)
    script = tmp_path / "model.py"
    script.write_text(model_py, encoding="utf-8")
    (tmp_path / "cwd").mkdir()
    result = run_with_standin(script, version, cwd=tmp_path / "cwd", env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert result.returncode == 0, result.stderr
    if result.real:
        return
    lookups = calls_named(result, "EmbeddingCollectionConfig.embedding_lookup")
    assert [c["kwargs"]["top_name"] for c in lookups] == ["e0", "e1", "e2", "e3"]
    assert len(calls_named(result, "EmbeddingCollectionConfig.shard")) == 1
    assert len(calls_named(result, "Model.fit")) == 1


def test_standin_rejects_a_layer_that_misreads_the_lookup_shapes(tmp_path: Path):
    """The stand-in builds the lookup outputs independently: a Reshape that ctrgen would refuse fails there too."""
    sys.path.insert(0, str(REPO / "tests"))
    from hugectr_run import run_with_standin

    _, _, model_py, _ = _roundtrip(tmp_path, CONFIG, "23.06")
    script = tmp_path / "model.py"
    script.write_text(model_py.replace("leading_dim=48,\n", "leading_dim=20,\n", 1), encoding="utf-8")
    result = run_with_standin(script, "23.06", cwd=tmp_path, env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert result.returncode != 0
    assert result.real or "n_in_elems % leading_dim" in result.stderr, result.stderr


def test_importing_for_a_release_without_the_api_names_the_releases_that_have_it(tmp_path: Path):
    src = tmp_path / "planner.py"
    src.write_text(PLANNER, encoding="utf-8")
    with pytest.raises(UserError, match=r"EmbeddingPlanner is not in HugeCTR 23\.06; it exists in HugeCTR 3\.7 "
                                        r"up to \(not including\) 4\.2"):
        import_source(src, "23.06")


COMPRESSED = CONFIG.replace(
    "ebc_config.shard(shard_matrix=shard_matrix, shard_strategy=shard_strategy)",
    "ebc_config.shard(shard_matrix=shard_matrix, shard_strategy=shard_strategy,\n"
    "                 compression_strategy={hugectr.CompressionStrategy.Reduction: ['t0', 't2'],\n"
    "                                       hugectr.CompressionStrategy.Unique: ['t1']})")


def test_compression_strategy_round_trips_from_23_12(tmp_path: Path):
    spec, _, model_py, diffs = _roundtrip(tmp_path, COMPRESSED, "23.12")
    assert diffs == []
    shard = yaml.safe_load(spec.read_text(encoding="utf-8"))["embedding_collection"]["shard"]
    assert shard["compression_strategy"] == {"CompressionStrategy.Reduction": ["t0", "t2"],
                                             "CompressionStrategy.Unique": ["t1"]}
    assert "hugectr.CompressionStrategy.Reduction: [" in model_py


def test_compression_strategy_before_23_12_is_refused(tmp_path: Path):
    with pytest.raises(UserError, match=r"compression_strategy.* is not in HugeCTR 23\.06; it exists in HugeCTR "
                                        r"23\.12 and later"):
        _import(tmp_path, COMPRESSED, "23.06")
    assert not (tmp_path / "specs" / "ebc.yaml").exists()


@pytest.mark.slow
def test_port_lists_what_cannot_move(tmp_path: Path):
    _, spec = _import(tmp_path, CONFIG, "23.06")
    proc = subprocess.run([sys.executable, "-m", "codegen", "port", str(spec), "--to", "4.3"], capture_output=True,
                          text=True, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    assert "comm_strategy" in proc.stderr and "23.04" in proc.stderr
    ok = subprocess.run([sys.executable, "-m", "codegen", "port", str(spec), "--to", "25.03", "--out",
                         str(tmp_path / "ported.yaml")], capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0, ok.stderr
    assert load_spec(tmp_path / "ported.yaml").spec.embedding_collection == load_spec(spec).spec.embedding_collection


def test_several_slots_per_input_are_refused_from_23_04(tmp_path: Path):
    def two_slots(text: str) -> str:
        return text.replace('"s0", 1, True, 1', '"s0", 1, True, 2').replace("SIZES = [1000, 200, 3000, 50]",
                                                                           "SIZES = [1000, 200, 3000, 50, 7]")
    with pytest.raises(UserError, match=r"inputs \['s0'\] have several slots: \"To use embedding collection, "
                                        r"slots_num should be set to 1"):
        _import(tmp_path, two_slots(CONFIG), "23.06")
    older = tmp_path / "older"
    older.mkdir()
    assert _roundtrip(older, two_slots(CONFIG_43), "4.2")[3] == []   # 4.2 has no such check


@pytest.mark.slow
def test_summary_command_refuses_a_collection(tmp_path: Path):
    _, spec = _import(tmp_path, CONFIG, "23.06")
    proc = subprocess.run([sys.executable, "-m", "codegen", "summary", str(spec)], capture_output=True, text=True,
                          cwd=REPO)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "embedding_collection" in proc.stderr and "not established" in proc.stderr and proc.stdout == ""


# 23.04+ grouped form: one call with lists, one (batch, sum of widths) output.
GROUPED_LOOKUP = '''ebc_config.embedding_lookup(
    table_config=[tables[t] for t in [0, 1, 1, 2]], bottom_name=["s%d" % i for i in range(4)],
    top_name="emb_all", combiner=["sum", "sum", "average", "concat"])'''
_BEFORE_LOOKUPS = CONFIG.split("for i, table in enumerate")[0]
_SHARD_AND_ADD = "shard_matrix, shard_strategy = plan" + \
    CONFIG.split("shard_matrix, shard_strategy = plan")[1].split("\nmodel.add(hugectr.DenseLayer")[0]
GROUPED = _BEFORE_LOOKUPS + GROUPED_LOOKUP + "\n" + _SHARD_AND_ADD + """
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["emb_all", "dense"], top_names=["all"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["all"], top_names=["fc"],
                             num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc", "label"],
                             top_names=["loss"]))
model.compile()
model.fit(max_iter=100, display=10, eval_interval=50, snapshot=1000000, snapshot_prefix="ebc")
"""


def test_grouped_lookup_round_trips_with_one_batch_major_output(tmp_path: Path):
    spec, rendered, model_py, diffs = _roundtrip(tmp_path, GROUPED, "23.06")
    assert diffs == []
    (lookup,) = yaml.safe_load(spec.read_text(encoding="utf-8"))["embedding_collection"]["lookups"]
    assert lookup == {"table": [0, 1, 1, 2], "bottom": ["s0", "s1", "s2", "s3"], "top": "emb_all",
                      "combiner": ["sum", "sum", "average", "concat"]}
    shapes = rendered.job.graph.tensor_shapes()
    assert shapes["emb_all"].dims == (16 + 16 + 16 + 48,) and shapes["all"].dims == (96 + 4,)
    assert "table_config=[embedding_tables[0], embedding_tables[1], embedding_tables[1], embedding_tables[2]]" \
        in model_py


def test_grouped_lookup_before_23_04_is_refused(tmp_path: Path):
    spec = _spec_with(tmp_path, GROUPED, "23.06", lambda d: (d.update(hugectr_version="4.3"),
                                                             d["embedding_collection"].pop("args")))
    assert "grouped embedding_lookup (lists) is not in HugeCTR 4.3; it exists in HugeCTR 23.04" in _error(spec)


@pytest.mark.slow
def test_a_wrong_combiner_in_the_spec_is_one_line_naming_the_field(tmp_path: Path):
    spec = _spec_with(tmp_path, CONFIG, "23.06", lambda d: d["embedding_collection"]["lookups"][2].update(
        combiner="mean"))
    proc = subprocess.run([sys.executable, "-m", "codegen", "generate", str(spec), "--out", str(tmp_path / "gen")],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "embedding_collection.lookups[2].combiner" in proc.stderr and "'mean' is not a combiner" in proc.stderr
