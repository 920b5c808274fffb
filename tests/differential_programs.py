"""Small Python programs from the constructs the importer's evaluator accepts, and the two ways of running them.

:func:`programs` is a hypothesis strategy; :func:`run_cpython` runs programs in one fresh CPython subprocess (each in
its own namespace), :func:`run_reader` through the evaluator. Each program ends with ``r = ...``; the test compares
``repr(r)``: equal, or the evaluator refuses (an unknown, or a one-line refusal) — never a different value.

``h`` is a path under the home folder (``os.path.expanduser("~/h")``): the evaluator keeps it as a symbolic
:class:`~codegen.importer.values.HomePath`, which :func:`run_reader` expands with the same ``HOME`` the CPython
subprocess runs with (:data:`HOMES`: a trailing ``/``, the root folder, an empty HOME).
"""

from __future__ import annotations

import ast
import json
import os
import posixpath
import subprocess
import sys

from hypothesis import strategies as st

from codegen.errors import Located
from codegen.importer.calls import Reader
from codegen.importer.values import EnvPath, HomePath, known, plain
from codegen.runtime.contract import local_path

INTS = ("a", "b", "c")
LISTS = ("L", "M")
PRELUDE = ("import argparse\nimport os\na, b, c = 3, 5, 7\nL = [1, 2]\nM = L\nS = {4, 1}\nT = {'x', 'y'}\n"
           "D = {'k': 1}\nt = 'z'\nh = os.path.expanduser('~/h')\n")
RESULT = "r = (a, b, c, L, M, sorted(S), len(T), D, t, S, h)\n"
HOMES = ("/home/ctrgen", "/home/ctrgen/", "/", "")
HOME = HOMES[0]

small = st.integers(min_value=-3, max_value=9)
name_i = st.sampled_from(INTS)
name_l = st.sampled_from(LISTS)


@st.composite
def iexpr(draw, depth: int = 0) -> str:
    choice = draw(st.integers(0, 9 if depth < 2 else 2))
    if choice <= 1:
        return str(draw(small))
    if choice == 2:
        return draw(name_i)
    if choice == 3:
        op = draw(st.sampled_from(["+", "-", "*", "//", "%", "**", "/"]))
        right = str(draw(st.integers(0, 3))) if op == "**" else draw(iexpr(depth + 1))
        return f"({draw(iexpr(depth + 1))} {op} {right})"
    if choice == 4:
        return f"len({draw(name_l)})"
    if choice == 5:
        return f"sum({draw(name_l)})"
    if choice == 6:
        return f"({draw(iexpr(depth + 1))} if {draw(cond(depth + 1))} else {draw(iexpr(depth + 1))})"
    if choice == 7:
        return f"len({{{draw(small)}, {draw(small)}, {draw(small)}}})"
    if choice == 8:
        return f"[x for x in {{{draw(small) * 100}, {draw(small) * 100}, {draw(small)}}}][0]"
    return f"max({draw(iexpr(depth + 1))}, {draw(iexpr(depth + 1))})"


@st.composite
def cond(draw, depth: int = 0) -> str:
    op = draw(st.sampled_from(["<", "<=", "==", "!=", ">", "in"]))
    if op == "in":
        return f"{draw(iexpr(depth + 1))} in {draw(name_l)}"
    return f"{draw(iexpr(depth + 1))} {op} {draw(iexpr(depth + 1))}"


