#!/usr/bin/env python3
"""Extract HugeCTR's Python API, release by release, from a HugeCTR clone into codegen/hugectr/api_table.json.

    python tools/hugectr_api.py PATH_TO_HUGECTR_CLONE [-o codegen/hugectr/api_table.json] [--check]

PATH is a clone of NVIDIA-Merlin/HugeCTR (bare or with a work tree) that has the release tags. For every release
from 3.2 on (the newest patch tag of each: v3.3.1 for 3.3, v23.06.01 for 23.06; 3.2 is read at v3.2, see PINNED_TAGS) the tool reads the pybind sources
(HugeCTR/pybind/, later HugeCTR/include/pybind/ and HugeCTR/src/pybind/) at that tag, follows
``PYBIND11_MODULE(hugectr, m)`` into the ``XxxPybind(m)`` functions it calls, and records what the modules
``hugectr``, ``hugectr.inference`` and ``hugectr.data`` expose:

* ``m.def("Name", ..., pybind11::arg("a") = default, ...)``: functions with their ordered parameters;
* ``pybind11::class_<...>(m, "Name")`` with ``.def(pybind11::init<...>(), pybind11::arg(...)...)``: the
  constructor's parameters under the class name, ``.def("method", ...)``: methods as ``Name.method``;
* ``pybind11::enum_<...>(m, "Name").value("Member", ...)``: enum types and members.

Overloads of one name are merged: parameters in order of first appearance, ``required`` only where every overload
has the parameter without a default, the default of the first overload that has one. Defaults are JSON values;
enum defaults are ``"Type.Member"`` (the Python names); a C++ expression that is no plain value is kept as its
source text with ``"unparsed": true``.

The output is a list of facts, each with ``since`` (first release that has it) and ``until`` (first release without
it, or null), one fact per line, sorted. A fact is one of

    {"kind": "function", "name": F [, "overloads": N]}       F = "CreateSolver", "Model", "Model.fit",
                                                               "inference.InferenceParams", "data.DataSourceParams"
    {"kind": "param", "func": F, "name": P, "after": Q | null, "default": V [, "unparsed": true] | "required": true}
    {"kind": "enum", "name": E}
    {"kind": "member", "enum": E, "name": M}
    {"kind": "type", "func": F, "name": P, "type": T}        T = int32, int64, uint32, uint64, float32, float64,
                                                               bool or list[T]: the C++ parameter type (of
                                                               ``pybind11::init<...>`` or of the bound function's
                                                               declaration), where every overload agrees

``after`` is the parameter before P in that release's order (null for the first), so inserting a parameter changes
the facts of two parameters, not of all that follow. A fact whose value changed (a default, the order) has one
entry per span. Only the standard library is used; nothing of HugeCTR is copied, only these facts.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

FIRST_RELEASE = (3, 2)
MODULES = {"": "", "inference": "inference.", "data": "data.", "tools": "tools."}  # submodules recorded
PYBIND_PATH = re.compile(r"^HugeCTR/(?:include/|src/)?pybind/[^/]+\.(?:hpp|cpp|h|cc)$")
TAG = re.compile(r"^v(\d+)\.(\d+)(?:\.(\d+))?$")
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "codegen" / "hugectr" / "api_table.json"
# Releases read at a tag other than their newest patch. v3.2.1 is no bug-fix patch of v3.2: it brought 3.3's
# graph_analysis() (automatic Slices) and the ETC-style CreateMOS(ps_types, ...). Release "3.2" is v3.2, the release
# the reference, the stand-in and the published v3.2 scripts (explicit Slices, CreateMOS(train_from_scratch, ...))
# describe; a v3.2.1 script is a 3.3 script in these respects.
PINNED_TAGS = {(3, 2): "v3.2"}


# ---- releases and sources -------------------------------------------------------------------------------------

def release_name(major: int, minor: int) -> str:
    return f"{major}.{minor:02d}" if major >= 23 else f"{major}.{minor}"


def releases(clone: str) -> list[tuple[str, str]]:
    """(release name, newest patch tag) of every release from FIRST_RELEASE on, oldest first."""
    tags = subprocess.run(["git", "-C", clone, "tag", "--list", "v*"], check=True, capture_output=True,
                          text=True).stdout.split()
    newest: dict[tuple[int, int], tuple[int, str]] = {}
    for tag in tags:
        m = TAG.match(tag)
        if not m:
            continue
        key, patch = (int(m[1]), int(m[2])), int(m[3] or 0)
        if key >= FIRST_RELEASE and (key not in newest or patch > newest[key][0]):
            newest[key] = (patch, tag)
    return [(release_name(*k), PINNED_TAGS.get(k, newest[k][1])) for k in sorted(newest)]


class Git:
    def __init__(self, clone: str):
        self.clone = clone
        self.proc = subprocess.Popen(["git", "-C", clone, "cat-file", "--batch"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)

    def files(self, tag: str) -> list[str]:
        out = subprocess.run(["git", "-C", self.clone, "ls-tree", "-r", "--name-only", tag], check=True,
                             capture_output=True, text=True).stdout.split("\n")
        return sorted(p for p in out if PYBIND_PATH.match(p))

    def read(self, tag: str, path: str) -> str:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(f"{tag}:{path}\n".encode())
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":
            raise SystemExit(f"cannot read {tag}:{path}")
        data = self.proc.stdout.read(int(header[2]))
        self.proc.stdout.read(1)
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait()


# ---- a small C++ tokenizer --------------------------------------------------------------------------------------

TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<pp>^[ \t]*\#[^\n]*(?:\\\n[^\n]*)*)
  | (?P<raw>R"(?P<delim>[^(\s]*)\(.*?\)(?P=delim)")
  | (?P<str>"(?:\\.|[^"\\\n])*")
  | (?P<chr>'(?:\\.|[^'\\\n])+')
  | (?P<num>0[xX][0-9a-fA-F']+[uUlL]*|(?:\d[\d']*\.?[\d']*|\.\d+)(?:[eE][+-]?\d+)?[fFlLuU]*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>::|->|<<|&&|\|\||==|!=|<=|>=|\+\+|--|[-+*/%&|^!~=<>?:.,;(){}\[\]])
""", re.S | re.M | re.X)


