"""Values of the numpy preprocessing (codegen/runtime/nvt_arrays.py): NVTabular 23.8's reserved ids, list columns
(`Ragged`), nulls, and the two ways a workflow or a request leaves the numpy steps (`Unsupported`, `Fallback`)."""

import numpy as np

PAD, NULL, OOV = 0, 1, 2            # NVTabular 23.8's reserved ids (categorify.py PAD_OFFSET, NULL_OFFSET, OOV_OFFSET)


class Unsupported(Exception):
    """The workflow has an operator (or an option of one) that no numpy step reproduces exactly."""


class Fallback(Exception):
    """This request needs the workflow itself (the numpy steps would not map it exactly)."""


class Ragged:
    """A list column: row i is values[offsets[i]:offsets[i + 1]]."""

    __slots__ = ("values", "offsets")

    def __init__(self, values, offsets):
        self.values, self.offsets = values, offsets

    def __len__(self):
        return len(self.offsets) - 1

    @property
    def lengths(self):
        return np.diff(self.offsets)

    def take(self, start, stop):
        offsets = self.offsets[start:stop + 1]
        return Ragged(self.values[offsets[0]:offsets[-1]], offsets - offsets[0])


def isnull(array):
    if array.dtype.kind == "f":
        return np.isnan(array)
    if array.dtype == object:
        return np.array([v is None or v != v for v in array], dtype=bool)
    return np.zeros(len(array), bool)
