"""Mutation check of the facts the generator owns (issue 17 item 2): `make mutate`.

Each mutant below changes one fact in codegen/ or templates/ by a textual edit. For each, in a fresh temporary copy
of the checkout: apply the edit, regenerate generated/ with the changed generator (so that tests reading committed
files cannot notice it; a mutant that makes generation fail leaves generated/ as it was), then run the mutant's small
test subset. A mutant whose tests still pass is a survivor. The checkout itself is never touched.

    python tools/mutate.py                  # every mutant; exit 1 if any survives
    python tools/mutate.py --list
    python tools/mutate.py vocab-lazyglobal eval-mode
    python tools/mutate.py --jobs 2         # mutants in parallel (each runs its tests with -n0)

A mutant whose text is no longer found exactly once is reported as stale (exit 2): update its `old` text when the
code it targets moves. Results are printed as a table; docs/testing.md records the last run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COPY = ("codegen", "templates", "tests", "specs", "generated", "pyproject.toml")
FACTS = "tests/test_facts.py"


@dataclass(frozen=True)
class Mutant:
    name: str
    fact: str
    path: str          # file under the checkout
    old: str           # must occur exactly once
    new: str
    tests: str         # pytest -k expression over `files`
    issue: bool = False  # one of the seven facts issue 17 found unguarded
    files: tuple[str, ...] = (FACTS,)


MUTANTS = (
    # -- the seven of issue 17 --
    Mutant("vocab-lazyglobal", "Adam with LazyGlobal keeps a third state copy in the vocabulary formula",
           "codegen/hugectr/versions.py",
           '(1 if optimizer == "Adam" and update_type == "LazyGlobal" else 0)', "0", "vocabulary", issue=True),
    Mutant("cardinality-max-plus-one", "cardinality = int_domain.max + 1", "codegen/workflow_schema.py",
           "card = _int_or_none(domain_max) + 1", "card = _int_or_none(domain_max)", "cardinality", issue=True),
    Mutant("drift-order", "a stale-lock check compares ordered column lists, not sets", "codegen/features.py",
           "if [c.name for c in getattr(locked, group)] != [c.name for c in getattr(fresh, group)]:",
           "if {c.name for c in getattr(locked, group)} != {c.name for c in getattr(fresh, group)}:", "lock_drift",
           issue=True),
    Mutant("drift-multi-hot", "a stale-lock check sees multi-hot changes", "codegen/features.py",
           "            if a[name] != b[name]:",
           '            if __import__("dataclasses").replace(a[name], multi_hot=False) != '
           '__import__("dataclasses").replace(b[name], multi_hot=False):', "lock_drift", issue=True),
    Mutant("drift-max-len", "a stale-lock check sees max_len changes", "codegen/features.py",
           "            if a[name] != b[name]:",
           '            if __import__("dataclasses").replace(a[name], max_len=None) != '
           '__import__("dataclasses").replace(b[name], max_len=None):', "lock_drift", issue=True),
    Mutant("eval-mode", "evaluate() runs the model in eval mode", "codegen/runtime/evaluation.py",
           'is told the batches done after each."""\n    model.eval()\n',
           'is told the batches done after each."""\n', "eval_mode", issue=True),
    Mutant("tensor-dims", "Triton tensors are declared [-1]", "codegen/triton/plan/repository.py",
           "dims: tuple[int, ...] = (-1,)", "dims: tuple[int, ...] = (1,)", "triton_tensor", issue=True),
    Mutant("ensemble-batch-rule", "validate: an ensemble's max_batch_size may equal its steps'",
           "codegen/triton/lint/rules_ensemble.py",
           "if member.config.max_batch_size < ens.config.max_batch_size:",
           "if member.config.max_batch_size <= ens.config.max_batch_size:", "ensemble_batch", issue=True),
    Mutant("keyset-signed", "32-bit keysets are unsigned", "codegen/keysets/write.py",
           '"int32": np.dtype("<u4")', '"int32": np.dtype("<i4")', "keyset", issue=True),
    # -- ten more (and a few beside them) --
    Mutant("vocab-adam-states", "Adam keeps two state copies", "codegen/hugectr/versions.py",
           '{"Adam": 2, "AdaGrad": 1,', '{"Adam": 1, "AdaGrad": 1,', "vocabulary"),
    Mutant("vocab-adagrad-states", "AdaGrad keeps one state copy", "codegen/hugectr/versions.py",
           '"AdaGrad": 1, "MomentumSGD"', '"AdaGrad": 0, "MomentumSGD"', "vocabulary"),
    Mutant("vocab-before-3.5", "before 3.5 the vocabulary ignores the optimizer", "codegen/hugectr/versions.py",
           'if not p.has("vocab_optimizer_states"):', "if False:", "vocabulary"),
    Mutant("vocab-gpu-count", "max_vocabulary_size_global = per GPU x GPU count", "codegen/graph/sparse.py",
           "optimizer.update_type) * gpu_count", "optimizer.update_type)", "vocabulary"),
    Mutant("cardinality-positive", "a cardinality below 1 is refused", "codegen/workflow_schema.py",
           "if card is not None and card <= 0:", "if card is not None and card < 0:", "cardinality"),
    Mutant("slot-order", "slot_size_array keeps the lock's slot order", "codegen/features.py",
           "return [int(c.cardinality or 0) for c in self.categorical]",
           "return sorted(int(c.cardinality or 0) for c in self.categorical)", "slot"),
    Mutant("drift-inputs-order", "a stale-lock check compares the request columns in order", "codegen/features.py",
           "and locked.inputs != fresh.inputs:", "and set(locked.inputs) != set(fresh.inputs):", "lock_drift"),
    Mutant("eval-restores-train", "evaluate() puts the model back in training mode",
           "codegen/runtime/evaluation.py",
           "        labels.append(label[:, 0])\n    model.train()\n", "        labels.append(label[:, 0])\n",
           "eval_mode"),
    Mutant("dtype-int64", "an int64 column is TYPE_INT64 in Triton", "codegen/triton/plan/repository.py",
           '"int32": "TYPE_INT32", "int64": "TYPE_INT64",', '"int32": "TYPE_INT32", "int64": "TYPE_INT32",',
           "triton_tensor or request_dtypes"),
    Mutant("dtype-request-fp64", "a float64 request column is TYPE_FP64", "codegen/triton/plan/repository.py",
           '"float64": "TYPE_FP64"', '"float64": "TYPE_FP32"', "request_dtypes"),
    Mutant("model-key-dtype", "the HugeCTR model's CATCOLUMN is UINT32 for 32-bit keys",
           "codegen/hugectr/backend.py",
           'KEY_DTYPE = {True: "TYPE_INT64", False: "TYPE_UINT32"}',
           'KEY_DTYPE = {True: "TYPE_INT64", False: "TYPE_INT32"}', "i64_input_key"),
    Mutant("nvt-key-dtype", "the preprocessing model's CATCOLUMN follows the key width",
           "codegen/triton/plan/repository.py",
           'backend.input_types(pre.key_dtype == "int64")', 'backend.input_types(True)',
           "i64_input_key"),
    Mutant("ensemble-max-batch", "the ensemble's max_batch_size is its steps'", "codegen/triton/plan/repository.py",
           "max_batch_size=nvt.max_batch_size,", "max_batch_size=nvt.max_batch_size + 1,", "max_batch_size"),
    Mutant("ps-max-batch", "ps.json max_batch_size equals config.pbtxt's", "codegen/triton/plan/repository.py",
           '"max_batch_size": model.max_batch_size,', '"max_batch_size": model.max_batch_size - 1,',
           "max_batch_size"),
    Mutant("keyset-range", "32-bit keys reach 2**32 - 1", "codegen/keysets/write.py",
           '"int32": (0, UINT32_MAX)', '"int32": (0, UINT32_MAX >> 1)', "keyset"),
    Mutant("batch-divisible", "batchsize must divide by the GPU count", "codegen/graph/build.py",
           "elif s.solver.batchsize % gpu_count:", "elif s.solver.batchsize % gpu_count > 1:", "batchsize"),
    Mutant("i64-unsigned", "uint64 ids make i64_input_key", "codegen/graph/build.py",
           'i64 = bool(dtypes & {"int64", "uint64"})', 'i64 = bool(dtypes & {"int64"})', "i64_input_key"),
    Mutant("nnz-max-len", "nnz_per_slot must hold the longest list the schema records", "codegen/graph/sparse.py",
           "if c.multi_hot and c.max_len is not None and v < c.max_len:",
           "if c.multi_hot and c.max_len is not None and v < c.max_len - 1:", "nnz"),
    Mutant("nnz-default", "a multi-hot slot's default nnz is its max_len", "codegen/graph/sparse.py",
           "values.append(c.max_len or 1 if c.multi_hot else 1)", "values.append(1)", "nnz"),
    Mutant("workspace-zero", "workspace 0 needs slot_size_array", "codegen/graph/sparse.py",
           "if (ws is None or ws == 0) and not e.slot_size_array:", "if ws is None and not e.slot_size_array:",
           "workspace"),
    Mutant("interaction-width", "DLRM's Interaction output: vec + n(n-1)/2 + 1 for n = slots + 1",
           "codegen/graph/shapes.py", "mlp.width + s * (s + 1) // 2 + 1", "mlp.width + s * (s - 1) // 2 + 1",
           "dimensions", files=("tests/test_criteo_specs.py",)),
    Mutant("reshape-leading-dim", "Reshape leading_dim = slots x vec (presets)", "codegen/graph/presets.py",
           "leading_dim=e.slot_num * e.vec_size)", "leading_dim=e.vec_size)", "dimensions",
           files=("tests/test_criteo_specs.py",)),
    Mutant("spec-positive", "counts and sizes are at least 1", "codegen/spec/fields.py",
           "PosInt = Annotated[int, Field(gt=0,", "PosInt = Annotated[int, Field(ge=0,", "spec_bounds"),
    Mutant("spec-non-negative", "seeds and workspaces are at least 0", "codegen/spec/fields.py",
           "NonNegInt = Annotated[int, Field(ge=0,", "NonNegInt = Annotated[int, Field(ge=-1,", "spec_bounds"),
    Mutant("spec-probability", "a dropout rate is below 1", "codegen/spec/fields.py",
           "Prob = Annotated[float, Field(ge=0.0, lt=1.0,", "Prob = Annotated[float, Field(ge=0.0, le=1.0,",
           "spec_bounds"),
    Mutant("spec-vec-max", "embedding_vec_size is at most 1024", "codegen/spec/model.py",
           "embedding_vec_size: Annotated[int, Field(ge=1, le=1024,",
           "embedding_vec_size: Annotated[int, Field(ge=1, le=1025,", "spec_bounds"),
    Mutant("torch-seed", "train_torch.py's default seed is the spec's", "codegen/render/torch_model.py",
           '"seed": int(solver.get("seed", 0) or 0),', '"seed": 0,', "seed"),
    # -- boundaries (tests/test_boundaries.py) --
    Mutant("key-offsets", "the largest key is the cardinality sum - 1 (a sum of 2**32 fits unsigned int)",
           "codegen/graph/build.py", "if total - 1 > key_max:", "if total > key_max:", "slot_offsets",
           files=("tests/test_boundaries.py",)),
    Mutant("args-long-long", "an args value for a long long parameter fits 64 bits signed",
           "codegen/hugectr/arg_types.py", '"int64": (INT64_MIN, INT64_MAX, "long long")',
           '"int64": (INT64_MIN, UINT64_MAX, "long long")', "args", files=("tests/test_boundaries.py",)),
    Mutant("args-size-t", "an args value for a size_t parameter is not negative",
           "codegen/hugectr/arg_types.py", '"uint64": (0, UINT64_MAX, "size_t / uint64")',
           '"uint64": (INT64_MIN, UINT64_MAX, "size_t / uint64")', "args", files=("tests/test_boundaries.py",)),
    Mutant("args-float", "an args value for a float parameter fits a C++ float",
           "codegen/hugectr/arg_types.py", '"float32": (FLT_MAX, "float")',
           '"float32": (DBL_MAX, "float")', "args", files=("tests/test_boundaries.py",)),
    Mutant("args-int-strict", "an args value for an int parameter is an integer, not a float",
           "codegen/hugectr/arg_types.py", "if not isinstance(value, int) or isinstance(value, bool):",
           "if not isinstance(value, (int, float)) or isinstance(value, bool):", "args",
           files=("tests/test_boundaries.py",)),
)