class Tok:
    __slots__ = ("kind", "text")

    def __init__(self, kind: str, text: str):
        self.kind, self.text = kind, text

    def __repr__(self) -> str:
        return self.text


def tokenize(src: str) -> list[Tok]:
    out, pos = [], 0
    while pos < len(src):
        m = TOKEN.match(src, pos)
        if not m:
            raise ValueError(f"cannot tokenize at {src[pos:pos + 40]!r}")
        pos = m.end()
        kind = m.lastgroup if m.lastgroup != "delim" else "raw"
        if kind in ("ws", "comment", "pp"):
            continue
        if kind == "raw":
            kind = "str"
        out.append(Tok(kind, m.group()))
    return out


OPEN = {"(": ")", "[": "]", "{": "}"}


def _template_open(toks: list[Tok], i: int) -> bool:
    """A '<' right after a name opens template arguments (no comparisons occur in pybind declarations)."""
    return toks[i].text == "<" and i > 0 and (toks[i - 1].kind == "id" or toks[i - 1].text == "template")


def match(toks: list[Tok], i: int) -> int:
    """Index of the token closing the bracket at i (angle brackets of templates included)."""
    stack = []
    j = i
    while j < len(toks):
        t = toks[j].text
        if t in OPEN:
            stack.append(OPEN[t])
        elif _template_open(toks, j):
            stack.append(">")
        elif t == ">" and stack and stack[-1] == ">":
            stack.pop()
        elif t in (")", "]", "}"):
            while stack and stack[-1] == ">":  # an unclosed '<' was a comparison after all
                stack.pop()
            if not stack or stack[-1] != t:
                raise ValueError(f"unbalanced {t!r}")
            stack.pop()
        if not stack:
            return j
        j += 1
    raise ValueError("unclosed bracket")


