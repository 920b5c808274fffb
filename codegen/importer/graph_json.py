"""A graph JSON written by HugeCTR's ``model.graph_to_json`` -> spec + features lock (hugectr.md §2).

The JSON is read field by field into the spec fields that make ``ctrgen generate`` write it again: the Data layer ->
``input`` and the lock's columns (C1..Cn, I1..In, the labels as written), embedding layers -> ``embeddings`` (with
``slot_size_array`` -> the lock's cardinalities), the embeddings' optimizer block -> ``optimizer`` (float32 values
back to the shortest decimal that widens to them), dense layers -> an explicit ``model.layers`` list without the
Slice layers HugeCTR's graph_analysis() inserted (§2.7), ``max_vocabulary_size_global`` -> the GPU count of
``solver.vvgpu`` (§2.8 inverted), ``model_name`` -> ``solver.model_name``.

Nothing in the JSON names the data, the solver's batch sizes or the training loop: those get placeholders, listed in
the result's assumptions. The release is read from the fields that differ between releases (§2.9) unless given.

Every candidate spec is generated in memory and its JSON compared with the imported bytes: an import either
reproduces the file byte for byte or is refused with one line naming the first field that differs.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Located, Problem, UserError
from ..features import Column, Features
from ..hugectr import versions as V
from ..hugectr.graph_reader import MISSING as _MISSING, parse_graph_text, position, show as _show
from .result import _NAME, ImportResult, _finish, default_name
from .graph_fields import Bad, Misfit, decimal_of_f32  # noqa: F401 (decimal_of_f32 re-exported)
from .graph_layers import _bottoms, undo_auto_slices
from .graph_read import Reading, read_document
from .to_spec import Imported


def _prechecks(r: Reading, p: V.Profile) -> None:
    """The fields that tell releases apart (hugectr.md §2.9), checked before anything is built."""
    rel = p.name
    if r.model_name is not None and not p.has("model_name"):
        raise Misfit("model_name", f"HugeCTR {rel} writes no model_name ({V.BEHAVIOUR['model_name'].describe()} "
                                   "does)")
    typed = "type" in r.sparse[0].json
    if typed != p.has("sparse_type_key"):
        span = V.BEHAVIOUR["sparse_type_key"].describe()
        raise Misfit("layers[0].sparse[0].type", f"HugeCTR {rel} writes a sparse input's \"type\"; {span} writes it"
                     if not typed else f"HugeCTR {rel} writes no sparse-input \"type\" ({span} does)")
    if r.label_arrays and not p.has("multi_label"):
        raise Misfit("layers[0].label", f"several labels; HugeCTR {rel} takes one "
                                         f"({V.BEHAVIOUR['multi_label'].describe()} takes several)")
    if (msg := p.missing(V.OPTIMIZERS, r.optimizer_type, "optimizer")) is not None:
        raise Misfit(f"layers[{r.embeddings[0]['index']}].optimizer.type", msg)
    for layer in r.layers:
        w = f"layers[{layer['index']}]"
        if (msg := p.missing(V.LAYERS, layer["type"], "layer type")) is not None:
            raise Misfit(f"{w}.type", msg)
        if layer["type"] == "Concat" and ("axis" in layer["json"]) != p.has("concat_axis"):
            span = V.BEHAVIOUR["concat_axis"].describe()
            raise Misfit(f"{w}.axis", f"HugeCTR {rel} writes no Concat \"axis\" ({span} does)"
                         if "axis" in layer["json"] else f"HugeCTR {rel} writes a Concat \"axis\" ({span})")
        if layer["type"] == "Softmax" and ("factor" in layer["json"]) != p.has("softmax_factor_json"):
            raise Misfit(f"{w}.factor", f"HugeCTR {rel} writes {'no' if 'factor' in layer['json'] else 'a'} Softmax "
                                        "\"factor\" (written from HugeCTR 3.9)")
    if p.has("auto_slice"):
        uses: dict[str, list[int]] = {}
        for layer in r.layers:
            for b in _bottoms(layer):
                uses.setdefault(b, []).append(layer["index"])
        for tensor, where in uses.items():
            if len(where) > 1:
                raise Misfit(f"layers[{where[1]}].bottom",
                             f"tensor {tensor!r} feeds {len(where)} layers (layers {', '.join(map(str, where))}); "
                             f"HugeCTR {rel} would have inserted a Slice for it ({V.BEHAVIOUR['auto_slice'].describe()}"
                             " does)")


def gpu_count(r: Reading, p: V.Profile) -> int | None:
    """The GPUs in vvgpu that make every embedding's max_vocabulary_size_global (hugectr.md §2.8) come out: the
    written value divided by the release's per-GPU value for the written workspace. None: any count fits."""
    found: int | None = None
    first_at = ""
    for e in r.embeddings:
        w = f"layers[{e['index']}].sparse_embedding_hparam.max_vocabulary_size_global"
        per = V.max_vocabulary_size_per_gpu(p, e["ws"], e["vec"], r.optimizer_type, r.update_type)
        if per == 0:
            if e["vocab"] != 0:
                raise Misfit(w, f"{e['vocab']} cannot come from workspace_size_per_gpu_in_mb {e['ws']}, which gives "
                                f"0 rows per GPU at HugeCTR {p.name}", 1)
            continue
        formula = _formula(p, e["ws"], e["vec"], r.optimizer_type, r.update_type)
        if e["vocab"] % per or e["vocab"] == 0:
            raise Misfit(w, f"{e['vocab']} is not a whole number of GPUs times {per} ({formula}); the value cannot "
                            f"be inverted at HugeCTR {p.name}", 1)
        g = e["vocab"] // per
        if found is not None and g != found:
            raise Misfit(w, f"{e['vocab']} = {g} GPUs x {per}, but {first_at} gives {found} GPUs; one solver has one "
                            "GPU count", 1)
        found, first_at = g, f"layers[{e['index']}]"
    return found


