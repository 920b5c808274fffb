"""The embedding collection API of a script -> the spec's ``embedding_collection:`` section.

Collects, in order, the EmbeddingCollectionConfig / EmbeddingPlanner the script builds, its ``embedding_lookup``
calls (each with the EmbeddingTableConfig / EmbeddingTablePlaceHolder it reads), its ``shard`` /
``create_embedding_collection`` call and the ``model.add`` of the result. Tables are listed in the order the lookups
first use them; a table built with the same arguments twice is one table.
"""

from __future__ import annotations

import json

from .calls import Call, Obj, value_repr

CONSTRUCTORS = ("EmbeddingCollectionConfig", "EmbeddingPlanner")
TABLES = ("EmbeddingTableConfig", "EmbeddingTablePlaceHolder")
LOOKUPS = tuple(f"{c}.embedding_lookup" for c in CONSTRUCTORS)
SHARDS = ("EmbeddingCollectionConfig.shard", "EmbeddingPlanner.create_embedding_collection")
# What model.add takes: the config itself (4.2+), the planner's collection (3.7 - 4.1).
ADDED = ("EmbeddingCollectionConfig", "EmbeddingPlanner.create_embedding_collection")
TYPED_TABLE_ARGS = ("name", "table_id", "id_space", "max_vocabulary_size", "ev_size")
COMBINERS = ("sum", "average", "concat")


class Collector:
    def __init__(self, refusal, kwargs_of, spec_value, release: str):
        self.Refusal, self.kwargs_of, self.spec_value, self.release = refusal, kwargs_of, spec_value, release
        self.ctor: Call | None = None
        self.tables: list[dict] = []
        self.keys: list[str] = []
        self.lookups: list[dict] = []
        self.shard: dict | None = None
        self.added_line: int | None = None

    @staticmethod
    def handles(call: Call) -> bool:
        return call.func in (*CONSTRUCTORS, *TABLES, *LOOKUPS, *SHARDS)

    @staticmethod
    def is_added(value: object) -> bool:
        return isinstance(value, Obj) and value.type in ADDED

    def _exists(self, call: Call) -> None:
        from ..hugectr import api

        try:
            msg = api.missing(call.func, self.release)
        except api.ApiError as exc:
            msg = str(exc)
        if msg:
            raise self.Refusal(f"hugectr.{call.func}: {msg}", call.line, "import it for a release that has it")

    def take(self, call: Call) -> None:
        f = call.func
        if f in TABLES:
            return  # a table is built first and read where a lookup uses it
        self._exists(call)
        if f in CONSTRUCTORS:
            if self.ctor is not None:
                raise self.Refusal(f"a second hugectr.{f}: the spec has one embedding collection", call.line)
            self.ctor = call
            return
        if self.ctor is None or f.split(".")[0] != self.ctor.func:
            raise self.Refusal(f"hugectr.{f} on a collection this script does not build", call.line)
        if self.added_line is not None:
            raise self.Refusal(f"{f.split('.')[-1]} after model.add of the embedding collection", call.line)
        if f in LOOKUPS:
            self.lookups.append(self.lookup(call))
        elif self.shard is not None:
            raise self.Refusal(f"{f.split('.')[-1]} is called twice", call.line)
        else:
            self.shard = {k: self.spec_value(v, call, k) for k, v in self.kwargs_of(call).items()}

    def add(self, call: Call, layers_before: int) -> None:
        if self.added_line is not None:
            raise self.Refusal("model.add of a second embedding collection", call.line)
        if layers_before:
            raise self.Refusal("model.add of the embedding collection after dense layers: the spec adds it before "
                               "them", call.line)
        if not self.lookups:
            raise self.Refusal("an embedding collection with no embedding_lookup", call.line)
        self.added_line = call.line

    def lookup(self, call: Call) -> dict:
        kw = self.kwargs_of(call)
        table = kw.get("table_config", kw.get("emb_table"))   # 3.7 names it emb_table
        grouped = isinstance(table, list)   # 23.04+: lists of tables, bottoms and combiners, one top
        for t in table if grouped else [table]:
            if not (isinstance(t, Call) and t.func in TABLES):
                raise self.Refusal(f"embedding_lookup(table_config={value_repr(table)}): not a table the script "
                                   "builds", call.line)
            self._exists(t)
        out: dict = {"table": [self.table(t) for t in table] if grouped else self.table(table)}
        for key, arg in (("bottom", "bottom_name"), ("top", "top_name"), ("combiner", "combiner")):
            v = self.spec_value(kw.get(arg), call, arg)
            many = grouped and key != "top"
            if not (isinstance(v, list) and all(isinstance(x, str) for x in v) if many else isinstance(v, str)):
                raise self.Refusal(f"embedding_lookup({arg}={value_repr(kw.get(arg))}): "
                                   f"{'a list of strings' if many else 'a string'} is needed", call.line)
            out[key] = v
        for c in out["combiner"] if grouped else [out["combiner"]]:
            if c not in COMBINERS:
                raise self.Refusal(f"embedding_lookup(combiner={c!r}): one of {', '.join(COMBINERS)}", call.line)
        extra = set(kw) - {"table_config", "emb_table", "bottom_name", "top_name", "combiner"}
        if extra:
            raise self.Refusal(f"embedding_lookup({sorted(extra)[0]}=...) has no spec field", call.line)
        return out

    def table(self, call: Call) -> int:
        kw = {k: self.spec_value(v, call, k) for k, v in self.kwargs_of(call).items()}
        key = json.dumps(kw, sort_keys=True, default=str)
        if key in self.keys:
            return self.keys.index(key)
        entry = {k: kw.pop(k) for k in TYPED_TABLE_ARGS if k in kw}
        for k in ("max_vocabulary_size", "ev_size"):
            if not isinstance(entry.get(k), int):
                raise self.Refusal(f"hugectr.{call.func} without an integer {k}", call.line)
        if isinstance(entry.get("name"), int):
            raise self.Refusal(f"hugectr.{call.func}(name={entry['name']!r}): the name is a string", call.line)
        if kw:
            entry["args"] = kw
        self.keys.append(key)
        self.tables.append(entry)
        return len(self.tables) - 1

    def section(self, model_line: int) -> dict | None:
        """The spec section, or None when the script builds no collection; refuses one that is never added."""
        if self.ctor is None:
            return None
        if self.added_line is None:
            raise self.Refusal(f"hugectr.{self.ctor.func} is built but never added to the model", self.ctor.line)
        out: dict = {}
        args = {k: self.spec_value(v, self.ctor, k) for k, v in self.kwargs_of(self.ctor).items()}
        if args:
            out["args"] = args
        out["tables"] = self.tables
        out["lookups"] = self.lookups
        if self.shard:
            out["shard"] = self.shard
        return out