@st.composite
def statement(draw, depth: int = 0) -> list[str]:
    k = draw(st.integers(0, 26 if depth < 2 else 9))
    i, e = draw(name_i), draw(iexpr())
    if k == 0:
        return [f"{i} = {e}"]
    if k == 1:
        return [f"{i} {draw(st.sampled_from(['+=', '-=', '*=']))} {e}"]
    if k == 2:
        return [f"{draw(name_l)}.append({e})"]
    if k == 3:
        return [f"{draw(name_l)} += [{e}, {draw(iexpr())}]"]
    if k == 4:
        return [f"{draw(name_l)} = {draw(name_l)}"]
    if k == 5:
        return [f"{draw(name_l)} = list({draw(name_l)})"]
    if k == 6:
        return [f"S.add({e})" if draw(st.booleans()) else f"T.add({json.dumps(draw(st.sampled_from('abcdef')))})"]
    if k == 7:
        return [f"D[{json.dumps(draw(st.sampled_from('kmn')))}] = {e}"]
    if k == 8:
        if draw(st.booleans()):
            return [f"t = \"%d/%s/%r\" % ({i}, {draw(name_l)}, t)"]
        return [f"t = f\"{{{i}}}-{{{draw(name_l)}}}:{{{i}:>{draw(st.integers(1, 6))}}}\""]
    if k == 9:
        return [f"{draw(name_l)} = [x * {draw(small)} for x in range({draw(st.integers(0, 6))}) if x % 2]"]
    if k >= 23:
        return [draw(iterator_statement(i))]
    if k >= 20:
        return [draw(home_statement(i, k))]
    body = draw(statement(depth + 1))
    if k == 10:
        return [f"for i in range({draw(st.integers(0, 5))}):", *("    " + s for s in body),
                f"    if {draw(cond())}:", f"        {draw(st.sampled_from(['break', 'continue', 'pass']))}"]
    if k == 11:
        limit = draw(st.integers(0, 200))
        step = draw(st.sampled_from(["+= 1", "*= 2", "+= 7"]))
        return [f"{i} = max({i}, 1)", f"while {i} < {limit}:", f"    {i} {step}"]
    if k == 12:
        n = f"n{depth}"      # one counter per nesting level: an inner loop does not reset the outer one
        return [f"{n} = 0", "while True:", f"    {n} += 1", *("    " + s for s in body),
                f"    if {n} >= {draw(st.integers(1, 6))}:", "        break", f"{i} = {n}"]
    if k == 13:
        return [f"if {draw(cond())}:", *("    " + s for s in body), "else:",
                *("    " + s for s in draw(statement(depth + 1)))]
    if k == 14:
        return ["def grow(x, acc=[]):", "    acc.append(x)", "    return len(acc)",
                f"{i} = grow({e}) + grow(1) * {draw(small)}"]
    if k == 15:
        return ["def bump():", f"    global {i}", f"    {i} = {i} + {draw(small)}", "bump()"]
    if k == 16:
        return ["try:", f"    {i} = {e} // {draw(iexpr())}", "except ZeroDivisionError:", f"    {i} = -1"]
    if k == 17:
        default = json.dumps(str(draw(small)))
        typ = draw(st.sampled_from(["int", "str", "float"]))
        return ["p = argparse.ArgumentParser()", f"p.add_argument('--v', type={typ}, default={default})",
                "args = p.parse_args([])", "t = str(args.v)", f"{i} = len(t)"]
    if k == 18:
        return ["def outer():", "    n = 1", "    def inner():", "        nonlocal n", f"        n += {e}",
                "    inner()", "    return n", f"{i} = outer()"]
    return [f"S = S | {{{draw(small)}, {e}}}"]


@st.composite
def iterator_statement(draw, i: str) -> str:
    """map, filter, zip, enumerate, sorted, reversed, min/max/sum/any/all and str methods over the lists and ``t``
    (lambdas, builtins, key=; a lazy map read after its list changed; an iterator read twice)."""
    l1, l2, e = draw(name_l), draw(name_l), draw(iexpr())
    fn = draw(st.sampled_from(["lambda x: x * 2", "abs", "str", "lambda x: x // 2 - 1", "bool", "lambda x: -x",
                               f"lambda x: x % {draw(st.integers(1, 4))}", "int", "lambda x: 10 // x"]))
    return draw(st.sampled_from([
        f"{l1} = list(map({fn}, {l2}))",
        f"{l1} = list(filter({fn}, {l2}))",
        f"{l1} = list(filter(None, {l2}))",
        f"m = map({fn}, {l2}); {l2}.append({e}); {l1} = list(m) + list(m)",
        f"{l1} = [p * q for p, q in zip({l1}, {l2})]",
        f"{l1} = [p * q for p, q in zip({l1}, map({fn}, {l2}))]",
        f"{l1} = [n * v for n, v in enumerate({l2}, {draw(small)})]",
        f"{l1} = sorted({l2}, key={fn}, reverse={draw(st.booleans())})",
        f"{l1} = list(reversed({l2}))",
        f"{i} = max({l1}, key={fn}, default={e})",
        f"{i} = min({l2} + [{e}], key={fn})",
        f"{i} = sum(map({fn}, {l1}))",
        f"{i} = int(any(map({fn}, {l1}))) + int(all(x > {e} for x in {l2}))",
        f"{i} = len(dict(zip(map(str, {l1}), {l2})))",
        f"t = '-'.join(map(str, {l1})).replace('-', {json.dumps(draw(st.sampled_from([',', '', ' '])))})",
        f"{l1} = [int(x) for x in t.split('-') if x.lstrip('-').isdigit()]",
        f"t = t.upper().removeprefix('Z').center({draw(st.integers(0, 8))}, '*')",
        f"{i} = t.find('z') + t.count('-') + len(t.split(','))",
    ]))