def split(toks: list[Tok], sep: str) -> list[list[Tok]]:
    """Split at top-level ``sep`` (outside (), [], {} and template <>)."""
    parts, cur, i = [], [], 0
    while i < len(toks):
        t = toks[i]
        if t.text in OPEN or _template_open(toks, i):
            try:
                j = match(toks, i)
            except ValueError:
                if t.text != "<":
                    raise
                j = i  # a lone '<' (comparison)
            cur.extend(toks[i:j + 1])
            i = j + 1
            continue
        if t.text == sep:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
        i += 1
    if cur:
        parts.append(cur)
    return parts


def text(toks: list[Tok]) -> str:
    """Source text of tokens, spaced as clang-format would for the expressions that occur here."""
    out = ""
    for k, t in enumerate(toks):
        prev = toks[k - 1] if k else None
        if prev is not None and prev.kind in ("id", "num", "str") and t.kind in ("id", "num", "str"):
            out += " "
        elif prev is not None and prev.text == "," or t.text == "=" or (prev is not None and prev.text == "="):
            out += " "
        out += t.text
    return out


# ---- pybind declarations ----------------------------------------------------------------------------------------

def _is(toks: list[Tok], i: int, *words: str) -> bool:
    return all(i + k < len(toks) and toks[i + k].text == w for k, w in enumerate(words))


def _pyb(toks: list[Tok], i: int, name: str) -> bool:
    """pybind11::name or py::name at i."""
    return (_is(toks, i, "pybind11", "::", name) or _is(toks, i, "py", "::", name)
            or (_is(toks, i, "::", "pybind11", "::", name)))


def _pyb_len(toks: list[Tok], i: int) -> int:
    return 4 if toks[i].text == "::" else 3


def unquote(s: str) -> str:
    return json.loads(s) if s.startswith('"') else s


class Api:
    """What one release exposes: functions with merged ordered params, enums with members."""

    def __init__(self):
        self.overloads: dict[str, list[list[tuple[str, list[Tok] | None]]]] = {}
        self.types: dict[str, list[dict[str, str]]] = {}  # function -> per overload {param: C++ type}
        self.enums: dict[str, list[tuple[str, str]]] = {}  # python name -> [(member, C++ enumerator)]
        self.enum_types: dict[str, str] = {}  # C++ type -> python name

    def function(self, name: str, params: list[tuple[str, list[Tok] | None]],
                 types: dict[str, str] | None = None) -> None:
        self.overloads.setdefault(name, []).append(params)
        self.types.setdefault(name, []).append(types or {})


def parse_args(args: list[list[Tok]]) -> list[tuple[str, list[Tok] | None]]:
    """The pybind11::arg("name") [= default] among a .def(...)'s arguments."""
    out = []
    for a in args:
        if not a or not _pyb(a, 0, "arg"):
            continue
        k = _pyb_len(a, 0)
        if a[k].text != "(":
            continue
        close = match(a, k)
        name = unquote(a[k + 1].text)
        rest = a[close + 1:]
        while rest and rest[0].text == ".":  # .none(true), .noconvert()
            end = match(rest, 2)
            rest = rest[end + 1:]
        if rest and rest[0].text == "=":
            out.append((name, rest[1:]))
        else:
            out.append((name, None))
    return out


def _same_names(decl: list[tuple[str, str]], names: list[str]) -> bool:
    """A declaration's parameters are the binding's: same count, same names in order (one typo forgiven in a long
    list: 23.x binds CreateSolver's ``kafka_brokers`` as ``kafka_brockers``)."""
    if len(decl) != len(names):
        return False
    differ = sum(n != b for (_, n), b in zip(decl, names))
    return differ == 0 or (differ == 1 and len(names) >= 8)


