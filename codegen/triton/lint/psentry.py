"""One ``models[]`` entry of a ps.json as the rules see it: typed reads that report a wrongly typed value once,
and findings placed on the ps.json file at the key's line."""

from __future__ import annotations

from typing import Any, Callable

from ...errors import Located
from .context import Context
from .findings import ERROR
from .psjson import PsModel, show


class PsEntry:
    def __init__(self, ctx: Context, model: PsModel):
        self.ctx, self.model = ctx, model
        self._bad: set[str] = set()

    @property
    def file(self):
        return self.model.file

    @property
    def name(self) -> str:
        return self.model.name

    def _source(self, top_level: bool) -> dict:
        return self.model.file.data if top_level else self.model.data

    def has(self, key: str, *, top_level: bool = False) -> bool:
        return key in self._source(top_level)

    def raw(self, key: str, *, top_level: bool = False) -> Any:
        return self._source(top_level).get(key)

    def value(self, key: str, read: Callable[[Any], Any], *, top_level: bool = False) -> Any:
        """The typed value, or None when absent or of the wrong type (reported once, as an error)."""
        if not self.has(key, top_level=top_level):
            return None
        raw = self.raw(key, top_level=top_level)
        try:
            return read(raw)
        except Located as exc:
            if key not in self._bad:
                self._bad.add(key)
                self.add(key, f"{exc}", "write the value as triton.md §4 describes it", top_level=top_level,
                         actual=raw)
            return None

    def add(self, key: str, message: str, fix: str = "", *, severity: str = ERROR, top_level: bool = False,
            actual: Any = None, expected: Any = None) -> None:
        self.ctx.add(self.file.path, key, message, fix, severity=severity,
                     line=self.file.line_of(key, top_level=top_level), actual=actual, expected=expected)

    def where(self) -> str:
        return f"models[{self.model.index}] ({show(self.name)}) of {self.ctx.show_path(self.file.path)}"
