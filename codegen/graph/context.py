"""The one build context of graph.build's functions: the spec (with its file, for lines), the features it trains on,
the release profile it targets, and the problems found so far. Every step of the builder (build.py, sparse.py,
layers.py, continuous.py, embedding_collection.py, reader_check.py) is a function over it and reports a problem one
way, :meth:`BuildContext.fail`; :meth:`BuildContext.raise_if_failed` stops the build where a later step needs what
a failed one makes."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Problem, UserError, field_path
from ..features import Features
from ..hugectr import versions as V
from ..hugectr.arg_types import arg_problem
from ..specfile.load import LoadedSpec
from ..specfile.model import Spec
from .ir import enum_values


@dataclass
class BuildContext:
    loaded: LoadedSpec
    features: Features
    lock_path: str                    # the lock as messages name it
    problems: list[Problem] = field(default_factory=list)
    profile: V.Profile = field(init=False)

    def __post_init__(self) -> None:
        release = self.spec.hugectr_version
        profile = V.profile(release) if release in V.SUPPORTED else None
        if profile is None:
            self.fail(("hugectr_version",), f"unsupported HugeCTR release {release!r}",
                      fix="use one of " + ", ".join(repr(v) for v in V.SUPPORTED))
            raise UserError(self.problems)   # nothing is checked without the release's profile
        self.profile = profile

    @property
    def spec(self) -> Spec:
        return self.loaded.spec

    def fail(self, loc: tuple, message: str, fix: str = "") -> None:
        """A problem at spec field ``loc`` (reported with its line when the spec has one)."""
        line, col = self.loaded.where(*loc)
        self.problems.append(Problem(str(self.loaded.path), message, field_path(loc), line, col, fix))

    def raise_if_failed(self) -> None:
        if self.problems:
            raise UserError(self.problems)


def extra_args(ctx: BuildContext, func: str, loc: tuple, args: dict, typed: tuple[str, ...]) -> tuple:
    """A spec's ``args:`` map -> checked keyword arguments (enum members from "Type.Member" strings)."""
    out = []
    for name, value in args.items():
        if name in typed:
            ctx.fail((*loc, name), f"{name!r} has its own field; give it there, not under args",
                     fix=f"move it to {'.'.join(loc[:-1])}.{name}")
            continue
        msg = ctx.profile.missing_arg(func, name)
        if msg:
            ctx.fail((*loc, name), msg, fix="remove it or check its spelling")
            continue
        why = arg_problem(func, ctx.profile.name, name, value)
        if why:
            ctx.fail((*loc, name), f"{func} argument {name!r}: {why}", fix="give a value of that type")
            continue
        out.append((name, enum_values(value)))
    return tuple(out)