class Extractor:
    def __init__(self, sources: dict[str, str]):
        self.toks = {path: tokenize(src) for path, src in sources.items()}
        self.bodies: dict[str, list[tuple[str, list[Tok]]]] = {}  # function -> [(param name, body tokens)]
        self.module_body: tuple[str, list[Tok]] | None = None
        self.decls: dict[str, list[list[tuple[str, str]]]] = {}  # function name -> [[(C++ type, param name)]]
        for toks in self.toks.values():
            self._index(toks)
            self._declarations(toks)
        self.api = Api()

    def _declarations(self, toks: list[Tok]) -> None:
        """Parameter lists of the C++ functions and methods the sources declare or define (name -> candidates)."""
        for i in range(1, len(toks) - 1):
            if toks[i].kind != "id" or toks[i + 1].text != "(" or not (
                    toks[i - 1].kind == "id" or toks[i - 1].text in (">", "&", "*", "::")):
                continue
            try:
                close = match(toks, i + 1)
            except ValueError:
                continue
            if close + 1 >= len(toks) or toks[close + 1].text not in ("{", ";", "const", "override"):
                continue
            params = []
            for part in split(toks[i + 2:close], ","):
                eq = next((k for k, t in enumerate(part) if t.text == "="), len(part))
                decl = part[:eq]
                if len(decl) < 2 or decl[-1].kind != "id":
                    params = None
                    break
                params.append((text(decl[:-1]), decl[-1].text))
            if params:
                self.decls.setdefault(toks[i].text, []).append(params)

    def types_of(self, init_or_ref: list[Tok], params: list[tuple[str, list[Tok] | None]]) -> dict[str, str]:
        """{param: C++ type} of one binding: ``pybind11::init<T...>()`` (by position), or ``&ns::Func`` /
        ``&Class::method`` whose declaration has exactly the binding's parameter names (else nothing)."""
        names = [n for n, _ in params]
        if _pyb(init_or_ref, 0, "init"):
            k = _pyb_len(init_or_ref, 0)
            if k < len(init_or_ref) and init_or_ref[k].text == "<":
                targs = [text(t) for t in split(init_or_ref[k + 1:match(init_or_ref, k)], ",")]
                if len(targs) == len(names):
                    return dict(zip(names, targs))
            return {}
        if not init_or_ref or init_or_ref[0].text != "&" or init_or_ref[-1].kind != "id":
            return {}
        found = {tuple(t for t, _ in c) for c in self.decls.get(init_or_ref[-1].text, []) if _same_names(c, names)}
        return dict(zip(names, next(iter(found)))) if len(found) == 1 else {}

    def _index(self, toks: list[Tok]) -> None:
        i = 0
        while i < len(toks):
            if _is(toks, i, "PYBIND11_MODULE", "(") and toks[i + 2].text == "hugectr":
                var = toks[i + 4].text
                close = match(toks, i + 1)
                end = match(toks, close + 1)
                self.module_body = (var, toks[close + 2:end])
                i = end
            elif (toks[i].text == "void" and i + 2 < len(toks) and toks[i + 1].kind == "id"
                  and toks[i + 2].text == "("):
                close = match(toks, i + 2)
                params = toks[i + 3:close]
                if (close + 1 < len(toks) and toks[close + 1].text == "{" and params
                        and any(t.text in ("module", "module_") for t in params)):
                    end = match(toks, close + 1)
                    self.bodies.setdefault(toks[i + 1].text, []).append((params[-1].text, toks[close + 2:end]))
                    i = end
            i += 1

    def run(self) -> Api:
        if self.module_body is None:
            raise SystemExit("no PYBIND11_MODULE(hugectr, m) found")
        var, body = self.module_body
        self._body(body, {var: ""}, set())
        return self.api

    def _body(self, body: list[Tok], scope: dict[str, str | None], seen: set[str]) -> None:
        """Walk one function body; scope maps variable -> module prefix (None: a skipped submodule)."""
        classes: dict[str, str | None] = {}  # variable -> qualified class name
        for stmt in split(body, ";"):
            if not stmt:
                continue
            self._statement(stmt, scope, classes, seen)

    def _statement(self, st: list[Tok], scope, classes, seen) -> None:
        # nested blocks (if/for/lambdas at statement level) are not used in the wrappers: skip them
        if st[0].text in ("if", "for", "while", "return"):
            return
        # XxxPybind(m);
        if len(st) >= 4 and st[0].kind == "id" and st[1].text == "(" and st[0].text in self.bodies:
            arg = st[2].text
            if arg in scope and st[0].text not in seen:
                for param, body in self.bodies[st[0].text]:
                    self._body(body, {param: scope[arg]}, seen | {st[0].text})
            return
        # [pybind11::module] var = parent.def_submodule("name", ...)
        eq = next((k for k, t in enumerate(st) if t.text == "="), None)
        if eq is not None and _is(st, eq + 2, ".", "def_submodule"):
            var, parent, sub = st[eq - 1].text, st[eq + 1].text, unquote(st[eq + 5].text)
            prefix = scope.get(parent)
            scope[var] = None if prefix is None or sub not in MODULES else prefix + MODULES[sub]
            return
        # head of a chain
        i = 0
        if st[0].text == "auto" and eq == 2:
            target, i = st[1].text, 3
        else:
            target = None
        if _pyb(st, i, "class_") or _pyb(st, i, "enum_"):
            is_enum = _pyb(st, i, "enum_")
            k = i + _pyb_len(st, i)
            tclose = match(st, k)
            targs = split(st[k + 1:tclose], ",")
            j = tclose + 1
            if st[j].kind == "id":  # pybind11::class_<...> var(m, "Name");
                target = st[j].text
                j += 1
            pclose = match(st, j)
            cargs = split(st[j + 1:pclose], ",")
            var = cargs[0][0].text if len(cargs[0]) == 1 else None
            owner = scope.get(var) if var in scope else None  # None: a skipped submodule or a nested class
            name = None if owner is None else owner + unquote(cargs[1][0].text)
            if is_enum:
                self._enum(name, text(targs[0]), st[pclose + 1:])
                if name is not None:
                    self.api.enums.setdefault(name, [])
            else:
                if name is not None:
                    self.api.overloads.setdefault(name, [])
                self._chain(name, st[pclose + 1:])
            if target:
                classes[target] = name
            return
        # var.def(...) chains on a module or a class variable
        if st[0].kind == "id" and len(st) > 2 and st[1].text == ".":
            var = st[0].text
            if var in classes:
                self._chain(classes[var], st[1:])
            elif var in scope and scope[var] is not None:
                self._module_chain(scope[var], st[1:])
            return

    def _links(self, toks: list[Tok]):
        """(.name, args) of a chain .a(...).b(...)."""
        i = 0
        while i < len(toks):
            if toks[i].text == "=" and i > 0:  # m.doc() = "...", m.attr("x") = ...
                return
            if toks[i].text != "." or i + 2 >= len(toks) or toks[i + 2].text != "(":
                raise ValueError(f"unexpected chain at {text(toks[i:i + 6])}")
            close = match(toks, i + 2)
            yield toks[i + 1].text, split(toks[i + 3:close], ",")
            i = close + 1

    def _module_chain(self, prefix: str, toks: list[Tok]) -> None:
        for name, args in self._links(toks):
            if name in ("def", "def_static") and args and args[0][0].kind == "str":
                params = parse_args(args[1:])
                types = self.types_of(args[1], params) if len(args) > 1 else {}
                self.api.function(prefix + unquote(args[0][0].text), params, types)

    def _chain(self, cls: str | None, toks: list[Tok]) -> None:
        for name, args in self._links(toks):
            if cls is None:
                continue
            if name == "def" and args and _pyb(args[0], 0, "init"):
                params = parse_args(args[1:])
                self.api.function(cls, params, self.types_of(args[0], params))
            elif name in ("def", "def_static") and args and args[0][0].kind == "str":
                params = parse_args(args[1:])
                types = self.types_of(args[1], params) if len(args) > 1 else {}
                self.api.function(f"{cls}.{unquote(args[0][0].text)}", params, types)

    def _enum(self, name: str | None, cpp_type: str, toks: list[Tok]) -> None:
        cpp_type = norm(cpp_type)
        if name is not None:
            self.api.enum_types[cpp_type] = name
        for link, args in self._links(toks):
            if link == "value" and name is not None:
                self.api.enums.setdefault(name, []).append((unquote(args[0][0].text), norm(text(args[1]))))


