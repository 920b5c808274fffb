"""The spec's ``embedding_collection:`` -> the checked :class:`EmbeddingCollection` of the graph, with the shapes of
the tensors its lookups write.

Which calls model.py makes depends on the release (from the API table): ``EmbeddingPlanner`` with
``create_embedding_collection`` in 3.7 - 4.1, ``EmbeddingCollectionConfig`` with ``shard`` from 4.2; tables are
``EmbeddingTablePlaceHolder`` in 3.7 and ``EmbeddingTableConfig`` from 3.8. Every argument is checked against the
target release; one that release lacks is refused naming the releases that have it.

Output shapes follow HugeCTR's ``allocate_ebc_output_helper_for_feature_major`` (HugeCTR/src/pybind/
model_compile.cpp, 24.04; model.cpp from 3.8): each lookup's top is ``(batch, 1, ev_size)``, or
``(batch, 1, max_hotness * ev_size)`` with the concat combiner, where max_hotness is the bottom input's nnz; 3.7
reserves ``(batch, ev_size)``. The batch-major layout (4.3 - 23.02 ``output_layout="batch_major"``) writes one
tensor whose name ctrgen cannot establish, so it is refused.

``graph_to_json`` (model.cpp, 24.04) writes the Input, SparseEmbedding and DenseLayer parameters only: the
collection is left out and its tops feed layers nothing in the file produces. ctrgen does not write such a file.
"""

from __future__ import annotations

from ..hugectr import api as A
from ..hugectr import versions as V
from ..hugectr.arg_types import arg_problem
from .context import BuildContext
from .ir import CONFIG, Args, CollectionTable, EmbeddingCollection, Enum, Lookup, SparseInput, enum_values
from .shapes import Shape

PLANNER = "EmbeddingPlanner"
TYPED_TABLE_ARGS = ("name", "table_id", "id_space", "max_vocabulary_size", "ev_size")
LOC = ("embedding_collection",)


def _missing(func: str, release: str, arg: str | None = None) -> str | None:
    try:
        return A.missing(func, release, arg)
    except A.ApiError as exc:
        return str(exc)


