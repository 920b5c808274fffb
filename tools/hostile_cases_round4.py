"""The hostile inputs of issue 43 (fourth round), part one: every path argument of every command given a FIFO, a
folder (or a file where a folder is wanted), a missing file, a link to /dev/zero, a link out of the case's folder,
a file that is not UTF-8, a 100 MiB file (a hole: no disk) and an empty file. Registered into
tools/hostile_cases.py's CASES when it is imported; built at run time like every other case."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable

from hostile_cases import LOCK, REPO, SPEC, add, big_sparse, dump, spec_folder
from hostile_outcomes import Run

HUGE = 100 << 20        # 100 MiB, as a hole: what must not be read whole (and takes no disk)


def _place(kind: str, path: Path, folder_wanted: bool) -> None:
    """Put the hostile thing ``kind`` at ``path`` (whatever was there is removed first)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "file":                      # where a folder is wanted
        path.write_text("not a folder\n")
    elif kind == "missing":
        pass
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "link_out":
        path.symlink_to("/etc" if folder_wanted else "/etc/passwd")
    elif kind == "not_utf8":
        path.write_bytes(b"name: \"\xff\xfe\"\n\x80\x81\n")
    elif kind == "huge":
        big_sparse(path, HUGE)
    elif kind == "empty":
        path.write_bytes(b"") if not folder_wanted else path.mkdir()
    else:
        raise ValueError(kind)


FILE_KINDS = ("fifo", "folder", "missing", "dev_zero", "link_out", "not_utf8", "huge", "empty")
FOLDER_KINDS = ("fifo", "file", "missing", "dev_zero", "link_out", "empty")

# What each kind's refusal says, unless the argument's own table entry says otherwise.
REASONS = {"fifo": r"not a regular file|FIFO|not a folder|is not a directory", "folder": r"folder|directory",
           "file": r"not a folder|is a file|not a directory|does not exist",
           "missing": r"not found|does not exist|no such|No such", "dev_zero": r"not a regular file|device|not a folder",
           "not_utf8": r"UTF-8|utf-8", "huge": r"bytes|MiB|too large|larger|more than"}


def _spec_base(d: Path) -> None:
    spec_folder(d)


def _model_base(d: Path) -> None:
    shutil.copytree(REPO / "generated" / "movielens", d / "model")
    spec_folder(d)


def _run_base(d: Path) -> None:
    from hostile_cases_round3 import POINTS, RUN_JSON

    (d / "run").mkdir(parents=True)
    (d / "run" / "run.json").write_text(json.dumps(RUN_JSON))
    (d / "run" / "metrics.json").write_text(json.dumps({"iterations": 2, "samples_per_second": 1.0}))
    (d / "run" / "metrics.jsonl").write_text(POINTS)


def _keysets_base(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "a.data").write_bytes(b"")
    (d / "file_list.txt").write_text("1\na.data\n")
    spec_folder(d)


def _import_base(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)


# a workflow argument may be a folder or a schema file: what is neither is not recognised
WF = {k: "not a saved NVTabular workflow" for k in ("fifo", "file", "dev_zero")}

