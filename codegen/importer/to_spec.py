"""The hugectr calls of a script -> a spec (a plain mapping the spec loader validates) and its features lock.

Each call maps onto the spec field that makes the generator write it again: CreateSolver -> ``solver``,
DataReaderParams -> ``data``, CreateOptimizer -> ``optimizer``, Input / DataReaderSparseParam -> ``input`` and the
lock's columns (named C1..Cn, I1..In and the label names as written), SparseEmbedding -> ``embeddings``, DenseLayer ->
``model.layers`` (or a preset when the layers are exactly one), compile / summary / graph_to_json / fit ->
``training`` and ``script``. What has no field is refused with its line, never dropped.

:func:`run` checks the script (one model, HugeCTR 3.2's API, no loop), passes each statement to its handler
(:mod:`.handlers`) over one :class:`.state.ImportState`, then assembles the spec in steps.
"""

from __future__ import annotations

from ..hugectr import versions as V
from . import handlers
from .arguments import (PRE_3_2_API, loop_refusal, _VERSION, Imported, Refusal, _as_model, kwargs_of, spec_value,
                        unknown_arguments, unknown_refusal)
from .calls import Call, Script
from .sections import _reader_check, _writes_no_weights, continuous, input as input_features
from .state import ImportState

__all__ = ["ImportState", "Imported", "Refusal", "kwargs_of", "run", "spec_value", "unknown_arguments",
           "unknown_refusal"]

SETUP_CALLS = {"solver": "CreateSolver", "reader": "DataReaderParams", "optimizer": "CreateOptimizer"}
# The spec's sections in the order an imported spec lists them.
SECTIONS = ("version", "name", "hugectr_version", "data", "features", "solver", "optimizer", "input", "embeddings",
            "embedding_collection", "model", "training", "script", "continuous_training", "reader_check",
            "offline_inference", "triton")


def run(st: ImportState) -> Imported:
    """The script's calls -> the spec and its features lock; a Refusal names the first call that has no spec field
    (``st.unmapped`` holds the others)."""
    _VERSION[0] = st.release
    st.perf_ext = bool(_as_model(st.script))
    model_call = _the_model(st.script)
    st.spec = {"version": 1, "name": st.name, "hugectr_version": st.release}
    for call in st.script.statements:
        handlers.take(st, call)
    if st.unmapped:
        raise st.unmapped[0]   # the importer reports the others with it
    for needed in ("solver", "reader", "optimizer"):
        if needed not in st.setup:
            raise Refusal(f"the model has no {needed} (hugectr.{SETUP_CALLS[needed]}(...))", model_call.line)
    _check_reader_or_compiled(st, model_call)
    if len(st.inputs) != 1:
        raise Refusal(f"{len(st.inputs)} hugectr.Input layers; a model has exactly one", model_call.line)
    spec = st.spec
    features = input_features(st, st.inputs[0], spec)
    spec["embeddings"] = st.embeddings
    collection = st.ebc.section(model_call.line)
    if collection is not None:
        spec["embedding_collection"] = collection
    spec["model"] = {"preset": "layers", "layers": st.layers}
    _training(st, model_call)
    _inference(st, model_call)
    _data(st, model_call)
    if st.ct is not None:
        if st.pending_pass is not None:
            st.passes.append({**st.pending_pass, "fit": False})   # a source set last, not trained on here
        continuous(spec, st.ct, st.passes, st.hmem, st.after, model_call)
    _script_section(st)
    spec["name"] = st.name   # CreateSolver(model_name=...) may have named it
    spec["triton"] = {"enabled": False}
    from .presets import compact
    spec = compact(spec, features)
    return Imported({k: spec[k] for k in SECTIONS if k in spec}, features, st.assumptions)


