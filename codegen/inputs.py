"""Reading user input files defensively: regular files only, under a size limit, UTF-8 without NUL, and YAML with a
cap on nesting and on what aliases expand to.

A path that is not a regular file (a device such as /dev/zero, a FIFO, a folder) or that lies under /proc or /sys
(whose files report no size and may never end) is refused before it is opened, so nothing blocks or reads without
end. Every refusal is one :class:`UserError` naming the file.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from .errors import UserError

# A spec is a few kB, a features lock of a thousand columns ~100 kB, a schema of a wide dataset a few MB.
MAX_SPEC_BYTES = 1 << 20
MAX_LOCK_BYTES = 16 << 20
MAX_SCHEMA_BYTES = 64 << 20
# YAML: deeper than this is no spec (the deepest field is ~6 levels); nodes after alias expansion (an alias bomb
# expands to billions: refused in linear time instead of hanging).
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000
# JSON ctrgen reads (MANIFEST.json, a checkpoint's features.json, ps.json, graph JSON, notebooks) nests a few levels;
# json.loads recurses per level, so depth is checked on the text first (no RecursionError, no stack exhaustion).
MAX_JSON_DEPTH = 64
# Files ctrgen wrote or that describe a model (MANIFEST.json, config.pbtxt, ps.json, features.json): a few kB to MB.
MAX_META_BYTES = 16 << 20
_PSEUDO_FS = ("/proc", "/sys")

# The C++ types spec and lock values become.
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1
FLT_MAX = 3.4028234663852886e38     # the largest finite C++ float
DBL_MAX = 1.7976931348623157e308


def check_regular(path: Path, what: str, limit: int) -> os.stat_result:
    """The stat of ``path``, refusing anything but a regular file of at most ``limit`` bytes."""
    resolved = os.path.realpath(path)
    if any(resolved == p or resolved.startswith(p + "/") for p in _PSEUDO_FS):
        raise UserError.one(path, f"{what} is under /proc or /sys, not a regular file",
                            fix=f"give the {_file(what)} itself")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError.one(path, f"{what} not found", fix="check the path") from None
    except OSError as exc:
        raise UserError.one(path, f"cannot read {what}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError.one(path, f"{what} is a folder, not a file", fix=f"give the {_file(what)} itself")
    if not stat.S_ISREG(st.st_mode):
        raise UserError.one(path, f"{what} is not a regular file (a device, FIFO or socket)",
                            fix=f"give the {_file(what)} itself")
    if st.st_size > limit:
        raise UserError.one(path, f"{what} is {st.st_size} bytes, more than the {limit} a {what} may have",
                            fix="check the path")
    return st


def _file(what: str) -> str:
    """``spec file``, ``file list`` (not ``file list file``)."""
    return what if what.endswith(("file", "list")) else f"{what} file"


def read_bytes(path: Path, what: str, limit: int) -> bytes:
    check_regular(path, what, limit)
    try:
        # O_NONBLOCK: should the path be swapped for a FIFO after the check, open() must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise UserError.one(path, f"{what} is not a regular file", fix=f"give the {_file(what)} itself")
            data = fh.read(limit + 1)
    except OSError as exc:
        raise UserError.one(path, f"cannot read {what}: {exc.strerror}") from None
    if len(data) > limit:
        raise UserError.one(path, f"{what} is more than {limit} bytes", fix="check the path")
    return data


def read_text(path: Path, what: str, limit: int) -> str:
    """UTF-8 text (a BOM is dropped) without NUL characters, line ends read as ``\\n`` (as ``Path.read_text``
    does, so a checkout with CRLF line ends hashes the same)."""
    return decode(read_bytes(path, what, limit), path, what).replace("\r\n", "\n").replace("\r", "\n")


def decode(data: bytes, path: Path | str, what: str) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise UserError.one(path, f"{what} is not UTF-8 text (byte 0x{data[exc.start]:02x})", line=line, col=col,
                            fix="save the file as UTF-8") from None
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        col = nul - (text.rfind("\n", 0, nul) + 1) + 1
        raise UserError.one(path, f"{what} contains a NUL character", line=line, col=col,
                            fix="remove it (a text file has none)")
    return text


def check_json_depth(text: str, path: Path | str, what: str) -> None:
    """Refuse JSON text whose arrays and objects nest deeper than MAX_JSON_DEPTH, scanning the text (strings skipped)
    without parsing it: the check runs before json.loads, whose recursion a deep document would exhaust."""
    depth = 0
    for m in _JSON_NESTING.finditer(text):
        ch = m.group()
        if ch in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                line, col = _line_col(text, m.start())
                raise UserError.one(path, f"{what} nests more than {MAX_JSON_DEPTH} levels deep", line=line, col=col,
                                    fix=f"a {what} is a few levels of objects and lists")
        elif ch in "]}":
            depth -= 1


_JSON_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_NON_FINITE = re.compile(r'(?<![\w"])(-?Infinity|NaN)(?![\w"])')


def parse_json(text: str, path: Path | str, what: str, *, finite: bool = True) -> Any:
    """JSON text, parsed after the depth check; with ``finite`` (the default) NaN and Infinity, which JSON does not
    have but Python's reader accepts, are refused, as is a number too long to convert."""
    check_json_depth(text, path, what)

    def refuse(name: str) -> Any:
        m = _NON_FINITE.search(text)
        line, col = _line_col(text, m.start()) if m else (None, None)
        raise UserError.one(path, f"{what} holds {name}, which is no JSON number", line=line, col=col,
                            fix="write a finite number")

    def finite_float(literal: str) -> float:
        value = float(literal)
        if value in (math.inf, -math.inf):      # 1e400: a literal JSON allows, past any double
            m = re.search(re.escape(literal), text)
            line, col = _line_col(text, m.start()) if m else (None, None)
            raise UserError.one(path, f"{what} holds {literal}, past the largest double", line=line, col=col,
                                fix="write a finite number")
        return value

    try:
        if finite:
            return json.loads(text, parse_constant=refuse, parse_float=finite_float)
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError.one(path, f"{what} is not JSON: {exc.msg}", line=exc.lineno, col=exc.colno) from None
    except ValueError as exc:       # int() of a number of more than 4300 digits
        raise UserError.one(path, f"{what} holds a number too long to read ({str(exc).split(':')[0]})",
                            fix="write a number of at most 19 digits") from None