SEGMENTS = st.sampled_from(["", "d", "d/", "/d", "a/b", "x.txt", "/"])


@st.composite
def home_statement(draw, i: str, k: int) -> str:
    """``h`` built on: appended to, joined, formatted (exact), or used another way (refused)."""
    seg, seg2 = json.dumps(draw(SEGMENTS)), json.dumps(draw(SEGMENTS))
    if k == 20:
        return draw(st.sampled_from([f"h = h + {seg}", f"h += {seg}", f"h = h + {seg} + {seg2}"]))
    if k == 21:
        return draw(st.sampled_from([f"h = os.path.join(h, {seg})", f"h = os.path.join(h, {seg}, {seg2})",
                                     f"h = os.path.join(os.path.expanduser('~'), {seg})",
                                     f"h = os.environ.get('CTRGEN_DIFF_UNSET', h) + {seg}",
                                     f"h = os.path.expanduser({seg}) + {seg2}"]))
    return draw(st.sampled_from([f"h = f\"{{h}}{{{i}}}/\"", 'h = f"{h}"', 'h = f"{h}-{t}"',
                                 "h = os.path.expanduser('~')", f"h = os.path.expanduser('~') + {seg}",
                                 f"h = {seg} + h", "h = h.rstrip('/')", "h = h[:-1]", f"{i} = len(h)",
                                 f"h = os.path.join({seg}, h)", "h = os.path.expanduser('~ctrgen/x')"]))


@st.composite
def programs(draw) -> str:
    lines = [s for _ in range(draw(st.integers(1, 6))) for s in draw(statement())]
    return PRELUDE + "\n".join(lines) + "\n" + RESULT


_RUNNER = """
import json, signal, sys
def stop(*_):
    raise TimeoutError()
signal.signal(signal.SIGALRM, stop)
out = []
for src in json.load(sys.stdin):
    g = {"__name__": "__main__"}
    signal.alarm(2)
    try:
        exec(compile(src, "<program>", "exec"), g)
        out.append(repr(g["r"]))
    except Exception as exc:
        out.append("!" + type(exc).__name__)
    finally:
        signal.alarm(0)
json.dump(out, sys.stdout)
"""


def run_cpython(sources: list[str], home: str = HOME) -> list[str]:
    """``repr(r)`` (or ``!ExceptionName``) of each program, run by a fresh CPython with the default hash seed and
    ``HOME`` set to ``home``."""
    env = {k: v for k, v in os.environ.items() if k != "CTRGEN_DIFF_UNSET"}
    done = subprocess.run([sys.executable, "-I", "-c", _RUNNER], input=json.dumps(sources), capture_output=True,
                          text=True, timeout=600, check=True, env={**env, "HOME": home})
    return json.loads(done.stdout)


def expand(v: object, home: str) -> object:
    """``v`` with each path under the home folder replaced by ``os.path.expanduser`` of its spec form, as a process
    whose ``HOME`` is ``home`` computes it (CPython's own function, with HOME set for the call)."""
    if isinstance(v, HomePath):
        old = os.environ.get("HOME")
        os.environ["HOME"] = home
        try:
            # An environment variable's path (EnvPath, the variable unset in both processes) as the generated
            # script and the trainer read it.
            return local_path(v.spec) if isinstance(v, EnvPath) else posixpath.expanduser(v.spec)
        finally:
            if old is None:
                del os.environ["HOME"]
            else:
                os.environ["HOME"] = old
    if type(v) in (tuple, list):
        return type(v)(expand(x, home) for x in v)  # type: ignore[call-arg]
    return v


def run_reader(source: str, home: str = HOME) -> str | None:
    """``repr(r)`` as the evaluator computes it (paths under the home folder expanded with ``home``), or None where
    it refuses (an unknown or a one-line refusal)."""
    try:
        frame = Reader("<program>", source).ev.run_module(ast.parse(source))
    except Located:
        return None
    r = expand(frame.globals.get("r"), home)
    if not known(r) or not plain(r):
        return None
    items = r if isinstance(r, tuple) else (r,)
    if any(isinstance(x, set) and not all(isinstance(y, int) for y in x) for x in items):
        return None
    return repr(r)
