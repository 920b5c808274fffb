#!/usr/bin/env python3
"""The import corpus: every single-model HugeCTR script and notebook unit of every release, imported and regenerated.

Reads local clones of the upstream repositories at run time (nothing upstream is copied into this repository) and
prints or writes only numbers, function/argument names, our own messages and file paths relative to the upstream
repositories.

    python tools/import_corpus.py collect --hugectr DIR [--backend DIR] [--merlin DIR] [--cache DIR]
    python tools/import_corpus.py inventory [--cache DIR] [-o FILE]
    python tools/import_corpus.py run [--cache DIR] [--release R ...] [--failures FILE]
    python tools/import_corpus.py trains [--cache DIR] [--unit HASH ...]     (tools/corpus_trains.py)
    python tools/import_corpus.py report [--cache DIR] [-o docs/import_corpus.md]

DIR may be a bare clone or a work tree; everything is read with ``git`` at the release tags, never from the
checked-out files.

Units. A ``.py`` file is one unit; a notebook gives one unit per ``%%writefile NAME.py`` cell and one unit of all
its other code cells joined (the importer's own split, :func:`codegen.importer.source.notebook_units`). A unit is
*single-model* when it builds exactly one ``hugectr.Model(...)`` (or ``ModelPerfExt``; any import alias) and does
not call ``Model.construct_from_json``; units with several models, ``construct_from_json`` or only inference APIs are
listed as excluded with the reason. Identical units (same Python syntax tree, so comments and layout do not count) are
one distinct unit that remembers every release it is published in.

Releases. For each release the tag that ctrgen's API table reads is read: the newest tag of that release (``v3.3.1``
for 3.3, ``v23.06.01`` for 23.06), except 3.2, read at v3.2 (v3.2.1 already has 3.3's automatic Slices and
CreateMOS(ps_types, ...); tools/hugectr_api.py, PINNED_TAGS).
HugeCTR is walked under samples/, test/, notebooks/ and tools/. hugectr_backend and Merlin do not tag every HugeCTR
release: for a release, the tag of the same release name when there is one (v3.5, v23.06.00), otherwise the newest
tag of that repository whose commit date is not later than the HugeCTR tag's commit date is read (the notebooks
published alongside that release), all of the repository.
"""

from __future__ import annotations

import argparse
import ast
import collections
import hashlib
import io
import json
import re
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RELEASES = ["3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9", "4.0", "4.1", "4.2", "4.3",
            "23.02", "23.04", "23.05", "23.06", "23.08", "23.09", "23.12", "24.04", "24.06", "25.03"]
HUGECTR_DIRS = ("samples/", "test/", "notebooks/", "tools/")
DEFAULT_CACHE = ROOT / ".work" / "corpus"
INDEX = "index.json"
RESULTS = "results.json"
# Methods of a hugectr object that only the low-level training loop uses.
LOW_LEVEL = {"train", "eval", "start_data_reading", "get_current_loss", "set_learning_rate", "check_overflow",
             "get_next", "is_eof", "set_source", "get_data_reader_train", "get_data_reader_eval",
             "get_learning_rate_scheduler", "get_eval_metrics"}
# Constructors of a trainable model (ModelPerfExt: the performance variant of Model in 3.x).
MODELS = {"Model", "ModelPerfExt"}
INFERENCE = {"CreateInferenceSession", "InferenceParams", "InferenceModel", "CreateInferenceParams",
             "VolatileDatabaseParams", "PersistentDatabaseParams", "UpdateSourceParams", "HPS"}


def progress(i: int, n: int, what: str) -> None:
    if sys.stderr.isatty() or i == n or i % 25 == 0:
        sys.stderr.write(f"\r{what}: {i}/{n}" + ("\n" if i == n else ""))
        sys.stderr.flush()


def release_key(r: str) -> tuple[int, int]:
    a, b = r.split(".")
    return int(a), int(b)


# ---- git ----------------------------------------------------------------------------------------------------------

