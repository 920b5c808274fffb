"""User-facing errors.

Every problem caused by user input (a spec, a workflow, a repository) is raised as :class:`UserError` and printed by
the CLI as one line ``FILE[:LINE[:COL]]: FIELD: MESSAGE (fix: HINT)`` with exit status 2 and no traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """One diagnostic: where it is, what is wrong, how to fix it."""

    file: str
    message: str
    field: str = ""
    line: int | None = None
    col: int | None = None
    fix: str = ""

    def format(self) -> str:
        loc = self.file
        if self.line is not None:
            loc += f":{self.line}"
            if self.col is not None:
                loc += f":{self.col}"
        text = f"{loc}: "
        if self.field:
            text += f"{self.field}: "
        text += self.message
        if self.fix:
            text += f" (fix: {self.fix})"
        return text

    def sort_key(self) -> tuple:
        return (self.file, self.line or 0, self.col or 0, self.field, self.message)


@dataclass
class UserError(Exception):
    """One or more problems with user input; the CLI prints them and exits 2."""

    problems: list[Problem] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.format())

    @classmethod
    def one(cls, file: str | Path, message: str, *, field: str = "", line: int | None = None,
            col: int | None = None, fix: str = "") -> "UserError":
        return cls([Problem(str(file), message, field, line, col, fix)])

    def format(self) -> str:
        return "\n".join(p.format() for p in sorted(self.problems, key=Problem.sort_key))

    def __str__(self) -> str:  # pragma: no cover - dataclass repr would hide the message
        return self.format()
