"""The names a spec may use where it used an unknown one: for pydantic's "extra_forbidden" error at ``loc``, the
fields of the model(s) at ``loc[:-1]``, and the closest of them to the name written (difflib)."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel


def _members(annotation: Any) -> list[Any]:
    """``annotation`` without Optional/Union/Annotated: its alternatives."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _members(a)]
    return [annotation]


def _step(annotation: Any, part: str | int) -> list[Any]:
    """The annotations one location part below ``annotation`` (none where it does not apply)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(part) if isinstance(part, str) else None
        return _members(field.annotation) if field is not None else []
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, tuple) and isinstance(part, int) and args:
        return _members(args[0])
    if origin is dict and isinstance(part, str) and len(args) == 2:
        return _members(args[1])
    return []


def _tagged(annotation: Any, tag: str | int) -> bool:
    """Whether a union member is the one of a discriminated union's ``tag`` (a Literal field that allows it)."""
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return False
    return any(typing.get_origin(m) is typing.Literal and tag in typing.get_args(m)
               for f in annotation.model_fields.values() for m in _members(f.annotation))


def field_names(root: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The field names of the model(s) at ``loc`` below ``root``; a location part that names no field (pydantic adds
    a union member's tag or class name) picks the members of that tag, or is passed over."""
    current: list[Any] = [root]
    for part in loc:
        below = [b for a in current for b in _step(a, part)]
        current = below or [a for a in current if _tagged(a, part)] or current
    names = {name for a in current if isinstance(a, type) and issubclass(a, BaseModel) for name in a.model_fields}
    return sorted(names)


def closest(name: str, valid: list[str]) -> str | None:
    match = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    return match[0] if match else None


def unknown_field_fix(root: type[BaseModel], loc: tuple[str | int, ...]) -> str:
    """'did you mean 'freq_threshold'? (fields here: ...)' for the unknown key ``loc[-1]``."""
    valid = field_names(root, loc[:-1])
    if not valid:
        return "remove it or check its spelling ('ctrgen schema' lists the fields)"
    guess = closest(str(loc[-1]), valid)
    head = f"did you mean {guess!r}?" if guess else "remove it or check its spelling"
    return f"{head} (fields here: {', '.join(valid)})"
