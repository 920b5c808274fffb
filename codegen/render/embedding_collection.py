"""EmbeddingCollection -> the lines model.py builds it with (templates/hugectr/_embedding_collection.j2).

The published scripts' order: the tables, the collection (EmbeddingCollectionConfig or EmbeddingPlanner), one
embedding_lookup per lookup, the shard plan, then ``model.add``. Values reach the code only through
:mod:`.literals`.
"""

from __future__ import annotations

from ..graph.embedding_collection import CONFIG, EmbeddingCollection
from .literals import Code, kwargs


def collection_context(c: EmbeddingCollection | None) -> dict | None:
    if c is None:
        return None
    var = "ebc_config" if c.api == CONFIG else "embedding_planner"
    lookups = [kwargs([(c.table_arg, Code(f"embedding_tables[{lk.table}]")), ("bottom_name", lk.bottom),
                       ("top_name", lk.top), ("combiner", lk.combiner)]) for lk in c.lookups]
    # shard_strategy entries are (strategy, tables) pairs: written as tuples, as the samples write them
    shard = [(k, [tuple(x) if isinstance(x, list) and len(x) == 2 else x for x in v]
              if k == "shard_strategy" and isinstance(v, list) else v) for k, v in c.shard]
    return dict(
        tables=[(t.func, kwargs(t.args)) for t in c.tables],
        api=c.api, var=var, args=kwargs(c.args), lookups=lookups,
        shard_method=c.shard_method, shard=kwargs(shard) if shard or c.api != CONFIG else None,
        # EmbeddingPlanner.create_embedding_collection returns what model.add takes; the config itself is added.
        added="embedding_collection" if c.api != CONFIG else var,
    )
