"""What the evaluator's parts ask of each other and of the world outside the script.

:class:`.evaluator.Evaluator` runs statements; the expressions (:mod:`.expressions`) and what uncertain code may have
changed (:mod:`.poison`) are functions over it, typed by :class:`Context` so that neither imports the statements.
Everything that is not Python itself (the modules a script imports, the objects they make) comes from a
:class:`World`: :class:`.evaluator.Nothing` models none of it; :class:`.calls.Reader` is the one a training script
is read with.
"""

from __future__ import annotations

import ast
from typing import ContextManager, Protocol

from .scopes import Budget, Class, Frame, Function, Region
from .values import Unknown


class World(Protocol):
    """The outside world, asked where Python's own rules end. ``effects_made`` counts what the world recorded (an
    uncertain region must record nothing, or ``uncertain_effects`` says what that means)."""

    def name_other(self, name: str, node: ast.Name) -> object:
        """A name no scope binds (NameError in Python unless a star import provides it)."""

    def import_module(self, node: ast.Import | ast.ImportFrom, frame: Frame) -> None: ...

    def resolve_dotted(self, node: ast.expr) -> object:
        """A dotted name the world knows without evaluating its parts, or None."""

    def attribute_other(self, base: object, node: ast.Attribute, frame: Frame) -> object: ...

    def call_other(self, node: ast.Call, func: object, frame: Frame) -> object:
        """A call of something that is not the script's own function or a modelled builtin."""

    def call_method_other(self, node: ast.Call, base: object, frame: Frame) -> object:
        """``base.attr(...)`` where ``base`` is not a container, string or the script's own object."""

    def call_value_other(self, func: object, args: list, node: ast.Call) -> object:
        """``func(*args)`` for a function value handed to map/filter/sorted(key=...) the evaluator does not know."""

    def passed(self, node: ast.Call, values: list) -> None:
        """The argument values of a call, once evaluated."""

    def function_context(self, fn: Function) -> ContextManager[object]:
        """What holds while the script's function ``fn`` runs (its module's names and text)."""

    def class_defined(self, node: ast.ClassDef) -> None: ...

    def instantiated(self, cls: Class) -> None:
        """The module created an object of ``cls``."""

    def unroll_limit(self, node: ast.For) -> int | None:
        """The most iterations a known ``for`` is followed for (None: the step budget only)."""

    def effects_made(self) -> int: ...

    def uncertain_effects(self, node: ast.stmt, why: str, loop: bool) -> None:
        """Effects were recorded in a region that may run any number of times (``loop``) or not at all."""

    def try_rest_skipped(self, node: ast.Try, effects: int) -> None:
        """The first ``effects`` effects of a try body happened for certain, what follows them may not."""

    def read_only_skipped(self, call: ast.Call) -> None:
        """A call that only reads its arguments was not followed where its effect was unknown."""


class Context(Protocol):
    """The evaluator as its expression and poisoning functions see it."""

    budget: Budget
    world: World

    @property
    def uncertain(self) -> Region | None: ...

    def text(self, node: ast.AST) -> str: ...

    def unknown(self, node: ast.AST, why: str = "") -> Unknown: ...

    def lookup(self, frame: Frame, name: str, node: ast.Name) -> object: ...

    def bind(self, frame: Frame, name: str, value: object) -> None: ...

    def taint(self, v: object) -> None: ...

    def untaint(self, v: object) -> object: ...

    def exec_body(self, body: list[ast.stmt], frame: Frame) -> None: ...
