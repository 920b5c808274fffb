"""The spec's ``embedding_collection:`` section: HugeCTR's embedding collection API instead of SparseEmbedding.

One section describes what a script builds with ``EmbeddingTableConfig`` (``EmbeddingTablePlaceHolder`` in 3.7),
``EmbeddingCollectionConfig`` (4.2+) or ``EmbeddingPlanner`` (3.7 - 4.1), its ``embedding_lookup`` calls, the shard
plan (``EmbeddingCollectionConfig.shard`` / ``EmbeddingPlanner.create_embedding_collection``) and the one
``model.add`` of the result. Which of the two APIs model.py uses follows from ``hugectr_version``; field names are
HugeCTR's argument names, and what has no field of its own goes to an ``args:`` map checked against the release.

    embedding_collection:
      args: {use_exclusive_keys: true}              # EmbeddingCollectionConfig(...) arguments
      tables:
        - {name: "0", max_vocabulary_size: 203931, ev_size: 128}
        - {name: "1", max_vocabulary_size: 18598, ev_size: 128}
      lookups:                                      # embedding_lookup(table_config=tables[table], ...), in order
        - {table: 0, bottom: data0, top: emb_vec0, combiner: sum}
        - {table: 1, bottom: data1, top: emb_vec1, combiner: sum}
      shard:                                        # EmbeddingCollectionConfig.shard(...) arguments
        shard_matrix: [["0", "1"]]
        shard_strategy: [[mp, ["0", "1"]]]
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from .fields import ExtraArgs, NonNegInt, PosInt, Strict, TensorName

COMBINERS = ("sum", "average", "concat")


class TableSpec(Strict):
    """One EmbeddingTableConfig (3.7: EmbeddingTablePlaceHolder); only the fields its release takes are set."""

    name: Annotated[str, Field(min_length=1, max_length=128)] | None = Field(
        None, description="4.2+: the table's name (the shard plan names tables by it)")
    table_id: NonNegInt | None = Field(None, description="3.8 - 4.1: the table's id")
    id_space: NonNegInt | None = Field(None, description="3.7: the table's id space")
    max_vocabulary_size: Annotated[int, Field(ge=-1)] = Field(
        ..., description="rows of the table (-1: a dynamic hash table, 4.2+)")
    ev_size: PosInt = Field(..., description="embedding vector size")
    args: ExtraArgs = Field(default_factory=dict, description="other arguments by HugeCTR's names (min_key, ...)")


def _combiners(value: str | list[str]) -> str | list[str]:
    for c in value if isinstance(value, list) else [value]:
        if c not in COMBINERS:
            raise ValueError(f"{c!r} is not a combiner of the embedding collection; use one of {', '.join(COMBINERS)}")
    return value


# One check (and one message) for both forms, rather than one per branch of a union.
Combiners = Annotated[str | list[str], AfterValidator(_combiners)]


class LookupSpec(Strict):
    """One embedding_lookup: the table it reads, the sparse input it looks up, the tensor it writes.

    The grouped form (23.04+, the only lookup of its collection) gives lists of tables, bottoms and combiners and one
    top, a (batch, sum of the lookups' widths) tensor."""

    table: NonNegInt | list[NonNegInt] = Field(..., description="index into tables (a list: the grouped form)")
    bottom: TensorName | list[TensorName] = Field(..., description="a sparse input's name (input.sparse[].name)")
    top: TensorName = Field(..., description="the output tensor, (batch, 1, ev_size); concat: max_hotness x ev_size")
    combiner: Combiners = Field("sum", description="HugeCTR's names: sum, average, concat (not mean)")

    @property
    def grouped(self) -> bool:
        return isinstance(self.table, list)

    def parts(self) -> list[tuple[int, str, str]]:
        """(table, bottom, combiner) of each lookup the call makes."""
        if not self.grouped:
            return [(self.table, self.bottom, self.combiner)]  # type: ignore[list-item]
        return list(zip(self.table, self.bottom, self.combiner))  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _same_form(self) -> "LookupSpec":
        lists = [isinstance(v, list) for v in (self.table, self.bottom, self.combiner)]
        if any(lists) and not all(lists):
            raise ValueError("the grouped form gives table, bottom and combiner as lists (all three)")
        if all(lists) and not (len(self.table) == len(self.bottom) == len(self.combiner) > 0):  # type: ignore[arg-type]
            raise ValueError("table, bottom and combiner lists must have one entry per lookup")
        return self


class EmbeddingCollectionSpec(Strict):
    args: ExtraArgs = Field(default_factory=dict,
                            description="EmbeddingCollectionConfig(...) arguments (use_exclusive_keys, "
                                        "comm_strategy, output_layout, ...); EmbeddingPlanner() takes none")
    tables: list[TableSpec] = Field(..., min_length=1)
    lookups: list[LookupSpec] = Field(..., min_length=1)
    shard: ExtraArgs = Field(default_factory=dict,
                             description="EmbeddingCollectionConfig.shard(...) arguments (shard_matrix, "
                                         "shard_strategy, compression_strategy) or, before 4.2, "
                                         "EmbeddingPlanner.create_embedding_collection(...) arguments")

    @model_validator(mode="after")
    def _tables_used(self) -> "EmbeddingCollectionSpec":
        for i, lk in enumerate(self.lookups):
            for table, _, _ in lk.parts():
                if table >= len(self.tables):
                    raise ValueError(f"lookups[{i}].table is {table}, but there are {len(self.tables)} tables")
            if lk.grouped and len(self.lookups) > 1:
                raise ValueError(f"lookups[{i}] is grouped (lists): HugeCTR takes it as the only lookup")
        used = {table for lk in self.lookups for table, _, _ in lk.parts()}
        unused = [i for i in range(len(self.tables)) if i not in used]
        if unused:
            raise ValueError(f"tables {unused} are not looked up by any lookup")
        tops = [lk.top for lk in self.lookups]
        if len(set(tops)) != len(tops):
            raise ValueError("lookup tops must all differ")
        return self