def _the_model(s: Script) -> Call:
    """The one hugectr.Model(...) of a script written for HugeCTR 3.2's API, with no loop: or a refusal."""
    models = [c for c in s.statements if c.func == "Model"]
    if not models:
        raise Refusal("no hugectr.Model(...) is built here", None,
                      "give the script or notebook that builds and trains the model")
    if len(models) > 1:
        lines = ", ".join(str(c.line) for c in models)
        raise Refusal(f"{len(models)} models are built (lines {lines}); import takes one model per file",
                      models[1].line, "split the file, one model each")
    old = next((c for c in s.all_calls if c.func in PRE_3_2_API), None)
    if old is not None:
        raise Refusal(f"hugectr.{old.func} is the API of HugeCTR 3.0 and 3.1; ctrgen reads the API HugeCTR 3.2 "
                      f"introduced ({PRE_3_2_API[old.func]})", old.line,
                      "write the script for HugeCTR 3.2 or later (CreateSolver, DataReaderParams, "
                      "hugectr.CreateOptimizer), or import the graph JSON it writes")
    if s.loops:
        raise loop_refusal(s.loops[0], *(s.loop_calls[0] if s.loop_calls else ([], "")))
    return models[0]


def _check_reader_or_compiled(st: ImportState, model_call: Call) -> None:
    """A data-reader test builds the Input layer only and reads batches; any other model is compiled."""
    if st.reader_check is not None:
        if st.compiled or st.layers or st.embeddings or st.fit is not None or st.then or st.before_fit or \
                st.ct is not None:
            raise Refusal(f"model.{st.reader_getter[6:]}() in a model that is also trained: a reader_check spec "
                          "builds the Input layer only and reads batches", model_call.line)
        st.spec["reader_check"] = _reader_check(st.reader_check, model_call)
    elif not st.compiled:
        raise Refusal("model.compile() is never called", model_call.line)


def _training(st: ImportState, model_call: Call) -> None:
    """``training``: the fit, the Model methods after it and before it, and whether the weights are saved."""
    spec = st.spec
    if st.fit is not None:
        spec.setdefault("training", {}).update(st.fit)
    elif st.reader_check is None:
        spec.setdefault("training", {})
    if st.then:
        spec.setdefault("training", {})["then"] = st.then
    if st.reader_check is None and _writes_no_weights(spec["training"], st.then, st.release):
        spec["training"]["save_weights"] = False       # the source saves nothing: neither does the spec
    if st.before_fit:
        if "fit" not in st.after:
            raise Refusal(f"model.{st.before_fit[0]['method']} with no model.fit after it", model_call.line)
        spec.setdefault("training", {})["before_fit"] = st.before_fit


def _inference(st: ImportState, model_call: Call) -> None:
    """``offline_inference``, with what the spec has already (the graph JSON, the release's API) left out."""
    inference = st.inference
    if inference is None:
        return
    if "predict" not in inference:
        raise Refusal("InferenceParams without InferenceModel(...).predict(...) has no spec field", model_call.line)
    if inference["graph_json"] == st.spec.get("training", {}).get("graph_json"):
        del inference["graph_json"]
    if inference["api"] == V.default_inference_api(st.release):
        del inference["api"]
    st.spec["offline_inference"] = inference


def _data(st: ImportState, model_call: Call) -> None:
    """The data made before the solver: a DataSource, a DataGenerator's files."""
    if st.data_source is not None:
        st.spec["data"]["data_source"] = st.data_source
    if st.generator is not None:
        if not st.generated:
            raise Refusal("hugectr.tools.DataGenerator is built but generate() is never called", model_call.line)
        st.spec["data"]["generate"] = st.generator


def _script_section(st: ImportState) -> None:
    """``script``: the order of the calls, when it is not the one the generator writes by default."""
    after = st.after
    if st.reader_check is not None and not after:
        after = ["summary", "graph_to_json", "fit"]   # never compiled: the order after compile is moot
    if st.setup != ["solver", "reader", "optimizer"] or after != ["summary", "graph_to_json", "fit"] or \
            st.before_compile or st.perf_ext:
        st.spec["script"] = {"setup": st.setup, "after_compile": after}
        if st.perf_ext:
            st.spec["script"]["model_class"] = "ModelPerfExt"
        if st.before_compile:
            st.spec["script"]["before_compile"] = list(st.before_compile)