def _formula(p: V.Profile, ws: int, vec: int, opt: str, update: str) -> str:
    if not p.has("vocab_optimizer_states"):
        return f"HugeCTR {p.name}: {ws}*1024*1024 // (4*{vec}) per GPU"
    k = V.OPTIMIZER_STATES[opt] + (1 if opt == "Adam" and update == "LazyGlobal" else 0)
    return f"HugeCTR {p.name}: {ws}*1024*1024 // ((1+{k})*4*{vec}) per GPU for {opt}"


@dataclass
class Attempt:
    release: str
    result: ImportResult | None = None
    misfit: Misfit | None = None
    notes: list[str] = field(default_factory=list)


def _spec_for(r: Reading, p: V.Profile, name: str, layers: list[dict], gpus: int, label: str) -> Imported:
    notes: list[str] = []
    spec: dict = {"version": 1, "name": name, "hugectr_version": p.name}
    total = r.graph.slots
    cols = [f"C{i + 1}" for i in range(total)]
    start = {}
    pos = 0
    for s in r.sparse:
        start[s.top] = pos
        pos += s.slot_num
    cards: list[int | None] = [None] * total
    for e in r.embeddings:
        if e["sizes"] is None or e["input"] not in start:
            continue
        s = next(s for s in r.sparse if s.top == e["input"])
        w = f"layers[{e['index']}].sparse_embedding_hparam.slot_size_array"
        if len(e["sizes"]) != s.slot_num:
            raise Bad(w, f"{len(e['sizes'])} entries for the {s.slot_num} slots of {e['input']!r}")
        a = start[e["input"]]
        for k, size in enumerate(e["sizes"]):
            if cards[a + k] is not None and cards[a + k] != size:
                raise Bad(w, f"differs from another embedding's slot_size_array of {e['input']!r}")
            cards[a + k] = size
    one_hot = any(e["type"] == "LocalizedSlotSparseEmbeddingOneHot" for e in r.embeddings)
    known = all(c is not None for c in cards)
    fmt = "raw" if one_hot else "parquet" if known else "norm"
    spec["data"] = {"format": fmt, "train": ["./train/_file_list.txt"], "eval": "./valid/_file_list.txt"}
    notes.append(f"data: {fmt} reader with placeholder file lists ./train/_file_list.txt and ./valid/_file_list.txt "
                 "(a graph JSON names no data; " + ("slot_size_array gives every cardinality)" if fmt == "parquet" else
                 "not every slot has a cardinality)" if fmt == "norm" else "the one-hot embedding needs Raw data)"))
    solver: dict = {}
    if gpus > 1:
        solver["vvgpu"] = [list(range(gpus))]
        if 2048 % gpus:
            solver["batchsize"] = solver["batchsize_eval"] = 2048 * gpus
        notes.append(f"solver.vvgpu: {gpus} GPUs on one node (max_vocabulary_size_global = {gpus} x the per-GPU "
                     "value; the JSON does not say how they are spread over nodes)")
    if r.model_name is not None:
        solver["model_name"] = True
    if any(layer["type"] == "FusedInnerProduct" for layer in layers):
        solver["use_mixed_precision"] = True
        if p.has("solver_scaler_check"):     # CreateSolver refuses scaler 1.0 (its default) in mixed precision
            solver["scaler"] = 1024.0
        notes.append("solver.use_mixed_precision: FusedInnerProduct layers run in half precision only")
    if solver:
        spec["solver"] = solver
    spec["optimizer"] = dict(r.optimizer)
    inp: dict = {}
    if not r.label_arrays:
        inp["label_name"] = r.labels[0]
    inp["dense_name"] = r.dense_name
    sparse = []
    for s in r.sparse:
        nnz = s.nnz_per_slot[0] if len(set(s.nnz_per_slot)) == 1 else list(s.nnz_per_slot)
        entry: dict = {"name": s.top, "nnz_per_slot": nnz, "is_fixed_length": s.is_fixed_length}
        if len(r.sparse) > 1:
            entry["columns"] = cols[start[s.top]:start[s.top] + s.slot_num]
        sparse.append(entry)
    inp["sparse"] = sparse
    spec["input"] = inp
    if r.label_arrays:
        spec["features"] = {"label": list(r.labels)}
    embeddings = []
    for e in r.embeddings:
        entry = {"name": e["name"], "input": e["input"], "embedding_type": e["type"],
                 "embedding_vec_size": e["vec"], "combiner": e["combiner"],
                 "workspace_size_per_gpu_in_mb": e["ws"]}
        if e["sizes"] is not None:
            entry["slot_size_array"] = True
        embeddings.append(entry)
    spec["embeddings"] = embeddings
    spec["model"] = {"preset": "layers", "layers": [
        {"type": layer["type"], "bottom": layer["bottom"], "top": layer["top"], **layer["params"]} for layer in layers]}
    spec["triton"] = {"enabled": False}
    dtype = "int64" if fmt == "parquet" else "int32"
    categorical = []
    for s in r.sparse:
        for k in range(s.slot_num):
            i = start[s.top] + k
            width = s.nnz_per_slot[k]
            categorical.append(Column(cols[i], dtype, cardinality=cards[i], multi_hot=width > 1,
                                      max_len=width if width > 1 else None))
    features = Features(categorical=tuple(categorical),
                        continuous=tuple(Column(f"I{i + 1}", "float32") for i in range(r.dense_dim)),
                        labels=tuple(Column(n, "float32") for n in r.labels), source_kind="imported",
                        provenance=f"imported from {label}")
    return Imported(spec, features, [(None, n) for n in notes])


