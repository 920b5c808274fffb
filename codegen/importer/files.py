"""Files a notebook writes with ``open(NAME, "w").write(TEXT)`` (or ``with open(NAME, "w") as f: f.write(TEXT)``),
recorded as the text the notebook writes, so a later ``!python NAME ...`` cell is read as a ``%%writefile`` one.

Nothing is written: ``open`` in write mode with a known name gives a :class:`WrittenFile` whose ``write`` of a known
string appends to :attr:`.values.Script.written`. A write whose text, or whether it runs, is unknown leaves the
file's text unknown (None), with the reason in :attr:`.values.Script.written_why`.
"""

from __future__ import annotations

import ast

from .scopes import Unk
from .values import Script

OPEN = object()            # the builtin ``open`` (not in the evaluator's builtins: every other use is not modelled)
_WRITE_MODES = frozenset({"w", "wt", "tw"})


class WrittenFile:
    def __init__(self, name: str):
        self.name = name


def open_file(script: Script, args: list, kwargs: dict, node: ast.Call, uncertain: str | None) -> WrittenFile:
    """``open(name, "w")`` of a known name: the file the script starts writing (empty, as "w" truncates)."""
    mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
    name = args[0] if args else kwargs.get("file")
    if not isinstance(name, str) or mode not in _WRITE_MODES or len(args) > 2 or set(kwargs) - {"file", "mode",
                                                                                                  "encoding"}:
        raise Unk("open(...) is not modelled (only open(NAME, 'w') of a known name, to write a script)")
    script.written_at.setdefault(name, node.lineno)
    _set(script, name, "" if uncertain is None else None, node, uncertain or "")
    return WrittenFile(name)


def file_method(script: Script, f: WrittenFile, attr: str, args: list, node: ast.Call,
                uncertain: str | None) -> object:
    if attr == "write" and len(args) == 1:
        text = args[0]
        if not isinstance(text, str):
            _set(script, f.name, None, node, "the text written is not known statically")
            raise Unk("the text written is not known statically")
        old = script.written.get(f.name)
        _set(script, f.name, old + text if old is not None and uncertain is None else None, node, uncertain or "")
        return len(text)
    if attr in ("close", "flush") and not args:
        return None
    raise Unk(f"file method {attr}(...) is not modelled")


def passed(script: Script, f: WrittenFile, node: ast.Call, func: str) -> None:
    _set(script, f.name, None, node, f"the file is passed to {func}(...), whose writes are not followed")


def _set(script: Script, name: str, text: str | None, node: ast.Call, why: str) -> None:
    if text is None and name not in script.written_why:
        script.written_why[name] = (node.lineno, why or "its text cannot be known statically")
    script.written[name] = text if name not in script.written_why else None
