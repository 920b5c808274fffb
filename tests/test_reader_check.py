"""reader_check: a data-reader test (a model with only its Input layer, the training or evaluation data reader
read batch by batch, tensors checked out, no loss, compile or fit): imported, checked per release, rendered call for
call, run on the stand-in, and written back unchanged (spec -> model -> spec)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codegen.errors import UserError
from codegen.importer import import_source
from codegen.importer.write import write_import
from codegen.pipeline import open_spec, render_spec
from codegen.specfile.load import load_spec
from codegen.specfile.write import write_spec
from hugectr_run import run_with_standin
from test_import import _roundtrip

# Written for this test: a reader built in a helper, batches read in a known loop, two tensors checked per batch.
READER_TEST = """\
import hugectr

BATCHES = 4


def reader_model(batch):
    solver = hugectr.CreateSolver(batchsize=batch, batchsize_eval=batch, vvgpu=[[0]], repeat_dataset=True,
                                  i64_input_key=True)
    reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Parquet,
                                      source=["./data/train/_file_list.txt"], eval_source="./data/val/_file_list.txt",
                                      slot_size_array=[11, 22, 33], check_type=hugectr.Check_t.Non)
    optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam)
    model = hugectr.Model(solver, reader, optimizer)
    model.add(hugectr.Input(label_dim=1, label_name="click", dense_dim=5, dense_name="numeric",
                            data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("ids", 1, False, 3)]))
    return model


model = reader_model(256)
data_reader = model.get_data_reader_READER()
for step in range(BATCHES):
    data_reader.read_a_batch_to_device()
    dense = model.check_out_tensor("numeric", hugectr.Tensor_t.TENSOR)
    label = model.check_out_tensor(tensor_name="click", tensor_type=hugectr.Tensor_t.TENSOR)
    print(step, len(dense), len(label))
