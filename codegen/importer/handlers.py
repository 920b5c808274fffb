"""One handler per hugectr call of a script, over the import state: ``BY_NAME`` maps a call's name onto its handler,
``BY_PATTERN`` holds the calls named by a prefix or a rule, tried in order after it, and :func:`take` dispatches one
statement. A handler returns whether the call was its own in the state it met (``model.set_source`` is a
continuous-training pass only once the script has made an embedding cache); a call that no handler takes has no spec
field and is collected as such, so that the import names all of them at once.
"""

from __future__ import annotations

from typing import Callable

from ..hugectr.versions import MODEL_METHODS
from .arguments import Refusal, compiled_once_fit, kwargs_of, spec_value
from .calls import Call, Obj, value_repr
from .sections import _after, _once, cache, embedding, fit, group_layer, layer, optimizer, reader, solver
from .state import ImportState

Handler = Callable[[ImportState, Call], bool]


def _args(call: Call, of: Call | None = None) -> dict:
    """Every keyword of a call as a spec value (``of``: the call whose arguments they are, for the message)."""
    return {k: spec_value(v, of or call, k) for k, v in kwargs_of(call).items()}


def _method(entry: dict, call: Call) -> dict:
    """A method call's entry: its name, and its arguments when it has any."""
    if kw := kwargs_of(call):
        entry["args"] = {k: spec_value(v, call, k) for k, v in kw.items()}
    return entry


# ---- setup: the solver, the reader, the optimizer, the model and its embedding cache ----------------------------

def _solver(st: ImportState, call: Call) -> bool:
    _once(st.setup, "solver", call)
    st.spec["solver"] = solver(st, call)
    return True


def _reader(st: ImportState, call: Call) -> bool:
    _once(st.setup, "reader", call)
    st.spec["data"] = reader(st, call)
    return True


def _optimizer(st: ImportState, call: Call) -> bool:
    if "optimizer" in st.setup:
        raise Refusal("a second CreateOptimizer: per-embedding optimizers are passed to SparseEmbedding "
                      "and have no spec field yet", call.line)
    st.setup.append("optimizer")
    st.spec["optimizer"] = optimizer(st, call)
    return True


def _model(st: ImportState, call: Call) -> bool:
    cache_arg = kwargs_of(call).get("etc_params")
    if cache_arg is not None and not (isinstance(cache_arg, Obj) and cache_arg.type in ("CreateMOS", "CreateETC")):
        raise Refusal(f"Model(..., {value_repr(cache_arg)}): not an embedding cache this script creates", call.line)
    return True


def _cache(st: ImportState, call: Call) -> bool:
    if st.ct is not None:
        raise Refusal(f"a second hugectr.{call.func}: one embedding cache per model", call.line)
    st.ct = cache(call)
    return True


def _hmem(st: ImportState, call: Call) -> bool:
    st.hmem = _args(call)
    return True


# ---- continuous training: the passes over sources, the cache's own calls ----------------------------------------

def _set_source(st: ImportState, call: Call) -> bool:
    if st.ct is None:
        return False
    kw = kwargs_of(call)
    p: dict = {"source": spec_value(kw.pop("source", None), call, "source"),
               "keyset": spec_value(kw.pop("keyset", None), call, "keyset")}
    if "eval_source" in kw:
        p["eval_source"] = spec_value(kw.pop("eval_source"), call, "eval_source")
    if kw or not isinstance(p["source"], list) or not isinstance(p["keyset"], list):
        raise Refusal("model.set_source(source=[...], keyset=[...], eval_source=...) is the form a "
                      "continuous_training pass has", call.line)
    if st.pending_pass is not None:
        st.passes.append({**st.pending_pass, "fit": False})   # set, then replaced before any fit
    st.pending_pass = p
    return True


def _incremental_model(st: ImportState, call: Call) -> bool:
    if st.ct is None:
        return False
    st.ct["incremental_model"] = True
    return True


def _save_params(st: ImportState, call: Call) -> bool:
    if st.ct is None or not st.fits:
        return False
    kw = kwargs_of(call)
    if set(kw) - {"prefix"}:
        raise Refusal("model.save_params_to_files(prefix, iter=...): only the prefix has a spec field", call.line)
    st.ct["save_prefix"] = spec_value(kw.get("prefix"), call, "prefix")
    return True


def _load_dense_weights(st: ImportState, call: Call) -> bool:
    if st.ct is None or compiled_once_fit(st.fits):
        return False
    st.ct["dense_model"] = spec_value(kwargs_of(call).get("dense_model_file"), call, "dense_model_file")
    return True


# ---- the model: its layers, compile, and what runs after compile ------------------------------------------------