def _copy_tree(dest: Path) -> Path:
    """The parts of the checkout the tests need, in dest/<checkout name> (shared/ beside it, as tests expect)."""
    work = dest / REPO.name
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in COPY:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(src, work / name)
    shared = REPO.parent / "shared"
    if shared.is_dir():
        (dest / "shared").symlink_to(shared)
    return work


def _env(work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env["PYTHONPATH"] = str(work)     # the copy first: the checkout's editable install must not be imported
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_texts(mutants) -> list[str]:
    problems = []
    for m in mutants:
        n = (REPO / m.path).read_text(encoding="utf-8").count(m.old)
        if n != 1:
            problems.append(f"{m.name}: the text to change occurs {n} times in {m.path} (update tools/mutate.py)")
    return problems


def run_mutant(m: Mutant | None, *, timeout: int, tests: str | None = None,
               files: tuple[str, ...] = (FACTS,)) -> tuple[str, float, str]:
    """('killed' | 'survived' | 'error', seconds, detail); ``m=None``: the unchanged copy (the baseline)."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ctrgen-mutant-") as tmp:
        work = _copy_tree(Path(tmp))
        if m is not None:
            target = work / m.path
            target.write_text(target.read_text(encoding="utf-8").replace(m.old, m.new), encoding="utf-8")
        env = _env(work)
        specs = sorted(str(p.relative_to(work)) for p in (work / "specs").glob("*.yaml"))
        subprocess.run([sys.executable, "-m", "codegen", "generate", *specs], cwd=work, env=env,
                       capture_output=True, text=True, timeout=timeout)
        cmd = [sys.executable, "-m", "pytest", "-n0", "-q", "-x", "-p", "no:cacheprovider", "--timeout",
               str(timeout), *(m.files if m else files), "-k", tests or (m.tests if m else "")]
        try:
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "killed", time.monotonic() - start, "timeout"
        tail = (proc.stdout.strip().splitlines() or [""])[-1]
        if proc.returncode == 0:
            return "survived", time.monotonic() - start, tail
        if proc.returncode == 1:
            return "killed", time.monotonic() - start, tail
        return "error", time.monotonic() - start, (proc.stdout + proc.stderr)[-400:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Change each generator fact in turn and report the ones no test "
                                             "notices.")
    ap.add_argument("names", nargs="*", help="mutants to run (default: all)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per mutant")
    args = ap.parse_args(argv)
    known = {m.name: m for m in MUTANTS}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        ap.error(f"unknown mutants {unknown}; --list shows them")
    chosen = [known[n] for n in args.names] if args.names else list(MUTANTS)
    if args.list:
        for m in chosen:
            print(f"{m.name:<24} {m.path:<38} {m.fact}{'  [issue 17]' if m.issue else ''}")
        return 0
    stale = check_texts(chosen)
    if stale:
        print("\n".join(stale), file=sys.stderr)
        return 2
    # The same tests on the unchanged copy must pass, or a "killed" would mean nothing.
    subset = " or ".join(sorted({f"({m.tests})" for m in chosen}))
    files = tuple(sorted({f for m in chosen for f in m.files}))
    state, secs, detail = run_mutant(None, timeout=args.timeout, tests=subset, files=files)
    print(f"[ 0/{len(chosen)}] baseline {'passes' if state == 'survived' else 'FAILS'} ({secs:.1f} s)  {detail}",
          flush=True)
    if state != "survived":
        print("the tests fail without any mutation: fix them first", file=sys.stderr)
        return 2
    results: dict[str, tuple[str, float, str]] = {}
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {m.name: pool.submit(run_mutant, m, timeout=args.timeout) for m in chosen}
        for i, m in enumerate(chosen, 1):
            results[m.name] = futures[m.name].result()
            state, secs, detail = results[m.name]
            print(f"[{i:>2}/{len(chosen)}] {state:<8} {m.name:<24} {secs:5.1f} s  {detail}", flush=True)
    survivors = [n for n, (state, _, _) in results.items() if state != "killed"]
    print(f"\n{len(chosen) - len(survivors)} of {len(chosen)} mutants killed"
          + (f"; not killed: {', '.join(survivors)}" if survivors else "; no survivor"))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
