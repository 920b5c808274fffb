"""User-facing errors: one problem type, one error type, one location format.

Every problem caused by user input (a spec, a features lock, a workflow, an imported script, a repository that
``validate`` reads, the files ``assemble`` copies) is a :class:`Problem`. Input errors are raised as
:class:`UserError` (one or more problems) and printed by the CLI one line each, sorted,
``FILE[:LINE[:COL]]: FIELD: MESSAGE (fix: HINT)``, with exit status 2 and no traceback; ``validate``'s findings are
the same problems with a severity (``FILE:LINE: error: FIELD: ...``). :class:`Problems` collects every problem of
an input so that they are reported at once. Code that finds a problem before it knows the file (a spec field, a
line of an imported script) raises :class:`Located`, a UserError whose file the caller fills in with :meth:`at`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any


def location(file: str, line: int | None = None, col: int | None = None) -> str:
    """The one location format: ``FILE``, ``FILE:LINE`` or ``FILE:LINE:COL`` (1-based)."""
    loc = file
    if line is not None:
        loc += f":{line}"
        if col is not None:
            loc += f":{col}"
    return loc


def field_path(loc: tuple[str | int, ...] | list) -> str:
    """The one field-path format: names joined by dots, list indexes in brackets (``model.layers[2].num_output``)."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# Characters that would split a one-line message or reorder it on a terminal: C0/C1 controls (newline, escape) and
# Unicode's bidirectional overrides, embeddings and isolates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with the characters that would split or reorder a line written as escapes (``\\n``,
    ``\\u202e``): a file or field name from user input stays on its one line, in its order."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


@dataclass(frozen=True)
class Problem:
    """One diagnostic: where it is, what is wrong, how to fix it.

    ``severity`` is empty for input errors and ``error`` / ``warning`` for ``validate``'s findings, which also carry
    the value the file holds (``actual``) and the one a consistent repository would hold (``expected``).
    """

    file: str
    message: str
    field: str = ""
    line: int | None = None
    col: int | None = None
    fix: str = ""
    severity: str = ""
    actual: Any = None
    expected: Any = None

    @property
    def location(self) -> str:
        return location(self.file, self.line, self.col)

    def format(self) -> str:
        parts = [self.location] if self.file else []
        if self.severity:
            parts.append(self.severity)
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return one_line(": ".join(parts) + (f" (fix: {self.fix})" if self.fix else ""))

    def sort_key(self) -> tuple:
        return (self.file, self.line or 0, self.col or 0, self.field, self.severity, self.message)

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "col": self.col, "severity": self.severity,
                "field": self.field, "message": self.message, "fix": self.fix,
                "actual": self.actual, "expected": self.expected}


def sort_problems(problems: list[Problem]) -> list[Problem]:
    """Sorted by (file, line, col, field, severity, message), duplicates dropped."""
    unique: dict[tuple, Problem] = {}
    for p in problems:
        unique.setdefault((*p.sort_key(), p.fix), p)
    return sorted(unique.values(), key=Problem.sort_key)


@dataclass
class UserError(Exception):
    """One or more problems with user input; the CLI prints them one line each and exits 2."""

    problems: list[Problem] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.format())

    @classmethod
    def one(cls, file: str | Path, message: str, *, field: str = "", line: int | None = None,
            col: int | None = None, fix: str = "") -> "UserError":
        return cls([Problem(str(file), message, field, line, col, fix)])

    def format(self) -> str:
        return "\n".join(p.format() for p in sort_problems(self.problems))

    def __str__(self) -> str:  # pragma: no cover - dataclass repr would hide the message
        return self.format()


class Located(UserError):
    """A problem found before its file is known: ``line``/``col`` in the file, or ``loc``, the path of a spec field
    (``("model", "layers", 3)``) that the caller resolves to a line. ``source`` says which input it is about when
    that is not obvious to the caller (``"spec"`` or ``"lock"``)."""

    def __init__(self, message: str, line: int | None = None, fix: str = "", *, col: int | None = None,
                 field: str = "", loc: tuple = (), source: str = ""):
        self.message, self.line, self.col, self.fix = message, line, col, fix
        self.field, self.loc, self.source = field, tuple(loc), source
        super().__init__([Problem("", message, field, line, col, fix)])

    def at(self, file: str | Path, *, message: str | None = None, field: str | None = None,
           line: int | None = None, col: int | None = None) -> UserError:
        """This problem in ``file`` (``message``/``field``/position overridden where given)."""
        return UserError([replace(self.problems[0], file=str(file),
                                  message=self.message if message is None else message,
                                  field=self.field if field is None else field,
                                  line=self.line if line is None else line,
                                  col=self.col if col is None else col)])


class Problems:
    """Collects the problems of one input so that all of them are reported at once (sorted)."""

    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(self, file: str | Path, message: str, *, field: str = "", line: int | None = None,
            col: int | None = None, fix: str = "", severity: str = "", actual: Any = None,
            expected: Any = None) -> None:
        self.items.append(Problem(str(file), message, field, line, col, fix, severity, actual, expected))

    def extend(self, problems: "list[Problem] | UserError") -> None:
        self.items.extend(problems.problems if isinstance(problems, UserError) else problems)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def sorted(self) -> list[Problem]:
        return sort_problems(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            raise UserError(list(self.items))