class Git:
    def __init__(self, path: str | Path):
        self.dir = str(path)
        out = self._run("rev-parse", "--git-dir")
        if not out.strip():
            raise SystemExit(f"{path}: not a git repository")
        self._cat = None

    def _run(self, *args: str) -> str:
        r = subprocess.run(["git", "-C", self.dir, *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"git {' '.join(args)} in {self.dir}: {r.stderr.strip()}")
        return r.stdout

    def tags(self) -> list[str]:
        return [t for t in self._run("tag", "--list").split() if t]

    def date(self, ref: str) -> str:
        return self._run("log", "-1", "--format=%cI", f"{ref}^{{commit}}").strip()

    def commit(self, ref: str) -> str:
        return self._run("rev-parse", f"{ref}^{{commit}}").strip()

    def files(self, ref: str) -> list[tuple[str, str]]:
        """(blob sha, path) of every .py / .ipynb file at ``ref``."""
        out = []
        for line in self._run("ls-tree", "-r", "-z", ref).split("\0"):
            if not line:
                continue
            meta, path = line.split("\t", 1)
            mode, kind, sha = meta.split()
            if kind == "blob" and mode != "120000" and path.endswith((".py", ".ipynb")):
                out.append((sha, path))
        return out

    def blob(self, sha: str) -> bytes:
        if self._cat is None:
            self._cat = subprocess.Popen(["git", "-C", self.dir, "cat-file", "--batch"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE)
        self._cat.stdin.write(sha.encode() + b"\n")
        self._cat.stdin.flush()
        header = self._cat.stdout.readline().split()
        size = int(header[2])
        data = self._cat.stdout.read(size)
        self._cat.stdout.read(1)
        return data

    def commits_mentioning(self, name: str) -> list[str]:
        """Commits of any branch or pull request, newest first, whose diff adds or removes a line naming ``name``."""
        out = self._run("log", "--all", "--format=%H", "-G", re.escape(name), "--", *_RUNS_IN)
        return [c for c in out.split() if c]

    def blob_at(self, ref: str, path: str) -> str | None:
        r = subprocess.run(["git", "-C", self.dir, "rev-parse", "--verify", "-q", f"{ref}:{path}"],
                           capture_output=True, text=True)
        return r.stdout.strip() or None

    def close(self) -> None:
        if self._cat is not None:
            self._cat.stdin.close()
            self._cat.wait()
            self._cat = None


def release_tag(tags: list[str], release: str) -> str | None:
    """The tag ctrgen's API table reads ``release`` at, where ``tags`` has it (3.2: v3.2, see tools/hugectr_api.py),
    else the newest tag of ``release``: v3.3 / v3.3.1 for 3.3; v23.06.00 / v23.06.01 for 23.06 (no alpha/beta)."""
    from codegen.hugectr.api import TAGS

    if TAGS.get(release) in tags:
        return TAGS[release]
    pat = re.compile(r"^v" + re.escape(release) + r"(?:\.(\d+))?$")
    best = None
    for t in tags:
        m = pat.match(t)
        if m:
            n = int(m.group(1) or -1)
            if best is None or n > best[0]:
                best = (n, t)
    return best[1] if best else None


def dated_tag(git: Git, tags: list[str], before: str) -> str | None:
    """The newest release tag (vX.Y[.Z]) of ``git`` whose commit date is not later than ``before``."""
    best = None
    for t in tags:
        if not re.match(r"^v\d+\.\d+(\.\d+)?$", t):
            continue
        d = git.date(t)
        if d <= before and (best is None or d > best[0]):
            best = (d, t)
    return best[1] if best else None


# ---- units --------------------------------------------------------------------------------------------------------

def hugectr_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> hugectr path ('' for the module itself, 'Model', 'inference.X', 'inference' ...)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "hugectr" or a.name.startswith("hugectr."):
                    sub = a.name[len("hugectr."):] if a.name != "hugectr" else ""
                    if a.asname:
                        aliases[a.asname] = sub
                    else:
                        aliases["hugectr"] = ""
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                (node.module == "hugectr" or node.module.startswith("hugectr.")):
            base = node.module[len("hugectr."):] if node.module != "hugectr" else ""
            for a in node.names:
                if a.name == "*":
                    aliases["*" + base] = base
                    continue
                aliases[a.asname or a.name] = f"{base}.{a.name}" if base else a.name
    return aliases


def dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def resolve(name: str | None, aliases: dict[str, str]) -> str | None:
    """'hc.DenseLayer' -> 'DenseLayer' when hc is hugectr; None when not a hugectr name."""
    if not name:
        return None
    head, _, rest = name.partition(".")
    if head in aliases:
        base = aliases[head]
        return ".".join(p for p in (base, rest) if p)
    return None


@dataclass
class Shape:
    """What a unit builds, read from its syntax tree (or its text when it does not parse)."""

    models: int = 0
    from_json: int = 0
    inference: int = 0
    hugectr: bool = False
    parses: bool = True
    error: str = ""


def shape_of(text: str) -> Shape:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        where = f"line {getattr(exc, 'lineno', '?')}"
        s = Shape(parses=False, error=f"{type(exc).__name__}: {getattr(exc, 'msg', exc)} ({where})")
        s.hugectr = bool(re.search(r"^\s*(import hugectr|from hugectr)", text, re.M))
        s.models = len(re.findall(r"(?<![\w.])(?:hugectr\.|hc\.)?Model(?:PerfExt)?\s*\(", text))
        s.from_json = text.count("construct_from_json")
        return s
    aliases = hugectr_aliases(tree)
    s = Shape(hugectr=bool(aliases))
    if not aliases:
        return s
    star = any(k.startswith("*") for k in aliases)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = resolve(dotted(node.func), aliases)
            if f is None and star and isinstance(node.func, ast.Name):
                f = node.func.id
            if f in MODELS:
                s.models += 1
            elif f and (f.split(".")[-1] in INFERENCE or f.startswith(("inference.", "hps."))):
                s.inference += 1
        if isinstance(node, ast.Attribute) and node.attr == "construct_from_json":
            s.from_json += 1
    return s


def classify(s: Shape) -> str:
    """'single' or the reason a unit is not a single-model unit ('' = no hugectr at all)."""
    if not s.hugectr:
        return ""
    if s.from_json:
        return "Model.construct_from_json (graph JSON model)"
    if s.models == 1:
        return "single"
    if s.models > 1:
        return "several models"
    if s.inference:
        return "inference only"
    return "no model (hugectr used without hugectr.Model)"


def normalized_hash(text: str) -> str:
    try:
        key = ast.dump(ast.parse(text), annotate_fields=False, include_attributes=False)
    except (SyntaxError, ValueError):
        key = "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def units_of(path: str, data: bytes) -> list[tuple[str, str]]:
    """(unit name, Python text) of a .py file or a notebook, as the importer splits them."""
    return [(name, text) for name, text, _ in units_and_argv(path, data)]


def units_and_argv(path: str, data: bytes) -> list[tuple[str, str, list[str] | None]]:
    """(unit name, Python text, command line) of a .py file or a notebook; the command line of a ``%%writefile``
    unit is the notebook's own first run of it, found by the importer (:func:`codegen.importer.notebook_argv`)."""
    text = data.decode("utf-8-sig", errors="replace")
    if path.endswith(".py"):
        return [("", text, None)]
    from codegen.errors import Located
    from codegen.importer import notebook_argv
    from codegen.importer.source import notebook_units

    try:
        units = notebook_units(text)
    except Located:
        return []
    out = []
    for u in units:
        m = re.match(r"cell \d+ \(%%writefile (\S+)\)", u.name)
        if m and not m.group(1).endswith(".py"):
            continue
        out.append((u.name, u.text, notebook_argv(text, u)[0]))
    return out


# Lines of READMEs and shell/CI scripts that may run a Python file (the candidates command_lines() then reads).
_RUNS_IN = ("*.md", "*.sh", "*.sub", "*.yml", "*.yaml", "*.txt", "*.rst")


def script_runs(git: Git, tag: str) -> list[tuple[str, str]]:
    """(file, line) of every line of a README or shell/CI script at ``tag`` that runs a Python file."""
    r = subprocess.run(["git", "-C", git.dir, "grep", "-I", "--full-name", "-E", r"(python[0-9.]*|%run) .*\.py",
                        tag, "--", *_RUNS_IN], capture_output=True, text=True)
    out = []
    for line in r.stdout.splitlines():
        _, _, rest = line.partition(":")          # "<tag>:<path>:<line>"
        path, _, text = rest.partition(":")
        out.append((path, text))
    return out


def script_argv(runs: list[tuple[str, str]], path: str) -> list[str] | None:
    """The first command line among ``runs`` that runs ``path``: by its path from the repository root (CI scripts
    run /workdir/<path>), or by its bare name from a file in the same folder (a README's ``$ python train.py``)."""
    from codegen.importer.argv import command_lines

    folder, _, base = path.rpartition("/")
    for where, text in runs:
        found = command_lines(text, path)
        if not found and where.rpartition("/")[0] == folder:
            found = command_lines(text, base)
        if found:
            return found[0]
    return None


def collect(args: argparse.Namespace) -> None:
    cache = Path(args.cache)
    (cache / "units").mkdir(parents=True, exist_ok=True)
    hug = Git(args.hugectr)
    htags = hug.tags()
    others = [(label, Git(d)) for label, d in (("hugectr_backend", args.backend), ("Merlin", args.merlin)) if d]
    other_tags = {label: g.tags() for label, g in others}
    releases = args.release or RELEASES
    units: dict[str, dict] = {}
    plan = []   # (release, repo label, git, tag)
    tags_used: dict[str, dict[str, str]] = {}
    for rel in releases:
        tag = release_tag(htags, rel)
        if tag is None:
            print(f"HugeCTR has no tag for release {rel}; skipped", file=sys.stderr)
            continue
        tags_used[rel] = {"HugeCTR": tag}
        plan.append((rel, "HugeCTR", hug, tag))
        date = hug.date(tag)
        for label, g in others:
            t = release_tag(other_tags[label], rel) or dated_tag(g, other_tags[label], date)
            if t:
                tags_used[rel][label] = t
                plan.append((rel, label, g, t))
    blob_units: dict[tuple[str, str], list] = {}
    files_seen = 0
    for i, (rel, label, g, tag) in enumerate(plan, 1):
        progress(i, len(plan), "collect")
        runs = script_runs(g, tag)
        for sha, path in g.files(tag):
            if label == "HugeCTR" and not path.startswith(HUGECTR_DIRS):
                continue
            files_seen += 1
            key = (label, sha)
            if key not in blob_units:
                found = []
                data = g.blob(sha)
                if b"hugectr" in data:
                    for uname, text, argv in units_and_argv(path, data):
                        kind = classify(shape := shape_of(text))
                        if not kind:
                            continue
                        h = normalized_hash(text)
                        found.append((h, uname, kind, shape.error, argv))
                        f = cache / "units" / f"{h}.py"
                        if not f.exists():
                            f.write_text(text, encoding="utf-8")
                blob_units[key] = found
            for h, uname, kind, err, argv in blob_units[key]:
                u = units.setdefault(h, {"hash": h, "kind": kind, "parse_error": err, "members": []})
                member = {"release": rel, "repo": label, "tag": tag, "path": path, "unit": uname}
                argv = argv if uname else (script_argv(runs, path) if kind == "single" else None)
                if argv is not None:
                    member["argv"] = argv     # the command line the repository runs it with
                u["members"].append(member)
    _argv_from_history(hug, units)
    for g in [hug] + [g for _, g in others]:
        g.close()
    for u in units.values():
        u["members"].sort(key=lambda m: (release_key(m["release"]), m["repo"], m["path"], m["unit"]))
    index = {"releases": [r for r in releases if r in tags_used], "tags": tags_used,
             "units": [units[h] for h in sorted(units)]}
    (cache / INDEX).write_text(json.dumps(index, indent=1, sort_keys=True), encoding="utf-8")
    single = [u for u in units.values() if u["kind"] == "single"]
    print(f"{files_seen} files read over {len(plan)} repository tags; {len(units)} distinct hugectr units, "
          f"{len(single)} single-model; index in {cache / INDEX}", file=sys.stderr)
    for rel in index["releases"]:
        n = sum(1 for u in single if any(m["release"] == rel for m in u["members"]))
        print(f"  {rel:>6} {' '.join(tags_used[rel].values()):<40} {n:4d} single-model units", file=sys.stderr)


def _argv_from_history(hug: Git, units: dict[str, dict]) -> None:
    """A script with command-line options that no release tag runs anywhere (v25.03.00 ships no CI scripts) takes the
    run line of the newest commit in the repository's history (any branch or pull request) whose tree holds the same
    file, byte for byte, and runs it: the repository's own CI ran exactly this code with that line. The member records
    the commit as ``argv_commit``."""
    for u in units.values():
        if u["kind"] != "single" or any("argv" in m for m in u["members"]):
            continue
        members = [m for m in u["members"] if m["repo"] == "HugeCTR" and not m["unit"]]
        for m in members:
            sha = hug.blob_at(m["tag"], m["path"])
            found = None
            for commit in hug.commits_mentioning(m["path"].rpartition("/")[2]):
                if sha is not None and hug.blob_at(commit, m["path"]) == sha:
                    found = script_argv(script_runs(hug, commit), m["path"])
                    if found is not None:
                        break
            if found is not None:
                for mm in members:
                    mm["argv"], mm["argv_commit"] = found, commit[:12]
                break


def load_index(cache: Path) -> dict:
    p = cache / INDEX
    if not p.exists():
        raise SystemExit(f"{p} not found: run `python tools/import_corpus.py collect --hugectr DIR` first")
    return json.loads(p.read_text(encoding="utf-8"))


def unit_text(cache: Path, h: str) -> str:
    return (cache / "units" / f"{h}.py").read_text(encoding="utf-8")


def releases_of(u: dict) -> list[str]:
    return sorted({m["release"] for m in u["members"]}, key=release_key)


def label_of(m: dict) -> str:
    return f"{m['repo']}:{m['path']}" + (f" [{m['unit']}]" if m["unit"] else "")


# ---- inventory ----------------------------------------------------------------------------------------------------

class Inventory(ast.NodeVisitor):
    """Every hugectr name a unit uses: calls (functions, constructors, methods of hugectr objects), keyword arguments,
    enum members / attributes, and the low-level training loops."""

    def __init__(self, aliases: dict[str, str]):
        self.aliases = aliases
        self.star = any(k.startswith("*") for k in aliases)
        self.types: dict[str, str] = {}      # variable (dotted) -> hugectr type of its value
        self.used: collections.Counter = collections.Counter()
        self.loops: list[tuple[int, str]] = []
        self.loop_depth = 0
        self.funcs: dict[str, ast.FunctionDef] = {}

    def name_of_call(self, node: ast.Call) -> str | None:
        d = dotted(node.func)
        f = resolve(d, self.aliases)
        if f is None and self.star and isinstance(node.func, ast.Name) and node.func.id[:1].isupper():
            f = node.func.id if node.func.id not in self.funcs else None
        if f is not None:
            return f
        if isinstance(node.func, ast.Attribute):
            recv = dotted(node.func.value)
            if recv in self.types:
                return f"{self.types[recv]}.{node.func.attr}"
            if isinstance(node.func.value, ast.Call):
                inner = self.name_of_call(node.func.value)
                if inner:
                    return f"{inner}().{node.func.attr}"
        return None

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        value = node.value
        if isinstance(value, ast.Call):
            f = self.name_of_call(value)
            method = f.rsplit(".", 1)[-1] if f else ""
            # Objects: what hugectr constructors and get_*/create_* methods return (not predictions, tensors).
            if f and (f.count(".") == 0 or method[:1].isupper() or method.startswith(("get_", "create_"))):
                for t in node.targets:
                    for el in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                        d = dotted(el)
                        if d:
                            self.types[d] = f

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.funcs[node.name] = node
        self.generic_visit(node)

    def _loop(self, node: ast.AST) -> None:
        self.loop_depth += 1
        self.generic_visit(node)
        self.loop_depth -= 1

    visit_For = visit_While = visit_AsyncFor = _loop

    def visit_Call(self, node: ast.Call) -> None:
        f = self.name_of_call(node)
        if f:
            self.used[("call", f)] += 1
            for kw in node.keywords:
                self.used[("kwarg", f"{f}({kw.arg or '**'}=)")] += 1
            if node.args:
                self.used[("positional", f"{f}(#{len(node.args)} positional)")] += 1
            method = f.rsplit(".", 1)[-1]
            if self.loop_depth and method in LOW_LEVEL and "." in f:
                self.loops.append((node.lineno, f))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        d = dotted(node)
        f = resolve(d, self.aliases)
        if f and "." in f:
            head, member = f.rsplit(".", 1)
            if head and head.split(".")[-1][:1].isupper() or head.endswith("_t"):
                self.used[("attr", f)] += 1
            # The value of an attribute chain is recorded once, not for each of its prefixes.
            return
        self.generic_visit(node)


def inventory_of(text: str) -> Inventory | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    inv = Inventory(hugectr_aliases(tree))
    # Calls used as Attribute.func are visited through visit_Call, whose generic_visit reaches the Attribute;
    # an attribute that is a call's function is not an enum member, so filter calls out of "attr" afterwards.
    inv.visit(tree)
    calls = {k[1] for k in inv.used if k[0] == "call"}
    for k in [k for k in inv.used if k[0] == "attr" and k[1] in calls]:
        del inv.used[k]
    return inv


def inventory(args: argparse.Namespace) -> None:
    cache = Path(args.cache)
    index = load_index(cache)
    single = [u for u in index["units"] if u["kind"] == "single"]
    overall_uses: collections.Counter = collections.Counter()
    overall_units: collections.Counter = collections.Counter()
    per_rel_units: dict[str, collections.Counter] = {r: collections.Counter() for r in index["releases"]}
    rel_range: dict[tuple, set] = collections.defaultdict(set)
    loops = []
    unparsed = []
    for i, u in enumerate(single, 1):
        progress(i, len(single), "inventory")
        inv = inventory_of(unit_text(cache, u["hash"]))
        rels = releases_of(u)
        if inv is None:
            unparsed.append(u)
            continue
        for k, n in inv.used.items():
            overall_uses[k] += n
            overall_units[k] += 1
            for r in rels:
                per_rel_units[r][k] += 1
                rel_range[k].add(r)
    for u in index["units"]:
        inv = inventory_of(unit_text(cache, u["hash"]))
        if inv is not None and inv.loops:
            loops.append((u, sorted({f for _, f in inv.loops})))
    out = io.StringIO()
    w = out.write
    w("# HugeCTR corpus inventory: what single-model units use\n\n")
    w("Generated by `tools/import_corpus.py inventory`. Counts: *units* = distinct single-model units using it "
      "(identical units across releases count once), *uses* = occurrences in those units.\n\n")
    w("| release | tags | single-model units |\n|---|---|---:|\n")
    for r in index["releases"]:
        n = sum(1 for u in single if r in releases_of(u))
        w(f"| {r} | {', '.join(f'{k} {v}' for k, v in sorted(index['tags'][r].items()))} | {n} |\n")
    w(f"| all | | {len(single)} distinct |\n\n")
    excluded = collections.Counter(u["kind"] for u in index["units"] if u["kind"] != "single")
    w("Excluded (not single-model), distinct units: " +
      "; ".join(f"{k}: {n}" for k, n in sorted(excluded.items())) + "\n\n")
    titles = {"call": "Calls (functions, constructors, methods of hugectr objects)",
              "attr": "Enum members and other hugectr attributes", "kwarg": "Keyword arguments",
              "positional": "Positional-argument calls"}
    for kind in ("call", "attr", "kwarg", "positional"):
        w(f"## {titles[kind]}\n\n| name | units | uses | releases |\n|---|---:|---:|---|\n")
        keys = sorted((k for k in overall_units if k[0] == kind), key=lambda k: (-overall_units[k], k[1]))
        for k in keys:
            rs = sorted(rel_range[k], key=release_key)
            span = rs[0] if len(rs) == 1 else f"{rs[0]}–{rs[-1]} ({len(rs)})"
            w(f"| `{k[1]}` | {overall_units[k]} | {overall_uses[k]} | {span} |\n")
        w("\n")
    w("## Per release (units using each call; enum members and keywords in the tables above)\n\n")
    for r in index["releases"]:
        c = per_rel_units[r]
        calls = sorted((k for k in c if k[0] == "call"), key=lambda k: (-c[k], k[1]))
        w(f"- **{r}**: " + ", ".join(f"{k[1]} {c[k]}" for k in calls) + "\n")
    w("\n## Low-level training loops (hugectr object methods called inside a loop), all units\n\n")
    for u, fs in sorted(loops, key=lambda x: label_of(x[0]["members"][-1])):
        m = u["members"][-1]
        w(f"- `{label_of(m)}` [{u['kind']}] ({', '.join(releases_of(u))}): {', '.join(fs)}\n")
    w("\n## Notebooks whose model is built in plain code cells (no `%%writefile` of the script)\n\n")
    nb = [u for u in single if any(m["unit"] == "code cells" for m in u["members"])]
    for u in sorted(nb, key=lambda u: label_of(u["members"][-1])):
        w(f"- `{label_of(u['members'][-1])}` ({', '.join(releases_of(u))})\n")
    if unparsed:
        w("\n## Single-model units that do not parse as Python 3\n\n")
        for u in unparsed:
            w(f"- `{label_of(u['members'][-1])}`: {u['parse_error']}\n")
    w("\n## Excluded units\n\n")
    for u in sorted((u for u in index["units"] if u["kind"] != "single"),
                    key=lambda u: (u["kind"], label_of(u["members"][-1]))):
        w(f"- {u['kind']}: `{label_of(u['members'][-1])}` ({', '.join(releases_of(u))})\n")
    w("\n## Single-model units\n\n")
    for u in sorted(single, key=lambda u: label_of(u["members"][-1])):
        paths = sorted({label_of(m) for m in u["members"]})
        w(f"- `{u['hash']}` {', '.join(f'`{p}`' for p in paths)} ({', '.join(releases_of(u))})\n")
    target = Path(args.output)
    target.write_text(out.getvalue(), encoding="utf-8")
    print(f"inventory of {len(single)} single-model units written to {target}", file=sys.stderr)


# ---- run ----------------------------------------------------------------------------------------------------------

def argv_of(u: dict, release: str) -> list[str] | None:
    """The command line a unit runs with in ``release``: the first of its members there that has one; where the
    release runs it nowhere (its CI scripts were dropped), the one the nearest release runs the same code with
    (earlier releases first)."""
    own = [m["argv"] for m in u["members"] if m["release"] == release and "argv" in m]
    if own:
        return own[0]
    order = sorted({m["release"] for m in u["members"]}, key=release_key)
    here = order.index(release) if release in order else 0
    others = sorted((m for m in u["members"] if "argv" in m),
                    key=lambda m: (abs(order.index(m["release"]) - here), order.index(m["release"]) > here))
    return others[0]["argv"] if others else None


def import_and_compare(text: str, release: str, name: str, argv: list[str] | None = None,
                       folder: Path | None = None) -> dict:
    """Import ``text`` for ``release``, generate, compare the calls. {'status', 'message', 'seconds', ...}.
    ``folder``: where the unit is written (beside the files a caller put there), else a folder of its own."""
    from codegen.errors import UserError
    from codegen.importer import import_source
    from codegen.importer.compare import compare_texts
    from codegen.importer.write import write_import
    from codegen.pipeline import open_spec, render_spec

    with tempfile.TemporaryDirectory(prefix="ctrgen-corpus-") as own:
        tmp = str(folder or own)
        src = Path(tmp) / f"{name}.py"
        src.write_text(text, encoding="utf-8")
        stage = "import"
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            result = import_source(src, release, "corpus_unit", argv)
            stage = "write the spec"
            write_import(result, Path(tmp) / "specs")
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
            stage = "generate"
            rendered = render_spec(open_spec(Path(tmp) / "specs" / f"{result.name}.yaml"))
            model_py = next(v for k, v in rendered.files.items() if str(k) == "model.py")
            stage = "compare"
            if folder is None:
                diffs = compare_texts(text, model_py, src.name, release, argv)
            else:      # the source reads the modules beside it, as the import did
                from codegen.importer.calls import extract
                from codegen.importer.compare import compare_with
                from codegen.importer.modules import Modules

                diffs = compare_with(extract(text, str(src), argv, Modules(src.parent, {}, src)),
                                     extract(model_py, "model.py"), release)
        except UserError as exc:
            first = sorted(exc.problems, key=lambda p: p.sort_key())[0]
            msg = first.message.replace(tmp, "<tmp>").replace(str(src), "<unit>")
            if first.fix.startswith("the script requires"):
                msg += f"; {first.fix.split(':')[0]}"      # no published command line gives it
            return {"status": "refused", "stage": stage, "message": msg}
        except Exception:  # noqa: BLE001 - a traceback from our code is a bug; record it
            tb = traceback.format_exc().replace(tmp, "<tmp>")
            return {"status": "crashed", "stage": stage, "message": tb.strip().splitlines()[-1], "traceback": tb}
    lines = text.count("\n") + 1
    if diffs:
        return {"status": "differing", "message": diffs[0], "differences": len(diffs), "seconds": seconds,
                "cpu": cpu, "lines": lines}
    return {"status": "reproduced", "seconds": seconds, "cpu": cpu, "lines": lines}


def _job(job: tuple[str, str, str, list[str] | None]) -> dict:
    return import_and_compare(*job)


def run(args: argparse.Namespace) -> None:
    cache = Path(args.cache)
    index = load_index(cache)
    single = [u for u in index["units"] if u["kind"] == "single"]
    wanted = set(args.release or index["releases"])
    jobs = [(u, r) for u in single for r in releases_of(u) if r in wanted]
    if args.unit:
        jobs = [(u, r) for u, r in jobs if u["hash"].startswith(tuple(args.unit))]
    results_path = cache / RESULTS
    keep = results_path.exists() and (args.release or args.unit)
    results = json.loads(results_path.read_text(encoding="utf-8")) if keep else {}
    t_all = time.perf_counter()
    work = [(unit_text(cache, u["hash"]), r, "unit", argv_of(u, r)) for u, r in jobs]
    if args.jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs) as pool:
            for i, res in enumerate(pool.map(_job, work, chunksize=4), 1):
                progress(i, len(jobs), "run")
                results[f"{jobs[i - 1][0]['hash']}@{jobs[i - 1][1]}"] = res
    else:
        for i, job in enumerate(work, 1):
            progress(i, len(jobs), "run")
            results[f"{jobs[i - 1][0]['hash']}@{jobs[i - 1][1]}"] = _job(job)
    results_path.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
    counts = collections.Counter(results[f"{u['hash']}@{r}"]["status"] for u, r in jobs)
    print(f"{len(jobs)} imports in {time.perf_counter() - t_all:.0f} s: " +
          ", ".join(f"{k} {n}" for k, n in sorted(counts.items())), file=sys.stderr)
    if args.failures:
        Path(args.failures).write_text(failures_text(index, results), encoding="utf-8")
        print(f"failures by cause written to {args.failures}", file=sys.stderr)


def trains(args: argparse.Namespace) -> None:
    from tools.corpus_trains import trains as run_trains

    run_trains(args, load_index, unit_text, releases_of, argv_of, release_key, progress)


# ---- report -------------------------------------------------------------------------------------------------------

ORDER = {"reproduced": 0, "refused": 1, "differing": 2, "crashed": 3}


def cause(res: dict) -> str:
    """A message with the unit's own numbers and names taken out, so that units group by cause."""
    msg = res.get("message", "")
    msg = re.sub(r"\((?:cell \d+, )?line \d+(?:, col \d+)?\)", "", msg)
    msg = re.sub(r"\bcall \d+ \(source line \d+\)", "call N", msg)
    msg = re.sub(r"\bline \d+", "line N", msg)
    msg = re.sub(r"source .*, generated .*$", "source X, generated Y", msg)
    msg = re.sub(r"'[^']*'", lambda m: m.group(0) if re.fullmatch(r"'[A-Za-z_][\w.]*'", m.group(0)) else "'…'", msg)
    msg = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", msg)
    return " ".join(msg.split())


# Refusals whose cause is the source itself on that release: an API fact the release lacks (from the API table), a
# check HugeCTR itself makes (its own message), a required argument left out (of a hugectr call, or a required
# command-line option that no published command line gives: argparse stops the script).
_SOURCE_REJECTED = re.compile(r"is not in HugeCTR \d|HugeCTR rejects this|bottom tensor name does not exists|"
                              r"which HugeCTR \S+ requires|the script requires \S+ on its command line")


def source_rejected(res: dict | None) -> bool:
    return res is not None and res.get("status") == "refused" and \
        bool(_SOURCE_REJECTED.search(res.get("message", "")))


_RUN_TIME = re.compile(r"cannot be known statically|cannot be known without running")


def refusal_class(res: dict) -> str:
    """Why a refusal is right: what the release itself rejects, a value only a run gives, or a gap of ctrgen's
    named by its message."""
    if source_rejected(res) or "is the API of HugeCTR" in res.get("message", ""):
        return "the release rejects it"
    if _RUN_TIME.search(res.get("message", "")):
        return "a run-time value"
    return "a named gap of ctrgen"


def release_refusal(res: dict) -> bool:
    return "unsupported HugeCTR release" in res.get("message", "")


def outcome(u: dict, results: dict) -> tuple[str, dict | None]:
    """A distinct unit's outcome over all its releases: reproduced only if reproduced in every one, else the worst
    (crashed, differing, refused); among equal ones the result whose cause is not the release itself, then the
    newest release."""
    best, which = None, None
    for r in releases_of(u):
        res = results.get(f"{u['hash']}@{r}")
        if res is None:
            continue
        key = (ORDER[res["status"]], not release_refusal(res), release_key(r))
        if best is None or key > best:
            best, which = key, res
    return ("reproduced" if which is None else which["status"]), which


def tally(index: dict, results: dict) -> dict:
    single = [u for u in index["units"] if u["kind"] == "single"]
    per_rel = {}
    for r in index["releases"]:
        c = collections.Counter()
        for u in single:
            if r in releases_of(u) and f"{u['hash']}@{r}" in results:
                c[results[f"{u['hash']}@{r}"]["status"]] += 1
        per_rel[r] = c
    overall = collections.Counter()
    causes: dict[str, dict[str, list]] = {"refused": collections.defaultdict(list),
                                           "differing": collections.defaultdict(list),
                                           "crashed": collections.defaultdict(list)}
    for u in single:
        st, res = outcome(u, results)
        if res is None and st == "reproduced" and not any(f"{u['hash']}@{r}" in results for r in releases_of(u)):
            continue
        overall[st] += 1
        if st != "reproduced":
            causes[st][cause(res)].append(u)
    return {"single": single, "per_rel": per_rel, "overall": overall, "causes": causes}


def pct(c: collections.Counter) -> str:
    n = sum(c.values())
    return f"{100.0 * c['reproduced'] / n:.1f}" if n else "–"


def failures_text(index: dict, results: dict) -> str:
    t = tally(index, results)
    out = io.StringIO()
    w = out.write
    o = t["overall"]
    w(f"# Import corpus failures by cause\n\nDistinct single-model units: {sum(o.values())}; " +
      ", ".join(f"{k} {o[k]}" for k in ORDER) + f" ({pct(o)}% reproduced).\n")
    for st in ("crashed", "refused", "differing"):
        groups = t["causes"][st]
        w(f"\n## {st} ({sum(len(v) for v in groups.values())})\n")
        for c, us in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            w(f"\n### {len(us)} × {c}\n\n")
            for u in sorted(us, key=lambda u: label_of(u["members"][-1])):
                _, res = outcome(u, results)
                rels = releases_of(u)
                w(f"- `{u['hash']}` `{label_of(u['members'][-1])}` ({rels[0]}–{rels[-1]}): "
                  f"{res.get('message', '')}\n")
                if st == "crashed":
                    w("\n```\n" + res.get("traceback", "").strip()[-3000:] + "\n```\n\n")
    return out.getvalue()


def report(args: argparse.Namespace) -> None:
    cache = Path(args.cache)
    index = load_index(cache)
    results = json.loads((cache / RESULTS).read_text(encoding="utf-8"))
    from tools import corpus_trains

    trains_path = cache / corpus_trains.TRAINS
    trained = json.loads(trains_path.read_text(encoding="utf-8")) if trains_path.exists() else None
    t = tally(index, results)
    out = io.StringIO()
    w = out.write
    w("# Import corpus: every published single-model script, imported and regenerated\n\n")
    w("`tools/import_corpus.py` reads local clones of NVIDIA-Merlin/HugeCTR, triton-inference-server/hugectr_backend "
      "and NVIDIA-Merlin/Merlin at every release tag, finds every single-model unit (a `.py` file, a notebook's "
      "`%%writefile *.py` cell, or a notebook's other code cells joined, that builds exactly one `hugectr.Model`), "
      "imports it with `ctrgen import` for its release, generates `model.py` from the spec and compares the hugectr "
      "calls of both (function, every argument by value, order; file paths may differ). A unit runs with the command "
      "line its repository runs it with (`ctrgen import --args`): a notebook's own `!python NAME.py ...` for its "
      "`%%writefile` cell, else the first README or CI script line of the release that runs the file, else the one "
      "the nearest release runs the same code with, else (a file no release tag runs: v25.03.00 ships no CI "
      "scripts) the line of the newest commit of any branch or pull request whose tree holds the same file byte for "
      "byte; without one, its argparse defaults.\n\n"
      "*reproduced*: the calls are equal; *refused*: the importer stopped with a one-line message; *differing*: "
      "imported but the generated calls differ; *crashed*: a Python exception from ctrgen (a bug). Each refusal's "
      "class says why it is right: *the release rejects it* (a function, argument or member the release lacks, a "
      "check HugeCTR itself makes), *a run-time value* (what the script computes only when it runs) or *a named "
      "gap of ctrgen* (its message says what ctrgen does not model). Scripts of other repositories: "
      "[import_external.md](import_external.md) (`tools/import_external.py`).\n\n")
    col = trained is not None
    w("## Per release\n\n| release | tags read | units | reproduced | refused | differing | crashed | % | "
      "not single-model |" + " trains in PyTorch |" * col + "\n|---|---|---:|---:|---:|---:|---:|---:|---:|" +
      "---:|" * col + "\n")
    for r in index["releases"]:
        c = t["per_rel"][r]
        tags = ", ".join(f"{k} {v}" for k, v in sorted(index["tags"][r].items()))
        excl = sum(1 for u in index["units"] if u["kind"] != "single" and r in releases_of(u))
        w(f"| {r} | {tags} | {sum(c.values())} | {c['reproduced']} | {c['refused']} | {c['differing']} | "
          f"{c['crashed']} | {pct(c)} | {excl} |" +
          (f" {corpus_trains.per_release(index, results, trained, r, releases_of)} |" if col else "") + "\n")
    o = t["overall"]
    excl = sum(1 for u in index["units"] if u["kind"] != "single")
    n_trained = sum(1 for v in (trained or {}).values() if v["status"] == "trained")
    w(f"| **distinct** | | **{sum(o.values())}** | **{o['reproduced']}** | **{o['refused']}** | "
      f"**{o['differing']}** | **{o['crashed']}** | **{pct(o)}** | {excl} |" + f" **{n_trained}** |" * col + "\n\n")
    w("*units*: the distinct single-model units of that release (a script and the notebook cell that writes the "
      "same code count once). "
      "A unit published in several releases is imported once per release; in the *distinct* row it counts as "
      "reproduced only if it reproduces in every release it is published in, otherwise by its worst outcome "
      "(crashed, then differing, then refused).\n\n")
    rejected = sum(1 for u in t["single"] if source_rejected(outcome(u, results)[1]))
    if rejected:
        w(f"Of the {o['refused']} refused units, {rejected} stop on what a release they are published in rejects "
          "itself (a function or argument that release does not have, a check HugeCTR itself makes, a required "
          "argument left out, a required command-line option no published command line gives): as published they do not run there, so no script can reproduce them.\n\n")
    excluded = collections.Counter(u["kind"] for u in index["units"] if u["kind"] != "single")
    w("Not single-model (distinct units, excluded): " +
      "; ".join(f"{k}: {n}" for k, n in sorted(excluded.items())) + ".\n\n")
    if trained is not None:
        w(corpus_trains.report_section(index, results, trained, releases_of, release_key, label_of, cause))
    times = sorted(r["cpu"] for r in results.values() if "cpu" in r)
    if times:
        # Bucketed, so that the committed report does not change with the machine's load.
        def bucket(x: float) -> str:
            return next(f"under {b} ms" for b in (10, 25, 50, 100, 250, 500, 1000, 10 ** 9) if x * 1000 < b)

        big = [r["cpu"] for r in results.values() if "cpu" in r and r.get("lines", 0) >= 250]
        w(f"CPU time of `ctrgen import` per unit (read, map, validate, write the spec): median "
          f"{bucket(times[len(times) // 2])}, all {bucket(times[-1])}" +
          (f"; {len(big)} imports of units of 250 lines or more: all {bucket(max(big))}" if big else "") + ".\n\n")
    for st, title in (("refused", "Refusal causes"), ("differing", "Differences"), ("crashed", "Crashes")):
        groups = t["causes"][st]
        if not groups:
            continue
        kind = "| class " if st == "refused" else ""
        w(f"## {title} (distinct units)\n\n| units {kind}| cause | example |\n|---:{'|---' * bool(kind)}|---|---|\n")
        for c, us in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            ex = min(label_of(u["members"][-1]) for u in us)
            cls = f"| {refusal_class(outcome(us[0], results)[1])} " if kind else ""
            w(f"| {len(us)} {cls}| {c.replace('|', '&#124;')} | `{ex}` |\n")
        w("\n")
    w("## Rerun\n\n```bash\n"
      "# clones (bare is fine) of NVIDIA-Merlin/HugeCTR, triton-inference-server/hugectr_backend and\n"
      "# NVIDIA-Merlin/Merlin\n"
      "python tools/import_corpus.py collect --hugectr hugectr --backend hugectr_backend --merlin Merlin\n"
      "python tools/import_corpus.py run                 # imports + regenerates every unit (cache: .work/corpus)\n"
      "python tools/import_corpus.py trains              # trains each unit that imports 2 steps in PyTorch\n"
      "python tools/import_corpus.py report              # writes this file\n"
      "python tools/import_corpus.py inventory -o FILE   # which hugectr names the units use\n```\n\n"
      "Releases read: " + ", ".join(index["releases"]) + ". For each the tag ctrgen's API table reads is read: the newest tag of the release "
      "(e.g. v3.3.1, v23.06.01), except 3.2, read at v3.2 (v3.2.1 already has 3.3's automatic Slices and "
      "`CreateMOS(ps_types, ...)`); HugeCTR under samples/, test/, notebooks/, tools/. hugectr_backend and Merlin do not "
      "tag every release: the tag of the same release name where there is one, otherwise the newest tag of each "
      "whose commit date is not later than the HugeCTR tag's is read "
      "(all of the repository).\n")
    Path(args.output).write_text(out.getvalue(), encoding="utf-8")
    print(f"report written to {args.output}: {sum(o.values())} distinct units, {pct(o)}% reproduced", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="import_corpus.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", default=str(DEFAULT_CACHE), help="folder for the extracted units and results "
                   "(outside the repository; default .work/corpus)")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="find every single-model unit of every release")
    c.add_argument("--hugectr", required=True, help="clone of NVIDIA-Merlin/HugeCTR (bare is fine)")
    c.add_argument("--backend", help="clone of triton-inference-server/hugectr_backend")
    c.add_argument("--merlin", help="clone of NVIDIA-Merlin/Merlin")
    c.add_argument("--release", action="append", help="only this release (repeatable)")
    i = sub.add_parser("inventory", help="which hugectr names the single-model units use")
    i.add_argument("-o", "--output", default="-")
    r = sub.add_parser("run", help="import, generate and compare every unit")
    r.add_argument("--release", action="append", help="only this release (repeatable); other results are kept")
    r.add_argument("--unit", action="append", help="only units whose hash starts with this (repeatable)")
    r.add_argument("-j", "--jobs", type=int, default=1, help="processes (default 1)")
    r.add_argument("--failures", help="also write the failures by cause to this file")
    tr = sub.add_parser("trains", help="train each unit that imports 2 steps with its generated train_torch.py "
                        "(tools/corpus_trains.py)")
    tr.add_argument("--unit", action="append", help="only units whose hash starts with this (repeatable); other "
                    "results are kept")
    rp = sub.add_parser("report", help="write the markdown report")
    rp.add_argument("-o", "--output", default=str(ROOT / "docs" / "import_corpus.md"))
    args = p.parse_args(argv)
    if getattr(args, "output", None) == "-":
        args.output = "/dev/stdout"
    {"collect": collect, "inventory": inventory, "run": run, "report": report, "trains": trains}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
