"""Which HugeCTR release the stand-in imitates (env var CTRGEN_HUGECTR_VERSION) and spans of releases."""

from __future__ import annotations

import os

ENV = "CTRGEN_HUGECTR_VERSION"
SUPPORTED = {"3.2": (3, 2), "3.3": (3, 3), "4.3": (4, 3), "23.06": (23, 6)}
NEWEST = (99, 0)


def fmt(r: tuple[int, int]) -> str:
    return f"{r[0]}.{r[1]:02d}" if r[0] >= 23 else f"{r[0]}.{r[1]}"


def _current() -> tuple[int, int]:
    name = os.environ.get(ENV, "")
    if name not in SUPPORTED:
        raise ImportError(f"hugectr stand-in: set {ENV} to the HugeCTR release to imitate, one of "
                          f"{', '.join(SUPPORTED)} (got {name!r})")
    return SUPPORTED[name]


RELEASE = _current()
NAME = fmt(RELEASE)


def at_least(major: int, minor: int) -> bool:
    return RELEASE >= (major, minor)


class Span:
    """Releases [since, until) that have a thing."""

    def __init__(self, since=(3, 2), until=NEWEST):
        self.since, self.until = since, until

    def covers(self, r=None) -> bool:
        return self.since <= (r or RELEASE) < self.until

    def describe(self) -> str:
        if self.until == NEWEST:
            return f"HugeCTR {fmt(self.since)} and later"
        return f"HugeCTR {fmt(self.since)} up to (not including) {fmt(self.until)}"


ALL = Span()
