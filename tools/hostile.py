"""`make hostile`: every hostile input of tools/hostile_cases.py (judged by tools/hostile_outcomes.py), each run in its own process under a time, memory
and file-size limit, and a table of outcomes (docs/testing.md, "Hostile inputs").

An outcome is one of: refused (one line per problem, exit 2 or the command's finding status, nothing written or
changed), accepted (exit 0 and the output checked: well formed, inert, exact), traceback, hang (killed after
--timeout seconds), unbounded read (past the memory or file-size limit), partial write (refused, but a file was
written or changed), injection (generated code or text that runs or shows what the input smuggled in, or a refusal
line split by a raw control character), silent wrong (accepted where it must be refused, or an output that is not
what the input says), over-refused (refused where a correct run is possible).

Each case runs in a child forked from this process (the CLI's modules are imported once, here), so a few hundred
cases take a few minutes. Cases in files other engineers are rewriting (the importer, assemble) are counted apart.

    python tools/hostile.py                # every case, the table
    python tools/hostile.py -k lock -v     # the cases whose id contains "lock", one line each
    python tools/hostile.py --json out.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # this checkout's codegen first
sys.path.insert(0, str(Path(__file__).resolve().parent))

import hostile_cases as H  # noqa: E402
import hostile_outcomes as O  # noqa: E402

MEMORY_LIMIT = 2 << 30          # bytes of address space a case may add to what this process has mapped
FILE_LIMIT = 256 << 20          # the largest file a case may write


def _vm_size() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def run_forked(run: O.Run, timeout: float) -> O.Result:
    """Run one case in a forked child: stdout and stderr to files, limits on memory and file size, killed after
    ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="ctrgen-hostile-io-") as io_dir:
        out_path, err_path, flag_path = (Path(io_dir) / n for n in ("out", "err", "flags"))
        pid = os.fork()
        if pid == 0:       # the child: never returns
            code = 1
            try:
                os.setpgid(0, 0)
                fd_out = os.open(out_path, os.O_WRONLY | os.O_CREAT)
                fd_err = os.open(err_path, os.O_WRONLY | os.O_CREAT)
                os.dup2(fd_out, 1)
                os.dup2(fd_err, 2)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), encoding="utf-8",
                                              errors="backslashreplace", write_through=True)
                sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), encoding="utf-8",
                                              errors="backslashreplace", write_through=True)
                limit = _vm_size() + MEMORY_LIMIT
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # a write past the limit fails with EFBIG
                os.chdir(run.cwd)
                code = _child(run)
            except MemoryError:
                Path(flag_path).write_text("memory")
                code = 1
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        deadline = time.monotonic() + timeout
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        code = None if status is None else os.waitstatus_to_exitcode(status)
        flags = flag_path.read_text() if flag_path.exists() else ""
        result = O.Result(code, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"),
                          memory_exceeded="memory" in flags)
        result.file_too_large = "[Errno 27]" in result.stderr
        return result


def _child(run: O.Run) -> int:
    from codegen.errors import UserError

    if run.call is not None:
        try:
            run.call()
        except UserError as exc:
            print(exc.format(), file=sys.stderr)
            return 2
        return 0
    from codegen.cli import main

    assert run.argv is not None
    try:
        main.main(args=run.argv, prog_name="ctrgen", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def run_case(c: O.Case, root: Path, timeout: float) -> tuple[str, str]:
    folder = root / c.id.replace("/", "__").replace(" ", "_")
    folder.mkdir(parents=True)
    try:
        run = c.build(folder)
    except Exception as exc:           # the case could not be built: a defect of the sweep, not of ctrgen
        return "not built", f"{type(exc).__name__}: {exc}"
    before = O.snapshot(folder)
    result = run_forked(run, timeout)
    after = O.snapshot(folder)
    return O.classify(c, run, result, before, after, folder)


def _preload() -> None:
    """The modules every case imports (no threads are started by them), imported once before forking."""
    import codegen.cli  # noqa: F401
    import codegen.pipeline  # noqa: F401
    import codegen.specfile.load  # noqa: F401
    import codegen.triton.lint.validate  # noqa: F401


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="select", default="", help="only cases whose id contains this text")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds before a case counts as a hang")
    parser.add_argument("--json", type=Path, help="write every case's outcome here")
    args = parser.parse_args()
    _preload()
    cases = [c for c in H.CASES if args.select in c.id]
    rows: list[dict] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ctrgen-hostile-") as tmp:
        for i, c in enumerate(cases):
            t0 = time.monotonic()
            outcome, detail = run_case(c, Path(tmp), args.timeout)
            ok = O.expected_outcome(c, outcome)
            rows.append({"id": c.id, "kind": c.kind, "area": c.area, "expect": c.expect, "outcome": outcome,
                         "as_expected": ok, "detail": detail, "seconds": round(time.monotonic() - t0, 2)})
            if args.verbose or not ok:
                mark = "ok " if ok else "BAD"
                print(f"{mark} {c.id!r}: {outcome}{' (' + detail + ')' if detail and not ok else ''}"
                      f"{' [' + c.area + ']' if c.area else ''}", flush=True)
            elif i % 25 == 24:
                print(f"  {i + 1}/{len(cases)} cases", file=sys.stderr, flush=True)
    print(table(rows, time.monotonic() - started))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, ensure_ascii=True) + "\n")
    mine_bad = [r for r in rows if not r["as_expected"] and not r["area"]]
    return 1 if mine_bad else 0


def table(rows: list[dict], seconds: float) -> str:
    """The outcome table: one row per kind, this change's cases and the other areas' apart."""
    columns = [o for o in (*O.OUTCOMES, "not built")]
    lines = ["| kind | cases | " + " | ".join(columns) + " |", "|---|---:|" + "---:|" * len(columns)]

    def row(label: str, group: list[dict]) -> str:
        counts = Counter(r["outcome"] for r in group)
        return f"| {label} | {len(group)} | " + " | ".join(str(counts.get(o, 0)) for o in columns) + " |"

    kinds = sorted({(r["area"], r["kind"]) for r in rows})
    for area, kind in kinds:
        label = kind if not area else f"{kind} ({area}, after merge)"
        lines.append(row(label, [r for r in rows if r["kind"] == kind and r["area"] == area]))
    mine = [r for r in rows if not r["area"]]
    lines.append(row("**all of this change**", mine))
    if len(mine) != len(rows):
        lines.append(row("**other areas**", [r for r in rows if r["area"]]))
    bad = sum(not r["as_expected"] for r in mine)
    lines.append("")
    lines.append(f"{len(rows)} cases in {seconds:.0f} s; {bad} of this change's {len(mine)} not as expected; "
                 f"{sum(not r['as_expected'] for r in rows if r['area'])} of {len(rows) - len(mine)} in other areas.")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