def regenerate(result: ImportResult) -> str:
    """The graph JSON ``ctrgen generate`` writes for an import's spec and lock (built as generate builds it)."""
    return _regenerate(result, placed=True)


def _regenerate(result: ImportResult, *, placed: bool) -> str:
    """:func:`regenerate` from the texts in memory: spec and lock are parsed from exactly the text their files would
    read back as (UTF-8, LF line ends), at a path where no file is. ``placed=False``: a build problem comes
    without line and column, so a spec the release cannot build is not parsed again by the round-trip YAML reader
    (for positions) only to be refused."""
    from ..features import lock_from_text
    from ..inputs import decode
    from ..model.build import build_job
    from ..render.graph_json import render_graph_json
    from ..specfile.context import open_spec

    folder = Path(tempfile.gettempdir()) / "ctrgen-import"        # never created: nothing is read or written there
    spec, lock = folder / f"{result.name}.yaml", folder / f"{result.name}.features.lock.json"

    def as_read(text: str, path: Path, what: str) -> str:       # inputs.read_text of a file written with ``text``
        return decode(text.encode("utf-8"), path, what).replace("\r\n", "\n").replace("\r", "\n")

    ctx = open_spec(spec, as_read(result.spec_text, spec, "spec"))
    if not placed:
        ctx = dataclasses.replace(ctx, loaded=_unplaced()(ctx.loaded.spec, ctx.loaded.path, ctx.loaded.text))
    features = lock_from_text(as_read(result.features.lock_text(), lock, "features lock"), lock)
    return render_graph_json(build_job(ctx, features))