def norm(cpp: str) -> str:
    """C++ qualified name without the HugeCTR:: / leading :: qualification."""
    cpp = cpp.replace(" ", "")
    for prefix in ("::", "HugeCTR::"):
        if cpp.startswith(prefix):
            cpp = cpp[len(prefix):]
    return cpp


# ---- defaults ---------------------------------------------------------------------------------------------------

class Unparsed(Exception):
    pass


class Values:
    def __init__(self, api: Api):
        self.enumerators: dict[str, str] = {}
        for pyname, members in api.enums.items():
            cpp_type = next((t for t, n in api.enum_types.items() if n == pyname), None)
            for member, cpp in members:
                self.enumerators[cpp] = f"{pyname}.{member}"
                if cpp_type and cpp.startswith(cpp_type + "::"):  # unscoped enum: Outer::VALUE
                    outer = cpp_type.rsplit("::", 1)[0] if "::" in cpp_type else ""
                    short = cpp[len(cpp_type) + 2:]
                    self.enumerators.setdefault(f"{outer}::{short}" if outer else short, f"{pyname}.{member}")

    def value(self, toks: list[Tok]):
        """JSON value of a default expression, or raise Unparsed."""
        if not toks:
            raise Unparsed
        t0 = toks[0]
        if len(toks) == 1:
            if t0.kind == "num":
                return number(t0.text)
            if t0.kind == "str":
                return unquote(t0.text)
            if t0.text in ("true", "false"):
                return t0.text == "true"
            if t0.text in ("nullptr", "NULL"):
                return None
            raise Unparsed
        if t0.text in ("-", "+") and len(toks) == 2 and toks[1].kind == "num":
            v = number(toks[1].text)
            return -v if t0.text == "-" else v
        # (a)
        if t0.text == "(" and match(toks, 0) == len(toks) - 1:
            return self.value(toks[1:-1])
        # {a, b}
        if t0.text == "{" and match(toks, 0) == len(toks) - 1:
            return [self.value(p) for p in split(toks[1:-1], ",")]
        if all(t.kind == "num" or t.text in "()+-*/" for t in toks):  # 256 * 1024
            return arithmetic(toks)
        q = qualified(toks)
        if q is None:
            raise Unparsed
        name, i = q
        n, rest = norm(name), toks[i:]
        if not rest:
            if n in ("std::nullopt", "pybind11::none", "py::none"):
                return None
            if n in self.enumerators:
                return self.enumerators[n]
            raise Unparsed
        targs: list[Tok] = []
        if rest[0].text == "<":  # template arguments
            close = match(toks, i)
            targs, rest = toks[i + 1:close], toks[close + 1:]
        if not rest or rest[0].text not in ("(", "{") or match(rest, 0) != len(rest) - 1:
            raise Unparsed
        args = split(rest[1:-1], ",")
        if n in ("pybind11::none", "py::none") and not args:
            return None
        if n in ("pybind11::dict", "py::dict") and not args:
            return {}
        if n in ("std::vector", "std::set", "std::list"):
            if not args:
                return []
            if rest[0].text == "{":
                return [self.value(a) for a in args]
            if len(args) == 1 and args[0][0].text == "{":
                return self.value(args[0])
            count = self.value(args[0])
            if not isinstance(count, (int, float)) or isinstance(count, bool):
                raise Unparsed
            if len(args) == 2:  # std::vector<T>(count, value)
                return [self.value(args[1]) for _ in range(int(count))]
            zero = ZERO.get(text(targs).replace(" ", ""))
            if len(args) == 1 and zero is not None:  # std::vector<T>(count): value-initialized
                return [zero] * int(count)
            raise Unparsed
        if n in ("std::map", "std::unordered_map"):
            if not args:
                return {}
            items = args if rest[0].text == "{" else (
                split(args[0][1:-1], ",") if len(args) == 1 and args[0][0].text == "{" else None)
            if items is None:
                raise Unparsed
            out = {}
            for item in items:
                if not item or item[0].text != "{":
                    raise Unparsed
                k, v = split(item[1:-1], ",")
                out[str(self.value(k))] = self.value(v)
            return out
        if n == "std::string":
            return "" if not args else self.value(args[0])
        if n == "std::pair":
            return [self.value(a) for a in args]
        raise Unparsed


