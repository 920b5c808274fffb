"""``ctrgen assemble --checkpoint RUN --onnx``: the repository's model step as an onnxruntime model in place of the
python-backend one (codegen/export/vcsr.py writes its file). Its config.pbtxt is the python model's (name, inputs,
outputs, max_batch_size, instance_group as assemble chose it) made an onnxruntime model: ``backend:
"onnxruntime"``, ``default_model_filename: "model.onnx"``, no ragged batching, dynamic batching or python
parameters (each request runs alone: the graph reads one request's VCSR tensors). The config is built and read back
through Triton's ModelConfig protobuf, and checked against the ensemble's step and the ONNX file's own inputs and
outputs before the repository is moved into place. Serving it needs a server with the onnxruntime backend (NVIDIA's
Triton image); the venv's server has the python backend only."""

from __future__ import annotations

from pathlib import Path

from ...errors import UserError
from ..pb import mc

ONNX_FILE = "model.onnx"
# Triton data types of the ONNX tensor element types the step uses (onnx.TensorProto: FLOAT 1, INT32 6, INT64 7).
ONNX_TYPES = {1: "TYPE_FP32", 6: "TYPE_INT32", 7: "TYPE_INT64"}
HEADER = ("# ctrgen assemble --onnx: the model step as an onnxruntime model of the trained weights (model.onnx), in\n"
          "# place of the python-backend one; served where the server has the onnxruntime backend.\n")


def onnx_config(python_config: str) -> str:
    """The onnxruntime model's config.pbtxt of the python-backend model's text (read back through ModelConfig)."""
    from google.protobuf import text_format

    config = text_format.Parse(python_config, mc.ModelConfig())
    config.ClearField("parameters")
    config.ClearField("dynamic_batching")
    config.backend = "onnxruntime"
    config.default_model_filename = ONNX_FILE
    for tensor in config.input:
        tensor.allow_ragged_batch = False
    text = HEADER + text_format.MessageToString(config)
    text_format.Parse(text, mc.ModelConfig())      # what Triton reads: parses, with no field it does not know
    return text


def check_step(config_text: str, ensemble_text: str, onnx_bytes: bytes, where: Path) -> None:
    """The config's inputs and outputs are the ONNX file's (names and types) and every tensor the ensemble's step
    maps; one line naming the first that is not."""
    import onnx
    from google.protobuf import text_format

    config = text_format.Parse(config_text, mc.ModelConfig())
    ensemble = text_format.Parse(ensemble_text, mc.ModelConfig())
    graph = onnx.load_from_string(onnx_bytes).graph
    for kind, declared, actual in (("input", config.input, graph.input), ("output", config.output, graph.output)):
        want = {t.name: mc.DataType.Name(t.data_type) for t in declared}
        have = {v.name: ONNX_TYPES.get(v.type.tensor_type.elem_type, "other") for v in actual}
        if want != have:
            raise UserError.one(where, f"the ONNX file's {kind}s {have} are not the model step's {want}",
                                field="--onnx", fix="report it: the export and the step's config disagree")
    step = next((s for s in ensemble.ensemble_scheduling.step if s.model_name == config.name), None)
    if step is None:
        raise UserError.one(where, f"the ensemble {ensemble.name!r} has no step running {config.name!r}",
                            field="--onnx")
    missing = sorted(set(step.input_map) - {t.name for t in config.input}) + \
        sorted(set(step.output_map) - {t.name for t in config.output})
    if missing:
        raise UserError.one(where, f"the ensemble maps {missing[0]!r}, which the ONNX step does not have",
                            field="--onnx")


def replace_step(version: Path, config: Path, onnx_bytes: bytes) -> list[str]:
    """In a staged repository: the python model's version folder emptied for model.onnx, its config rewritten;
    returns the files removed (names in the version folder)."""
    removed = sorted(p.name for p in version.iterdir())
    for path in version.iterdir():
        if path.is_dir():
            import shutil

            shutil.rmtree(path)
        else:
            path.unlink()
    (version / ONNX_FILE).write_bytes(onnx_bytes)
    config.write_text(onnx_config(config.read_text(encoding="utf-8")), encoding="utf-8")
    return removed
