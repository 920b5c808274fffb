"""The hostile inputs of issue 28, built at run time: bad, tampered or adversarial files and arguments for every
command, each with what a correct ctrgen does (refuse it in one line, or accept it and write correct output).

What a case is and how a run is judged: tools/hostile_outcomes.py. Used by tools/hostile.py (``make hostile``: every case, each in its own process with a time, memory and file-size
limit, and a table of outcomes) and tests/test_hostile.py (the cases marked ``quick``, in-process, one test per
kind). A case builds its files in an empty folder and returns what to run: ctrgen's arguments or a function.
Nothing here is written by hand into the repository: every file is made here, at run time.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any, Callable

import yaml  # PyYAML (pinned by NVTabular): writes the test specs

REPO = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_outcomes import IMPORT, MINE, RUNTIME, Case, Run, check_outputs  # noqa: E402

LOCK = {
    "ctrgen_features_lock": 1, "source": "recorded", "provenance": "hostile-input test",
    "categorical": [{"name": "userId", "dtype": "int64", "cardinality": 162542},
                    {"name": "movieId", "dtype": "int64", "cardinality": 56586}],
    "continuous": [],
    "labels": [{"name": "rating", "dtype": "float32"}],
}

SPEC: dict = {
    "version": 1, "name": "movielens", "hugectr_version": "3.3",
    "data": {"format": "parquet", "train": ["/model/data/train/_file_list.txt"],
             "eval": "/model/data/valid/_file_list.txt"},
    "features": {"label": ["rating"]},
    "solver": {"vvgpu": [[0]], "batchsize": 2048, "batchsize_eval": 2048, "max_eval_batches": 160,
               "repeat_dataset": True},
    "optimizer": {"type": "Adam"},
    "input": {"label_name": "label", "dense_name": "dense",
              "sparse": [{"name": "data1", "nnz_per_slot": 2, "is_fixed_length": True}]},
    "embeddings": [{"name": "sparse_embedding1", "input": "data1",
                    "embedding_type": "LocalizedSlotSparseEmbeddingHash", "workspace_size_per_gpu_in_mb": 100,
                    "embedding_vec_size": 16, "combiner": "sum"}],
    "model": {"preset": "mlp", "units": [128, 128]},
    "training": {"max_iter": 2000, "display": 100, "eval_interval": 200, "snapshot": 1900},
    "targets": ["hugectr", "torch"],
}


CASES: list[Case] = []


def case(kind: str, name: str, expect: str, *, check: Callable[[Path], str] | None = None, area: str = MINE,
         quick: bool = False) -> Callable[[Callable[[Path], Run]], Callable[[Path], Run]]:
    def register(build: Callable[[Path], Run]) -> Callable[[Path], Run]:
        CASES.append(Case(kind, name, build, expect, check, area, quick))
        return build
    return register


def add(kind: str, name: str, build: Callable[[Path], Run], expect: str, **kw: Any) -> None:
    CASES.append(Case(kind, name, build, expect, **kw))


# ---- building blocks ------------------------------------------------------------------------------------------------

def dump(spec: dict) -> str:
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=False)


def spec_folder(d: Path, spec: dict | str = SPEC, lock: dict | str | None = None, name: str = "s") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}.yaml"
    path.write_text(spec if isinstance(spec, str) else dump(spec))
    lock = LOCK if lock is None else lock
    (d / f"{name}.features.lock.json").write_text(lock if isinstance(lock, str) else json.dumps(lock, indent=2))
    return path


def generate(d: Path, spec: str = "s.yaml", out: str = "out") -> Run:
    return Run(d, ["generate", spec, "--out", out])


def with_value(spec: dict, path: tuple, value: Any) -> dict:
    """A deep copy of ``spec`` with the field at ``path`` (keys and list indexes) set to ``value``."""
    out = json.loads(json.dumps(spec))
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def big_sparse(path: Path, size: int) -> None:
    """A file of ``size`` bytes that takes no disk (a hole): reading it whole is what a case must not do."""
    with open(path, "wb") as fh:
        fh.truncate(size)


def fifo(path: Path) -> None:
    if path.exists() or path.is_symlink():
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    os.mkfifo(path)


def to_dev_zero(path: Path) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to("/dev/zero")


def deep_json(levels: int = 100_000) -> str:
    return "[" * levels + "]" * levels


# ---- output checks of the cases ------------------------------------------------------------------------------------

def check_generated(folder: str = "out") -> Callable[[Path], str]:
    return lambda d: check_outputs(d / folder)


def literal_in(relpath: str, value: str) -> Callable[[Path], str]:
    """The generated file holds ``value`` as one exact string literal (and is otherwise clean)."""
    def check(d: Path) -> str:
        if problem := check_outputs(d / "out"):
            return problem
        tree = ast.parse((d / "out" / "movielens" / relpath).read_text(encoding="utf-8"))
        if not any(isinstance(n, ast.Constant) and n.value == value for n in ast.walk(tree)):
            return f"silent wrong: {relpath} does not hold {value!r} as a literal"
        return ""
    return check

# ---- spec values (generate) -----------------------------------------------------------------------------------------

INT_FIELDS = {
    "batchsize": ("solver", "batchsize"), "batchsize_eval": ("solver", "batchsize_eval"),
    "max_eval_batches": ("solver", "max_eval_batches"), "vec_size": ("embeddings", 0, "embedding_vec_size"),
    "workspace": ("embeddings", 0, "workspace_size_per_gpu_in_mb"), "max_iter": ("training", "max_iter"),
    "display": ("training", "display"), "eval_interval": ("training", "eval_interval"),
    "units0": ("model", "units", 0), "nnz_per_slot": ("input", "sparse", 0, "nnz_per_slot"),
    "vvgpu_id": ("solver", "vvgpu", 0, 0),
}
BAD_INTS = {"minus1": -1, "2pow31": 2**31, "2pow63": 2**63, "2pow64": 2**64, "1e30": 10**30, "float1.5": 1.5,
            "string12": "12", "true": True, "list": [1], "map": {"a": 1}, "nan": float("nan"), "inf": float("inf"),
            "empty": "", "sci": "1e3"}
VALID_INTS = {"batchsize": 4096, "batchsize_eval": 4096, "max_eval_batches": 1, "vec_size": 1024, "workspace": 1,
              "max_iter": 3000, "display": 1, "eval_interval": 300, "units0": 1, "nnz_per_slot": 3, "vvgpu_id": 3}
for fname, fpath in INT_FIELDS.items():
    for vname, value in BAD_INTS.items():
        add("spec value", f"{fname}={vname}",
            lambda d, p=fpath, v=value: generate(spec_folder(d, with_value(SPEC, p, v)).parent),
            "refused", quick=(fname == "batchsize" and vname in ("2pow64", "nan", "string12")))
    add("spec value", f"{fname}=valid", lambda d, p=fpath, f=fname: generate(spec_folder(
        d, with_value(SPEC, p, VALID_INTS[f])).parent), "accepted", check=check_generated())

for vname, value in {"nan": float("nan"), "inf": float("inf"), "minus_inf": float("-inf"), "1e39": 1e39,
                     "zero": 0.0, "negative": -0.001, "string": "0.001", "bool": True, "list": [0.1]}.items():
    add("spec value", f"lr={vname}", lambda d, v=value: generate(spec_folder(
        d, with_value(SPEC, ("solver", "lr"), v)).parent), "refused", quick=vname == "nan")
add("spec value", "lr=1e-300", lambda d: generate(spec_folder(d, with_value(SPEC, ("solver", "lr"), 1e-300)).parent),
    "accepted", check=check_generated())

IDENT_FIELDS = {"name": ("name",), "input_name": ("input", "sparse", 0, "name"),
                "embedding_name": ("embeddings", 0, "name")}
BAD_IDENTS = {"space": "a b", "python": "x\"; import os; os.system('id') #", "dotdot": "../x", "newline": "a\nb",
              "bidi": "\u202eabc", "empty": "", "long": "a" * 65, "digit_first": "1abc", "number": 123,
              "slash": "a/b", "null_byte": "a\x00b"}
for fname, fpath in IDENT_FIELDS.items():
    for vname, value in BAD_IDENTS.items():
        def build(d: Path, p: tuple = fpath, v: Any = value) -> Run:
            spec = with_value(SPEC, p, v)
            if p == ("input", "sparse", 0, "name"):
                spec["embeddings"][0]["input"] = v
            return generate(spec_folder(d, spec).parent)
        add("spec value", f"{fname}={vname}", build, "refused", quick=(fname == "name" and vname == "python"))

for vname, value in {"unknown": "Bogus", "lowercase": "adam", "number": 1, "null": None}.items():
    add("spec value", f"optimizer.type={vname}", lambda d, v=value: generate(spec_folder(
        d, with_value(SPEC, ("optimizer", "type"), v)).parent), "refused")
for fname, fpath, value in (("embedding_type", ("embeddings", 0, "embedding_type"), "Bogus"),
                            ("combiner", ("embeddings", 0, "combiner"), "max"),
                            ("preset", ("model", "preset"), "bogus"),
                            ("format", ("data", "format"), "csv"),
                            ("target", ("targets",), ["hugectr", "bogus"]),
                            ("version", ("hugectr_version",), "99"), ("version_float", ("hugectr_version",), 3.3),
                            ("version_patch", ("hugectr_version",), "3.3.0"),
                            ("spec_version", ("version",), 2)):
    add("spec value", f"{fname}={value!r}", lambda d, p=fpath, v=value: generate(spec_folder(
        d, with_value(SPEC, p, v)).parent), "refused")

# args: maps checked against the C++ types of the HugeCTR release
for vname, args in {"device_layout_string": {"device_layout": "LocalFirst"},
                    "device_layout_unknown": {"device_layout": "DeviceLayout.Bogus"},
                    "is_dlrm_string": {"is_dlrm": "yes"}, "unknown_arg": {"bogus_argument": 1},
                    "nan": {"is_dlrm": float("nan")}, "deep": {"is_dlrm": [[[[[[[[1]]]]]]]]},
                    "int_overflow": {"num_gpus_per_node": 2**64}}.items():
    add("spec args", vname, lambda d, a=args: generate(spec_folder(
        d, with_value(SPEC, ("solver", "args"), a)).parent), "refused", quick=vname == "device_layout_string")
add("spec args", "device_layout_member", lambda d: generate(spec_folder(d, with_value(
    SPEC, ("solver", "args"), {"device_layout": "DeviceLayout.NodeFirst"})).parent), "accepted",
    check=check_generated())

# the rules of codegen/model/spec_rules.py
for vname, columns in {"empty": [], "unknown": ["nope"], "label": ["rating"]}.items():
    add("spec rules", f"sparse_columns_{vname}", lambda d, c=columns: generate(spec_folder(
        d, with_value(SPEC, ("input", "sparse", 0, "columns"), c)).parent), "refused", quick=vname == "empty")
add("spec rules", "sparse_columns_both", lambda d: generate(spec_folder(d, with_value(
    SPEC, ("input", "sparse", 0, "columns"), ["userId", "movieId"])).parent), "accepted", check=check_generated())
for vname, value in {"MANIFEST": "MANIFEST", "manifest_case": "manifest", "features": "features"}.items():
    add("spec rules", f"name={vname}", lambda d, v=value: generate(spec_folder(
        d, with_value(SPEC, ("name",), v)).parent), "refused", quick=vname == "MANIFEST")
add("spec rules", "name=features_without_torch", lambda d: generate(spec_folder(d, {
    **with_value(SPEC, ("name",), "features"), "targets": ["hugectr"]}).parent), "accepted",
    check=check_generated())
for vname, value in {"twice": [[0, 0]], "twice_of_three": [[0, 1, 1]], "empty_row": [[]], "no_rows": [],
                     "negative": [[-1]]}.items():
    add("spec rules", f"vvgpu_{vname}", lambda d, v=value: generate(spec_folder(
        d, with_value(SPEC, ("solver", "vvgpu"), v)).parent), "refused", quick=vname == "twice")
add("spec rules", "vvgpu_two_gpus", lambda d: generate(spec_folder(d, with_value(
    SPEC, ("solver", "vvgpu"), [[0, 1]])).parent), "accepted", check=check_generated())

# strings copied into generated code: accepted only as exact, inert literals
for vname, value in {"quote": "/d/x'); import os; os.system('id'); ('", "dquote": '/d/x"; import os #',
                     "backslash": "/d/x\\'\\n", "triple": "/d/'''\"\"\"", "newline": "/d/a\nb",
                     "bidi": "/d/\u202etxt.lst", "shell": "/d/$(id)`id`;id", "long": "/d/" + "a" * 5000}.items():
    add("injection", f"data.train={vname}", lambda d, v=value: generate(spec_folder(
        d, with_value(SPEC, ("data", "train", 0), v)).parent), "either",
        check=literal_in("model.py", value), quick=vname == "quote")
for vname, column in {"quote": "a\"'; import os #", "html": "</code><img src=x onerror=alert(1)>",
                      "newline": "a\nb", "bidi": "user\u202eId", "pbtxt": "a\" } input { name: \"x"}.items():
    def column_build(d: Path, c: str = column) -> Run:
        lock = json.loads(json.dumps(LOCK))
        lock["categorical"][0]["name"] = c
        return generate(spec_folder(d, lock=lock).parent)
    add("injection", f"lock_column={vname}", column_build, "either", check=check_generated(),
        quick=vname == "pbtxt")


@case("injection", "spec_file_closes_html_comment", "accepted", check=check_generated(), quick=True)
def _(d: Path) -> Run:
    spec_folder(d, name="x--><img src=x onerror=alert(1)>")
    return generate(d, "x--><img src=x onerror=alert(1)>.yaml")


@case("injection", "provenance_html", "accepted", check=check_generated())
def _(d: Path) -> Run:
    return generate(spec_folder(d, lock={**LOCK, "provenance": "--><script>alert(1)</script>"}).parent)


# ---- spec files -----------------------------------------------------------------------------------------------------

def _spec_file(mutate: Callable[[Path], None]) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        mutate(spec_folder(d))
        return generate(d)
    return build


SPEC_FILES: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (fifo, "refused"), "dev_zero": (to_dev_zero, "refused"),
    "folder": (lambda p: (p.unlink(), p.mkdir()), "refused"), "huge": (lambda p: big_sparse(p, 3 << 30), "refused"),
    "over_cap": (lambda p: p.write_text(dump(SPEC) + "#" * (1 << 20)), "refused"),
    "not_utf8": (lambda p: p.write_bytes(p.read_bytes() + b"# \xff\xfe\n"), "refused"),
    "nul": (lambda p: p.write_bytes(p.read_bytes() + b"# a\x00b\n"), "refused"),
    "bom": (lambda p: p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes()), "accepted"),
    "crlf": (lambda p: p.write_bytes(p.read_bytes().replace(b"\n", b"\r\n")), "accepted"),
    "alias_bomb": (lambda p: p.write_text("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)) + dump(SPEC)), "refused"),
    "deep_flow": (lambda p: p.write_text(dump(SPEC) + "extra: " + "[" * 100_000 + "]" * 100_000 + "\n"), "refused"),
    "deep_block": (lambda p: p.write_text(dump(SPEC) + "".join(f"{'  ' * i}k{i}:\n" for i in range(200))
                                          + "  " * 200 + "v: 1\n"), "refused"),
    "empty": (lambda p: p.write_text(""), "refused"), "comment_only": (lambda p: p.write_text("# nothing\n"), "refused"),
    "top_list": (lambda p: p.write_text("- 1\n- 2\n"), "refused"), "null": (lambda p: p.write_text("null\n"), "refused"),
    "tabs": (lambda p: p.write_text("version: 1\nsolver:\n\tbatchsize: 1\n"), "refused"),
    "duplicate_key": (lambda p: p.write_text(dump(SPEC) + "name: other\n"), "refused"),
    "unknown_key": (lambda p: p.write_text(dump(SPEC) + "bogus: 1\n"), "refused"),
    "python_tag": (lambda p: p.write_text(dump(SPEC).replace("name: movielens",
                                                              "name: !!python/object/apply:os.system ['id']")),
                   "refused"),
    "long_key": (lambda p: p.write_text(dump(SPEC) + "k" * 100_000 + ": 1\n"), "refused"),
    "binary": (lambda p: p.write_bytes(os.urandom(4096)), "refused"),
}
for vname, (mutate, expect) in SPEC_FILES.items():
    add("spec file", vname, _spec_file(mutate), expect, check=check_generated() if expect == "accepted" else None,
        quick=vname in ("fifo", "alias_bomb", "deep_flow", "crlf"))


@case("spec file", "missing", "refused")
def _(d: Path) -> Run:
    d.mkdir(parents=True, exist_ok=True)
    return generate(d, "nope.yaml")


@case("names", "file_name_with_newline", "refused", quick=True)
def _(d: Path) -> Run:
    spec_folder(d, name="a\nb")
    (d / "a\nb.features.lock.json").unlink()          # refused: the lock is missing; the line names the file
    return generate(d, "a\nb.yaml")


@case("names", "file_name_with_bidi", "refused")
def _(d: Path) -> Run:
    spec_folder(d, name="evil\u202egpj")
    (d / "evil\u202egpj.features.lock.json").unlink()
    return generate(d, "evil\u202egpj.yaml")


@case("names", "file_name_with_escape", "refused")
def _(d: Path) -> Run:
    spec_folder(d, name="a\x1b[2Jb")
    (d / "a\x1b[2Jb.features.lock.json").unlink()
    return generate(d, "a\x1b[2Jb.yaml")


@case("names", "column_name_with_newline_in_a_refusal", "refused")
def _(d: Path) -> Run:
    spec = with_value(SPEC, ("features", "categorical"), ["user\nId\u202e"])
    return generate(spec_folder(d, spec).parent)


# ---- features locks -------------------------------------------------------------------------------------------------

def _lock_case(mutate: Callable[[dict], Any]) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        lock = json.loads(json.dumps(LOCK))
        result = mutate(lock)
        return generate(spec_folder(d, lock=result if isinstance(result, str) else lock).parent)
    return build


def _set_card(value: Any) -> Callable[[dict], None]:
    return lambda lock: lock["categorical"][0].__setitem__("cardinality", value)


LOCKS: dict[str, tuple[Callable[[dict], Any], str]] = {
    "nan_cardinality": (lambda lock: json.dumps(lock).replace("162542", "NaN"), "refused"),
    "infinity_cardinality": (lambda lock: json.dumps(lock).replace("162542", "Infinity"), "refused"),
    "1e400_cardinality": (lambda lock: json.dumps(lock).replace("162542", "1e400"), "refused"),
    "5000_digit_cardinality": (lambda lock: json.dumps(lock).replace("162542", "9" * 5000), "refused"),
    "2pow63_cardinality": (_set_card(2**63), "refused"), "zero_cardinality": (_set_card(0), "refused"),
    "negative_cardinality": (_set_card(-1), "refused"), "float_cardinality": (_set_card(1.5), "refused"),
    "string_cardinality": (_set_card("10"), "refused"), "bool_cardinality": (_set_card(True), "refused"),
    "empty_name": (lambda lock: lock["categorical"][0].__setitem__("name", ""), "refused"),
    "blank_name": (lambda lock: lock["categorical"][0].__setitem__("name", "  "), "refused"),
    "duplicate_name": (lambda lock: lock["categorical"][1].__setitem__("name", "userId"), "refused"),
    "duplicate_across_roles": (lambda lock: lock["labels"][0].__setitem__("name", "userId"), "refused"),
    "unknown_column_key": (lambda lock: lock["categorical"][0].__setitem__("bogus", 1), "refused"),
    "max_len_2pow31": (lambda lock: lock["categorical"][0].update(multi_hot=True, max_len=2**31), "refused"),
    "multi_hot_string": (lambda lock: lock["categorical"][0].__setitem__("multi_hot", "yes"), "refused"),
    "version_2": (lambda lock: lock.__setitem__("ctrgen_features_lock", 2), "refused"),
    "top_list": (lambda lock: "[]", "refused"), "not_json": (lambda lock: "{", "refused"),
    "deep": (lambda lock: deep_json(), "refused"),
    "deep_object": (lambda lock: '{"a":' * 50_000 + "1" + "}" * 50_000, "refused"),
    "categorical_not_list": (lambda lock: lock.__setitem__("categorical", {"userId": 1}), "refused"),
    "column_not_object": (lambda lock: lock["categorical"].__setitem__(0, "userId"), "refused"),
}
for vname, (mutate, expect) in LOCKS.items():
    add("lock", vname, _lock_case(mutate), expect,
        quick=vname in ("nan_cardinality", "empty_name", "duplicate_name", "deep"))


def _lock_file(mutate: Callable[[Path], None]) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        spec_folder(d)
        mutate(d / "s.features.lock.json")
        return generate(d)
    return build


for vname, mutate in {"fifo": fifo, "dev_zero": to_dev_zero, "huge": lambda p: big_sparse(p, 3 << 30),
                      "folder": lambda p: (p.unlink(), p.mkdir()), "missing": lambda p: p.unlink(),
                      "not_utf8": lambda p: p.write_bytes(b'{"a": "\xff"}'),
                      "nul": lambda p: p.write_bytes(b'{"a": "\x00"}')}.items():
    add("lock file", vname, _lock_file(mutate), "refused", quick=vname == "fifo")


# ---- --out paths ----------------------------------------------------------------------------------------------------

OUTS: dict[str, Callable[[Path], str]] = {
    "proc": lambda d: "/proc", "proc_self": lambda d: "/proc/self", "sys_kernel": lambda d: "/sys/kernel",
    "dev": lambda d: "/dev", "path_max": lambda d: str(d / ("a/" * 2100)),
    "name_max": lambda d: str(d / ("a" * 300)), "component_250": lambda d: str(d / ("b" * 250)),
    "a_file": lambda d: (d / "f").write_text("x") and str(d / "f"),
    "under_a_file": lambda d: (d / "f").write_text("x") and str(d / "f" / "sub"),
    "empty": lambda d: "",
}
for vname, target in OUTS.items():
    def out_build(d: Path, t: Callable[[Path], str] = target) -> Run:
        spec_folder(d)
        return Run(d, ["generate", "s.yaml", "--out", t(d)])
    add("out path", vname, out_build, "refused", quick=vname in ("proc", "path_max", "name_max"))


@case("out path", "output_folder_is_a_link", "refused")
def _(d: Path) -> Run:
    spec_folder(d)
    (d / "elsewhere").mkdir()
    (d / "out").mkdir()
    (d / "out" / "movielens").symlink_to(d / "elsewhere")
    return generate(d)


@case("out path", "output_folder_is_a_fifo", "refused")
def _(d: Path) -> Run:
    spec_folder(d)
    (d / "out").mkdir()
    os.mkfifo(d / "out" / "movielens")
    return generate(d)


@case("out path", "long_but_valid", "accepted", check=check_generated("out"))
def _(d: Path) -> Run:
    spec_folder(d)
    return Run(d, ["generate", "s.yaml", "--out", str(Path("out") / ("c" * 200))])


# ---- existing outputs: MANIFEST.json, generated files, leftovers of killed runs ----------------------------------

def _after_first(mutate: Callable[[Path], None], command: str = "generate") -> Callable[[Path], Run]:
    """A first, clean generate into out/; then ``mutate(out/movielens)`` and run ``command`` again."""
    def build(d: Path) -> Run:
        from codegen.output import write
        from codegen.pipeline import open_spec, render_spec

        spec = spec_folder(d)
        rendered = render_spec(open_spec(spec))
        write(d / "out" / rendered.name, rendered.files)
        mutate(d / "out" / rendered.name)
        if command == "check":
            return Run(d, ["check", "s.yaml", "--out", "out"], refusal_codes=(1, 2))
        return generate(d)
    return build


OUTPUTS: dict[str, tuple[Callable[[Path], None], str]] = {
    "manifest_fifo": (lambda f: fifo(f / "MANIFEST.json"), "refused"),
    "manifest_dev_zero": (lambda f: to_dev_zero(f / "MANIFEST.json"), "refused"),
    "manifest_huge": (lambda f: big_sparse(f / "MANIFEST.json", 3 << 30), "refused"),
    "manifest_deep": (lambda f: (f / "MANIFEST.json").write_text(deep_json()), "either"),
    "manifest_folder": (lambda f: ((f / "MANIFEST.json").unlink(), (f / "MANIFEST.json").mkdir()), "refused"),
    "manifest_escapes": (lambda f: (f / "MANIFEST.json").write_text(json.dumps(
        {"generator": "ctrgen", "files": {"../../victim": "0" * 64}})), "refused"),
    "model_py_huge": (lambda f: big_sparse(f / "model.py", 3 << 30), "refused"),
    "model_py_fifo": (lambda f: fifo(f / "model.py"), "refused"),
    "model_py_dev_zero": (lambda f: to_dev_zero(f / "model.py"), "refused"),
    "model_py_edited": (lambda f: (f / "model.py").write_text("# mine\n"), "refused"),
    "leftover_20_digit_pid": (lambda f: (f.parent / f".ctrgen-{f.name}-{'9' * 20}-abc").mkdir(), "accepted"),
    "leftover_old_link_outside": (lambda f: (shutil.rmtree(f), (f.parent / f".ctrgen-{f.name}-999999-old")
                                             .symlink_to("/etc")), "accepted"),
    "leftover_old_folder": (lambda f: f.rename(f.parent / f".ctrgen-{f.name}-4194304-old"), "accepted"),
}


def _leftover_check(d: Path) -> str:
    folder = d / "out" / "movielens"
    if folder.is_symlink() or not folder.is_dir():
        return "silent wrong: the output folder is not a real folder after the run"
    if any(p.name.startswith(".ctrgen-movielens-9999999") for p in (d / "out").iterdir()):
        return "silent wrong: the leftover of a killed run was not cleaned"
    return check_outputs(folder)


for vname, (mutate, expect) in OUTPUTS.items():
    add("existing outputs", f"generate_{vname}", _after_first(mutate), expect,
        check=_leftover_check if expect != "refused" else None,
        quick=vname in ("manifest_fifo", "model_py_huge", "leftover_20_digit_pid", "leftover_old_link_outside"))
for vname in ("manifest_fifo", "manifest_dev_zero", "manifest_huge", "model_py_huge", "model_py_fifo",
              "model_py_dev_zero"):
    add("existing outputs", f"check_{vname}", _after_first(OUTPUTS[vname][0], "check"), "refused",
        quick=vname == "manifest_dev_zero")


# ---- workflow schemas (ctrgen lock) ---------------------------------------------------------------------------------

def _schema_feature(name: str, ftype: str, tags: list[str], extra: dict, domain_max: int | None = None) -> dict:
    f: dict = {"name": name, "type": ftype, "annotation": {"tag": tags, "extraMetadata": [extra]}}
    if domain_max is not None:
        f["intDomain"] = {"name": name, "min": "0", "max": str(domain_max)}
    return f


def _schema_features(extra: dict) -> list[dict]:
    return [_schema_feature("userId", "INT", ["categorical"], {"dtype_item_size": 64.0, **extra}, 162541),
            _schema_feature("movieId", "INT", ["categorical"], {"dtype_item_size": 64.0}, 56585),
            _schema_feature("rating", "FLOAT", ["target"], {"dtype_item_size": 32.0})]


def _write_schema(folder: Path, extra: dict, fmt: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        (folder / ".merlin").mkdir()
        (folder / ".merlin" / "schema.json").write_text(json.dumps({"feature": _schema_features(extra)}))
        return
    from google.protobuf import struct_pb2, text_format

    from codegen.tfmd import schema_pb2

    schema = schema_pb2().Schema()
    for f in _schema_features(extra):
        feature = schema.feature.add(name=f["name"], type=schema_pb2().FeatureType.Value(f["type"]))
        feature.annotation.tag.extend(f["annotation"]["tag"])
        struct = struct_pb2.Struct()
        struct.update(f["annotation"]["extraMetadata"][0])
        feature.annotation.extra_metadata.add().Pack(struct)
        if "intDomain" in f:
            feature.int_domain.min, feature.int_domain.max = 0, int(f["intDomain"]["max"])
    (folder / "schema.pbtxt").write_text(text_format.MessageToString(schema))


def _lock_from_schema(extra: dict, fmt: str) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        _write_schema(d / "data", extra, fmt)
        spec_folder(d, {**SPEC, "workflow": "data"})
        return Run(d, ["lock", "s.yaml"])
    return build


SCHEMA_VALUES = {"item_size_text": {"dtype_item_size": "abc"}, "item_size_nan": {"dtype_item_size": float("nan")},
                 "item_size_inf": {"dtype_item_size": float("inf")}, "item_size_fraction": {"dtype_item_size": 6.5},
                 "item_size_negative": {"dtype_item_size": -8.0}, "item_size_1e30": {"dtype_item_size": 1e30},
                 "dims_text": {"_dims": "abc"}, "dims_entry_text": {"_dims": [["a", 1]]},
                 "dims_nan": {"_dims": [[0.0, float("nan")]]}, "dims_inf": {"_dims": [[0.0, float("inf")]]}}
for fmt in ("pbtxt", "json"):
    for vname, extra in SCHEMA_VALUES.items():
        add("workflow schema", f"{fmt}_{vname}", _lock_from_schema(extra, fmt), "refused",
            quick=fmt == "pbtxt" and vname in ("item_size_text", "dims_nan"))
    add("workflow schema", f"{fmt}_valid", _lock_from_schema({}, fmt), "accepted",
        check=lambda d: "" if json.loads((d / "s.features.lock.json").read_text())["categorical"][0][
            "cardinality"] == 162542 else "silent wrong: the lock's cardinality")


def _schema_file(mutate: Callable[[Path], None]) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        _write_schema(d / "data", {}, "json")
        mutate(d / "data" / ".merlin" / "schema.json")
        spec_folder(d, {**SPEC, "workflow": "data"})
        return Run(d, ["lock", "s.yaml"])
    return build


for vname, mutate in {"fifo": fifo, "dev_zero": to_dev_zero, "huge": lambda p: big_sparse(p, 3 << 30),
                      "deep": lambda p: p.write_text(deep_json())}.items():
    add("workflow schema", f"schema_json_{vname}", _schema_file(mutate), "refused", quick=vname == "deep")


# ---- raw ETL inputs (ctrgen etl) ------------------------------------------------------------------------------------

ETL = {"inputs": {"train": ["raw/r.csv"], "columns": {"userId": "int64", "movieId": "int64", "rating": "float64"}},
       "split": {"valid_fraction": 0.2},
       "groups": [{"columns": ["userId", "movieId"], "ops": ["Categorify"]},
                  {"columns": ["rating"], "ops": [{"LambdaOp": {"compare": ">", "value": 3, "dtype": "int8"}}]}],
       "output": {"dir": "data", "out_files_per_proc": 1, "shuffle": False}}
ROWS = "userId,movieId,rating\n" + "".join(f"{i % 7},{i % 5},{i % 6}.0\n" for i in range(40))


def _etl(rows: str | None = ROWS, etl: dict = ETL, prepare: Callable[[Path], None] | None = None
         ) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        (d / "raw").mkdir(parents=True)
        if rows is not None:
            (d / "raw" / "r.csv").write_text(rows)
        if prepare is not None:
            prepare(d)
        spec_folder(d, {**SPEC, "etl": etl})
        (d / "s.features.lock.json").unlink()
        return Run(d, ["etl", "s.yaml", "--out", "gen"], refusal_codes=(2,))
    return build


def _row(line: int, value: str) -> str:
    lines = ROWS.splitlines()
    fields = lines[line].split(",")
    fields[0] = value
    lines[line] = ",".join(fields)
    return "\n".join(lines) + "\n"


for vname, value in {"empty_id": "", "nan_id": "NaN", "null_id": "null", "text_id": "abc", "float_id": "1.5",
                     "huge_id": "9" * 30}.items():
    add("etl", vname, _etl(_row(5, value)), "refused", quick=vname in ("empty_id", "nan_id"))
add("etl", "output_dir_is_a_file", _etl(prepare=lambda d: (d / "data").write_text("x")), "refused", quick=True)
add("etl", "output_dir_under_proc", _etl(etl={**ETL, "output": {**ETL["output"], "dir": "/proc/ctrgen"}}),
    "refused")
add("etl", "input_fifo", _etl(rows=None, prepare=lambda d: os.mkfifo(d / "raw" / "r.csv")), "refused")
add("etl", "input_dev_zero", _etl(rows=None, prepare=lambda d: (d / "raw" / "r.csv").symlink_to("/dev/zero")),
    "refused")
add("etl", "header_without_line_break", _etl(rows=None, prepare=lambda d: (d / "raw" / "r.csv").write_text(
    "userId," * 300_000)), "refused")
add("etl", "missing_column", _etl(ROWS.replace("movieId", "movie")), "refused")
add("etl", "no_rows", _etl("userId,movieId,rating\n"), "refused")


# ---- keysets: file lists ------------------------------------------------------------------------------------------

def _file_list(write: Callable[[Path], None]) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        d.mkdir(parents=True, exist_ok=True)
        write(d / "file_list.txt")
        return Run(d, ["keysets", "file_list.txt", "--format", "norm", "--key-type", "int64", "-q"])
    return build


for vname, write in {"fifo": lambda p: os.mkfifo(p), "dev_zero": lambda p: p.symlink_to("/dev/zero"),
                     "huge": lambda p: big_sparse(p, 3 << 30), "5000_digit_count": lambda p: p.write_text(
                         "9" * 5000 + "\na.data\n"), "not_utf8": lambda p: p.write_bytes(b"1\n\xff.data\n"),
                     "count_mismatch": lambda p: p.write_text("2\na.data\n"),
                     "missing_data_file": lambda p: p.write_text("1\nnope.data\n"),
                     "data_file_fifo": lambda p: (os.mkfifo(p.parent / "f.data"), p.write_text("1\nf.data\n"))
                     }.items():
    add("keysets", f"file_list_{vname}", _file_list(write), "refused", quick=vname in ("fifo", "5000_digit_count"))


# ---- Triton repositories (ctrgen validate) --------------------------------------------------------------------------

def _repo(mutate: Callable[[Path], None], torch: bool = False) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        # The whole generated folder: its MANIFEST.json says where a repository's shared files lie (the graph JSON
        # is <name>.json beside triton/).
        shutil.copytree(REPO / "generated" / "movielens", d / "model")
        repo = "model/triton_torch" if torch else "model/triton"
        mutate(d / repo)
        return Run(d, ["validate", repo], refusal_codes=(1, 2))
    return build


def _param(name: str, value: str) -> Callable[[Path], None]:
    def mutate(repo: Path) -> None:
        path = repo / "movielens" / "config.pbtxt"
        text = path.read_text()
        m = re.search(r'key: "%s"\s*value \{\s*string_value: "[^"]*"' % re.escape(name), text)
        assert m, name
        path.write_text(text[:m.start()] + re.sub(r'string_value: "[^"]*"', f'string_value: "{value}"', m.group())
                        + text[m.end():])
    return mutate


def _ps(replace: Callable[[str], str]) -> Callable[[Path], None]:
    return lambda repo: (repo / "ps.json").write_text(replace((repo / "ps.json").read_text()))


REPOS: dict[str, Callable[[Path], None]] = {
    "config_fifo": lambda r: fifo(r / "movielens" / "config.pbtxt"),
    "config_dev_zero": lambda r: to_dev_zero(r / "movielens" / "config.pbtxt"),
    "config_huge": lambda r: big_sparse(r / "movielens" / "config.pbtxt", 3 << 30),
    "config_not_utf8": lambda r: (r / "movielens" / "config.pbtxt").write_bytes(b"name: \"\xff\"\n"),
    "config_garbage": lambda r: (r / "movielens" / "config.pbtxt").write_bytes(os.urandom(2048)),
    "ps_fifo": lambda r: fifo(r / "ps.json"), "ps_dev_zero": lambda r: to_dev_zero(r / "ps.json"),
    "ps_huge": lambda r: big_sparse(r / "ps.json", 3 << 30), "ps_deep": lambda r: (r / "ps.json").write_text(
        deep_json()),
    "ps_nan": _ps(lambda t: re.sub(r'"gpucacheper":\s*[^,\n}]+', '"gpucacheper": NaN', t)),
    "ps_infinity": _ps(lambda t: re.sub(r'"gpucacheper":\s*[^,\n}]+', '"gpucacheper": Infinity', t)),
    "ps_1e400": _ps(lambda t: re.sub(r'"gpucacheper":\s*[^,\n}]+', '"gpucacheper": 1e400', t)),
    "ps_nan_string": _ps(lambda t: re.sub(r'"gpucacheper":\s*[^,\n}]+', '"gpucacheper": "nan"', t)),
    "ps_5000_digits": _ps(lambda t: re.sub(r'"max_batch_size":\s*[^,\n}]+', '"max_batch_size": ' + "9" * 5000, t)),
    "ps_top_list": lambda r: (r / "ps.json").write_text("[]"),
    "graph_json_fifo": lambda r: fifo(r.parent / "movielens.json"),
    "graph_json_dev_zero": lambda r: to_dev_zero(r.parent / "movielens.json"),
    "graph_json_huge": lambda r: big_sparse(r.parent / "movielens.json", 3 << 30),
    "graph_json_deep": lambda r: (r.parent / "movielens.json").write_text(deep_json()),
    "graph_json_5000_digits": lambda r: (r.parent / "movielens.json").write_text(re.sub(
        r'"dense_dim":\s*\d+', '"dense_dim": ' + "9" * 5000, (r.parent / "movielens.json").read_text())),
    "param_gpucacheper_nan": _param("gpucacheper", "nan"),
    "param_gpucacheper_inf": _param("gpucacheper", "inf"),
    "param_hit_rate_1e400": _param("hit_rate_threshold", "1e400"),
    "param_slots_5000_digits": _param("slots", "9" * 5000),
    "nvt_cats_deep": lambda r: None,
}
for vname, mutate in REPOS.items():
    if vname == "nvt_cats_deep":
        continue
    reason = {"config": r"config\.pbtxt.*error: syntax", "ps": r"ps\.json.*error", "graph": r"\.json.*error: config",
              "param": r"error: .*(gpucacheper|hit_rate_threshold|slots)"}[vname.split("_")[0]]
    add("validate", vname, _repo(mutate), "refused", reason=reason,
        quick=vname in ("config_fifo", "ps_nan", "ps_1e400", "graph_json_fifo", "param_gpucacheper_nan"))
add("validate", "clean_copy", _repo(lambda r: None), "accepted", check=lambda d: "")


# ---- a checkpoint's features.json (query --compare) -----------------------------------------------------------------

def _checkpoint(mutate: Callable[[Path], None]) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        from codegen.serve.offline import read_checkpoint

        ckpt = d / "ckpt"
        ckpt.mkdir(parents=True)
        shutil.copy(REPO / "generated" / "movielens" / "features.json", ckpt / "features.json")
        with zipfile.ZipFile(ckpt / "model.pt", "w") as z:
            z.writestr("model/data.pkl", b"")
        mutate(ckpt)
        return Run(d, call=lambda: read_checkpoint(ckpt))
    return build


for vname, mutate in {"features_fifo": lambda c: fifo(c / "features.json"),
                      "features_dev_zero": lambda c: to_dev_zero(c / "features.json"),
                      "features_huge": lambda c: big_sparse(c / "features.json", 3 << 30),
                      "features_deep": lambda c: (c / "features.json").write_text(deep_json()),
                      "features_nan": lambda c: (c / "features.json").write_text('{"a": NaN}'),
                      "features_not_utf8": lambda c: (c / "features.json").write_bytes(b'{"a": "\xff"}'),
                      "model_pt_not_zip": lambda c: (c / "model.pt").write_bytes(os.urandom(1024)),
                      "model_pt_fifo": lambda c: fifo(c / "model.pt"),
                      "model_pt_missing": lambda c: (c / "model.pt").unlink()}.items():
    add("checkpoint", vname, _checkpoint(mutate), "refused", reason=r"(features\.json|model\.pt)(:\d+)*: --compare",
        quick=vname in ("features_fifo", "features_deep"))


# ---- query: rows and URLs -------------------------------------------------------------------------------------------

QUERY_INPUTS = {"userId": "INT64", "movieId": "INT64", "price": "FP32", "site": "BYTES"}


def _query_csv(text: str) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        from codegen.serve.query import Ensemble, read_rows, request_tensors, typed_frame

        d.mkdir(parents=True, exist_ok=True)
        data = d / "rows.csv"
        data.write_text(text)
        ensemble = Ensemble("ens", dict(QUERY_INPUTS), ("OUTPUT0",), 64)

        def call() -> Any:
            frame = typed_frame(read_rows(data, ensemble.columns, None), ensemble, data)
            tensors = request_tensors(frame, ensemble, data)
            want = [int(line.split(",")[0]) for line in text.splitlines()[1:]]
            assert tensors["userId"].ravel().tolist() == want, "the ids sent differ from the file's"
        return Run(d, call=call)
    return build


HEADER = "userId,movieId,price,site\n"
QUERY_ROWS = {"text_id": ("abc,2,0.5,a\n", "refused"), "fraction_id": ("1.5,2,0.5,a\n", "refused"),
              "23_digit_id": ("12345678901234567890123,2,0.5,a\n", "refused"),
              "20mb_id": ("9" * (20 << 20) + ",2,0.5,a\n", "refused"),
              "2pow63_id": (f"{2**63},2,0.5,a\n", "refused"), "empty_id": (",2,0.5,a\n", "refused"),
              "nan_id": ("NaN,2,0.5,a\n", "refused"), "extra_field": ("1,2,0.5,a,9\n", "refused"),
              "missing_field": ("1,2\n", "refused"), "price_text": ("1,2,abc,a\n", "refused"),
              "price_1e39": ("1,2,1e39,a\n", "refused"), "price_infinity": ("1,2,inf,a\n", "refused"),
              "exponent_id": ("1e3,2,0.5,a\n", "refused"),
              "valid": ("1,2,0.5,a\n-3,4,,b\n9223372036854775807,5,1e-3,\"c,d\"\n", "accepted")}
for vname, (rows, expect) in QUERY_ROWS.items():
    add("query", f"csv_{vname}", _query_csv(HEADER + rows), expect, check=(lambda d: "") if expect == "accepted"
        else None, quick=vname in ("text_id", "fraction_id", "extra_field", "valid"))


def _query_parquet(values: list, dtype: str, expect_ids: list | None = None) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        import pandas as pd

        from codegen.serve.query import Ensemble, read_rows, request_tensors

        d.mkdir(parents=True, exist_ok=True)
        data = d / "rows.parquet"
        pd.DataFrame({"userId": pd.Series(values, dtype=dtype), "movieId": [2] * len(values),
                      "price": [0.5] * len(values), "site": ["a"] * len(values)}).to_parquet(data)
        ensemble = Ensemble("ens", dict(QUERY_INPUTS), ("OUTPUT0",), 64)

        def call() -> Any:
            tensors = request_tensors(read_rows(data, ensemble.columns, None), ensemble, data)
            assert tensors["userId"].ravel().tolist() == expect_ids, "the ids sent differ from the file's"
        return Run(d, call=call)
    return build


add("query", "parquet_fraction_id", _query_parquet([1.0, 1.5], "float64"), "refused", quick=True)
add("query", "parquet_nan_id", _query_parquet([1.0, float("nan")], "float64"), "refused")
add("query", "parquet_nullable_null_id", _query_parquet([1, None], "Int64"), "refused")
add("query", "parquet_uint64_past_int64", _query_parquet([2**63 + 5], "uint64"), "refused")
add("query", "parquet_whole_floats", _query_parquet([1.0, 7.0], "float64", [1, 7]), "accepted",
    check=lambda d: "")


def _url(url: str) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        from codegen.serve.query import endpoint

        d.mkdir(parents=True, exist_ok=True)

        def call() -> Any:
            with endpoint(url) as end:
                return end.url
        return Run(d, call=call)
    return build


for vname, url in {"ipv6_unclosed": "http://[::1", "no_port": "http://localhost", "port_0": "localhost:0",
                   "port_65536": "localhost:65536", "space": "http://a b:80", "empty": "", "colons": ":::",
                   "huge": "h" * 100_000 + ":80", "path": "http://localhost:8000/v2/../x",
                   "newline": "localhost:80\nHost: x"}.items():
    add("query", f"url_{vname}", _url(url), "refused", quick=vname == "ipv6_unclosed")
for vname, url in {"ipv4": "http://127.0.0.1:8000", "ipv6": "http://[::1]:8000", "name": "localhost:8000"}.items():
    add("query", f"url_{vname}", _url(url), "accepted", check=lambda d: "")


# ---- serve: --log and what the server would block on ---------------------------------------------------------------

def _serve(log: Callable[[Path], str] | None, mutate: Callable[[Path], None] | None = None) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        shutil.copytree(REPO / "generated" / "movielens", d / "model")      # triton/ with the map beside it
        if mutate is not None:
            mutate(d / "model" / "triton")
        argv = ["serve", "model/triton", "--http-port", "1", "--grpc-port", "2", "--metrics-port", "0", "--timeout",
                "1"]
        return Run(d, argv + (["--log", log(d)] if log is not None else []))
    return build


add("serve", "log_is_a_folder", _serve(lambda d: str(d)), "refused", quick=True)
add("serve", "log_under_proc", _serve(lambda d: "/proc/ctrgen.log"), "refused")
add("serve", "log_in_a_missing_folder", _serve(lambda d: str(d / "nope" / "x.log")), "refused")
add("serve", "log_is_a_fifo", _serve(lambda d: (os.mkfifo(d / "f"), str(d / "f"))[1]), "refused")
add("serve", "config_fifo", _serve(None, lambda r: fifo(r / "movielens_nvt" / "config.pbtxt")), "refused",
    quick=True)
add("serve", "model_file_fifo", _serve(None, lambda r: fifo(r / "movielens_nvt" / "1" / "model.py")), "refused")
add("serve", "model_file_dev_zero", _serve(None, lambda r: to_dev_zero(r / "movielens_nvt" / "1" / "model.py")),
    "refused")


# ---- the importer and assemble (issue 28's parts in those files) -------------------------------------------------------

def _import(source: str, suffix: str = ".py", extra: tuple[str, ...] = (), out: str = "out"
            ) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        d.mkdir(parents=True, exist_ok=True)
        (d / f"train{suffix}").write_text(source)
        return Run(d, ["import", f"train{suffix}", "--out", out, *extra])
    return build


# A small HugeCTR training script; LR and SOURCE are where each case puts its hostile expression.
SCRIPT = """\
import hugectr
X = LR
solver = hugectr.CreateSolver(max_eval_batches=10, batchsize_eval=1024, batchsize=1024, lr=X, vvgpu=[[0]],
                              repeat_dataset=True)
reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm, source=[SOURCE],
                                  eval_source="./data/file_list_test.txt", check_type=hugectr.Check_t.Sum)
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam)
model = hugectr.Model(solver, reader, optimizer)
model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=13, dense_name="dense",
                        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 1, True, 26)]))
model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                  workspace_size_per_gpu_in_mb=300, embedding_vec_size=16, combiner="sum",
                                  sparse_embedding_name="sparse_embedding1", bottom_name="data1", optimizer=optimizer))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["sparse_embedding1"],
                             top_names=["reshape1"], leading_dim=416))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["reshape1", "dense"],
                             top_names=["concat1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["concat1"], top_names=["fc1"],
                             num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc1", "label"],
                             top_names=["loss"]))
model.compile()
model.fit(max_iter=2000, display=200, eval_interval=1000, snapshot=1000000, snapshot_prefix="m")
"""


def script(lr: str = "0.001", source: str = '"./data/file_list.txt"') -> str:
    return SCRIPT.replace("LR", lr, 1).replace("SOURCE", source, 1)


def notebook(source: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "source": source.splitlines(keepends=True),
                                  "metadata": {}, "outputs": [], "execution_count": None}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


IMPORTS = {
    "deep_notebook": ('{"cells": ' + deep_json() + "}", ".ipynb", "23.06"),
    "deep_graph_json": (deep_json(), ".json", "23.06"),
    "5000_digit_graph_json": ('{"layers": [' + "9" * 5000 + "]}", ".json", "23.06"),
    "100k_terms": (script(lr="+".join(["0.00001"] * 100_000)), ".py", "23.06"),
    "3000_deep_parens": (script(lr="(" * 3000 + "0.001" + ")" * 3000), ".py", "23.06"),
    "square_40_times": (script(lr="0.001").replace("X = 0.001\n", "X = 3\n" + "X = X * X\n" * 40), ".py",
                        "23.06"),
    "power_chain": (script(lr=" ** ".join(["64"] * 6)), ".py", "23.06"),
    "2gb_string": (script(source="'a' * (2 ** 31)"), ".py", "23.06"),
    "1mb_path_literal": (script(source=repr("a" * (1 << 20))), ".py", "23.06"),
    "unknown_hugectr_version": (script(), ".py", "99"),
}
for vname, (source, suffix, version) in IMPORTS.items():
    add("import", vname, _import(source, suffix, ("--hugectr-version", version)), "refused", area=IMPORT,
        quick=vname in ("deep_notebook", "unknown_hugectr_version"))
for vname in ("unknown_hugectr_version", "1mb_path_literal"):
    source, suffix, version = IMPORTS[vname]
    add("import", f"{vname}_out_folder", _import(source, suffix, ("--hugectr-version", version), out="specs_out"),
        "refused", area=IMPORT)
add("import", "valid_script", _import(script(), ".py", ("--hugectr-version", "23.06")), "accepted", area=IMPORT,
    check=lambda d: "" if (d / "out" / "train.yaml").is_file() else "silent wrong: no spec written")
add("import", "valid_notebook", _import(notebook(script()), ".ipynb", ("--hugectr-version", "23.06")), "accepted",
    area=IMPORT, check=lambda d: "" if (d / "out" / "train.yaml").is_file() else "silent wrong: no spec written")


def _assemble(mutate: Callable[[Path, Path], None]) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from codegen.serve.offline import ENSEMBLE_SUFFIX  # noqa: F401  (the serve modules import here)

        workflow = d / "workflow"
        (workflow / "categories").mkdir(parents=True)
        (workflow / "workflow.pkl").write_bytes(b"\x80\x04N.")
        pq.write_table(pa.table({"userId": [1, 2, 3]}), workflow / "categories" / "unique.userId.parquet")
        _write_output_schema(workflow)
        ckpt = d / "ckpt"
        ckpt.mkdir()
        import torch

        torch.save({"table.weight": torch.zeros(4, 2)}, ckpt / "model.pt")      # a state dict of tensors
        shutil.copy(REPO / "generated" / "movielens" / "features.json", ckpt / "features.json")
        mutate(workflow, ckpt)
        return Run(d, ["assemble", str(REPO / "specs" / "movielens.yaml"), "--workflow", str(workflow),
                       "--checkpoint", str(ckpt), "--out", str(d / "deploy")])
    return build


def _write_output_schema(folder: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from merlin.schema import ColumnSchema, Schema, Tags
        from merlin.schema.io.tensorflow_metadata import TensorflowMetadata
    columns = [ColumnSchema(name, dtype="int64", tags=[Tags.CATEGORICAL],
                            properties={"embedding_sizes": {"cardinality": card, "dimension": 16}})
               for name, card in (("userId", 162542), ("movieId", 56586))]
    columns.append(ColumnSchema("rating", dtype="int8", tags=[Tags.TARGET]))
    TensorflowMetadata.from_merlin_schema(Schema(columns)).to_proto_text_file(str(folder), "output_schema.pbtxt")


ASSEMBLES: dict[str, Callable[[Path, Path], None]] = {
    "fifo_in_workflow": lambda w, c: os.mkfifo(w / "categories" / "f"),
    "dev_zero_link_in_workflow": lambda w, c: (w / "categories" / "z").symlink_to("/dev/zero"),
    "link_outside_in_workflow": lambda w, c: (w / "categories" / "passwd").symlink_to("/etc/passwd"),
    "folder_link_outside": lambda w, c: (w / "categories" / "etc").symlink_to("/etc"),
    "features_json_fifo": lambda w, c: fifo(c / "features.json"),
    "features_json_deep": lambda w, c: (c / "features.json").write_text(deep_json()),
    "model_pt_no_torch_data": lambda w, c: _zip_without_tensors(c / "model.pt"),
    "workflow_pkl_random": lambda w, c: (w / "workflow.pkl").write_bytes(os.urandom(4096)),
}
# Each case is refused for its own reason: every other input of the base case passes its check.
ASSEMBLE_REASONS = {"fifo": "not a regular file", "dev": "pointing outside", "link": "pointing outside",
                    "folder": "pointing outside", "features": "features.json", "model": "state dict",
                    "workflow": "does not load"}
for vname, mutate in ASSEMBLES.items():
    add("assemble", vname, _assemble(mutate), "refused", area=RUNTIME, reason=ASSEMBLE_REASONS[vname.split("_")[0]],
        quick=vname in ("link_outside_in_workflow", "model_pt_no_torch_data"))


def _zip_without_tensors(path: Path) -> None:
    path.unlink()
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("model/data.pkl", b"")


# ---- issue 43 (third round): report, etl, port, query, import, submit.py ---------------------------------------------
import hostile_cases_round3  # noqa: E402,F401  (registers its cases into CASES)
import hostile_cases_round4  # noqa: E402,F401  (issue 43, fourth round: paths, spec commands, schema)
import hostile_cases_round4b  # noqa: E402,F401  (issue 43, fourth round: flags, serve --host, demo, trainer, submit.py)