def qualified(toks: list[Tok]):
    """(qualified name, index after it) if toks start with a (possibly ::-qualified) name."""
    i = 0
    parts = []
    if toks[0].text == "::":
        parts.append("::")
        i = 1
    while i < len(toks) and toks[i].kind == "id":
        parts.append(toks[i].text)
        i += 1
        if i < len(toks) and toks[i].text == "::":
            parts.append("::")
            i += 1
        else:
            break
    if not parts or parts[-1] == "::":
        return None
    return "".join(parts), i


ZERO = {t: 0 for t in ("int", "unsigned", "long", "longlong", "size_t", "int64_t", "int32_t", "uint64_t",
                       "uint32_t")}
ZERO.update({"float": 0.0, "double": 0.0, "bool": False, "std::string": ""})


def arithmetic(toks: list[Tok]):
    """Value of an expression of number literals and + - * / ( ) (no names: safe to evaluate)."""
    expr = "".join(str(number(t.text)) if t.kind == "num" else t.text for t in toks)
    try:
        v = eval(compile(expr, "<default>", "eval"), {"__builtins__": {}}, {})  # noqa: S307 - literals only
    except Exception as e:
        raise Unparsed from e
    if not isinstance(v, (int, float)):
        raise Unparsed
    return v


def number(s: str):
    s = s.replace("'", "").rstrip("uUlL")
    if s[:2] in ("0x", "0X"):
        return int(s, 16)
    is_float = any(c in s for c in ".eE") or s[-1:] in "fF"
    s = s.rstrip("fF")
    return float(s) if is_float else int(s)


