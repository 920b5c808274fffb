#!/usr/bin/env python3
"""HugeCTR scripts of repositories the import corpus does not read, imported as a new user would.

    python tools/import_external.py --hugectr DIR --clone REPO=DIR ... [-o docs/import_external.md]

REPO is one of SOURCES' names (owner/name) and DIR a local clone of it (bare is fine; everything is read with
``git``). Each source names the commits read: NVTabular at every release tag, the MLPerf training results at their
newest commit. A unit (a ``.py`` file or a notebook unit, split as tools/import_corpus.py splits them) that builds
exactly one ``hugectr.Model`` and is not a unit of the corpus itself is imported for the HugeCTR release current when
its commit was made (the newest release of tools/import_corpus.py's RELEASES whose HugeCTR tag is not later; 3.2 for
anything older), with its argparse defaults, beside the Python files of its own folder (the helper modules a user
has next to the script), then regenerated and compared call for call like a corpus unit. Identical units (same
syntax tree) at several paths or tags are one row. Prints nothing from the clones but paths, tags, counts and our
own messages.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import import_corpus as ic  # noqa: E402

# (repository, which commits: "tags" = every vX.Y.Z tag, "head" = the newest commit, what it is)
SOURCES = [
    ("NVIDIA-Merlin/NVTabular", "tags", "HugeCTR example notebooks, integration tests, benchmark script"),
    ("mlcommons/training_results_v1.1", "head", "MLPerf Training v1.1: DLRM on HugeCTR, every submitter"),
    ("mlcommons/training_results_v2.0", "head", "MLPerf Training v2.0: DLRM on HugeCTR, every submitter"),
    ("mlcommons/training_results_v2.1", "head", "MLPerf Training v2.1: DLRM on HugeCTR, every submitter"),
    ("mlcommons/training_results_v3.0", "head", "MLPerf Training v3.0: DLRM-DCNv2 on HugeCTR"),
    ("mlcommons/training_results_v3.1", "head", "MLPerf Training v3.1: DLRM-DCNv2 on HugeCTR"),
]


def release_dates(hug: ic.Git) -> list[tuple[str, str]]:
    tags = hug.tags()
    out = []
    for r in ic.RELEASES:
        t = ic.release_tag(tags, r)
        if t:
            out.append((hug.date(t), r))
    return sorted(out)


def release_at(dates: list[tuple[str, str]], when: str) -> str:
    current = ic.RELEASES[0]
    for d, r in dates:
        if d <= when:
            current = r
    return current


def commits_of(git: ic.Git, which: str) -> list[str]:
    if which == "head":
        return ["HEAD"]
    tags = [t for t in git.tags() if ic.re.match(r"^v\d+\.\d+\.\d+$", t)]
    return sorted(tags, key=lambda t: tuple(int(x) for x in t[1:].split(".")))


def import_in_folder(text: str, release: str, siblings: dict[str, str]) -> dict:
    """ic.import_and_compare with the unit's folder beside it: its sibling .py files written next to it."""
    with tempfile.TemporaryDirectory(prefix="ctrgen-external-") as tmp:
        for name, body in siblings.items():
            (Path(tmp) / name).write_text(body, encoding="utf-8")
        return ic.import_and_compare(text, release, "unit", None, folder=Path(tmp))


