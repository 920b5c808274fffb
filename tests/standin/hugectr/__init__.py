"""Stand-in for NVIDIA HugeCTR's Python module, for tests where HugeCTR cannot run (no GPU, no wheel).

Contract (see tests/standin/README.md):

* Put ``tests/standin`` first on PYTHONPATH and set ``CTRGEN_HUGECTR_VERSION`` to the release to imitate
  (3.2, 3.3, 4.3 or 23.06). Importing without it fails.
* Every function, constructor and method takes the arguments of that release only: unknown keywords, missing
  required arguments, wrong types and enum members of other releases raise TypeError / AttributeError naming the
  release (and the releases that have the thing). HugeCTR's own checks raise RuntimeError with HugeCTR's text.
* Every call is appended as one JSON line ``{"call", "args", "kwargs"}`` to the file named by
  ``CTRGEN_STANDIN_RECORD`` (when set).
* ``Model.graph_to_json`` writes the bytes HugeCTR's writer writes for the release; ``Model.summary`` prints the
  release's table to stdout. Nothing trains: fit/train/eval validate arguments and state, and check data files
  only where HugeCTR opens them (``CTRGEN_STANDIN_SKIP_DATA=1`` skips those checks; ``CTRGEN_STANDIN_ROOT`` maps
  absolute paths below a folder).

It is written from the HugeCTR facts of docs/hugectr.md only and must never import ctrgen's ``codegen`` package.
"""

from __future__ import annotations

from ._release import NAME as __version__  # noqa: F401
from ._enums import ENUMS as _ENUMS, ABSENT as _ABSENT
from ._api import (AsyncParam, CreateETC, CreateHMemCache, CreateMOS, CreateOptimizer, CreateSolver,  # noqa: F401
                   DataReaderParams, DataReaderSparseParam, DataSourceParams, DenseLayer, DenseLayerComputeConfig,
                   HybridEmbeddingParam, Input, SparseEmbedding, COMPUTE_CONFIG_SPAN, ETC_SPAN, MOS_SPAN, HugeCTRError)
from ._collection import SPAN as _EBC_SPAN, EmbeddingCollectionConfig, EmbeddingTableConfig  # noqa: F401
from ._model import Model  # noqa: F401
from ._release import NAME as _NAME

globals().update({name: e for name, e in _ENUMS.items() if name not in _ABSENT})

_ONLY_IN = {"DenseLayerComputeConfig": COMPUTE_CONFIG_SPAN, "CreateMOS": MOS_SPAN, "CreateETC": ETC_SPAN, "CreateHMemCache": ETC_SPAN,
            "EmbeddingTableConfig": _EBC_SPAN, "EmbeddingCollectionConfig": _EBC_SPAN}
for _name, _span in _ONLY_IN.items():
    if not _span.covers():
        del globals()[_name]


def __getattr__(name: str):
    if name in _ONLY_IN or name in _ABSENT:
        span = _ONLY_IN.get(name) or _ENUMS[name]._spans[next(iter(_ENUMS[name]._spans))]
        raise AttributeError(f"hugectr.{name} does not exist in HugeCTR {_NAME} (it exists in {span.describe()})")
    raise AttributeError(f"module 'hugectr' has no attribute {name!r} (HugeCTR {_NAME} stand-in; if the real "
                         "release has it, add it to tests/standin/hugectr from HugeCTR's sources)")