# ---- facts ------------------------------------------------------------------------------------------------------

def release_facts(api: Api) -> set[str]:
    """Every fact of one release as canonical JSON text (no span yet)."""
    values = Values(api)
    facts = set()
    for func, overloads in api.overloads.items():
        fn = {"kind": "function", "name": func}
        if len(overloads) > 1:
            fn["overloads"] = len(overloads)  # params below are merged: their order is first appearance
        facts.add(dump(fn))
        order: list[str] = []
        info: dict[str, dict] = {}
        for params in overloads:
            for pname, dflt in params:
                if pname not in info:
                    order.append(pname)
                    info[pname] = {"default": dflt}
                elif info[pname]["default"] is None:
                    info[pname]["default"] = dflt
        for pname in order:  # required: no overload lets it be left out
            info[pname]["required"] = all(any(p == pname and d is None for p, d in params) for params in overloads)
        for k, pname in enumerate(order):
            fact = {"kind": "param", "func": func, "name": pname, "after": order[k - 1] if k else None}
            dflt = info[pname]["default"]
            if dflt is not None:
                try:
                    fact["default"] = values.value(dflt)
                except (Unparsed, ValueError, IndexError):
                    fact["default"] = text(dflt)
                    fact["unparsed"] = True
            elif info[pname]["required"]:
                fact["required"] = True
            else:
                fact["optional"] = True  # an overload lacks it, none gives a default
            facts.add(dump(fact))
    for func, per_overload in api.types.items():   # a type where every overload that binds the param agrees
        kinds: dict[str, set[str | None]] = {}
        for types in per_overload:
            for pname, cpp in types.items():
                kinds.setdefault(pname, set()).add(cpp_kind(cpp))
        bound = {p for params in api.overloads[func] for p, _ in params}
        for pname, found in kinds.items():
            unknown = any(pname in {p for p, _ in params} and pname not in types
                          for params, types in zip(api.overloads[func], per_overload))
            if len(found) == 1 and None not in found and not unknown and pname in bound:
                facts.add(dump({"kind": "type", "func": func, "name": pname, "type": found.pop()}))
    for enum, members in api.enums.items():
        facts.add(dump({"kind": "enum", "name": enum}))
        for member, _ in members:
            facts.add(dump({"kind": "member", "enum": enum, "name": member}))
    return facts