"""


def _source(tmp_path: Path, reader: str = "train", tensor: str = "Train", extra: str = "") -> Path:
    src = tmp_path / f"reader_{reader}.py"
    src.write_text(READER_TEST.replace("READER", reader).replace("TENSOR", tensor) + extra, encoding="utf-8")
    return src


@pytest.mark.parametrize("reader,tensor,version", [("train", "Train", "23.06"), ("eval", "Evaluate", "4.3"),
                                                   ("train", "Train", "4.3")])
def test_reader_test_round_trips_and_runs(tmp_path: Path, reader: str, tensor: str, version: str):
    src = _source(tmp_path, reader, tensor)
    spec, diffs = _roundtrip(tmp_path, src, version)
    assert diffs == []
    loaded = load_spec(spec).spec
    rc = loaded.reader_check
    assert rc is not None and rc.reader == reader and rc.batches == 4
    assert [(c.of, c.method, c.args) for c in rc.each_batch] == [
        ("reader", "read_a_batch_to_device", {}),
        ("model", "check_out_tensor", {"tensor_name": "numeric", "tensor_type": f"Tensor_t.{tensor}"}),
        ("model", "check_out_tensor", {"tensor_name": "click", "tensor_type": f"Tensor_t.{tensor}"})]
    assert loaded.embeddings == [] and loaded.model.layers == []
    # spec -> model -> spec is the identity for the imported spec too
    again = tmp_path / "again.yaml"
    again.write_text(write_spec(loaded), encoding="utf-8")
    assert load_spec(again).spec == loaded
    out = tmp_path / "generated" / src.stem
    assert sorted(p.name for p in out.iterdir()) == ["MANIFEST.json", "README.md", "model.py"]  # never compiled
    model_py = (out / "model.py").read_text(encoding="utf-8")
    assert "model.compile" not in model_py and "model.fit" not in model_py
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "model.summary()` or graph JSON" in card and "Model Summary" not in card
    run = tmp_path / "run"
    run.mkdir()
    ran = run_with_standin(out / "model.py", version, cwd=run, env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert ran.returncode == 0, ran.stderr
    calls = [c["call"] for c in ran.calls]
    assert f"Model.get_data_reader_{reader}" in calls and "Model.compile" not in calls
    per_batch = ["DataReader.read_a_batch_to_device", "Model.check_out_tensor", "Model.check_out_tensor"]
    assert calls[calls.index(f"Model.get_data_reader_{reader}") + 1:] == per_batch * 4


@pytest.mark.parametrize("version", ["4.1", "23.02", "25.03"])
def test_reader_test_round_trips_in_other_releases(tmp_path: Path, version: str):
    """DataReader (up to 23.05) and Core23DataReader (23.04 on) both bind read_a_batch_to_device."""
    _, diffs = _roundtrip(tmp_path, _source(tmp_path), version)
    assert diffs == []


def test_reader_check_is_checked_against_the_release(tmp_path: Path):
    """check_out_tensor (and Tensor_t) start in 4.1: an older target names the release that has it."""
    spec, _ = _roundtrip(tmp_path, _source(tmp_path), "23.06")
    spec.write_text(spec.read_text(encoding="utf-8").replace('hugectr_version: "23.06"', 'hugectr_version: "4.0"'),
                    encoding="utf-8")
    with pytest.raises(UserError) as exc:
        render_spec(open_spec(spec))
    text = exc.value.format()
    assert "reader_check.each_batch[1].method" in text and "exists in HugeCTR 4.1" in text


@pytest.mark.parametrize("old,new,where,message", [
    ("method: read_a_batch_to_device", "method: read_batch", "reader_check.each_batch[0].method",
     "the data reader has no method 'read_batch'"),
    ("tensor_name: numeric, ", "", "reader_check.each_batch[1].args", "needs 'tensor_name'"),
    ("tensor_name: numeric,", "tensor_name: numeric, index: 2,", "reader_check.each_batch[1].args.index",
     "has no argument 'index'"),
])
def test_bad_reader_check_fields_name_the_field(tmp_path: Path, old: str, new: str, where: str, message: str):
    spec, _ = _roundtrip(tmp_path, _source(tmp_path), "23.06")
    text = spec.read_text(encoding="utf-8")
    assert old in text
    spec.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(UserError) as exc:
        render_spec(open_spec(spec))
    formatted = exc.value.format()
    assert where in formatted and message in formatted


def test_reader_check_beside_training_is_refused(tmp_path: Path):
    spec, _ = _roundtrip(tmp_path, _source(tmp_path), "23.06")
    spec.write_text(spec.read_text(encoding="utf-8") + "training: {max_iter: 10}\n", encoding="utf-8")
    with pytest.raises(UserError, match="neither compiles nor trains"):
        render_spec(open_spec(spec))


def test_no_layers_without_reader_check_is_refused(tmp_path: Path):
    spec, _ = _roundtrip(tmp_path, _source(tmp_path), "23.06")
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text[:text.index("reader_check:")] + "triton: {enabled: false}\n", encoding="utf-8")
    with pytest.raises(UserError, match="at least one layer"):
        load_spec(spec)


def test_reader_of_a_trained_model_is_refused(tmp_path: Path):
    src = _source(tmp_path, extra="model.compile()\nmodel.fit(max_iter=10)\n")
    with pytest.raises(UserError, match="also trained"):
        write_import(import_source(src, "23.06"), tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_standin_still_needs_compile_for_other_tensors(tmp_path: Path):
    """The Input's tensors exist from Model.add(Input) on; any other tensor needs compile, as before."""
    spec, _ = _roundtrip(tmp_path, _source(tmp_path), "23.06")
    model_py = tmp_path / "generated" / "reader_train" / "model.py"
    text = model_py.read_text(encoding="utf-8")
    model_py.write_text(text + 'model.check_out_tensor(tensor_name="fc1", tensor_type=hugectr.Tensor_t.Train)\n',
                        encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    ran = run_with_standin(model_py, "23.06", cwd=run, env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert ran.returncode != 0 and "before calling Model.compile()" in ran.stderr


def test_reader_check_with_triton_is_refused(tmp_path: Path):
    """No graph JSON is written for a model that is never compiled, so there is nothing for Triton to serve."""
    spec, _ = _roundtrip(tmp_path, _source(tmp_path), "23.06")
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("triton: {enabled: false}", "triton: {enabled: true}"), encoding="utf-8")
    with pytest.raises(UserError, match="reader_check renders model.py only"):
        render_spec(open_spec(spec))


STANDIN_EPOCH = """\
import hugectr

solver = hugectr.CreateSolver(batchsize=64, vvgpu=[[0]], repeat_dataset=False, i64_input_key=True)
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Parquet, source=["train.txt"],
                                  eval_source="eval.txt", slot_size_array=[10], check_type=hugectr.Check_t.Non)
model = hugectr.Model(solver, reader, hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam))
data_reader = model.get_data_reader_train()
try:
    data_reader.read_a_batch_to_device()
except RuntimeError as exc:
    print("before input:", exc)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=2, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("s", 1, True, 1)]))
print("sizes:", [data_reader.read_a_batch_to_device() for _ in range(4)])
"""


def test_standin_reader_reads_batches_of_an_epoch(tmp_path: Path):
    """The stand-in's read_a_batch_to_device: the data reader exists once the Input is added; in epoch mode the
    batches run out (size 0), as HugeCTR's reader returns 0 at the end of the file list."""
    script = tmp_path / "epoch.py"
    script.write_text(STANDIN_EPOCH, encoding="utf-8")
    ran = run_with_standin(script, "23.06", cwd=tmp_path, env={"CTRGEN_STANDIN_SKIP_DATA": "1",
                                                               "CTRGEN_STANDIN_BATCHES": "3"})
    assert ran.returncode == 0, ran.stderr
    assert "before input: hugectr stand-in: the data reader is created by Model.add(Input)" in ran.stdout
    assert "sizes: [64, 64, 64, 0]" in ran.stdout
