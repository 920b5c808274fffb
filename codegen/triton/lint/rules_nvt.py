"""The preprocessing model NVTabular's ``export_hugectr_ensemble`` writes (``<name>_nvt``, python backend,
``output_model: "hugectr"``) against the HugeCTR model it feeds and the features lock (triton.md §6.3-§6.5, R1, R19).

Its runtime (HugeCTRWorkflowRunner) sends one key per ``cats`` column, shifted by the cumulative cardinalities in
``cats`` order, ``conts`` as DES, and a ROWINDEX for one table: one-hot, one table only.
"""

from __future__ import annotations

import json

from ...errors import UserError
from ...inputs import parse_json
from .context import Context
from ...hugectr.graph_reader import Graph
from .modelconfig import ConfigFile

NVT_OUTPUT_MODEL = "hugectr"
# ctrgen's preprocessing model marks its runtime with this parameter: it builds one CSR per table and sends every key
# of multi-hot slots (triton.md §3), so the one-hot / one-table limits of NVTabular's runner do not apply.
VCSR_PARAM, VCSR_VALUE = "key_layout", "vcsr"


def is_hugectr_preprocessor(cfg: ConfigFile) -> bool:
    return cfg.string_param("output_model") == NVT_OUTPUT_MODEL


def _add(ctx: Context, cfg: ConfigFile, field: str, message: str, fix: str = "", **kw) -> None:
    ctx.add(cfg.path, field, message, fix, line=cfg.line_of_param(field), **kw)


def _columns(ctx: Context, cfg: ConfigFile, key: str) -> list[str] | None:
    raw = cfg.string_param(key)
    if raw is None:
        return None
    if raw == "":
        return []
    try:
        value = parse_json(raw, cfg.path, key)
    except UserError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        _add(ctx, cfg, key, f"{raw!r} is not a JSON list of column names (triton.md §6.3: json.dumps(cats))",
             "write e.g. \"[\\\"userId\\\", \\\"movieId\\\"]\"", actual=raw)
        return None
    return value


def builds_vcsr(cfg: ConfigFile) -> bool:
    return cfg.string_param(VCSR_PARAM) == VCSR_VALUE


def check_preprocessor(ctx: Context, nvt: ConfigFile, hugectr: ConfigFile | None, graph: Graph | None) -> None:
    cats, conts = _columns(ctx, nvt, "cats"), _columns(ctx, nvt, "conts")
    vcsr = builds_vcsr(nvt)
    lock = ctx.lock
    if lock is not None:
        where = f"the features lock {ctx.show_path(ctx.lock_path)}"
        want_cats, want_conts = [c.name for c in lock.categorical], [c.name for c in lock.continuous]
        if cats is not None and cats != want_cats:
            _add(ctx, nvt, "cats", f"{cats} != the categorical columns of {where} in slot order {want_cats}: the "
                 "runner shifts keys by cumulative cardinalities in cats order (triton.md §6.4, R1)",
                 f"set cats to {json.dumps(want_cats)}", actual=cats, expected=want_cats)
        if conts is not None and conts != want_conts:
            _add(ctx, nvt, "conts", f"{conts} != the continuous columns of {where} {want_conts} (triton.md §6.4)",
                 f"set conts to {json.dumps(want_conts)}", actual=conts, expected=want_conts)
        multi = [c.name for c in lock.categorical if c.multi_hot]
        if multi and not vcsr:
            _add(ctx, nvt, "output_model", f"NVTabular's HugeCTR runner is one-hot only, but {where} marks "
                 f"{', '.join(multi)} multi-hot (triton.md §6.4-§6.5, R19)",
                 "serve multi-hot models with a preprocessing model that builds VCSR (triton.md §3)")
    if graph is None or hugectr is None:
        return
    if cats is not None and len(cats) != graph.slots:
        _add(ctx, nvt, "cats", f"{len(cats)} columns {cats}, but {hugectr.name!r} reads {graph.slots} slots: the "
             "runner sends one key per column (triton.md §6.4)", "list one column per slot, in slot order",
             actual=cats)
    if conts is not None and len(conts) != graph.dense_dim:
        _add(ctx, nvt, "conts", f"{len(conts)} columns {conts}, but {hugectr.name!r} reads dense_dim "
             f"{graph.dense_dim} (triton.md §6.4)", "list the continuous columns of training", actual=conts)
    if len(graph.tables) > 1 and not vcsr:
        _add(ctx, nvt, "output_model", f"NVTabular's HugeCTR runner builds ROWINDEX for one table, but "
             f"{hugectr.name!r} has {graph.describe_tables()} (triton.md §6.4-§6.5, R19)",
             "serve multi-table models with a preprocessing model that builds one CSR per table (triton.md §3)")
