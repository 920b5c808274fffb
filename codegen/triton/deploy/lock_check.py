"""``ctrgen assemble``: the saved workflow must be the one the features lock was recorded from, on the columns the
spec trains on. A workflow with other cardinalities, columns or dtypes would load in the server and map raw values
to ids the model never trained (or make the preprocessing model refuse to load); it is refused naming the column."""

from __future__ import annotations

from pathlib import Path

from ...errors import UserError
from ...features import Features


def _columns(features: Features) -> dict[str, tuple[str, object]]:
    """name -> (group, Column) over categorical, continuous and label columns."""
    return {c.name: (group, c) for group in ("categorical", "continuous", "labels") for c in getattr(features, group)}


def check_workflow_against_lock(locked: Features, fresh: Features, workflow: Path, *, lock_name: str,
                                spec_display: str) -> None:
    """``locked``: the lock on the spec's columns; ``fresh``: the workflow at ``workflow`` read with the spec's column
    selection (both read by the command, codegen/triton/commands/assemble.py). ``lock_name`` and ``spec_display``
    only word the message."""
    lock_cols, flow_cols = _columns(locked), _columns(fresh)
    fix = (f"pass the workflow {lock_name} was recorded from, or record this one ('ctrgen lock {spec_display} "
           "--workflow DIR'), regenerate and retrain")
    for name, (group, col) in lock_cols.items():
        if name not in flow_cols:
            raise UserError.one(workflow, f"column {name!r} ({group} in {lock_name}) is not among the workflow's "
                                "output columns", field=name, fix=fix)
        other_group, other = flow_cols[name]
        if other_group != group:
            raise UserError.one(workflow, f"column {name!r} is {other_group} in the workflow, {group} in {lock_name}",
                                field=name, fix=fix)
        for attr, what in (("cardinality", "cardinality"), ("dtype", "dtype"), ("multi_hot", "multi-hot"),
                           ("max_len", "list length")):
            a, b = getattr(col, attr), getattr(other, attr)
            if a != b:
                raise UserError.one(workflow, f"column {name!r} has {what} {b} in the workflow, {a} in {lock_name}",
                                    field=name, fix=fix)
    for group in ("categorical", "continuous", "labels"):
        a, b = [c.name for c in getattr(locked, group)], [c.name for c in getattr(fresh, group)]
        if a != b:
            extra = [n for n in b if n not in a]
            name = extra[0] if extra else next(x for x, y in zip(a, b) if x != y)
            what = ("is not in " + lock_name) if extra else f"is out of order ({lock_name}: {a}, workflow: {b})"
            raise UserError.one(workflow, f"{group} column {name!r} of the workflow {what}", field=name, fix=fix)
    if locked.inputs is not None and fresh.inputs is not None:
        raw_lock = {c.name: c for c in locked.inputs}
        raw_flow = {c.name: c for c in fresh.inputs}
        for name in sorted(raw_lock.keys() | raw_flow.keys()):
            a, b = raw_lock.get(name), raw_flow.get(name)
            if a is None or b is None:
                where = "the workflow" if a is None else lock_name
                raise UserError.one(workflow, f"raw input column {name!r} is missing from {where}", field=name,
                                    fix=fix)
            if a != b:
                shape = {True: "a list", False: "a scalar"}
                what = (f"dtype {b.dtype} in the workflow, {a.dtype}" if a.dtype != b.dtype
                        else f"{shape[b.multi_hot]} in the workflow, {shape[a.multi_hot]}")
                raise UserError.one(workflow, f"raw input column {name!r} has {what} in {lock_name}", field=name,
                                    fix=fix)
