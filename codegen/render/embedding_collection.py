"""EmbeddingCollection -> the lines model.py builds it with (templates/hugectr/_embedding_collection.j2).

The published scripts' order: the tables, the collection (EmbeddingCollectionConfig or EmbeddingPlanner), one
embedding_lookup per lookup, the shard plan, then ``model.add``. Values reach the code only through
:mod:`.literals`.
"""

from __future__ import annotations

from ..graph.ir import CONFIG, EmbeddingCollection
from .literals import Code, kwargs


def collection_context(c: EmbeddingCollection | None) -> dict | None:
    if c is None:
        return None
    var = "ebc_config" if c.api == CONFIG else "embedding_planner"
    def table(i: int) -> Code:
        return Code(f"embedding_tables[{int(i)}]")

    def listed(v):   # the grouped form passes lists
        return list(v) if isinstance(v, tuple) else v

    lookups = [kwargs([(c.table_arg, [table(i) for i in lk.table] if isinstance(lk.table, tuple) else table(lk.table)),
                       ("bottom_name", listed(lk.bottom)), ("top_name", lk.top), ("combiner", listed(lk.combiner))])
               for lk in c.lookups]
    return dict(
        tables=[(t.func, kwargs(t.args)) for t in c.tables],
        api=c.api, var=var, args=kwargs(c.args), lookups=lookups,
        shard_method=c.shard_method, shard=kwargs(c.shard) if c.shard or c.api != CONFIG else None,
        # EmbeddingPlanner.create_embedding_collection returns what model.add takes; the config itself is added.
        added="embedding_collection" if c.api != CONFIG else var,
    )
