"""The command line a script runs with: given (``ctrgen import --args``) or found where the script is run.

A notebook that writes ``NAME.py`` with ``%%writefile`` usually runs it a few cells later (``!python NAME.py ...``,
``!mpirun -np 1 python3 NAME.py ...``, ``%run NAME.py ...``); READMEs and CI shell scripts do the same with ``$ python
NAME.py ...``. :func:`command_lines` finds those runs in any such text; :func:`parse` applies a command line to the
``add_argument`` calls the static reader recorded, through the standard library's own argparse, so types, choices,
``store_true``, ``nargs``, ``required`` and abbreviations behave exactly as when the script runs.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex

from ..errors import Located

# A run of a Python file: an interpreter (or IPython's %run), options, then the file; the rest are its arguments.
_RUN = re.compile(r"(?:^|[\s;&|(\"'])(?:python[0-9.]*|%run)((?:\s+-[A-Za-z]\S*)*)\s+(\S+\.py)(?=\s|$|[\"';&|])(.*)$")
# Shell operators that end a command's arguments.
_ENDS = frozenset({"&&", "||", ";", "|", "&", ">", ">>", "<", "2>", "2>&1", ")", "(", "<<"})


def split(text: str, what: str = "--args") -> list[str]:
    """``text`` split as a POSIX shell would (one line, exit 2 on an unclosed quote)."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise Located(f"{what}: {exc}", fix="quote the command line as a shell would, e.g. --args \"--shard_plan "
                                            "uniform\"") from None


def _arguments(rest: str) -> list[str] | None:
    """The arguments of one command (up to a shell operator); None where they hold shell or IPython expansions."""
    lex = shlex.shlex(rest, posix=True, punctuation_chars=";&|<>()")
    lex.whitespace_split = True
    out: list[str] = []
    try:
        for token in lex:
            if token in _ENDS or token.startswith(("&", "|", ";", ">", "<")):
                break
            out.append(token)
    except ValueError:
        # An unbalanced quote closing a string the command line sits in ("... python3 x.py --a b"): drop it.
        return _arguments(rest.rstrip().rstrip("\"'")) if rest.rstrip().endswith(("\"", "'")) else None
    if any("$" in t or "{" in t or "`" in t for t in out):
        return None
    return out


def command_lines(text: str, script: str) -> list[list[str]]:
    """Every command line in ``text`` (shell lines, a README, a notebook cell's ``!``/``%run`` lines) that runs
    ``script`` (a file name or a relative path; a run of ``dir/NAME.py`` or ``/abs/dir/NAME.py`` matches
    ``dir/NAME.py``), as argument lists, in order. Backslash-continued lines are joined."""
    return [args for path, args in _runs(text) if _runs_script(path, script)]


def _runs(text: str) -> list[tuple[str, list[str]]]:
    """(script path as written, without ``./``; arguments) of every command line in ``text`` that runs a script."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line.startswith(("!", "$")):
            line = line[1:].strip()
        m = _RUN.search(line)
        if m is None:
            continue
        path = m.group(2).strip("\"'")
        if path.startswith("./"):
            path = path[2:]
        args = _arguments(m.group(3))
        if args is not None:
            found.append((path, args))
    return found


def _runs_script(path: str, script: str) -> bool:
    return path == script or path.endswith("/" + script)


class NotebookRuns:
    """Every script run in a notebook's code cells (``!`` and ``%run`` lines, ``%%bash``/``%%sh``/``%%script``
    cells), read once and indexed by the file name run: looking up the runs of each ``%%writefile`` file costs what
    that file's runs cost, so a notebook of many cells is read in time linear in its size."""

    def __init__(self, notebook_text: str):
        self.by_name: dict[str, list[tuple[int, str, list[str]]]] = {}
        try:
            cells = json.loads(notebook_text).get("cells", [])
        except (json.JSONDecodeError, AttributeError):
            return
        for number, cell in enumerate(cells if isinstance(cells, list) else [], start=1):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            src = cell.get("source", "")
            src = "".join(s for s in src if isinstance(s, str)) if isinstance(src, list) else src
            if not isinstance(src, str) or src.startswith("%%writefile"):
                continue
            shell = src.startswith(("%%bash", "%%sh", "%%script"))
            lines = src.replace("\\\n", " ").splitlines()
            picked = lines[1:] if shell else [ln for ln in lines if ln.lstrip().startswith(("!", "%run"))]
            for path, args in _runs("\n".join(picked)):
                self.by_name.setdefault(path.rsplit("/", 1)[-1], []).append((number, path, args))

    def of(self, script: str) -> list[tuple[int, list[str]]]:
        """(cell number, arguments) of every run of ``script``, in notebook order."""
        runs = self.by_name.get(script.rsplit("/", 1)[-1], [])
        return [(number, args) for number, path, args in runs if _runs_script(path, script)]


def notebook_command_lines(notebook_text: str, script: str) -> list[tuple[int, list[str]]]:
    """(cell number, arguments) of every run of ``script`` in a notebook's code cells."""
    return NotebookRuns(notebook_text).of(script)


class _Strict(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting."""

    def error(self, message: str):  # type: ignore[override]
        raise Located(f"the command line does not fit the script's argparse parser: {message}",
                      fix="pass the arguments the script defines (see its add_argument calls)")

    def exit(self, status: int = 0, message: str | None = None):  # type: ignore[override]
        raise Located(f"the command line makes the script exit: {(message or '').strip() or 'status ' + str(status)}",
                      fix="pass the arguments the script runs with, not --help")


UNKNOWN = object()   # what parse() returns for an argument whose value cannot be known (a custom type or action)
_TYPES = (int, float, str, bool, str.upper, str.lower, str.strip)
_ACTIONS = frozenset({"store", "store_true", "store_false", "store_const", "append", "append_const", "count",
                      "extend", "help", "version"})
_KEYS = frozenset({"action", "nargs", "const", "default", "type", "choices", "required", "dest", "help", "metavar"})


def parse(arguments: list[tuple[list[str], dict]], argv: list[str],
          known_only: bool = False) -> tuple[dict[str, object], list[str]]:
    """Apply ``argv`` to the recorded ``add_argument(*flags, **kwargs)`` calls with the real argparse.

    Values the reader could not know (a default computed at run time, a custom ``type`` or ``action``) come back as
    :data:`UNKNOWN`. Returns (dest -> value, arguments left over by ``parse_known_args``)."""
    parser = _Strict(prog="script", add_help=False)
    unknown_dests = set()
    for flags, given in arguments:
        opts = {k: v for k, v in given.items() if k in _KEYS and k not in ("help", "metavar")}
        action = opts.get("action", "store")
        unknown = not isinstance(action, str) or action not in _ACTIONS
        if unknown:
            opts["action"] = "store"
        if "type" in opts and opts["type"] not in _TYPES:
            opts.pop("type")
            unknown = True
        if "choices" in opts and not isinstance(opts["choices"], (list, tuple, set, range, str)):
            opts.pop("choices")
        try:
            act = parser.add_argument(*flags, **opts)
        except (TypeError, ValueError, argparse.ArgumentError) as exc:
            raise Located(f"the script's add_argument{tuple(flags)!r} cannot be read: {exc}") from None
        if unknown:
            unknown_dests.add(act.dest)
    ns, extra = parser.parse_known_args(argv)
    if extra and not known_only:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    # A default the reader could not know arrives as UNKNOWN itself (argparse leaves non-string defaults alone).
    return {k: (UNKNOWN if k in unknown_dests else v) for k, v in vars(ns).items()}, extra


def describe(argv: list[str]) -> str:
    return shlex.join(argv) if argv else "(no arguments)"
