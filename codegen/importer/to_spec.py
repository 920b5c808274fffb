"""The hugectr calls of a script -> a spec (a plain mapping the spec loader validates) and its features lock.

Each call maps onto the spec field that makes the generator write it again: CreateSolver -> ``solver``,
DataReaderParams -> ``data``, CreateOptimizer -> ``optimizer``, Input / DataReaderSparseParam -> ``input`` and the
lock's columns (named C1..Cn, I1..In and the label names as written), SparseEmbedding -> ``embeddings``, DenseLayer ->
``model.layers`` (or a preset when the layers are exactly one), compile / summary / graph_to_json / fit ->
``training`` and ``script``. What has no field is refused with its line, never dropped.
"""

from __future__ import annotations

from ..hugectr import versions as V
from ..hugectr.versions import MODEL_METHODS
from .arguments import (PRE_3_2_API, loop_refusal, _VERSION, Imported, Refusal, _as_model, compiled_once_fit, kwargs_of,
                        spec_value, unknown_arguments, unknown_refusal)
from .calls import Call, Obj, Script, value_repr
from .embedding_collection import Collector
from .sections import Sections, _reader_check, _writes_no_weights
from .signatures import POSITIONAL, param_names  # noqa: F401  (POSITIONAL re-exported for compare)

__all__ = ["Imported", "Mapper", "Refusal", "kwargs_of", "spec_value", "unknown_arguments", "unknown_refusal"]


class Mapper(Sections):
    def __init__(self, script: Script, release: str, name: str, source_label: str):
        self.script = script
        self.release = release
        self.name = name
        self.source_label = source_label
        self.assumptions: list[tuple[int | None, str]] = []
        self.before_compile: list[str] = []
        self.ebc = Collector(Refusal, kwargs_of, spec_value, release)
        # Calls with no spec field: collected so that the import names all of them at once, not only the first.
        self.unmapped: list[Refusal] = []

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
            raise loop_refusal(s.loops[0], *(s.loop_calls[0] if s.loop_calls else ([], "")))
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
                    self.unmapped.append(Refusal(f"model.add(hugectr.{layer.func}(...)) has no spec field yet",
                                                 layer.line))
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
                self.unmapped.append(Refusal(f"hugectr.{f}(...) has no spec field yet", call.line,
                                             "remove the call, or file what it should become"))
        if self.unmapped:
            raise self.unmapped[0]   # the importer reports the others with it
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
            default_api = V.default_inference_api(self.release)
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