# C++ parameter types -> the value range codegen checks (size_t is 64-bit on every platform HugeCTR builds for).
SCALAR_KINDS = {"int": "int32", "int32_t": "int32", "long long": "int64", "long long int": "int64", "long": "int64",
                "int64_t": "int64", "size_t": "uint64", "unsigned long long": "uint64", "unsigned long": "uint64",
                "uint64_t": "uint64", "unsigned int": "uint32", "unsigned": "uint32", "uint32_t": "uint32",
                "float": "float32", "double": "float64", "bool": "bool"}


def cpp_kind(cpp: str) -> str | None:
    """``const std::vector<long long>&`` -> ``list[int64]``; None for a type that is no number, bool or list of them."""
    t = re.sub(r"\bconst\b|&|\bstd::", " ", cpp)
    t = re.sub(r"\s+", " ", t).strip()
    t = re.sub(r"\s*([<>])\s*", r"\1", t)
    m = re.fullmatch(r"vector<(.+)>", t)
    if m:
        inner = cpp_kind(m[1])
        return f"list[{inner}]" if inner else None
    return SCALAR_KINDS.get(t)


def dump(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=True, separators=(", ", ": "))


KIND_ORDER = {"function": 0, "param": 1, "type": 1, "enum": 2, "member": 3}


def spans(per_release: list[tuple[str, set[str]]]) -> list[dict]:
    names = [r for r, _ in per_release]
    where: dict[str, list[int]] = {}
    for k, (_, facts) in enumerate(per_release):
        for f in facts:
            where.setdefault(f, []).append(k)
    out = []
    for f, idx in where.items():
        start = prev = idx[0]
        for k in idx[1:] + [None]:
            if k is not None and k == prev + 1:
                prev = k
                continue
            fact = json.loads(f)
            fact["since"] = names[start]
            fact["until"] = names[prev + 1] if prev + 1 < len(names) else None
            out.append(fact)
            if k is not None:
                start = prev = k
    rank = {n: k for k, n in enumerate(names)}

    def key(f):
        owner = f.get("func") or f.get("enum") or f["name"]
        return (owner, KIND_ORDER[f["kind"]] >= 2, KIND_ORDER[f["kind"]], f["name"] if f["kind"] in (
            "param", "type", "member") else "", rank[f["since"]], dump(f))
    return sorted(out, key=key)


def render(rels: list[tuple[str, str]], facts: list[dict]) -> str:
    lines = ["{",
             '  "about": "HugeCTR Python API by release, extracted from each release\'s pybind sources by '
             'tools/hugectr_api.py; do not edit",',
             '  "releases": [' + ", ".join(dump(r) for r, _ in rels) + "],",
             '  "tags": {' + ", ".join(f"{dump(r)}: {dump(t)}" for r, t in rels) + "},",
             '  "facts": [']
    lines += ["    " + dump(f) + ("," if k < len(facts) - 1 else "") for k, f in enumerate(facts)]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def extract(clone: str, verbose: bool = False) -> str:
    rels = releases(clone)
    git = Git(clone)
    per_release = []
    try:
        for name, tag in rels:
            sources = {p: git.read(tag, p) for p in git.files(tag)}
            api = Extractor(sources).run()
            facts = release_facts(api)
            if verbose:
                print(f"{name:6} {tag:10} {len(api.overloads):4} functions {len(api.enums):3} enums "
                      f"{len(facts):5} facts", file=sys.stderr)
            per_release.append((name, facts))
    finally:
        git.close()
    return render(rels, spans(per_release))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("clone", help="path of a HugeCTR clone (bare or not) with the release tags")
    ap.add_argument("-o", "--out", default=str(DEFAULT_OUT), help="output file (default: %(default)s)")
    ap.add_argument("--check", action="store_true", help="exit 1 if the output file differs instead of writing")
    ap.add_argument("-v", "--verbose", action="store_true", help="print a line per release")
    a = ap.parse_args(argv)
    table = extract(a.clone, a.verbose)
    out = Path(a.out)
    if a.check:
        same = out.exists() and out.read_text() == table
        print(f"{out}: {'up to date' if same else 'differs'}")
        return 0 if same else 1
    out.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