# (label, base, hostile path inside the case folder, argv with {P} for that path, folder wanted, reasons by kind)
PATH_ARGS: list[tuple[str, Callable[[Path], None], str, list[str], bool, dict[str, str]]] = [
    ("generate_spec", _spec_base, "s.yaml", ["generate", "{P}", "--out", "out"], False, {}),
    ("graph_spec", _spec_base, "s.yaml", ["graph", "{P}"], False, {}),
    ("summary_spec", _spec_base, "s.yaml", ["summary", "{P}"], False, {}),
    ("check_spec", _spec_base, "s.yaml", ["check", "{P}", "--out", "out"], False, {}),
    ("lock_spec", _spec_base, "s.yaml", ["lock", "{P}"], False, {}),
    ("port_spec", _spec_base, "s.yaml", ["port", "{P}", "--to", "3.4", "--out", "o.yaml"], False, {}),
    ("etl_spec", _spec_base, "s.yaml", ["etl", "{P}", "--out", "gen"], False, {}),
    ("train_spec", _spec_base, "s.yaml", ["train", "{P}", "--out", "run", "--device", "cpu"], False, {}),
    ("generate_lock", _spec_base, "s.features.lock.json", ["generate", "s.yaml", "--out", "out"], False, {}),
    ("graph_lock", _spec_base, "s.features.lock.json", ["graph", "s.yaml"], False, {}),
    ("summary_lock", _spec_base, "s.features.lock.json", ["summary", "s.yaml"], False, {}),
    ("keysets_file_list", _keysets_base, "file_list.txt",
     ["keysets", "{P}", "--format", "norm", "--key-type", "int64", "-q"], False, {}),
    ("keysets_spec", _keysets_base, "s.yaml", ["keysets", "file_list.txt", "--spec", "{P}", "-q"], False, {}),
    ("import_script", _import_base, "train.py", ["import", "{P}", "--hugectr-version", "23.06", "--out", "out"],
     False, {}),
    ("import_notebook", _import_base, "train.ipynb",
     ["import", "{P}", "--hugectr-version", "23.06", "--out", "out"], False, {}),
    ("validate_ps", _model_base, "ps2.json", ["validate", "model/triton", "--ps", "{P}"], False, {}),
    ("validate_features_lock", _model_base, "l.json",
     ["validate", "model/triton", "--features-lock", "{P}"], False, {}),
    ("validate_spec", _model_base, "s.yaml", ["validate", "model/triton", "--spec", "{P}"], False, {}),
    ("report_run_json", _run_base, "run/run.json", ["report", "run"], False, {}),
    ("report_metrics_json", _run_base, "run/metrics.json", ["report", "run"], False, {}),
    ("report_dir", _run_base, "run", ["report", "{P}"], True, {}),
    ("validate_repo", _model_base, "model/triton", ["validate", "{P}"], True, {}),
    ("serve_repo", _model_base, "model/triton",
     ["serve", "{P}", "--http-port", "1", "--grpc-port", "2", "--metrics-port", "0", "--timeout", "1"], True, {}),
    ("generate_workflow", _spec_base, "wf", ["generate", "s.yaml", "--workflow", "{P}", "--out", "out"], True, WF),
    ("lock_workflow", _spec_base, "wf", ["lock", "s.yaml", "--workflow", "{P}"], True, WF),
    ("graph_workflow", _spec_base, "wf", ["graph", "--workflow", "{P}"], True, WF),
]


def _path_case(base: Callable[[Path], None], rel: str, argv: list[str], kind: str, folder_wanted: bool
               ) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        base(d)
        _place(kind, d / rel, folder_wanted)
        return Run(d, [a.replace("{P}", rel) for a in argv], refusal_codes=(1, 2) if argv[0] in ("validate",
                                                                                                  "check") else (2,))
    return build


QUICK_PATHS = {("graph_spec", "fifo"), ("summary_spec", "huge"), ("report_dir", "file"), ("validate_ps", "dev_zero"),
               ("keysets_spec", "not_utf8")}
for _label, _base, _rel, _argv, _folder, _reasons in PATH_ARGS:
    for _kind in (FOLDER_KINDS if _folder else FILE_KINDS):
        _reason = _reasons.get(_kind, REASONS.get(_kind, ""))
        add("paths", f"{_label}_{_kind}", _path_case(_base, _rel, _argv, _kind, _folder), "refused",
            reason=_reason, quick=(_label, _kind) in QUICK_PATHS)


# ---- every spec-reading command given the same bad spec (each loads it its own way) ----------------------------------

def _bad_spec(text: str, argv: list[str]) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        spec_folder(d, text)
        return Run(d, argv, refusal_codes=(1, 2) if argv[0] == "check" else (2,))
    return build


def _with(path: tuple, value: object) -> str:
    from hostile_cases import with_value

    return dump(with_value(SPEC, path, value))


