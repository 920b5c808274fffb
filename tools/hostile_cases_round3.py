"""The hostile inputs of issue 43 (third round): the commands other than the trainer (report, etl, port, query,
import, the generated Vertex AI submit.py). Registered into tools/hostile_cases.py's CASES when it is imported; built
at run time like every other case."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

from hostile_cases import ETL, REPO, ROWS, SPEC, _etl, add, big_sparse, dump, fifo, spec_folder
from hostile_outcomes import Run

# ---- ctrgen report: a run folder (run.json, metrics.json, metrics.jsonl) --------------------------------------------

RUN_JSON = {"ctrgen": "0.1.0", "name": "m", "spec": "m.yaml", "spec_sha256": "0" * 64, "command": ["python", "t.py"],
            "data": {"--train": ["t.txt"]}, "generated": {"model.py": "1" * 64},
            "graph": {"nodes": [["a", ["input"], "input"], ["b", ["loss"], "loss"]], "edges": [["a", "b"]]},
            "hardware": {"machine": "x86_64", "cpus": 2, "system": "Linux", "python": "3.11", "gpus": []}}
POINTS = "".join(json.dumps({"step": s, "tag": "train/loss", "value": v}) + "\n" for s, v in ((1, 0.5), (2, 0.4)))


def _report(mutate: Callable[[Path], Any] = lambda run: None, out: str | None = None) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        run = d / "run"
        run.mkdir(parents=True)
        (run / "run.json").write_text(json.dumps(RUN_JSON))
        (run / "metrics.json").write_text(json.dumps({"iterations": 2, "samples_per_second": 1.0}))
        (run / "metrics.jsonl").write_text(POINTS)
        mutate(run)
        return Run(d, ["report", "run", *(["--out", out] if out else [])])
    return build


def _run_json(change: dict | str) -> Callable[[Path], Any]:
    text = change if isinstance(change, str) else json.dumps({**RUN_JSON, **change})
    return lambda run: (run / "run.json").write_text(text)


def _points(text: str | bytes) -> Callable[[Path], Any]:
    data = text if isinstance(text, bytes) else text.encode()
    return lambda run: (run / "metrics.jsonl").write_bytes(data)


def _page_says(*needles: str) -> Callable[[Path], str]:
    def check(d: Path) -> str:
        page = (d / "run" / "report.html").read_text(encoding="utf-8")
        coords = re.findall(r'points="([^"]*)"', page)
        if any(re.search(r"nan|inf", c, re.I) for c in coords):
            return "silent wrong: a curve has a NaN or Infinity coordinate"
        missing = [n for n in needles if n not in page]
        return f"silent wrong: the page does not say {missing[0]!r}" if missing else ""
    return check


REPORTS: dict[str, tuple[Callable[[Path], Run], str, str]] = {
    "step_1e400": (_report(_points('{"step": 1e400, "tag": "t", "value": 1}\n')), "refused", r"jsonl:1: not a point"),
    "deep_metrics_line": (_report(_points("[" * 100_000 + "]" * 100_000 + "\n")), "refused", r"jsonl:1: "),
    "deep_run_json": (_report(_run_json("[" * 100_000 + "]" * 100_000)), "refused", "nests more than"),
    "run_json_not_utf8": (_report(lambda r: (r / "run.json").write_bytes(b'{"name": "\xff"}')), "refused",
                          "not UTF-8"),
    "metrics_not_utf8": (_report(_points(POINTS.encode() + b"\xff\n" + POINTS.encode())), "refused",
                         r"jsonl:3: not UTF-8"),
    "run_json_without_graph": (_report(lambda r: (r / "run.json").write_text(json.dumps(
        {k: v for k, v in RUN_JSON.items() if k != "graph"}))), "refused", "graph: must be"),
    "run_json_command_text": (_report(_run_json({"command": "rm -rf /"})), "refused", "command: must be a list"),
    "no_graph_nodes": (_report(_run_json({"graph": {"nodes": [], "edges": []}})), "refused", "no nodes"),
    "out_is_a_folder": (_report(lambda r: (r.parent / "f").mkdir(), out="f"), "refused", "is a folder"),
    "out_in_missing_folder": (_report(out="missing/r.html"), "refused", "does not exist"),
    "metrics_2gib": (_report(lambda r: big_sparse(r / "metrics.jsonl", 2 << 30)), "refused", "bytes, more than"),
    "metrics_non_json_line": (_report(_points(POINTS + "oops\n" + POINTS)), "refused", r"jsonl:3: not a JSON point"),
    "metrics_fifo": (_report(lambda r: ((r / "metrics.jsonl").unlink(), os.mkfifo(r / "metrics.jsonl"))), "refused",
                     "not a regular file"),
}
for _name, (_build, _expect, _reason) in REPORTS.items():
    add("report", _name, _build, _expect, reason=_reason, quick=_name in ("step_1e400", "metrics_fifo", "no_graph_nodes"))
add("report", "metrics_cut_last_line", _report(_points(POINTS + '{"step": 3, "tag": "tr')), "accepted",
    check=_page_says("2 points from metrics.jsonl", "was cut off"), quick=True)
add("report", "metrics_nan_value", _report(_points(POINTS + '{"step": 3, "tag": "train/loss", "value": NaN}\n')),
    "accepted", check=_page_says("1 point(s) not drawn"))


# ---- ctrgen etl: spec settings, column names, the scheduler, CSV headers ----------------------------------------------

def _etl_with(*path_value: Any) -> dict:
    *path, value = path_value
    etl = json.loads(json.dumps(ETL))
    node = etl
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return etl


ETLS: dict[str, tuple[Callable[[Path], Run], str, str]] = {
    "column_html": (_etl(etl=_etl_with("inputs", "columns", "<b>userId</b>", "int64")), "refused", "may not hold '/'"),
    "column_dotdot": (_etl(etl=_etl_with("inputs", "columns", "../../../../x", "int64")), "refused",
                      "may not hold '/'"),
    "split_seed_2_64": (_etl(etl=_etl_with("split", "seed", 2**64)), "refused", "split.seed"),
    "valid_fraction_1e-300": (_etl(etl=_etl_with("split", "valid_fraction", 1e-300)), "refused",
                              "leaves the valid split empty"),
    "part_size_0MB": (_etl(etl=_etl_with("output", "part_size", "0MB")), "refused", "part_size"),
    "out_files_1e6": (_etl(etl=_etl_with("output", "out_files_per_proc", 1_000_000)), "refused", "at most 10000"),
    "out_files_2_63": (_etl(etl=_etl_with("output", "out_files_per_proc", 2**63)), "refused", "at most 10000"),
    "header_100000_columns": (_etl(",".join(f"c{i}" for i in range(100_000)) + "\n1\n"), "refused",
                              "100000 columns"),
}
for _name, (_build, _expect, _reason) in ETLS.items():
    add("etl", _name, _build, _expect, reason=_reason, quick=_name == "column_dotdot")


def _etl_scheduler(address: str) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        run = _etl()(d)
        return Run(d, [*(run.argv or []), "--scheduler", address])
    return build


add("etl", "scheduler_unreachable", _etl_scheduler("tcp://127.0.0.1:1"), "refused", reason="cannot reach")
add("etl", "scheduler_malformed", _etl_scheduler("tcp://[::1"), "refused", reason="not a Dask scheduler address",
    quick=True)


def _lock_cards(d: Path) -> str:
    lock = json.loads((d / "s.features.lock.json").read_text(encoding="utf-8"))
    cards = [(c["name"], c["cardinality"]) for c in lock["categorical"]]
    return "" if cards == [("userId", 10), ("movieId", 8)] else f"silent wrong: the lock holds {cards}"


add("etl", "sep_tab", _etl(ROWS.replace(",", "\t"), etl=_etl_with("inputs", "sep", "\t")), "accepted",
    check=_lock_cards)
add("etl", "quoted_header", _etl(ROWS.replace("userId,movieId,rating", '"userId","movieId","rating"')), "accepted",
    check=_lock_cards)


# ---- ctrgen port: --out, modes, line ends, tags ---------------------------------------------------------------------

def dump_spec_with_tag() -> str:
    text = dump(SPEC)
    assert "hugectr_version: '3.3'" in text
    return text.replace("hugectr_version: '3.3'", "hugectr_version: !!str 3.3")


def _port(out: str | None = None, prepare: Callable[[Path], Any] = lambda d: None, spec_text: str | None = None,
          crlf: bool = False) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        spec_folder(d, spec_text if spec_text is not None else SPEC)
        if crlf:
            (d / "s.yaml").write_bytes((d / "s.yaml").read_bytes().replace(b"\n", b"\r\n"))
        os.chmod(d / "s.yaml", 0o644)
        prepare(d)
        return Run(d, ["port", "s.yaml", "--to", "3.4", *(["--out", out] if out else [])])
    return build


def _port_check(name: str, crlf: bool = False) -> Callable[[Path], str]:
    def check(d: Path) -> str:
        data = (d / name).read_bytes()
        if (d / name).stat().st_mode & 0o777 != 0o644:
            return f"silent wrong: {name} is mode {oct((d / name).stat().st_mode & 0o777)}, the spec 0o644"
        if crlf and data.count(b"\n") != data.count(b"\r\n"):
            return f"silent wrong: {name} lost its CRLF line ends"
        return "" if b'hugectr_version: "3.4"' in data else f"silent wrong: {name} is not ported"
    return check


add("port", "out_in_missing_folder", _port("missing/o.yaml"), "refused", reason="does not exist", quick=True)
add("port", "out_is_the_lock", _port("s.features.lock.json"), "refused", reason="features lock", quick=True)
add("port", "out_is_a_link", _port("l.yaml", lambda d: (d / "l.yaml").symlink_to(d.parent / "outside.yaml")),
    "refused", reason="symbolic link")
add("port", "in_place_keeps_mode", _port(), "accepted", check=_port_check("s.yaml"), quick=True)
add("port", "out_keeps_mode_and_crlf", _port("o.yaml", crlf=True), "accepted", check=_port_check("o.yaml", True))
add("port", "str_tag", _port("o.yaml", spec_text=dump_spec_with_tag()), "accepted", check=_port_check("o.yaml"))


# ---- ctrgen query / serve: --tolerance, URLs, --host -----------------------------------------------------------------

def _query_args(*args: str) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        d.mkdir(parents=True, exist_ok=True)
        (d / "x.csv").write_text("userId,movieId\n1,2\n")
        return Run(d, ["query", *args, "--data", "x.csv"])
    return build


add("query", "tolerance_nan", _query_args("http://127.0.0.1:1", "--tolerance", "nan"), "refused",
    reason="--tolerance", quick=True)
add("query", "tolerance_negative", _query_args("http://127.0.0.1:1", "--tolerance", "-1"), "refused",
    reason="--tolerance")
add("query", "https_url", _query_args("https://127.0.0.1:8000"), "refused", reason="plain HTTP only")


def _serve_host(host: str) -> Callable[[Path], Run]:
    def build(d: Path) -> Run:
        shutil.copytree(REPO / "generated" / "movielens", d / "model")
        return Run(d, ["serve", "model/triton", "--host", host, "--http-port", "18090", "--grpc-port", "18091",
                       "--metrics-port", "0", "--timeout", "1"])
    return build


add("serve", "host_999", _serve_host("999.1.1.1"), "refused", reason="not an address of this machine")


# ---- ctrgen import: 20,000 %%writefile cells (was quadratic: ~7 minutes; now about a second) -------------------------

def _writefile_notebook(d: Path) -> Run:
    d.mkdir(parents=True, exist_ok=True)
    cells = []
    for i in range(20_000):
        cells.append({"cell_type": "code", "source": f"%%writefile f{i}.py\nx = {i}\n", "metadata": {}, "outputs": []})
        cells.append({"cell_type": "code", "source": f"!python f{i}.py --lr 0.1\n", "metadata": {}, "outputs": []})
    (d / "nb.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return Run(d, ["import", "nb.ipynb", "--hugectr-version", "23.06", "--out", "out"])


add("import", "writefile_20000_cells", _writefile_notebook, "refused", reason="no hugectr.Model")


# ---- the generated trainer (generated/movielens/train_torch.py, in the case's process) -----------------------------

_HELD: list = []        # lock files a case holds for its run (another run writing into the folder)


def _parquet(path: Path, rows: int = 512, rating: Any = None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    ratings = [float(i % 2) for i in range(rows)] if rating is None else [rating] + [1.0] * (rows - 1)
    pq.write_table(pa.table({"rating": pa.array(ratings, pa.float32()),
                             "userId": pa.array([i % 1000 for i in range(rows)], pa.int64()),
                             "movieId": pa.array([i % 500 for i in range(rows)], pa.int64())}), path)


def _trainer(*flags: str, prepare: Callable[[Path], Any] = lambda d: None) -> Callable[[Path], Run]:
    """The trainer on two small Parquet files (train/, valid/), a few steps, output into run/."""
    def build(d: Path) -> Run:
        for split in ("train", "valid"):
            (d / split).mkdir(parents=True)
            _parquet(d / split / "part_0.parquet")
        prepare(d)
        argv = ["--train", str(d / "train"), "--eval", str(d / "valid"), "--device", "cpu", "--max-iter", "2",
                "--batch-size", "64", "--display", "1", "--eval-interval", "2", "--snapshot", "0",
                "--max-eval-batches", "1", "--threads", "1", "--output-dir", str(d / "run"), *(f.replace("{d}", str(d)) for f in flags)]
        return Run(d, call=lambda: _run_trainer(argv))
    return build


def _run_trainer(argv: list[str]) -> None:
    import contextlib
    import importlib.util
    import io

    from codegen.errors import Located

    spec = importlib.util.spec_from_file_location("hostile_train", REPO / "generated" / "movielens" / "train_torch.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = module.main(argv)
        except SystemExit as exc:       # argparse's refusal: usage, then "...: error: ...", exit 2
            code = exc.code if isinstance(exc.code, int) else 1
    sys.stderr.write(err.getvalue()) if code != 2 else None
    if code == 2:       # the trainer's one line ("error: ..."), as the refusal
        lines = err.getvalue().strip().splitlines()
        raise Located("\n".join(line for line in lines if "error:" in line) or "\n".join(lines))


def _hold_lock(d: Path) -> None:
    import fcntl

    (d / "run").mkdir()
    fh = open(d / "run" / "run.lock", "a+")
    fcntl.flock(fh, fcntl.LOCK_EX)
    fh.write("pid 4242: an earlier trainer\n")
    fh.flush()
    _HELD.append(fh)


def _used(d: Path) -> None:
    (d / "run").mkdir()
    (d / "run" / "metrics.jsonl").write_text('{"step": 1, "tag": "train/loss", "value": 0.5}\n')


TRAINERS: dict[str, tuple[Callable[[Path], Run], str]] = {
    "used_run_folder": (_trainer(prepare=_used), "holds an earlier run"),
    "run_folder_locked": (_trainer(prepare=_hold_lock), "another run is writing into it"),
    "batch_size_99999999": (_trainer("--batch-size", "99999999"), "--batch-size 99999999"),
    **{f"{flag.strip('-').replace('-', '_')}_{value}": (_trainer(flag, value), f"error: {flag} ") for flag, value in (
        ("--display", "0"), ("--eval-interval", "0"), ("--snapshot", "-5"), ("--max-iter", "-5"), ("--seed", "-1"),
        ("--seed", str(2**70)), ("--max-eval-batches", "0"), ("--max-eval-batches", "-1"), ("--lr", "nan"),
        ("--lr", "inf"), ("--lr", "-0.1"), ("--epochs", "0"))},
    "output_dir_a_file": (_trainer(prepare=lambda d: (d / "run").write_text("x")), "--output-dir .*is a file"),
    "output_dir_under_a_file": (_trainer("--output-dir", "{d}/f/run", prepare=lambda d: (d / "f").write_text("x")),
                                "--output-dir .*not a folder"),
    "label_5": (_trainer(prepare=lambda d: _parquet(d / "train" / "part_0.parquet", rating=5.0)), "outside \\[0, 1\\]"),
    "label_nan": (_trainer(prepare=lambda d: _parquet(d / "train" / "part_0.parquet", rating=float("nan"))),
                  "label column 'rating': row 0 is nan"),
    "label_inf": (_trainer(prepare=lambda d: _parquet(d / "valid" / "part_0.parquet", rating=float("-inf"))),
                  "label column 'rating': row 0 is -inf"),
    "empty_eval": (_trainer(prepare=lambda d: _parquet(d / "valid" / "part_0.parquet", rows=0)), "no evaluation rows"),
    "data_fifo": (_trainer(prepare=lambda d: fifo(d / "train" / "part_0.parquet")), "not a regular file"),
    "features_fifo": (_trainer("--features", "{d}/f.json", prepare=lambda d: fifo(d / "f.json")), "not a regular file"),
    "features_dev_zero": (_trainer("--features", "/dev/zero"), "not a regular file"),
    "features_huge": (_trainer("--features", "{d}/f.json", prepare=lambda d: big_sparse(d / "f.json", 3 << 30)),
                      "over 16 MiB"),
    "features_deep": (_trainer("--features", "{d}/f.json", prepare=lambda d: (d / "f.json").write_text("[" * 100_000)),
                      "nests more than 64"),
}
for vname, (build, reason) in TRAINERS.items():
    add("trainer", vname, build, "refused", reason=reason,
        quick=vname in ("used_run_folder", "batch_size_99999999", "lr_nan", "label_5", "features_fifo"))
add("trainer", "clean_run", _trainer(), "accepted",
    check=lambda d: "" if (d / "run" / "model.pt").is_file() else "silent wrong: no model.pt written")