def collect(clones: dict[str, str], hugectr: str, cache: Path) -> tuple[list[dict], int]:
    known = set()
    index = cache / ic.INDEX
    if index.exists():
        known = {u["hash"] for u in json.loads(index.read_text(encoding="utf-8"))["units"]}
    dates = release_dates(ic.Git(hugectr))
    units: dict[tuple[str, str], dict] = {}
    repeated: set[str] = set()
    for repo, which, _ in SOURCES:
        if repo not in clones:
            continue
        git = ic.Git(clones[repo])
        for ref in commits_of(git, which):
            # A results repository is published with its first commit; later ones only touch headers.
            when = git.date(ref) if which == "tags" else git.date(git._run("rev-list", "--max-parents=0", ref).split()[-1])
            release = release_at(dates, when)
            files = git.files(ref)
            by_dir = collections.defaultdict(dict)
            for sha, path in files:
                if path.endswith(".py"):
                    by_dir[str(Path(path).parent)][Path(path).name] = sha
            for sha, path in files:
                data = git.blob(sha)
                if b"hugectr" not in data:
                    continue
                for name, text, _ in ic.units_and_argv(path, data):
                    if ic.classify(ic.shape_of(text)) != "single":
                        continue
                    h = ic.normalized_hash(text)
                    if h in known:
                        repeated.add(h)
                        continue
                    u = units.setdefault((h, release), {"repo": repo, "release": release, "text": text,
                                                        "paths": collections.OrderedDict(), "hash": h})
                    label = path + (f" [{name}]" if name else "")
                    u["paths"].setdefault(label, []).append(ref)
                    if "siblings" not in u:
                        folder = by_dir[str(Path(path).parent)]
                        u["siblings"] = {n: git.blob(s).decode("utf-8", "replace") for n, s in folder.items()
                                         if s != sha}
        git.close()
    return list(units.values()), len(repeated)


def refs_text(refs: list[str]) -> str:
    refs = [r for r in refs if r != "HEAD"]
    return f" ({refs[0]}–{refs[-1]})" if len(refs) > 1 else (f" ({refs[0]})" if refs else "")


def report(rows: list[dict], repeated: int) -> str:
    out = io.StringIO()
    w = out.write
    c = collections.Counter(r["status"] for r in rows)
    w("# Import of HugeCTR scripts from other repositories (not tuned for)\n\n"
      "Written by `tools/import_external.py` (its docstring: what is read and how). Sources: " +
      "; ".join(f"{repo} ({what})" for repo, _, what in SOURCES) + ". A unit already in the corpus "
      f"([import_corpus.md](import_corpus.md)) is not repeated here ({repeated} distinct units are).\n\n")
    w(f"{len(rows)} distinct units: " + ", ".join(f"{c[k]} {k}" for k in ic.ORDER) + ". Each refusal's class as in "
      "the corpus report: *the release rejects it*, *a run-time value* or *a named gap of ctrgen*.\n\n")
    w("| source | file (tags) | release | outcome | class | cause |\n|---|---|---|---|---|---|\n")
    for r in rows:
        paths = list(r["paths"].items())
        first, refs = paths[0]
        more = f" and {len(paths) - 1} other path(s)" if len(paths) > 1 else ""
        cls = ic.refusal_class(r["result"]) if r["status"] == "refused" else ""
        cause = ic.cause(r["result"]).replace("|", "&#124;")
        cause = cause if len(cause) <= 160 else cause[:157] + "..."
        w(f"| {r['repo']} | `{first}`{refs_text(refs)}{more} | {r['release']} | {r['status']} | {cls} | "
          f"{cause if r['status'] != 'reproduced' else ''} |\n")
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="import_external.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--hugectr", required=True, help="clone of NVIDIA-Merlin/HugeCTR (its tag dates pick releases)")
    p.add_argument("--clone", action="append", default=[], metavar="REPO=DIR", help="a clone of one of SOURCES")
    p.add_argument("--cache", default=str(ic.DEFAULT_CACHE), help="the corpus cache (its units are not repeated)")
    p.add_argument("-o", "--output", default=str(ic.ROOT / "docs" / "import_external.md"))
    args = p.parse_args(argv)
    names = {repo for repo, _, _ in SOURCES}
    clones = {}
    for item in args.clone:
        repo, _, path = item.partition("=")
        if repo not in names or not path:
            p.error(f"--clone {item!r}: expected REPO=DIR with REPO one of {', '.join(sorted(names))}")
        clones[repo] = path
    units, repeated = collect(clones, args.hugectr, Path(args.cache))
    rows = []
    for i, u in enumerate(units, 1):
        ic.progress(i, len(units), "import")
        res = import_in_folder(u["text"], u["release"], u["siblings"])
        rows.append({**u, "status": res["status"], "result": res})
    rows.sort(key=lambda r: (r["repo"], ic.release_key(r["release"]), next(iter(r["paths"]))))
    Path(args.output).write_text(report(rows, repeated), encoding="utf-8")
    c = collections.Counter(r["status"] for r in rows)
    print(f"{len(rows)} distinct units: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())) +
          f"; written to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
