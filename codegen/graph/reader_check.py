"""The spec's ``reader_check:`` section -> :class:`ReaderCheck`, checked against the target release's API table:
``Model.get_data_reader_train`` / ``_eval``, each reader method on the data reader classes the release binds, each
model method with its arguments (required ones present, every keyword known)."""

from __future__ import annotations

from ..hugectr import api as A
from .context import BuildContext
from .ir import ReaderCheck, enum_values

# The classes get_data_reader_train()/_eval() return, by key width: DataReader (up to 23.05), Core23DataReader
# (23.04 on); a reader method must exist on one of them in the target release.
READER_CLASSES = ("DataReader32", "DataReader64", "Core23DataReader32", "Core23DataReader64")
LOC = ("reader_check",)


def _reader_class(method: str, release: str) -> str | None:
    return next((c for c in READER_CLASSES if A.has(f"{c}.{method}", release)), None)


def build_reader_check(ctx: BuildContext) -> ReaderCheck | None:
    rc = ctx.spec.reader_check
    if rc is None:
        return None
    release = ctx.profile.name
    for section, on in (("training", ctx.spec.training.model_fields_set), ("offline_inference",
                                                                           ctx.spec.offline_inference),
                        ("continuous_training", ctx.spec.continuous_training)):
        if on:
            ctx.fail((section,), "a reader_check spec reads batches only: it neither compiles nor trains",
                     fix=f"remove {section}, or remove reader_check")
    getter = f"Model.get_data_reader_{rc.reader}"
    msg = ctx.profile.missing_function(getter)
    if msg:
        ctx.fail((*LOC, "reader"), msg, fix="target another release")
    calls = []
    for i, call in enumerate(rc.each_batch):
        loc = (*LOC, "each_batch", i)
        if call.of == "reader":
            cls = _reader_class(call.method, release)
            if cls is None:
                ever = [f"{c}.{call.method}" for c in READER_CLASSES if f"{c}.{call.method}" in A.functions_ever()]
                why = A.describe(ever[0]) if ever else "no HugeCTR release has it"
                ctx.fail((*loc, "method"), f"the data reader has no method {call.method!r} in HugeCTR {release} "
                                           f"({why})", fix="remove it or target another release")
                continue
            func = f"{cls}.{call.method}"
        else:
            func = f"Model.{call.method}"
            msg = ctx.profile.missing_function(func)
            if msg:
                ctx.fail((*loc, "method"), msg, fix="remove it or target another release")
                continue
        params = A.signature(func, release)
        known = {p.name for p in params}
        bad = sorted(set(call.args) - known)
        if bad:
            ctx.fail((*loc, "args", bad[0]), f"{func} has no argument {bad[0]!r} in HugeCTR {release}",
                     fix=f"use {sorted(known)}" if known else "remove args")
            continue
        missing = [p.name for p in params if p.required and p.name not in call.args]
        if missing:
            ctx.fail((*loc, "args"), f"{func} needs {missing[0]!r}", fix=f"add args: {{{missing[0]}: ...}}")
            continue
        args = tuple((k, enum_values(v)) for k, v in call.args.items())
        calls.append((call.of, call.method, args))
    return ReaderCheck(reader=rc.reader, batches=rc.batches, calls=tuple(calls))
