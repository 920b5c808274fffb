"""Release facts (issue 24, item 3): every enum member, layer type, embedding type, optimizer and argument an
imported or ported spec uses is checked against the API table for the target release, naming the first and last
releases that have it; `import` and `port` refuse (exit 2, nothing written) what the release does not have."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_ctrgen
from test_import import NORM_DCN

# One-hot embeddings read the Raw format with a slot_size_array.
ONE_HOT = NORM_DCN.replace("Embedding_t.DistributedSlotSparseEmbeddingHash",
                           "Embedding_t.LocalizedSlotSparseEmbeddingOneHot") \
    .replace("DataReaderType_t.Norm,", "DataReaderType_t.Raw, num_samples=4096, eval_num_samples=4096, "
             "slot_size_array=[1000] * 26,") \
    .replace('"./data/file_list.txt"', '"./data/train.bin"').replace('"./data/file_list_test.txt"', '"./data/test.bin"') \
    .replace("hugectr.Check_t.Norm if False else hugectr.Check_t.Sum", "hugectr.Check_t.Non") \
    .replace('DataReaderSparseParam("data1", 2, False, 26)', 'DataReaderSparseParam("data1", 1, True, 26)') \
    .replace('bottom_name="data1", optimizer=optimizer', 'bottom_name="data1", optimizer=optimizer, '
             'slot_size_array=[1000] * 26')
REMOVED_ARG = NORM_DCN.replace("repeat_dataset=True)", "repeat_dataset=True, is_dlrm=False)")  # 3.2 to 3.7
FTRL = NORM_DCN.replace("optimizer_type=hugectr.Optimizer_t.Adam, update_type=hugectr.Update_t.Global,\n"
                        "                                    beta1=0.9, beta2=0.999, epsilon=0.0001",
                        "optimizer_type=hugectr.Optimizer_t.Ftrl, update_type=hugectr.Update_t.Global")


def _import(tmp_path: Path, text: str, release: str):
    src = tmp_path / "m.py"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "specs"
    return run_ctrgen("import", str(src), "--hugectr-version", release, "--out", str(out), "--name", "m"), out


@pytest.mark.parametrize("text,release,what,have", [
    (ONE_HOT, "25.03", "hugectr.Embedding_t.LocalizedSlotSparseEmbeddingOneHot", "HugeCTR 3.2 to 23.12"),
], ids=["embedding-type-removed"])
def test_import_refuses_what_the_release_does_not_have(tmp_path: Path, text: str, release: str, what: str,
                                                      have: str):
    proc, out = _import(tmp_path, text, release)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{what} is not in HugeCTR {release}; {have} have it" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("text,good,release,what", [
    (ONE_HOT, "23.06", "25.03", "hugectr.Embedding_t.LocalizedSlotSparseEmbeddingOneHot"),
], ids=["embedding-type-removed"])
def test_port_refuses_what_the_release_does_not_have(tmp_path: Path, text: str, good: str, release: str, what: str):
    proc, out = _import(tmp_path, text, good)
    assert proc.returncode == 0, proc.stderr
    spec = out / "m.yaml"
    before = spec.read_text(encoding="utf-8")
    ported = tmp_path / "ported.yaml"
    proc = run_ctrgen("port", str(spec), "--to", release, "--out", str(ported))
    assert proc.returncode == 2
    assert f"cannot move to HugeCTR {release}: {what} is not in HugeCTR {release}" in proc.stderr
    assert spec.read_text(encoding="utf-8") == before and not ported.exists()


def test_layer_types_optimizers_and_arguments_are_refused_for_the_release(tmp_path: Path):
    # The spec's own checks name these first (the field and its line), with the releases that have them.
    proc, _ = _import(tmp_path, REMOVED_ARG, "4.3")
    assert proc.returncode == 2
    assert "CreateSolver argument 'is_dlrm' is not in HugeCTR 4.3; it exists in HugeCTR 3.2 up to (not " \
           "including) 3.8" in proc.stderr
    proc, _ = _import(tmp_path, NORM_DCN.replace("Layer_t.InnerProduct", "Layer_t.FusedInnerProduct"), "24.04")
    assert proc.returncode == 2
    assert "layer type 'FusedInnerProduct' is not in HugeCTR 24.04; it exists in HugeCTR 3.2 up to (not " \
           "including) 23.12" in proc.stderr
    proc, _ = _import(tmp_path, FTRL, "4.2")
    assert proc.returncode == 2
    assert "is not in HugeCTR 4.2; it exists in HugeCTR 4.3 and later" in proc.stderr and "optimizer" in proc.stderr


def test_port_out_writes_the_lock_beside_the_new_spec(tmp_path: Path):
    proc, out = _import(tmp_path, NORM_DCN, "4.3")
    assert proc.returncode == 0, proc.stderr
    other = tmp_path / "elsewhere"
    other.mkdir()
    ported = other / "m_3_3.yaml"
    proc = run_ctrgen("port", str(out / "m.yaml"), "--to", "3.3", "--out", str(ported))
    assert proc.returncode == 0, proc.stderr
    lock = other / "m_3_3.features.lock.json"
    assert lock.read_bytes() == (out / "m.features.lock.json").read_bytes()
    assert f"wrote {lock}" in proc.stdout
    gen = run_ctrgen("generate", str(ported), "--out", str(tmp_path / "gen"))
    assert gen.returncode == 0, gen.stderr
    assert "HugeCTR 3.3" in (tmp_path / "gen" / "m" / "model.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("text,good,release,what", [
    (REMOVED_ARG, "3.7", "4.3", "CreateSolver argument 'is_dlrm' is not in HugeCTR 4.3"),
    (NORM_DCN.replace("Layer_t.InnerProduct", "Layer_t.FusedInnerProduct")
     .replace("repeat_dataset=True)", "repeat_dataset=True, use_mixed_precision=True, scaler=1024)"), "23.06",
     "24.04", "layer type 'FusedInnerProduct' is not in HugeCTR 24.04"),
    (FTRL, "23.06", "4.2", "is not in HugeCTR 4.2; it exists in HugeCTR 4.3 and later"),
], ids=["argument", "layer-type", "optimizer"])
def test_port_refuses_removed_arguments_layers_and_optimizers(tmp_path: Path, text: str, good: str, release: str,
                                                              what: str):
    proc, out = _import(tmp_path, text, good)
    assert proc.returncode == 0, proc.stderr
    proc = run_ctrgen("port", str(out / "m.yaml"), "--to", release)
    assert proc.returncode == 2 and f"cannot move to HugeCTR {release}" in proc.stderr and what in proc.stderr