def _add(st: ImportState, call: Call) -> bool:
    if st.compiled:
        raise Refusal("model.add after model.compile()", call.line)
    added = kwargs_of(call).get("layer")
    if st.ebc.is_added(added):
        st.ebc.add(call, len(st.layers))
        return True
    if not isinstance(added, Call):
        raise Refusal(f"model.add({value_repr(added)}): not a layer the script builds", call.line)
    if added.func == "Input":
        st.inputs.append(added)
    elif added.func == "SparseEmbedding":
        st.embeddings.append(embedding(st, added))
    elif added.func == "DenseLayer":
        st.layers.append(layer(added))
    elif added.func == "GroupDenseLayer":
        st.layers.append(group_layer(added))
    else:
        st.unmapped.append(Refusal(f"model.add(hugectr.{added.func}(...)) has no spec field yet", added.line))
    return True


def _compile(st: ImportState, call: Call) -> bool:
    st.compiled = True
    if kwargs_of(call):
        st.spec.setdefault("training", {})["compile"] = _args(call)
    return True


def _summary(st: ImportState, call: Call) -> bool:
    _after(st, st.after, "summary", call, st.compiled, st.then + st.before_fit)
    return True


def _graph_to_json(st: ImportState, call: Call) -> bool:
    _after(st, st.after, "graph_to_json", call, st.compiled, st.then + st.before_fit)
    path = kwargs_of(call).get("graph_config_file")
    st.spec.setdefault("training", {})["graph_json"] = spec_value(path, call, "graph_config_file")
    return True


def _fit(st: ImportState, call: Call) -> bool:
    if st.ct is None:
        _after(st, st.after, "fit", call, st.compiled, st.then)
        st.fit = fit(call, st.release)
        return True
    # continuous training: one fit per pass, all with the same arguments
    if not st.compiled:
        raise Refusal("model.fit before model.compile()", call.line)
    this = fit(call, st.release)
    if st.fit is not None and this != st.fit:
        raise Refusal("the passes of a continuous-training script fit with different arguments; the "
                      "spec has one fit for all passes", call.line)
    if st.fits and st.pending_pass is None:
        raise Refusal("model.fit twice on the same files (no set_source between)", call.line)
    st.fit = this
    if "fit" not in st.after:
        st.after.append("fit")
    if st.pending_pass is not None:
        st.passes.append(st.pending_pass)
        st.pending_pass = None
    elif not st.fits:
        st.passes.append({})
    st.fits.append(call.line)
    return True


def _model_method(st: ImportState, call: Call) -> bool:
    """A further Model method: before fit (loading weights or optimizer states to continue from) or after
    everything."""
    f = call.func
    if not (f.startswith("Model.") and f[len("Model."):] in MODEL_METHODS and st.compiled and st.ct is None):
        return False
    entry = _method({"method": f[len("Model."):]}, call)
    (st.then if "fit" in st.after else st.before_fit).append(entry)
    return True


# ---- a data-reader test: get_data_reader_*() and the calls of each batch ----------------------------------------

def _get_data_reader(st: ImportState, call: Call) -> bool:
    if st.compiled or st.reader_check is not None or kwargs_of(call):
        return False
    st.reader_check = {"reader": call.func.rsplit("_", 1)[1], "calls": []}
    st.reader_getter = call.func
    return True


def _reader_check_call(st: ImportState, call: Call) -> bool:
    f = call.func
    if st.reader_check is None or st.compiled or not (
            f.startswith(st.reader_getter + ".") or f == "Model.check_out_tensor"):
        return False
    entry = _method({"of": "model" if f.startswith("Model.check") else "reader", "method": f.rsplit(".", 1)[1]}, call)
    st.reader_check["calls"].append(entry)
    return True


# ---- the embedding collection API, and layers built but never added ---------------------------------------------

def _collection(st: ImportState, call: Call) -> bool:
    if not st.ebc.handles(call):
        return False
    st.ebc.take(call)
    return True


def _not_added(st: ImportState, call: Call) -> bool:
    return True  # built but never added: not part of the model


# ---- offline inference after training ---------------------------------------------------------------------------

def _inference_params(st: ImportState, call: Call) -> bool:
    if st.fit is None or st.inference is not None:
        return False
    st.inference = {"params": _args(call)}
    return True


def _inference_model(st: ImportState, call: Call) -> bool:
    inference = st.inference
    if inference is None or "graph_json" in inference:
        return False
    inference["api"] = call.func.split(".")[1]
    kw = kwargs_of(call)
    json_path = kw.get("model_config_path")
    if not isinstance(kw.get("inference_params"), Obj):
        raise Refusal("InferenceModel(graph_json, inference_params) is the form offline_inference has", call.line)
    inference["graph_json"] = spec_value(json_path, call, "model_config_path")
    return True