def _enums_in(value: object):
    if isinstance(value, Enum):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _enums_in(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _enums_in(k)
            yield from _enums_in(v)


def build_collection(builder: BuildContext, sparse: list[SparseInput]) -> EmbeddingCollection | None:
    """Check the spec's embedding_collection (problems go to ``builder.fail``); None when there is none or it
    cannot be built."""
    spec = builder.spec.embedding_collection
    if spec is None:
        return None
    release = builder.profile.name
    fails = len(builder.problems)
    _check_model(builder, sparse, release)
    if A.has(CONFIG, release):
        api = CONFIG
    elif A.has(PLANNER, release):
        api = PLANNER
    else:
        builder.fail(LOC, f"the embedding collection API is not in HugeCTR {release}; it exists from "
                          f"{A.first_release(PLANNER)} ({PLANNER}) and from {A.first_release(CONFIG)} ({CONFIG})",
                     fix=f"target HugeCTR {A.first_release(PLANNER)} or later, or use embeddings: (SparseEmbedding)")
        return None

    ctor = _checked(builder, release, api, (*LOC, "args"), spec.args)
    # (a planner of 23.04 and later has no output_layout: its output is feature-major)
    layout = A.given_or_default(ctor, api, "output_layout", release) if A.has(api, release, "output_layout") else None
    if layout not in (None, "feature_major"):
        builder.fail((*LOC, "args", "output_layout"), f"{layout!r}: the batch-major output tensor's name is not "
                     "known to ctrgen, so the layers after it cannot be checked", fix="use feature_major")
    tables = _tables(builder, spec, release)
    lookups = _lookups(builder, spec, sparse, release)
    shard = _shard(builder, spec, api, tables, release)
    if len(builder.problems) > fails:
        return None
    table_arg = A.signature(f"{api}.embedding_lookup", release)[0].name
    return EmbeddingCollection(api, ctor, tuple(tables), tuple(lookups), shard, table_arg)


def _check_model(builder: BuildContext, sparse: list[SparseInput], release: str) -> None:
    """What the rest of the spec must be for a model with an embedding collection."""
    from ..specfile.graph import ExplicitGraph

    if not isinstance(builder.spec.model, ExplicitGraph):
        builder.fail(("model", "preset"), f"preset {builder.spec.model.preset!r} builds on SparseEmbedding outputs; "
                     "a model with an embedding_collection lists its layers", fix="use preset: layers")
    for section in ("continuous_training", "offline_inference"):
        if getattr(builder.spec, section) is not None:
            builder.fail((section,), f"{section} with an embedding_collection is not supported by ctrgen",
                         fix=f"remove {section}")
    if builder.spec.solver.args.get("use_embedding_collection") is not True:
        builder.fail(("solver", "args"), "an embedding_collection trains only with CreateSolver("
                     "use_embedding_collection=True)", fix="add use_embedding_collection: true to solver.args")
    if V.holds("collection_one_slot_inputs", release):
        multi = [s.name for s in sparse if s.slot_num != 1]
        if multi:   # model.cpp add(Input), 23.04+
            builder.fail(("input", "sparse"), f"inputs {multi} have several slots: \"To use embedding collection, "
                         "slots_num should be set to 1 in each sparse_param\"", fix="one sparse input per slot")
    if builder.spec.embeddings:
        builder.fail(("embeddings",), "a model with an embedding_collection has no SparseEmbedding here",
                     fix="move these embeddings into embedding_collection, or remove it")


def _checked(builder: BuildContext, release: str, func: str, where: tuple, args: dict) -> Args:
    """``args`` of ``func`` checked against ``release`` (problems go to ``builder.fail``), in the signature's order."""
    out = []
    for name, value in args.items():
        msg = _missing(func, release, name)
        if msg:
            builder.fail((*where, name), msg, fix="remove it or target a release that has it")
            continue
        why = arg_problem(func, release, name, value)
        if why:
            builder.fail((*where, name), f"{func} argument {name!r}: {why}", fix="give a value of that type")
            continue
        value = enum_values(value)
        for member in _enums_in(value):
            msg = _missing(f"{member.type}.{member.member}", release)
            if msg:
                builder.fail((*where, name), msg, fix="use a member the target release has")
        out.append((name, value))
    given = {k for k, _ in out}
    if len(out) == len(args):   # a misspelled or retired argument is reported once, not as a missing one too
        for p in A.signature(func, release):
            if p.required and p.name not in given:
                builder.fail(where, f"{func} needs {p.name!r} in HugeCTR {release}", fix=f"set {p.name}")
    order = [p.name for p in A.signature(func, release)]
    return tuple(sorted(out, key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))


def _tables(builder: BuildContext, spec, release: str) -> list[CollectionTable]:
    """The tables, each checked as the release's table call."""
    table_func = "EmbeddingTablePlaceHolder" if A.has("EmbeddingTablePlaceHolder", release) else "EmbeddingTableConfig"
    tables = []
    for i, t in enumerate(spec.tables):
        where = (*LOC, "tables", i)
        given = {k: getattr(t, k) for k in TYPED_TABLE_ARGS if getattr(t, k) is not None}
        both = sorted(set(given) & set(t.args))
        if both:
            builder.fail((*where, "args", both[0]), f"{both[0]!r} has its own field; give it there, not under args",
                         fix=f"move it to tables[{i}].{both[0]}")
        args = _checked(builder, release, table_func, where, {**given, **t.args})
        given_args = dict(args)
        label = next((given_args[k] for k in ("name", "table_id", "id_space") if k in given_args), i)
        keys = (int(given_args["min_key"]), int(given_args["max_key"])) if "min_key" in given_args else None  # type: ignore[call-overload]
        tables.append(CollectionTable(table_func, args, rows=t.max_vocabulary_size, ev_size=t.ev_size, label=str(label),
                                      key_range=keys))
    return tables


def _lookups(builder: BuildContext, spec, sparse: list[SparseInput], release: str) -> list[Lookup]:
    """Each lookup with the shape of the tensor it writes."""
    by_input = {s.name: s for s in sparse}
    lookups = []
    tops: set[str] = set()
    for i, lk in enumerate(spec.lookups):
        where = (*LOC, "lookups", i)
        if lk.grouped and not V.holds("collection_grouped_lookup", release):
            builder.fail((*where, "table"), f"the grouped embedding_lookup (lists) is not in HugeCTR {release}; it "
                         "exists in HugeCTR 23.04 and later", fix="one lookup per table")
            continue
        widths = []
        for table, bottom, combiner in lk.parts():
            si = by_input.get(bottom)
            if si is None:
                builder.fail((*where, "bottom"), f'{bottom!r} is not a sparse input (HugeCTR: "Cannot find bottom")',
                             fix=f"use one of {sorted(by_input)}")
                continue
            ev = spec.tables[table].ev_size
            widths.append(ev * max(si.nnz_per_slot) if combiner == "concat" else ev)
        if len(widths) != len(lk.parts()):
            continue
        tops.add(lk.top)
        if lk.grouped:   # batch major: one (batch, sum of widths) tensor (model_compile.cpp, 24.04)
            shape = Shape((sum(widths),))
            lookups.append(Lookup(tuple(lk.table), tuple(lk.bottom), lk.top, tuple(lk.combiner), shape))
            continue
        shape = Shape((1, widths[0])) if V.holds("collection_lookup_3d", release) else Shape((widths[0],))
        lookups.append(Lookup(lk.table, lk.bottom, lk.top, lk.combiner, shape))
    return lookups


def _shard(builder: BuildContext, spec, api: str, tables: list[CollectionTable],
           release: str) -> Args:
    """The shard (or create_embedding_collection) arguments, whose shard_matrix names the tables."""
    shard_func = f"{api}.{'shard' if api == CONFIG else 'create_embedding_collection'}"
    shard: tuple[tuple[str, object], ...] = ()
    if spec.shard or api == PLANNER:
        shard = _checked(builder, release, shard_func, (*LOC, "shard"), spec.shard)
        # shard_strategy entries are (strategy, tables) pairs: kept as tuples, as the samples write them
        shard = tuple((k, [tuple(x) if isinstance(x, list) and len(x) == 2 else x for x in v]
                       if k == "shard_strategy" and isinstance(v, list) else v) for k, v in shard)
    names = [dict(t.args).get("name") for t in tables]
    if api == CONFIG and all(isinstance(n, str) for n in names):
        matrix = dict(shard).get("shard_matrix")  # type: ignore[call-overload]
        if isinstance(matrix, list):
            unknown = sorted({x for row in matrix if isinstance(row, list) for x in row
                              if isinstance(x, str) and x not in names})
            if unknown:
                builder.fail((*LOC, "shard", "shard_matrix"), f"names tables {unknown} that tables does not have",
                             fix="use the tables' names")
    return shard
