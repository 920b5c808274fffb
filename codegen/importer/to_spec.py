"""The hugectr calls of a script -> a spec (a plain mapping the spec loader validates) and its features lock.

Each call maps onto the spec field that makes the generator write it again: CreateSolver -> ``solver``,
DataReaderParams -> ``data``, CreateOptimizer -> ``optimizer``, Input / DataReaderSparseParam -> ``input`` and the
lock's columns (named C1..Cn, I1..In and the label names as written), SparseEmbedding -> ``embeddings``, DenseLayer ->
``model.layers`` (or a preset when the layers are exactly one), compile / summary / graph_to_json / fit ->
``training`` and ``script``. What has no field is refused with its line, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Located
from ..features import Column, Features
from ..graph.ir import Enum
from ..hugectr.versions import MODEL_METHODS
from .calls import Call, Obj, Script, Unknown, value_repr
from .values import first_unknown
from .embedding_collection import Collector

from .signatures import POSITIONAL, param_names  # noqa: F401  (POSITIONAL re-exported for compare)

SOLVER_TYPED = ("seed", "vvgpu", "batchsize", "batchsize_eval", "max_eval_batches", "lr", "warmup_steps",
                "decay_start", "decay_steps", "decay_power", "end_lr", "repeat_dataset", "use_mixed_precision",
                "scaler", "enable_tf32_compute", "use_cuda_graph")
OPTIMIZER_TYPED = ("beta1", "beta2", "epsilon", "initial_accu_value", "momentum_factor", "atomic_update", "beta",
                   "lambda1", "lambda2")
READER_FORMATS = {"Parquet": "parquet", "Norm": "norm", "Raw": "raw", "RawAsync": "raw_async"}
FIT_TYPED = ("num_epochs", "max_iter", "display", "eval_interval", "snapshot", "snapshot_prefix")


# Calls of HugeCTR 3.0/3.1 scripts and what replaced them in 3.2 (the first release ctrgen reads).
PRE_3_2_API = {"solver_parser_helper": "hugectr.CreateSolver and hugectr.DataReaderParams",
               "optimizer.CreateOptimizer": "hugectr.CreateOptimizer"}

_VERSION = [None]   # the release being imported (positional names depend on it)


Refusal = Located  # old name (codegen.errors.Located: message, line, fix), kept for a transition


@dataclass
class Imported:
    spec: dict
    features: Features
    assumptions: list[tuple[int | None, str]] = field(default_factory=list)


def kwargs_of(call: Call, version: str | None = None) -> dict:
    names = param_names(call.func, version or _VERSION[0])
    out: dict = {}
    if call.args:
        if names is None and (version or _VERSION[0]):
            from ..hugectr import api

            try:
                absent = api.missing(call.func, version or _VERSION[0])
            except api.ApiError:
                absent = None
            if absent:
                raise Refusal(f"hugectr.{absent}", call.line, "remove the call or target a release that has it")
        if names is None or len(call.args) > len(names):
            raise Refusal(f"hugectr.{call.func} with {len(call.args)} positional argument(s) cannot be read",
                          call.line, "pass the arguments by keyword")
        out.update(zip(names, call.args))
    for k, v in call.kwargs:
        if k in out:
            raise Refusal(f"hugectr.{call.func}: argument {k!r} given twice", call.line)
        out[k] = v
    return out


def spec_value(v: object, call: Call, name: str) -> object:
    """A call's argument value -> the spec's YAML value (enums as "Type.Member")."""
    if isinstance(v, Unknown):
        raise unknown_refusal(v, call, name)
    if isinstance(v, Enum):
        return f"{v.type}.{v.member}"
    if isinstance(v, Call) and v.func.split(".")[-1][:1].isupper() and not v.func.startswith("Model."):
        # A value object (AsyncParam, HybridEmbeddingParam, ...): {"hugectr.AsyncParam": {its arguments}}.
        return {f"hugectr.{v.func}": {k: spec_value(x, v, k) for k, x in kwargs_of(v).items()}}
    if isinstance(v, (Call, Obj)):
        raise Refusal(f"hugectr.{call.func}({name}={value_repr(v)}): object arguments have no spec field",
                      call.line)
    if isinstance(v, tuple):
        return [spec_value(x, call, name) for x in v]
    if isinstance(v, list):
        return [spec_value(x, call, name) for x in v]
    if isinstance(v, dict):
        return {str(spec_value(k, call, name)): spec_value(x, call, name) for k, x in v.items()}
    if isinstance(v, float) and v.is_integer() and False:
        return v
    return v


def unknown_refusal(v: Unknown, call: Call, name: str) -> Located:
    """The one line for a value the reader cannot know that would feed hugectr argument ``name``."""
    why = f": {v.why}" if v.why else ""
    fix = ("pass it on the command line with --args" if "command-line" in v.why or "--" in v.text[:2] else
           "write the value as a literal (or pass it with --args where the script reads it from its command line)")
    return Refusal(f"hugectr.{call.func}({name}=...): {v.text!r} cannot be known without running the script{why}",
                   v.line or call.line, fix, col=v.col if v.line else None)


def unknown_arguments(script: Script) -> list[Located]:
    """Every hugectr argument of the script the reader cannot know, one refusal each (for reporting all at once)."""
    out = []
    for call in script.all_calls:
        names = param_names(call.func, _VERSION[0]) or ()
        for name, v in [*zip(names, call.args), *call.kwargs]:
            u = first_unknown(v)
            if u is not None and call.func.split(".")[-1] not in DATA_CALLS:
                out.append(unknown_refusal(u, call, name))
    return out


# Calls whose arguments are data the script passes at run time (not model facts): never refused for an unknown.
DATA_CALLS = frozenset({"predict", "evaluate", "check_out_tensor", "lookup", "lookup_fromdlpack"})


def _release_key(name: str) -> tuple[int, int]:
    major, minor = name.split(".")[:2]
    return int(major), int(minor)


def compiled_once_fit(fits: list) -> bool:
    return bool(fits)


def _enum_member(v: object, type_: str, call: Call, name: str) -> str:
    if isinstance(v, Enum) and v.type == type_:
        return v.member
    if isinstance(v, Unknown):
        raise unknown_refusal(v, call, name)
    raise Refusal(f"hugectr.{call.func}({name}={value_repr(v)}): expected a hugectr.{type_} member", call.line)


def _required(func: str, arg: str, release: str) -> bool:
    from ..hugectr import api

    try:
        return any(p.name == arg and p.required for p in api.signature(func, release))
    except api.ApiError:
        return False


def _as_model(script: Script) -> bool:
    """A ModelPerfExt script read as a Model script (same arguments and methods); True when it was one."""
    perf = False
    for c in script.all_calls:
        head, dot, rest = c.func.partition(".")
        if head == "ModelPerfExt":
            c.func, perf = "Model" + dot + rest, True
    return perf


class Mapper:
    def __init__(self, script: Script, release: str, name: str, source_label: str):
        self.script = script
        self.release = release
        self.name = name
        self.source_label = source_label
        self.assumptions: list[tuple[int | None, str]] = []
        self.before_compile: list[str] = []
        self.ebc = Collector(Refusal, kwargs_of, spec_value, release)

    def run(self) -> Imported:
        _VERSION[0] = self.release
        s = self.script
        perf_ext = _as_model(s)
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
            raise Refusal("hugectr calls inside a loop of unknown length (a low-level training loop) have no spec "
                          "field", s.loops[0], "use model.fit(...), or import the graph JSON it writes")
        spec: dict = {"version": 1, "name": self.name, "hugectr_version": self.release}
        setup: list[str] = []
        after: list[str] = []
        model_call = models[0]
        compiled = False
        layers: list[dict] = []
        embeddings: list[dict] = []
        inputs: list[Call] = []
        fit: dict | None = None
        ct: dict | None = None            # continuous_training, when the model has an embedding cache
        hmem: dict | None = None
        passes: list[dict] = []
        pending_pass: dict | None = None
        fits: list[int] = []
        then: list[dict] = []
        before_fit: list[dict] = []
        generator: dict | None = None
        data_source: dict | None = None
        generated = False
        inference: dict | None = None
        reader_check: dict | None = None   # a data-reader test: get_data_reader_*() and calls per batch
        reader_getter = ""
        for call in s.statements:
            f = call.func
            if f == "CreateSolver":
                self._once(setup, "solver", call)
                spec["solver"] = self.solver(call)
            elif f == "DataReaderParams":
                self._once(setup, "reader", call)
                spec["data"] = self.reader(call)
            elif f == "CreateOptimizer":
                if "optimizer" in setup:
                    raise Refusal("a second CreateOptimizer: per-embedding optimizers are passed to SparseEmbedding "
                                  "and have no spec field yet", call.line)
                setup.append("optimizer")
                spec["optimizer"] = self.optimizer(call)
            elif f == "Model":
                kw = kwargs_of(call)
                cache = kw.get("etc_params")
                if cache is not None and not (isinstance(cache, Obj) and cache.type in ("CreateMOS", "CreateETC")):
                    raise Refusal(f"Model(..., {value_repr(cache)}): not an embedding cache this script creates",
                                  call.line)
            elif f in ("CreateMOS", "CreateETC"):
                if ct is not None:
                    raise Refusal(f"a second hugectr.{f}: one embedding cache per model", call.line)
                ct = self.cache(call)
            elif f == "CreateHMemCache":
                hmem = {k: spec_value(v, call, k) for k, v in kwargs_of(call).items()}
            elif f == "Model.set_source" and ct is not None:
                kw = kwargs_of(call)
                p: dict = {"source": spec_value(kw.pop("source", None), call, "source"),
                           "keyset": spec_value(kw.pop("keyset", None), call, "keyset")}
                if "eval_source" in kw:
                    p["eval_source"] = spec_value(kw.pop("eval_source"), call, "eval_source")
                if kw or not isinstance(p["source"], list) or not isinstance(p["keyset"], list):
                    raise Refusal("model.set_source(source=[...], keyset=[...], eval_source=...) is the form a "
                                  "continuous_training pass has", call.line)
                if pending_pass is not None:
                    passes.append({**pending_pass, "fit": False})   # set, then replaced before any fit
                pending_pass = p
            elif f == "Model.get_incremental_model" and ct is not None:
                ct["incremental_model"] = True
            elif f == "Model.save_params_to_files" and ct is not None and fits:
                kw = kwargs_of(call)
                if set(kw) - {"prefix"}:
                    raise Refusal("model.save_params_to_files(prefix, iter=...): only the prefix has a spec field",
                                  call.line)
                ct["save_prefix"] = spec_value(kw.get("prefix"), call, "prefix")
            elif f == "Model.load_dense_weights" and ct is not None and not compiled_once_fit(fits):
                ct["dense_model"] = spec_value(kwargs_of(call).get("dense_model_file"), call, "dense_model_file")
            elif f == "Model.add":
                if compiled:
                    raise Refusal("model.add after model.compile()", call.line)
                layer = kwargs_of(call).get("layer")
                if self.ebc.is_added(layer):
                    self.ebc.add(call, len(layers))
                    continue
                if not isinstance(layer, Call):
                    raise Refusal(f"model.add({value_repr(layer)}): not a layer the script builds", call.line)
                if layer.func == "Input":
                    inputs.append(layer)
                elif layer.func == "SparseEmbedding":
                    embeddings.append(self.embedding(layer))
                elif layer.func == "DenseLayer":
                    layers.append(self.layer(layer))
                elif layer.func == "GroupDenseLayer":
                    layers.append(self.group_layer(layer))
                else:
                    raise Refusal(f"model.add(hugectr.{layer.func}(...)) has no spec field yet", layer.line)
            elif f == "Model.compile":
                compiled = True
                kw = kwargs_of(call)
                if kw:
                    spec.setdefault("training", {})["compile"] = {k: spec_value(v, call, k) for k, v in kw.items()}
            elif f == "Model.summary":
                self._after(after, "summary", call, compiled, then + before_fit)
            elif f == "Model.graph_to_json":
                self._after(after, "graph_to_json", call, compiled, then + before_fit)
                path = kwargs_of(call).get("graph_config_file")
                spec.setdefault("training", {})["graph_json"] = spec_value(path, call, "graph_config_file")
            elif f == "Model.fit" and ct is not None:
                if not compiled:
                    raise Refusal("model.fit before model.compile()", call.line)
                this = self.fit(call)
                if fit is not None and this != fit:
                    raise Refusal("the passes of a continuous-training script fit with different arguments; the "
                                  "spec has one fit for all passes", call.line)
                if fits and pending_pass is None:
                    raise Refusal("model.fit twice on the same files (no set_source between)", call.line)
                fit = this
                if "fit" not in after:
                    after.append("fit")
                if pending_pass is not None:
                    passes.append(pending_pass)
                    pending_pass = None
                elif not fits:
                    passes.append({})
                fits.append(call.line)
            elif f == "Model.fit":
                self._after(after, "fit", call, compiled, then)
                fit = self.fit(call)
            elif f in ("Model.get_data_reader_train", "Model.get_data_reader_eval") and not compiled and \
                    reader_check is None and not kwargs_of(call):
                reader_check = {"reader": f.rsplit("_", 1)[1], "calls": []}
                reader_getter = f
            elif reader_check is not None and not compiled and (
                    f.startswith(reader_getter + ".") or f == "Model.check_out_tensor"):
                kw = kwargs_of(call)
                entry = {"of": "model" if f.startswith("Model.check") else "reader", "method": f.rsplit(".", 1)[1]}
                if kw:
                    entry["args"] = {k: spec_value(v, call, k) for k, v in kw.items()}
                reader_check["calls"].append(entry)
            elif self.ebc.handles(call):
                self.ebc.take(call)
            elif f in ("DenseLayer", "SparseEmbedding", "Input", "DataReaderSparseParam"):
                continue  # built but never added: not part of the model
            elif f == "inference.InferenceParams" and fit is not None and inference is None:
                inference = {"params": {k: spec_value(v, call, k) for k, v in kwargs_of(call).items()}}
            elif f in ("inference.InferenceModel", "inference.CreateInferenceSession") and inference is not None \
                    and "graph_json" not in inference:
                inference["api"] = f.split(".")[1]
                kw = kwargs_of(call)
                json_path = kw.get("model_config_path")
                if not isinstance(kw.get("inference_params"), Obj):
                    raise Refusal("InferenceModel(graph_json, inference_params) is the form offline_inference has",
                                  call.line)
                inference["graph_json"] = spec_value(json_path, call, "model_config_path")
            elif f in ("inference.InferenceModel.predict", "inference.CreateInferenceSession.predict") and \
                    inference is not None and "graph_json" in inference and "predict" not in inference:
                inference["predict"] = {k: spec_value(v, call, k) for k, v in kwargs_of(call).items()}
            elif f.startswith(("inference.InferenceModel.", "inference.CreateInferenceSession.")) and \
                    inference is not None and "predict" in inference and f.split(".")[-1] != "predict":
                entry = {"method": f.split(".")[-1]}
                kw = kwargs_of(call)
                if kw:
                    entry["args"] = {k: spec_value(v, call, k) for k, v in kw.items()}
                inference.setdefault("then", []).append(entry)
            elif f == "tools.DataGenerator":
                if setup or generator is not None:
                    raise Refusal("hugectr.tools.DataGenerator after the solver, reader or optimizer: the spec "
                                  "synthesizes the data first", call.line)
                params = kwargs_of(call).get("data_generator_params")
                if not (isinstance(params, Call) and params.func == "tools.DataGeneratorParams"):
                    raise Refusal("hugectr.tools.DataGenerator(<DataGeneratorParams>) is the form the spec has",
                                  call.line)
                generator = {k: spec_value(v, params, k) for k, v in kwargs_of(params).items()}
            elif f == "data.DataSource":
                if setup or data_source is not None:
                    raise Refusal("hugectr.data.DataSource after the solver, reader or optimizer (or twice): the spec "
                                  "builds one first", call.line)
                params = kwargs_of(call).get("data_source_params")
                if not (isinstance(params, Call) and params.func == "data.DataSourceParams"):
                    raise Refusal("hugectr.data.DataSource(<DataSourceParams>) is the form the spec has", call.line)
                data_source = {"params": {k: spec_value(v, params, k) for k, v in kwargs_of(params).items()}}
            elif f == "data.DataSource.move_to_local" and data_source is not None and not kwargs_of(call):
                if data_source.get("move_to_local") or setup:
                    raise Refusal("data_source.move_to_local() is called once, before the solver, in the spec",
                                  call.line)
                data_source["move_to_local"] = True
            elif f == "tools.DataGenerator.generate" and generator is not None and not generated:
                generated = True
            elif f.startswith("Model.") and f[len("Model."):] in MODEL_METHODS and compiled and ct is None:
                kw = kwargs_of(call)
                entry = {"method": f[len("Model."):]}
                if kw:
                    entry["args"] = {k: spec_value(v, call, k) for k, v in kw.items()}
                # before fit (loading weights or optimizer states to continue from) or after everything
                (then if "fit" in after else before_fit).append(entry)
            else:
                raise Refusal(f"hugectr.{f}(...) has no spec field yet", call.line,
                              "remove the call, or file what it should become")
        for needed in ("solver", "reader", "optimizer"):
            if needed not in setup:
                raise Refusal(f"the model has no {needed} (hugectr.{ {'solver': 'CreateSolver', 'reader': 'DataReaderParams', 'optimizer': 'CreateOptimizer'}[needed]}(...))",
                              model_call.line)
        if reader_check is not None:
            if compiled or layers or embeddings or fit is not None or then or before_fit or ct is not None:
                raise Refusal(f"model.{reader_getter[6:]}() in a model that is also trained: a reader_check spec "
                              "builds the Input layer only and reads batches", model_call.line)
            spec["reader_check"] = _reader_check(reader_check, model_call)
        elif not compiled:
            raise Refusal("model.compile() is never called", model_call.line)
        if len(inputs) != 1:
            raise Refusal(f"{len(inputs)} hugectr.Input layers; a model has exactly one", model_call.line)
        features = self.input(inputs[0], spec, embeddings)
        spec["embeddings"] = embeddings
        collection = self.ebc.section(model_call.line)
        if collection is not None:
            spec["embedding_collection"] = collection
        spec["model"] = {"preset": "layers", "layers": layers}
        if fit is not None:
            spec.setdefault("training", {}).update(fit)
        elif reader_check is None:
            spec.setdefault("training", {})
        if then:
            spec.setdefault("training", {})["then"] = then
        if reader_check is None and _writes_no_weights(spec["training"], then):
            spec["training"]["save_weights"] = False       # the source saves nothing: neither does the spec
        if before_fit:
            if "fit" not in after:
                raise Refusal(f"model.{before_fit[0]['method']} with no model.fit after it", model_call.line)
            spec.setdefault("training", {})["before_fit"] = before_fit
        if inference is not None:
            if "predict" not in inference:
                raise Refusal("InferenceParams without InferenceModel(...).predict(...) has no spec field",
                              model_call.line)
            if inference["graph_json"] == spec.get("training", {}).get("graph_json"):
                del inference["graph_json"]
            default_api = "InferenceModel" if _release_key(self.release) >= (3, 4) and \
                _release_key(self.release) < (23, 9) else "CreateInferenceSession"
            if inference["api"] == default_api:
                del inference["api"]
            spec["offline_inference"] = inference
        if data_source is not None:
            spec["data"]["data_source"] = data_source
        if generator is not None:
            if not generated:
                raise Refusal("hugectr.tools.DataGenerator is built but generate() is never called", model_call.line)
            spec["data"]["generate"] = generator
        if ct is not None:
            if pending_pass is not None:
                passes.append({**pending_pass, "fit": False})   # a source set last, not trained on here
            self.continuous(spec, ct, passes, hmem, fit, after, model_call)
        if reader_check is not None and not after:
            after = ["summary", "graph_to_json", "fit"]   # never compiled: the order after compile is moot
        if setup != ["solver", "reader", "optimizer"] or after != ["summary", "graph_to_json", "fit"] or \
                self.before_compile or perf_ext:
            spec["script"] = {"setup": setup, "after_compile": after}
            if perf_ext:
                spec["script"]["model_class"] = "ModelPerfExt"
            if self.before_compile:
                spec["script"]["before_compile"] = list(self.before_compile)
        spec["name"] = self.name   # CreateSolver(model_name=...) may have named it
        spec["triton"] = {"enabled": False}
        self._solver_mode(spec)
        from .presets import compact
        spec = compact(spec, features)
        ordered = {k: spec[k] for k in ("version", "name", "hugectr_version", "data", "features", "solver",
                                        "optimizer", "input", "embeddings", "embedding_collection", "model",
                                        "training", "script", "continuous_training", "reader_check",
                                        "offline_inference", "triton")
                   if k in spec}
        return Imported(ordered, features, self.assumptions)

    # ---- continuous training (seed 003) ----------------------------------------------------------------------------
    def cache(self, call: Call) -> dict:
        kw = kwargs_of(call)
        if call.func == "CreateMOS":
            out: dict = {"train_from_scratch": bool(spec_value(kw.pop("train_from_scratch", True), call, "x"))}
            out["ps"] = "host_memory" if spec_value(kw.pop("use_host_memory_ps", True), call, "x") else "ssd"
            models = kw.pop("dest_sparse_models", None) if out["train_from_scratch"] else \
                kw.pop("trained_sparse_models", None)
        else:
            types = spec_value(kw.pop("ps_types", None), call, "ps_types")
            if not isinstance(types, list):
                raise Refusal("CreateETC needs ps_types=[...]", call.line)
            out = {"ps": [{"TrainPSType_t.Staged": "staged", "TrainPSType_t.Cached": "cached"}.get(t, t)
                          for t in types]}
            models = kw.pop("sparse_models", None)
            if "local_paths" in kw:
                out["local_paths"] = spec_value(kw.pop("local_paths"), call, "local_paths")
            kw.pop("hmem_cache_configs", None)
        out["sparse_models"] = spec_value(models, call, "sparse_models")
        if kw:
            raise Refusal(f"hugectr.{call.func}({next(iter(kw))}=...) has no spec field yet", call.line)
        out["incremental_model"] = False
        out["low_level"] = False
        return out

    def continuous(self, spec: dict, ct: dict, passes: list[dict], hmem: dict | None, fit: dict | None,
                   after: list[str], model_call: Call) -> None:
        if not passes:
            raise Refusal("a continuous-training script that never calls model.fit", model_call.line)
        keyset = spec.get("data", {}).pop("args", {}).pop("keyset", None) if "keyset" in spec.get("data", {}).get(
            "args", {}) else None
        if not spec.get("data", {}).get("args", True):
            spec["data"].pop("args", None)
        if keyset is None:
            raise Refusal("DataReaderParams needs keyset=[...] for the embedding cache's first pass", model_call.line)
        passes[0] = {"keyset": keyset}
        ct["passes"] = passes
        if "save_prefix" not in ct:
            raise Refusal("a continuous-training script that never calls model.save_params_to_files(prefix) after "
                          "its passes", model_call.line)
        if hmem is not None:
            ct["hmem_cache"] = hmem
        spec["continuous_training"] = ct
        if after[:2] != ["summary", "graph_to_json"]:
            raise Refusal("continuous-training scripts are generated with summary() then graph_to_json() before "
                          "the first fit", model_call.line)
        after[:] = ["summary", "graph_to_json", "fit"]

    # ---- helpers ---------------------------------------------------------------------------------------------------
    def _once(self, seen: list[str], what: str, call: Call) -> None:
        if what in seen:
            raise Refusal(f"a second hugectr.{call.func}: one model per file", call.line)
        seen.append(what)

    def _after(self, seen: list[str], what: str, call: Call, compiled: bool, then: list | None = None) -> None:
        then = then or []
        if what in seen or what in self.before_compile:
            raise Refusal(f"model.{what} is called twice; the spec has one of each", call.line)
        if not compiled and what not in ("graph_to_json", "summary"):
            raise Refusal(f"model.{what} before model.compile()", call.line)
        if then:
            raise Refusal(f"model.{what} after model.{then[-1]['method']}: the spec calls further Model methods "
                          "last", call.line)
        if not compiled:
            if what in self.before_compile:
                raise Refusal(f"model.{what} is called twice; the spec has one of each", call.line)
            self.before_compile.append(what)   # summary, graph_to_json may run before compile (graph_analysis once)
            return
        seen.append(what)

    def solver(self, call: Call) -> dict:
        kw = kwargs_of(call)
        out: dict = {}
        extra: dict = {}
        for k, v in kw.items():
            if k in SOLVER_TYPED:
                out[k] = spec_value(v, call, k)
            elif k == "i64_input_key":
                self.i64 = bool(spec_value(v, call, k))
            elif k == "model_name":
                name = spec_value(v, call, k)
                if not isinstance(name, str) or not name.isidentifier():
                    raise Refusal(f"CreateSolver(model_name={name!r}) is not a valid identifier", call.line)
                self.name = name
                out["model_name"] = True
            else:
                extra[k] = spec_value(v, call, k)
        if "vvgpu" in out:
            out["vvgpu"] = [list(node) for node in out["vvgpu"]]
        if extra:
            out["args"] = extra
        return out

    i64 = False

    def reader(self, call: Call) -> dict:
        kw = kwargs_of(call)
        out: dict = {}
        extra: dict = {}
        fmt = kw.pop("data_reader_type", None)
        if fmt is None:
            raise Refusal("DataReaderParams without data_reader_type", call.line)
        member = _enum_member(fmt, "DataReaderType_t", call, "data_reader_type")
        if member not in READER_FORMATS:
            raise Refusal(f"DataReaderType_t.{member} readers have no spec field yet", call.line)
        out["format"] = READER_FORMATS[member]
        source = spec_value(kw.pop("source", None), call, "source")
        if isinstance(source, str):
            source = [source]
        if not source:
            raise Refusal("DataReaderParams without source", call.line)
        out["train"] = source
        ev = spec_value(kw.pop("eval_source", None), call, "eval_source")
        if not isinstance(ev, str):
            raise Refusal("DataReaderParams without an eval_source string", call.line)
        out["eval"] = ev
        if "check_type" in kw:
            out["check_type"] = _enum_member(kw.pop("check_type"), "Check_t", call, "check_type")
        elif _required("DataReaderParams", "check_type", self.release):
            # The source would stop with a TypeError; the generated script, which passes it, would not be its calls.
            raise Refusal(f"hugectr.DataReaderParams without check_type, which HugeCTR {self.release} requires "
                          "(the source stops there with a TypeError)", call.line,
                          "pass check_type=hugectr.Check_t.Non (Parquet) or Check_t.Sum")
        if "slot_size_array" in kw:
            self.slot_sizes = [int(x) for x in spec_value(kw.pop("slot_size_array"), call, "slot_size_array")]
            if out["format"] != "parquet":
                out["slot_size_array"] = True
        elif out["format"] == "parquet":
            out["slot_size_array"] = False
        if "num_workers" in kw:
            out["num_workers"] = spec_value(kw.pop("num_workers"), call, "num_workers")
        for k, v in kw.items():
            extra[k] = spec_value(v, call, k)
        if extra:
            out["args"] = extra
        return out

    slot_sizes: list[int] | None = None

    def optimizer(self, call: Call) -> dict:
        kw = kwargs_of(call)
        out: dict = {}
        extra: dict = {}
        if "optimizer_type" in kw:
            out["type"] = _enum_member(kw.pop("optimizer_type"), "Optimizer_t", call, "optimizer_type")
        else:
            out["type"] = "Adam"
            self.assumptions.append((call.line, "CreateOptimizer without optimizer_type: HugeCTR's default Adam"))
        if "update_type" in kw:
            out["update_type"] = _enum_member(kw.pop("update_type"), "Update_t", call, "update_type")
        for k, v in kw.items():
            if k in OPTIMIZER_TYPED:
                out[k] = spec_value(v, call, k)
            else:
                extra[k] = spec_value(v, call, k)
        if extra:
            out["args"] = extra
        return out

    def embedding(self, call: Call) -> dict:
        kw = kwargs_of(call)
        out: dict = {}
        extra: dict = {}
        name = spec_value(kw.pop("sparse_embedding_name", None), call, "sparse_embedding_name")
        bottom = spec_value(kw.pop("bottom_name", None), call, "bottom_name")
        if not isinstance(name, str) or not isinstance(bottom, str):
            raise Refusal("SparseEmbedding needs sparse_embedding_name and bottom_name strings", call.line)
        out["name"], out["input"] = name, bottom
        if "embedding_type" in kw:
            out["embedding_type"] = _enum_member(kw.pop("embedding_type"), "Embedding_t", call, "embedding_type")
        else:
            raise Refusal("SparseEmbedding without embedding_type", call.line)
        for k in ("workspace_size_per_gpu_in_mb", "embedding_vec_size", "combiner"):
            if k in kw:
                out[k] = spec_value(kw.pop(k), call, k)
        if isinstance(out.get("combiner"), int):
            out["combiner"] = {0: "sum", 1: "mean"}.get(out["combiner"], out["combiner"])
        if "slot_size_array" in kw:
            sizes = [int(x) for x in spec_value(kw.pop("slot_size_array"), call, "slot_size_array")]
            self.embedding_sizes.append((bottom, sizes, call.line))
            out["slot_size_array"] = True
        opt = kw.pop("optimizer", None)
        if opt is None:
            out["optimizer"] = "default"
        elif not (isinstance(opt, Obj) and opt.type == "CreateOptimizer"):
            raise Refusal(f"SparseEmbedding(optimizer={value_repr(opt)}): only the model's optimizer object",
                          call.line)
        for k, v in kw.items():
            extra[k] = spec_value(v, call, k)
        if extra:
            out["args"] = extra
        return out

    @property
    def embedding_sizes(self) -> list:
        if not hasattr(self, "_emb_sizes"):
            self._emb_sizes: list = []
        return self._emb_sizes

    def layer(self, call: Call) -> dict:
        kw = kwargs_of(call)
        t = kw.pop("layer_type", None)
        member = _enum_member(t, "Layer_t", call, "layer_type")
        bottoms = spec_value(kw.pop("bottom_names", None), call, "bottom_names")
        tops = spec_value(kw.pop("top_names", None), call, "top_names")
        if not isinstance(bottoms, list) or not isinstance(tops, list):
            raise Refusal(f"DenseLayer {member} without bottom_names / top_names lists", call.line)
        out: dict = {"type": member, "bottom": bottoms[0] if len(bottoms) == 1 else bottoms,
                     "top": tops[0] if len(tops) == 1 else tops}
        for k, v in kw.items():
            val = spec_value(v, call, k)
            if isinstance(val, str) and "." in val and isinstance(v, Enum):
                val = v.member  # DenseLayer enum arguments are written by member (the builder knows their types)
            elif isinstance(v, (list, tuple)) and v and all(isinstance(x, Enum) for x in v):
                val = [x.member for x in v]   # activations=[Activation_t.Relu, ...]
            out[k] = val
        return out

    def group_layer(self, call: Call) -> dict:
        kw = kwargs_of(call)
        member = _enum_member(kw.pop("group_layer_type", None), "GroupLayer_t", call, "group_layer_type")
        bottoms = spec_value(kw.pop("bottom_name_list", kw.pop("bottom_name", None)), call, "bottom_name_list")
        tops = spec_value(kw.pop("top_name_list", None), call, "top_name_list")
        if isinstance(bottoms, str):
            raise Refusal("GroupDenseLayer(bottom_name=<one name>) (3.3's form) has no spec field; 3.3.1 and later "
                          "take bottom_name_list", call.line)
        out: dict = {"type": member, "bottom": bottoms[0] if len(bottoms) == 1 else bottoms, "top": tops,
                     "num_outputs": spec_value(kw.pop("num_outputs", None), call, "num_outputs")}
        if "last_act_type" in kw:
            out["last_act_type"] = _enum_member(kw.pop("last_act_type"), "Activation_t", call, "last_act_type")
        if kw:
            raise Refusal(f"GroupDenseLayer({next(iter(kw))}=...) has no spec field", call.line)
        return out

    def fit(self, call: Call) -> dict:
        kw = kwargs_of(call)
        out: dict = {}
        extra: dict = {}
        for k, v in kw.items():
            if k in FIT_TYPED:
                out[k] = spec_value(v, call, k)
            else:
                extra[k] = spec_value(v, call, k)
        if "max_iter" not in out and "num_epochs" not in out:
            out["max_iter"] = 2000  # Model.fit's default (hugectr.md §1.9)
        if extra:
            out["args"] = extra
        return out

    def _solver_mode(self, spec: dict) -> None:
        t = spec.get("training", {})
        solver = spec.setdefault("solver", {})
        if t.get("num_epochs") and "max_iter" not in t and solver.get("repeat_dataset", True) is True:
            pass  # HugeCTR refuses this; the builder reports it with the line of the spec

    def input(self, call: Call, spec: dict, embeddings: list[dict]) -> Features:
        kw = kwargs_of(call)
        line = call.line
        params = kw.pop("data_reader_sparse_param_array", None)
        if not isinstance(params, list) or not all(isinstance(p, Call) and p.func == "DataReaderSparseParam"
                                                   for p in params):
            raise Refusal("Input needs data_reader_sparse_param_array=[hugectr.DataReaderSparseParam(...), ...]",
                          line)
        labels: list[str]
        label_dim = 1
        if "label_names" in kw:
            labels = spec_value(kw.pop("label_names"), call, "label_names")
            dims = spec_value(kw.pop("label_dims", [1] * len(labels)), call, "label_dims")
            if any(d != 1 for d in dims):
                raise Refusal(f"label_dims {dims}: only labels of dimension 1 have a spec field", line)
        else:
            labels = [spec_value(kw.pop("label_name", "label"), call, "label_name")]
            label_dim = spec_value(kw.pop("label_dim", 1), call, "label_dim")
        dense_dim = spec_value(kw.pop("dense_dim", 0), call, "dense_dim")
        dense_name = spec_value(kw.pop("dense_name", "dense"), call, "dense_name")
        if kw:
            k = next(iter(kw))
            raise Refusal(f"Input({k}=...) has no spec field yet", line)
        inp: dict = {}
        if len(labels) == 1:
            inp["label_name"] = labels[0]
            if label_dim != 1:
                inp["label_dim"] = label_dim
        inp["dense_name"] = dense_name
        sparse = []
        slot_total = 0
        slots_per_input = []
        for p in params:
            pk = kwargs_of(p)
            name = spec_value(pk.get("top_name"), p, "top_name")
            nnz = spec_value(pk.get("nnz_per_slot", 1), p, "nnz_per_slot")
            fixed = spec_value(pk.get("is_fixed_length", False), p, "is_fixed_length")
            slot_num = spec_value(pk.get("slot_num"), p, "slot_num")
            if not isinstance(slot_num, int):
                raise Refusal("DataReaderSparseParam without slot_num", p.line)
            entry: dict = {"name": name, "nnz_per_slot": nnz, "is_fixed_length": bool(fixed)}
            sparse.append(entry)
            slots_per_input.append((name, slot_num, nnz))
            slot_total += slot_num
        # Column names: C1..Cn over all slots in order, I1..In for dense, the labels as written.
        cols = [f"C{i + 1}" for i in range(slot_total)]
        pos = 0
        if len(sparse) > 1:
            for entry, (_, n, _) in zip(sparse, slots_per_input):
                entry["columns"] = cols[pos:pos + n]
                pos += n
        inp["sparse"] = sparse
        spec["input"] = inp
        if len(labels) > 1:
            spec["features"] = {"label": labels}
        cards = self._cardinalities(slots_per_input, slot_total, line)
        dtype = "int64" if self.i64 else "int32"
        categorical = []
        pos = 0
        for _name, n, nnz in slots_per_input:
            for k in range(n):
                width = nnz[k] if isinstance(nnz, list) else nnz
                card = cards[pos] if cards else None
                categorical.append(Column(cols[pos], dtype, cardinality=card if card else None,
                                          multi_hot=width > 1, max_len=width if width > 1 else None))
                pos += 1
        continuous = tuple(Column(f"I{i + 1}", "float32") for i in range(int(dense_dim)))
        label_cols = tuple(Column(n, "float32") for n in labels)
        if self.i64:
            spec.setdefault("solver", {})
        return Features(categorical=tuple(categorical), continuous=continuous, labels=label_cols,
                        source_kind="imported", provenance=f"imported from {self.source_label}")

    def _cardinalities(self, inputs, total: int, line: int) -> list[int] | None:
        cards = self.slot_sizes
        for bottom, sizes, eline in self.embedding_sizes:
            pos = 0
            for name, n, _ in inputs:
                if name == bottom:
                    if len(sizes) != n:
                        raise Refusal(f"SparseEmbedding slot_size_array has {len(sizes)} entries for {n} slots",
                                      eline)
                    if cards is None:
                        cards = [0] * total
                    if cards[pos:pos + n] != sizes and any(cards[pos:pos + n]):
                        raise Refusal("SparseEmbedding slot_size_array differs from the reader's", eline)
                    cards = [*cards[:pos], *sizes, *cards[pos + n:]]
                pos += n
        if cards is not None and len(cards) != total:
            raise Refusal(f"slot_size_array has {len(cards)} entries for {total} slots", line)
        return cards


def _writes_no_weights(training: dict, then: list[dict]) -> bool:
    """Whether the imported fit writes no snapshot and nothing saves the weights after it (then the generated script
    must not save them either: ``training.save_weights: false``)."""
    max_iter, snapshot = training.get("max_iter"), training.get("snapshot", 10000)
    if not isinstance(max_iter, int) or not isinstance(snapshot, int) or "num_epochs" in training:
        return False
    writes = snapshot > 0 and (max_iter - 1) // snapshot > 0
    return not writes and not any(entry["method"] == "save_params_to_files" for entry in then)


def _reader_check(rc: dict, model_call: Call) -> dict:
    """The calls made after get_data_reader_*() -> reader_check: the shortest run of calls they repeat."""
    calls = rc["calls"]
    if not calls:
        raise Refusal(f"model.get_data_reader_{rc['reader']}() and no batch is read from it", model_call.line)
    n = len(calls)
    period = next(p for p in range(1, n + 1) if n % p == 0 and calls == calls[:p] * (n // p))
    return {"reader": rc["reader"], "batches": n // period, "each_batch": calls[:period]}