def read_json(path: Path, what: str, limit: int = MAX_META_BYTES, *, finite: bool = True) -> Any:
    """A JSON file read as every input is (regular file, at most ``limit`` bytes, UTF-8), then :func:`parse_json`."""
    return parse_json(read_text(path, what, limit), path, what, finite=finite)


def _line_col(text: str, i: int) -> tuple[int, int]:
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def check_yaml_tree(tree: Any, path: Path | str) -> None:
    """Refuse a YAML document nested deeper than MAX_YAML_DEPTH or with more than MAX_YAML_NODES nodes once aliases
    are expanded (counted without expanding them: a shared node's size is computed once)."""
    sizes: dict[int, int] = {}
    # Iterative post-order walk: deep documents must not exhaust Python's stack here either.
    stack: list[tuple[Any, int, bool]] = [(tree, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        children = list(node.values()) if isinstance(node, dict) else node if isinstance(node, list) else []
        if done:
            total = 1 + sum(sizes.get(id(c), 1) for c in children)
            sizes[id(node)] = total
            if total > MAX_YAML_NODES:
                raise UserError.one(path, f"the YAML expands to more than {MAX_YAML_NODES} values (aliases "
                                          "repeated inside aliases)", fix="write the values out; a spec needs few")
            continue
        if id(node) in sizes:
            continue
        if depth > MAX_YAML_DEPTH:
            line, col = _position(node)
            raise UserError.one(path, f"the YAML is nested more than {MAX_YAML_DEPTH} levels deep", line=line,
                                col=col, fix="a spec is a few levels of mappings and lists")
        stack.append((node, depth, True))
        for c in children:
            if isinstance(c, (dict, list)) and id(c) not in sizes:
                stack.append((c, depth + 1, False))


def check_yaml_nesting(text: str, path: Path | str) -> None:
    """Refuse a document whose collections nest deeper than MAX_YAML_DEPTH from libyaml's tokens, before a reader
    builds anything: the pure-Python round-trip reader takes time quadratic in the depth of nested flow collections
    (3 s of CPU for the ~480 levels of `[` Python's recursion limit lets it reach). The scan stops at the first token
    past the cap. Each opening token starts a collection of the tree, so this refuses nothing check_yaml_tree would
    accept (a key nested that deep aside: no spec has one); what libyaml cannot scan is left to the reader, which
    reports it."""
    try:
        from _ruamel_yaml import CParser
        from ruamel.yaml import tokens
    except ImportError:        # ruamel without its C extension: the reader's own checks still apply
        return
    opening = (tokens.FlowSequenceStartToken, tokens.FlowMappingStartToken, tokens.BlockSequenceStartToken,
               tokens.BlockMappingStartToken)
    closing = (tokens.FlowSequenceEndToken, tokens.FlowMappingEndToken, tokens.BlockEndToken)
    parser, depth, token = CParser(text), 0, None
    try:
        while depth <= MAX_YAML_DEPTH and (token := parser.get_token()) is not None:
            depth += 1 if isinstance(token, opening) else -1 if isinstance(token, closing) else 0
    except Exception:  # a scanner error: the reader reports it with its position
        return
    if depth > MAX_YAML_DEPTH and token is not None:
        mark = token.start_mark
        raise UserError.one(path, f"the YAML is nested more than {MAX_YAML_DEPTH} levels deep", line=mark.line + 1,
                            col=mark.column + 1, fix="a spec is a few levels of mappings and lists")


def _position(node: Any) -> tuple[int | None, int | None]:
    lc = getattr(node, "lc", None)
    if lc is None or lc.line is None:
        return None, None
    return lc.line + 1, lc.col + 1


def json_positions(text: str) -> dict[tuple, tuple[int, int]]:
    """{path: (line, col)} of every value of a JSON document that parses (``("categorical", 1)`` for the second
    entry of "categorical"), so that problems found in the parsed data can name their line."""
    decoder = json.JSONDecoder()
    out: dict[tuple, tuple[int, int]] = {}
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)

    def pos(i: int) -> tuple[int, int]:
        line = bisect.bisect_right(starts, i)
        return line, i - starts[line - 1] + 1

    def skip(i: int) -> int:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        return i

    def value(i: int, path: tuple) -> int:
        i = skip(i)
        out[path] = pos(i)
        if text[i] == "{":
            i = skip(i + 1)
            while text[i] != "}":
                key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
                i = value(skip(i) + 1, (*path, key))        # past the ':'
                i = skip(i)
                i = skip(i + 1) if text[i] == "," else i
            return i + 1
        if text[i] == "[":
            i, n = skip(i + 1), 0
            while text[i] != "]":
                i = skip(value(i, (*path, n)))
                i = skip(i + 1) if text[i] == "," else i
                n += 1
            return i + 1
        return decoder.raw_decode(text, i)[1]

    value(0, ())
    return out
