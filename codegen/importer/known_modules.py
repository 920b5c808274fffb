"""Constants of third-party modules that published HugeCTR scripts pass to hugectr calls.

A script is never imported, so a value such as ``mllog_constants.DLRM_DCNv2`` (given to ``CreateSolver(model_name=...)``
by the MLPerf DLRM sample) would be unknowable. The few such constants are fixed strings of a released package; they are
listed here with the module that defines them, and nothing else of those modules is known.
"""

from __future__ import annotations

from typing import Any

# module -> {attribute: value}. mlperf_logging/mllog/constants.py (mlcommons/logging): the benchmark names.
MODULE_CONSTANTS: dict[str, dict[str, object]] = {
    "mlperf_logging.mllog.constants": {
        "DLRM_DCNv2": "dlrm_dcnv2",
    },
}


def module_value(dotted: str) -> dict[str, Any] | None:
    """The known attributes of module ``dotted`` (with its known submodules as nested dicts), or None."""
    out: dict[str, Any] = {}
    prefix = dotted + "."
    for mod, consts in MODULE_CONSTANTS.items():
        if mod == dotted:
            out.update(consts)
        elif mod.startswith(prefix):
            node = out
            for part in mod[len(prefix):].split("."):
                node = node.setdefault(part, {})
            node.update(consts)
    return out or None