def _predict(st: ImportState, call: Call) -> bool:
    inference = st.inference
    if inference is None or "graph_json" not in inference or "predict" in inference:
        return False
    inference["predict"] = _args(call)
    return True


def _inference_method(st: ImportState, call: Call) -> bool:
    f = call.func
    inference = st.inference
    if not (f.startswith(("inference.InferenceModel.", "inference.CreateInferenceSession.")) and
            inference is not None and "predict" in inference and f.split(".")[-1] != "predict"):
        return False
    inference.setdefault("then", []).append(_method({"method": f.split(".")[-1]}, call))
    return True


# ---- data made before the solver: DataGenerator, DataSource -----------------------------------------------------

def _data_generator(st: ImportState, call: Call) -> bool:
    if st.setup or st.generator is not None:
        raise Refusal("hugectr.tools.DataGenerator after the solver, reader or optimizer: the spec "
                      "synthesizes the data first", call.line)
    params = kwargs_of(call).get("data_generator_params")
    if not (isinstance(params, Call) and params.func == "tools.DataGeneratorParams"):
        raise Refusal("hugectr.tools.DataGenerator(<DataGeneratorParams>) is the form the spec has", call.line)
    st.generator = _args(params)
    return True


def _generate(st: ImportState, call: Call) -> bool:
    if st.generator is None or st.generated:
        return False
    st.generated = True
    return True


def _data_source(st: ImportState, call: Call) -> bool:
    if st.setup or st.data_source is not None:
        raise Refusal("hugectr.data.DataSource after the solver, reader or optimizer (or twice): the spec "
                      "builds one first", call.line)
    params = kwargs_of(call).get("data_source_params")
    if not (isinstance(params, Call) and params.func == "data.DataSourceParams"):
        raise Refusal("hugectr.data.DataSource(<DataSourceParams>) is the form the spec has", call.line)
    st.data_source = {"params": _args(params)}
    return True


def _move_to_local(st: ImportState, call: Call) -> bool:
    if st.data_source is None or kwargs_of(call):
        return False
    if st.data_source.get("move_to_local") or st.setup:
        raise Refusal("data_source.move_to_local() is called once, before the solver, in the spec", call.line)
    st.data_source["move_to_local"] = True
    return True


# ---- the tables ---------------------------------------------------------------------------------------------------

# A call's name -> its handler. The names are distinct from every name BY_PATTERN takes before the handler's own
# (the order of the if/elif this replaces), so trying the name first decides as that order did.
BY_NAME: dict[str, Handler] = {
    "CreateSolver": _solver,
    "DataReaderParams": _reader,
    "CreateOptimizer": _optimizer,
    "Model": _model,
    "CreateMOS": _cache,
    "CreateETC": _cache,
    "CreateHMemCache": _hmem,
    "Model.set_source": _set_source,
    "Model.get_incremental_model": _incremental_model,
    "Model.save_params_to_files": _save_params,
    "Model.load_dense_weights": _load_dense_weights,
    "Model.add": _add,
    "Model.compile": _compile,
    "Model.summary": _summary,
    "Model.graph_to_json": _graph_to_json,
    "Model.fit": _fit,
    "Model.get_data_reader_train": _get_data_reader,
    "Model.get_data_reader_eval": _get_data_reader,
    "DenseLayer": _not_added,
    "SparseEmbedding": _not_added,
    "Input": _not_added,
    "DataReaderSparseParam": _not_added,
    "inference.InferenceParams": _inference_params,
    "inference.InferenceModel": _inference_model,
    "inference.CreateInferenceSession": _inference_model,
    "inference.InferenceModel.predict": _predict,
    "inference.CreateInferenceSession.predict": _predict,
    "tools.DataGenerator": _data_generator,
    "tools.DataGenerator.generate": _generate,
    "data.DataSource": _data_source,
    "data.DataSource.move_to_local": _move_to_local,
}

# The calls taken by a prefix or a rule, in order: after a call's own handler declines it, or when it has none.
BY_PATTERN: tuple[Handler, ...] = (_reader_check_call, _collection, _inference_method, _model_method)


def take(st: ImportState, call: Call) -> None:
    """One statement of the script, through its handler; a call none takes is collected as one with no spec field."""
    handler = BY_NAME.get(call.func)
    if handler is not None and handler(st, call):
        return
    if any(handler(st, call) for handler in BY_PATTERN):
        return
    st.unmapped.append(Refusal(f"hugectr.{call.func}(...) has no spec field yet", call.line,
                               "remove the call, or file what it should become"))
