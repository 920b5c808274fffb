"""Release facts of an imported or ported spec: everything its script uses, checked against the API table.

The check reads the ``model.py`` the spec generates (statically, with the importer's own reader) and looks up every
hugectr function and method it calls, every argument it passes by name and every enum member it uses (layer types,
embedding types, optimizers, ...) in ``api_table.json`` for the target release. What the release does not have is
one problem each, naming the releases that have it.
"""

from __future__ import annotations

from ..graph.ir import Enum
from ..hugectr import api
from .calls import extract
from .signatures import param_names
from .values import Call


def _spans_text(name: str, arg: str | None = None) -> str:
    """'HugeCTR 3.2 to 23.12' (first and last release of each span that has it)."""
    out = []
    names = list(api.RELEASES)
    for since, until in api.spans(name, arg):
        last = names[names.index(until) - 1] if until is not None else names[-1]
        out.append(since if last == since else f"{since} to {last}")
    return "HugeCTR " + " and ".join(out)


def _enums(v: object):
    if isinstance(v, Enum):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _enums(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _enums(x)
    elif isinstance(v, Call):
        for x in [*v.args, *(x for _, x in v.kwargs)]:
            yield from _enums(x)


def problems(model_py: str, release: str) -> list[str]:
    """What ``model_py`` uses that HugeCTR ``release`` does not have, one sentence each, in order of first use."""
    found: list[str] = []

    def add(message: str) -> None:
        if message not in found:
            found.append(message)

    for call in extract(model_py, "model.py").all_calls:
        func = call.func
        try:
            api.spans(func)
        except api.ApiError:
            continue                      # not in the table (a helper the table does not list): nothing to check
        if not api.has(func, release):
            add(f"hugectr.{func} is not in HugeCTR {release}; {_spans_text(func)} have it")
            continue
        names = param_names(func, release) or ()
        passed = [k for k, _ in call.kwargs] + [n for n, _ in zip(names, call.args)]
        for arg in passed:
            try:
                api.spans(func, arg)
            except api.ApiError:
                continue
            if not api.has(func, release, arg):
                add(f"hugectr.{func} argument {arg!r} is not in HugeCTR {release}; {_spans_text(func, arg)} have it")
        for e in _enums(list(call.args) + [v for _, v in call.kwargs]):
            member = f"{e.type}.{e.member}"
            try:
                api.spans(member)
            except api.ApiError:
                continue
            if not api.has(member, release):
                add(f"hugectr.{member} is not in HugeCTR {release}; {_spans_text(member)} have it")
    return found