@functools.cache
def _unplaced() -> type:
    """A LoadedSpec whose problems have no line and column (spec.load is imported on first use)."""
    from ..specfile.load import LoadedSpec

    class Unplaced(LoadedSpec):
        def where(self, *loc: str | int) -> tuple[int | None, int | None]:
            return None, None

    return Unplaced


def first_difference(a: object, b: object, path: str = "") -> tuple[str, object, object] | None:
    """The first place two parsed JSON documents differ (types included: 1 is not 1.0)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            sub = f"{path}.{k}" if path else k
            if k not in a or k not in b:
                return sub, a.get(k, _MISSING), b.get(k, _MISSING)
            if (d := first_difference(a[k], b[k], sub)) is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            if (d := first_difference(x, y, f"{path}[{i}]")) is not None:
                return d
        if len(a) != len(b):
            return path, a, b
        return None
    if type(a) is type(b) and a == b:
        return None
    return path, a, b


def _byte_difference(raw: bytes, want: bytes) -> str:
    if raw.rstrip(b"\r\n") == want and raw != want:
        return "the file ends with a newline; graph_to_json writes none after the last '}'"
    if b"\r\n" in raw and raw.replace(b"\r\n", b"\n") == want:
        return "the file has CRLF line ends; graph_to_json writes LF"
    if raw.startswith(b"\xef\xbb\xbf"):
        return "the file starts with a byte-order mark; graph_to_json writes none"
    at = next((i for i, (x, y) in enumerate(zip(raw, want)) if x != y), min(len(raw), len(want)))
    line = raw[:at].count(b"\n") + 1
    return (f"the same content laid out differently from graph_to_json (sorted keys, 2-space indent, no final "
            f"newline), first at line {line}")


def _attempt(r: Reading, release: str, name: str, raw: bytes, doc: object, path: Path, label: str) -> Attempt:
    p = V.profile(release)
    assert p is not None
    att = Attempt(release)
    try:
        _prechecks(r, p)
        gpus = gpu_count(r, p) or 1
    except Misfit as exc:
        att.misfit = exc
        return att
    variants: list[tuple[list[dict], list[str]]] = [(r.layers, [])]
    if p.has("auto_slice"):
        undone, dropped = undo_auto_slices(r.layers)
        if dropped:
            variants.insert(0, (undone, dropped))
    last: Misfit | None = None
    for layers, dropped in variants:
        imported = _spec_for(r, p, name, layers, gpus, label)
        if dropped:
            imported.assumptions.append((None, "model.layers: the Slice layers of " + ", ".join(
                repr(t) for t in dropped) + " left out (HugeCTR's graph_analysis inserts them)"))
        try:
            result = _finish(path, imported, label, [n for _, n in imported.assumptions])
            text = _regenerate(result, placed=False)
        except UserError as exc:
            problems = exc.problems
            if len(problems) > 1:       # the first by position, as generate would list them
                try:
                    regenerate(result)
                except UserError as placed:
                    problems = placed.problems
            first = sorted(problems, key=Problem.sort_key)[0]
            where = f"{first.field}: " if first.field else ""
            last = Misfit("", f"HugeCTR {release} cannot build it: {where}{first.message}", 2)
            continue
        if text.encode("utf-8") == raw:
            att.result = result
            return att
        diff = first_difference(doc, json.loads(text))
        if diff is None:
            last = Misfit("", _byte_difference(raw, text.encode("utf-8")), 4)
        else:
            where, got, want = diff
            last = Misfit(where, f"the JSON has {_show(got)}, HugeCTR {release} writes {_show(want)} for this model",
                          3)
    att.misfit = last
    return att


def import_graph_json(path: Path, text: str, hugectr_version: str | None, name: str | None) -> ImportResult:
    try:
        doc = parse_graph_text(text, path)      # the shared reader's loading: nesting checked before parsing
    except Located as exc:                      # invalid JSON, with its position
        raise UserError([Problem(str(path), "not valid JSON: " + exc.message.removeprefix("invalid JSON: "), "",
                                 exc.line, exc.col, "give the file model.graph_to_json wrote")]) from None
    try:
        reading = read_document(doc, path)
    except Located as exc:
        raise refusal(path, text, exc.message, exc.field, exc.fix) from None
    if reading.model_name is not None:
        if not _NAME.match(reading.model_name):
            raise refusal(path, text, f"model_name {reading.model_name!r} is not a valid identifier; ctrgen writes the "
                                      "spec name as model_name", "model_name")
        if name is not None and name != reading.model_name:
            raise refusal(path, text, f"--name {name!r} differs from the JSON's model_name {reading.model_name!r}, "
                                      "which ctrgen writes as the spec name", "model_name",
                          f"omit --name, or pass --name {reading.model_name}")
    name = name or reading.model_name or default_name(path)
    raw = path.read_bytes()
    label = path.name
    if hugectr_version is not None:
        if hugectr_version not in V.SUPPORTED:
            raise UserError.one(path, f"unsupported HugeCTR release {hugectr_version!r}", field="--hugectr-version",
                                fix="use one of " + ", ".join(V.SUPPORTED) + ", or omit it")
        att = _run(reading, hugectr_version, name, raw, doc, path, label, text)
        if att.result is None:
            assert att.misfit is not None
            fits = [v for v in V.SUPPORTED if v != hugectr_version
                    and _run(reading, v, name, raw, doc, path, label, text).result is not None]
            fix = f"omit --hugectr-version (the JSON fits HugeCTR {_ranges(fits)})" if fits else ""
            raise refusal(path, text, f"--hugectr-version {hugectr_version}: {att.misfit.message}",
                          att.misfit.field, fix)
        return att.result
    attempts = [_run(reading, v, name, raw, doc, path, label, text) for v in V.SUPPORTED]
    fits = [a for a in attempts if a.result is not None]
    if not fits:
        closest = max(reversed(attempts), key=lambda a: a.misfit.stage if a.misfit else 0)
        assert closest.misfit is not None
        raise refusal(path, text, f"no supported HugeCTR release ({', '.join(V.SUPPORTED)}) writes this JSON; "
                                  f"closest {closest.release}: {closest.misfit.message}", closest.misfit.field)
    chosen = fits[-1]
    assert chosen.result is not None
    if len(fits) > 1:
        chosen.result.assumptions.insert(0, f"release {chosen.release} assumed: the JSON fits HugeCTR "
                                            f"{_ranges([a.release for a in fits])} "
                                            f"(pass --hugectr-version to choose)")
    return chosen.result


def _ranges(releases: list[str]) -> str:
    """'3.6–23.12' for a contiguous run of supported releases, runs joined by ', '."""
    order = list(V.SUPPORTED)
    runs: list[list[str]] = []
    for r in releases:
        if runs and order.index(r) == order.index(runs[-1][-1]) + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}–{run[-1]}" for run in runs)


def _run(reading: Reading, release: str, name: str, raw: bytes, doc: object, path: Path, label: str,
         text: str) -> Attempt:
    try:
        return _attempt(reading, release, name, raw, doc, path, label)
    except Located as exc:
        raise refusal(path, text, exc.message, exc.field, exc.fix) from None


def refusal(path: Path, text: str, message: str, field: str, fix: str = "") -> UserError:
    """The one line of a refused import: the file, the line of ``field`` in it (where the JSON has that field, else
    its nearest enclosing one), the field, the message."""
    line, col = position(text, field)
    return UserError.one(path, message, field=field, line=line, col=col, fix=fix)

