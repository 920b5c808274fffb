"""The HugeCTR Triton backend's inputs and output (triton.md §2.1; hugectr_backend src/hugectr.cc
ValidateModelConfig): DES (dense values), CATCOLUMN (the keys) and ROWINDEX (CSR row offsets), in that order, with the
data types the backend accepts. CATCOLUMN's type is the key width: int64 keys or uint32 ones. What ctrgen plans for a
repository and what ``ctrgen validate`` accepts both read this."""

from __future__ import annotations

from ..runtime.contract import CATCOLUMN, DES, ROWINDEX

# i64 keys (embeddingkey_long_type / supportlonglong true) -> the CATCOLUMN data type that carries them (§5, R6).
KEY_DTYPE = {True: "TYPE_INT64", False: "TYPE_UINT32"}
# input name -> accepted data types (the first is what ctrgen writes for int64 keys)
INPUTS: dict[str, tuple[str, ...]] = {
    DES: ("TYPE_FP32",),
    CATCOLUMN: (KEY_DTYPE[True], KEY_DTYPE[False]),
    ROWINDEX: ("TYPE_INT32",),
}
OUTPUT_DTYPE = "TYPE_FP32"


def input_types(i64_keys: bool) -> tuple[tuple[str, str], ...]:
    """(name, data type) of the three inputs of a model whose keys are int64 (``i64_keys``) or uint32."""
    return ((DES, INPUTS[DES][0]), (CATCOLUMN, KEY_DTYPE[i64_keys]), (ROWINDEX, INPUTS[ROWINDEX][0]))
