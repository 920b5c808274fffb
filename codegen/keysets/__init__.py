"""Keyset files for HugeCTR's embedding cache (CreateMOS / CreateETC, hugectr.md §1.8).

A keyset file lists the keys one training source holds: a headerless little-endian array of keys, as wide as the
model's keys (8-byte with ``i64_input_key=True``, else 4-byte: HugeCTR's ``unsigned int``). HugeCTR sorts and
de-duplicates them on load; ctrgen writes them sorted and unique. The keys are the ones the embedding sees:

* Parquet (NVTabular output): each categorical id plus its slot's offset, the exclusive prefix sum of
  ``slot_size_array`` in slot order (hugectr.md §1.2) — the offsets HugeCTR's Parquet reader adds;
* Norm: the keys as stored (the Norm reader adds no offsets).

Modules: ``sources`` (file lists, formats), ``parquet`` and ``norm`` (reading keys), ``write`` (the file),
``cli`` (``ctrgen keysets``).
"""