BAD_SPECS: dict[str, tuple[str, str]] = {
    "batchsize_nan": (_with(("solver", "batchsize"), float("nan")), "batchsize"),
    "batchsize_2pow63": (_with(("solver", "batchsize"), 2**63), "batchsize"),
    "vec_size_string": (_with(("embeddings", 0, "embedding_vec_size"), "16"), "embedding_vec_size"),
    "units_dict": (_with(("model", "units"), {"a": 1}), "units"),
    "name_code": (_with(("name",), "x'); import os; os.system('id') #"), "name"),
    "top_list": ("- 1\n- 2\n", "mapping|must be|not a"),
    "top_null": ("null\n", "empty|mapping|must be|not a"),
    "alias_bomb": ("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi")), "alias|anchor"),
    "tab_indent": ("version: 1\nname: m\n\tsolver: 1\n", "yaml|YAML|tab|syntax|found character"),
    "unknown_top_field": (dump({**SPEC, "bogus_field": 1}), "bogus_field"),
}
SPEC_COMMANDS = {"graph": ["graph", "s.yaml"], "summary": ["summary", "s.yaml"],
                 "check": ["check", "s.yaml", "--out", "out"], "port": ["port", "s.yaml", "--to", "3.4"],
                 "lock": ["lock", "s.yaml"], "keysets": ["keysets", "--spec", "s.yaml", "-q"]}
for _cmd, _argv in SPEC_COMMANDS.items():
    for _vname, (_text, _reason) in BAD_SPECS.items():
        add("spec commands", f"{_cmd}_{_vname}", _bad_spec(_text, _argv), "refused", reason=_reason,
            quick=(_cmd, _vname) in (("graph", "name_code"), ("summary", "alias_bomb"), ("keysets", "top_list")))


def _lock_bad(lock: dict | str, argv: list[str]) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        spec_folder(d, SPEC, lock)
        return Run(d, argv)
    return build


BAD_LOCKS: dict[str, dict | str] = {
    "cardinality_nan": '{"ctrgen_features_lock": 1, "categorical": [{"name": "a", "dtype": "int64", '
                       '"cardinality": NaN}], "continuous": [], "labels": []}',
    "cardinality_string": {**LOCK, "categorical": [{"name": "userId", "dtype": "int64", "cardinality": "9"}]},
    "name_code": {**LOCK, "categorical": [{"name": "a'); import os #", "dtype": "int64", "cardinality": 9}]},
    "top_list": "[]",
}
for _cmd, _argv in {"graph": ["graph", "s.yaml"], "summary": ["summary", "s.yaml"]}.items():
    for _vname, _lock in BAD_LOCKS.items():
        # a column name with quotes is data, kept as a literal wherever it is written (as generate does)
        add("spec commands", f"{_cmd}_lock_{_vname}", _lock_bad(_lock, _argv),
            "accepted" if _vname == "name_code" else "refused", reason=r"lock|cardinality|name",
            check=lambda d: "")


# ---- schema: takes nothing -------------------------------------------------------------------------------------------

def _schema(*argv: str) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        d.mkdir(parents=True, exist_ok=True)
        return Run(d, ["schema", *argv])
    return build


for _vname, _argv in {"extra_argument": ("s.yaml",), "unknown_option": ("--out", "x"),
                      "code_argument": ("$(id)",)}.items():
    add("schema", _vname, _schema(*_argv), "refused", reason=r"unexpected extra argument|No such option",
        quick=_vname == "extra_argument")


def _schema_json(d: Path) -> Run:
    d.mkdir(parents=True, exist_ok=True)

    def call() -> None:
        import contextlib
        import io

        from codegen.cli import main

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                main.main(args=["schema"], prog_name="ctrgen", standalone_mode=False)
            except SystemExit as exc:
                assert not exc.code, exc.code
        doc = json.loads(out.getvalue())
        assert doc.get("type") == "object" and "properties" in doc, "the schema is not a JSON Schema object"
        (d / "schema.json").write_text(out.getvalue())
    return Run(d, call=call)


add("schema", "prints_a_json_schema", _schema_json, "accepted",
    check=lambda d: "" if (d / "schema.json").stat().st_size > 1000 else "silent wrong: a short schema", quick=True)
