"""``import_corpus.py trains``: does each unit that imports train in PyTorch, as a user moving to PyTorch runs it?

For each distinct single-model unit that imports (reproduced), at the newest release it reproduces at: ``ctrgen
import`` writes the spec; a spec without the torch target gets it added, as a user would (``targets: [hugectr,
torch]``), and ``ctrgen generate``'s refusal of it is the unit's one line; otherwise the user's data is made: the
columns of the generated features.json as Parquet (64 synthetic training and evaluation rows; ids below each slot's
rows: its cardinality, or for a table HugeCTR sizes by ``workspace_size_per_gpu_in_mb`` a share of the
``max_vocabulary_size`` that sizing implies), and the generated train_torch.py trains 2 steps on the CPU as ``ctrgen
train SPEC --train DIR --eval DIR --device cpu --max-iter 2`` plans it (run in this process: the script's ``main``
with that command line; a Norm or Raw reader's spec takes its columns as Parquet exactly so).

Outcomes: *trained*; *refused* (the product's one line: the generator's or the trainer's); *crashed* (a Python
exception: a bug); *too large here* (the tables the features size hold more than ``MEMORY_LIMIT`` bytes with the
optimizer's states: not run on this machine, listed with the size).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

TRAINS = "trains.json"
STEPS = 2
ROWS = 64
MAX_IDS = 1000                      # ids drawn per slot: below min(rows of the slot, MAX_IDS)
MEMORY_LIMIT = 6 << 30              # bytes of embedding tables (weights, gradient, optimizer states) run here
STATES = {"SGD": 0, "MomentumSGD": 1, "Nesterov": 1, "AdaGrad": 1}   # per-row state copies; others: 2 (Adam's)
TRAINER_FLAGS = ("--batch-size", str(ROWS // 2), "--eval-batch-size", str(ROWS // 2), "--max-eval-batches", "1",
                 "--eval-interval", str(STEPS), "--display", "1", "--snapshot", "0", "--no-tensorboard",
                 "--threads", "1", "--compile", "off")


def slot_rows(features: dict) -> dict[str, int]:
    """Column -> the rows its ids lie below: the cardinality (a slot of size 0: that of the slot whose rows it
    shares), else (rows from the data) an equal share of the smallest max_vocabulary_size of the tables HugeCTR sizes
    for its input."""
    out = {}
    for s in features["sparse"]:
        cols = s["columns"]
        tables = [t["max_vocabulary_size"] for t in s.get("hugectr_tables", [])]
        share = max(1, min(tables) // len(cols)) if tables else MAX_IDS
        for c in cols:
            out[c["name"]] = c["cardinality"] if c.get("cardinality") is not None else share
        for c in cols:
            if c.get("shares"):      # a slot of size 0: ids of the slot whose rows it shares
                out[c["name"]] = out[c["shares"]]
    return out


def copies(rendered) -> int:
    """Copies of a table the trainer holds: the weights, a dense gradient and the optimizer's state tensors."""
    return 2 + STATES.get(rendered.job.optimizer.type, 2)


def table_bytes(rendered, rows: dict[str, int], features: dict) -> int:
    """Bytes of the embedding tables the trainer allocates: each input's rows (cardinalities, 0 for a slot of size
    0; sized-from-data slots at their synthetic rows) times each embedding's vector size, four bytes, ``copies``."""
    cols = {s["input"]: [0 if c.get("shares") else rows[c["name"]] if c.get("cardinality") is not None
                         else min(rows[c["name"]], MAX_IDS) for c in s["columns"]] for s in features["sparse"]}
    total = sum(sum(cols.get(e.bottom, [0])) * e.vec_size * 4 * copies(rendered) for e in rendered.job.graph.embeddings)
    c = rendered.job.graph.collection    # an embedding collection's tables, as the torch target sizes them
    if c is not None:
        from codegen.model.torch_collection import bottoms_of, torch_tables
        by_input = {s["input"]: cols[s["input"]] for s in features["sparse"]}
        sized = [n if n is not None else max(by_input[b][0] for b in bottoms_of(c, i))   # a dynamic table from data
                 for i, n in enumerate(torch_tables(rendered.job)[0])]
        total += sum(n * int(dict(t.args)["ev_size"]) * 4 * copies(rendered) for n, t in zip(sized, c.tables))
    return total


def write_data(root: Path, features: dict, rows: dict[str, int], seed: int = 0) -> dict[str, Path]:
    """The features' columns as Parquet, train/ and valid/ (one part file each)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    out = {}
    # A label features.json leaves to the data's _metadata.json (name null) gets a name here, which only that file says.
    labels = [c["name"] if c["name"] is not None else f"target_{i}" for i, c in enumerate(features["labels"])]
    for split in ("train", "valid"):
        cols: dict[str, object] = {}
        for name, c in zip(labels, features["labels"]):
            cols[name] = rng.integers(0, 2, ROWS).astype(c.get("dtype", "float32"))
        for c in features["continuous"]:
            cols[c["name"]] = rng.random(ROWS).astype(c.get("dtype", "float32"))
        for s in features["sparse"]:
            for c in s["columns"]:
                high = min(rows[c["name"]], MAX_IDS)
                if c.get("multi_hot"):
                    lengths = rng.integers(1, max(1, c["nnz"]) + 1, ROWS)
                    cols[c["name"]] = pa.array([rng.integers(0, high, n).astype(c["dtype"]) for n in lengths],
                                               pa.list_(pa.from_numpy_dtype(np.dtype(c["dtype"]))))
                else:
                    cols[c["name"]] = rng.integers(0, high, ROWS).astype(c["dtype"])
        folder = root / split
        folder.mkdir(parents=True)
        pq.write_table(pa.table(cols), folder / "part_0.parquet")
        write_metadata(folder, ["part_0.parquet"], ROWS, labels, [c["name"] for c in features["continuous"]],
                       [c["name"] for s in features["sparse"] for c in s["columns"]])
        out[split] = folder
    return out


def write_metadata(folder: Path, files: list[str], rows: int, labels: list[str], conts: list[str],
                   cats: list[str]) -> None:
    """The folder's _metadata.json as HugeCTR's Parquet reader reads it (src/data_readers/metadata.cpp): each file's
    rows ("file_stats") and the "labels", "conts" and "cats" lists of {"col_name", "index"}, index the column's
    position in the files (here labels, then continuous, then categorical columns, as write_data writes them)."""
    names = [*labels, *conts, *cats]
    doc = {"file_stats": [{"file_name": f, "num_rows": rows} for f in files],
           **{key: [{"col_name": n, "index": names.index(n)} for n in group]
              for key, group in (("cats", cats), ("conts", conts), ("labels", labels))}}
    (folder / "_metadata.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def _refused(exc, stage: str) -> dict:
    first = sorted(exc.problems, key=lambda p: p.sort_key())[0]
    where = f"{first.field}: " if first.field else ""
    return {"status": "refused", "stage": stage, "message": where + first.message}


def train_unit(text: str, release: str, argv: list[str] | None, name: str = "unit") -> dict:
    """Import ``text`` for ``release``, add the torch target where the import did not, generate, make the data and
    train ``STEPS`` steps. {'status', 'stage', 'message', ...}."""
    from codegen.errors import UserError
    from codegen.importer import import_source
    from codegen.importer.write import write_import
    from codegen.output import apply_write, plan_write
    from codegen.pipeline import open_spec, render_spec
    from codegen.runtime.contract import FEATURES_FILE
    from codegen.specfile.write import write_spec
    from codegen.train.launch import TRAINER, plan_launch

    with tempfile.TemporaryDirectory(prefix="ctrgen-trains-") as tmp:
        root = Path(tmp)
        src = root / f"{name}.py"
        src.write_text(text, encoding="utf-8")
        stage, added = "import", False
        try:
            result = import_source(src, release, "corpus_unit", argv)
            written = write_import(result, root / "specs")
            spec_path = written[0]
            stage = "generate"
            ctx = open_spec(spec_path)
            added = "torch" not in ctx.spec.targets
            if added:       # as a user would: targets: [hugectr, torch]
                spec = ctx.spec.model_copy(update={"targets": [*ctx.spec.targets, "torch"]})
                spec_path.write_text(write_spec(spec, "targets: torch added by the corpus run"), encoding="utf-8")
                ctx = open_spec(spec_path)
            rendered = render_spec(ctx)
            features = json.loads(rendered.files[next(k for k in rendered.files if str(k) == FEATURES_FILE)])
            rows = slot_rows(features)
            size = table_bytes(rendered, rows, features)
            if size > MEMORY_LIMIT:
                return {"status": "too large here", "stage": "data", "torch_added": added,
                        "message": f"its embedding tables take {size / (1 << 30):.0f} GiB with their gradient and "
                                   f"{copies(rendered) - 2} optimizer state(s) ({sum(rows.values()):,} rows), more "
                                   f"than the {MEMORY_LIMIT >> 30} GiB measured here"}
            stage = "data"
            data = write_data(root / "data", features, rows)
            folder = root / "generated" / rendered.name
            stage = "train"
            continuous = rendered.job.continuous
            # Continuous training reads one training and evaluation source per pass (the trainer's --pass-* flags).
            passes = () if continuous is None else \
                tuple(a for _ in continuous.passes for a in ("--pass-train", str(data["train"]), "--pass-eval",
                                                             str(data["valid"])))
            launch = plan_launch(ctx, folder, root / "run", ranks=1, device="cpu", max_iter=STEPS, resume=False,
                                 extra=(*TRAINER_FLAGS, *passes), continuous=continuous is not None,
                                 given=None if continuous else ([str(data["train"])], str(data["valid"])))
            apply_write(plan_write(folder, rendered.files))
        except UserError as exc:
            return {**_refused(exc, stage), "torch_added": added}
        except Exception:  # noqa: BLE001 - a traceback from our code is a bug; record it
            tb = traceback.format_exc().replace(tmp, "<tmp>")
            return {"status": "crashed", "stage": stage, "message": tb.strip().splitlines()[-1], "traceback": tb}
        return {**_run_trainer(folder / str(TRAINER), launch.argv[2:], tmp, name), "torch_added": added}


def _run_trainer(script: Path, argv: list[str], tmp: str, name: str) -> dict:
    """train_torch.py's ``main(argv)`` in this process (its output captured): trained, refused (its ``error:``
    line, exit 2) or crashed."""
    out, err = io.StringIO(), io.StringIO()
    path = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(f"corpus_train_torch_{name}", script)
        module = importlib.util.module_from_spec(spec)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            spec.loader.exec_module(module)
            code = module.main(argv)
    except BaseException:  # noqa: BLE001 - SystemExit included: main returns its status
        tb = traceback.format_exc().replace(tmp, "<tmp>")
        return {"status": "crashed", "stage": "train", "message": tb.strip().splitlines()[-1], "traceback": tb,
                "stderr": err.getvalue().replace(tmp, "<tmp>")[-2000:]}
    finally:
        sys.path[:] = path
    text = err.getvalue().replace(tmp, "<tmp>")
    if code == 0 and "done: " in out.getvalue() + text:
        return {"status": "trained", "stage": "train"}
    errors = [line[len("error: "):] for line in text.splitlines() if line.startswith("error: ")]
    if code == 2 and len(errors) == 1:
        return {"status": "refused", "stage": "train", "message": errors[0]}
    return {"status": "crashed", "stage": "train", "message": f"exit {code}: " + (text.strip().splitlines() or [""])[-1],
            "stderr": text[-3000:]}


def trains(args, load_index, unit_text, releases_of, argv_of, release_key, progress) -> None:
    """For each distinct unit that imports, at the newest release it reproduces at: train_unit; results in
    ``CACHE/trains.json`` (hash -> result with its release)."""
    cache = Path(args.cache)
    index = load_index(cache)
    results = json.loads((cache / "results.json").read_text(encoding="utf-8"))
    path = cache / TRAINS
    done = json.loads(path.read_text(encoding="utf-8")) if path.exists() and args.unit else {}
    jobs = []
    for u in index["units"]:
        if u["kind"] != "single" or (args.unit and not u["hash"].startswith(tuple(args.unit))):
            continue
        ok = [r for r in releases_of(u) if results.get(f"{u['hash']}@{r}", {}).get("status") == "reproduced"]
        if ok:
            jobs.append((u, max(ok, key=release_key)))
    t0 = time.perf_counter()
    for i, (u, r) in enumerate(jobs, 1):
        progress(i, len(jobs), "trains")
        res = train_unit(unit_text(cache, u["hash"]), r, argv_of(u, r), name=u["hash"])
        done[u["hash"]] = {**res, "release": r}
        path.write_text(json.dumps(done, indent=1, sort_keys=True), encoding="utf-8")
    counts: dict[str, int] = {}
    for u, _ in jobs:
        counts[done[u["hash"]]["status"]] = counts.get(done[u["hash"]]["status"], 0) + 1
    print(f"{len(jobs)} units in {time.perf_counter() - t0:.0f} s: " +
          ", ".join(f"{k} {n}" for k, n in sorted(counts.items())), file=sys.stderr)


# ---- report -------------------------------------------------------------------------------------------------------

# Why a cause is an exception, where the product's one line does not say it all (matched on the message).
WHY = (("no cardinality in the workflow schema", "the slot has no size, and the reader's slot offsets or the "
        "trainer's tables need one"),
       ("dense step of a dynamic table", "a dense step of this optimizer would move rows HugeCTR's hash table "
        "leaves alone"),
       ("HugeCTR's embedding collection adds no slot offset", "tables sized per slot under a Parquet reader whose "
        "slot_size_array offsets the keys past them: HugeCTR overflows, so the torch target refuses"),
       ("(min_key, max_key)", "a 3.7 - 4.0 table's key range leaves out keys its input holds: HugeCTR reads its "
        "last row (or outside the table) for them, so the torch target refuses"),
       ("SparseEmbedding has no Ftrl update", "HugeCTR's SparseEmbedding cannot update with Ftrl (it throws)"),
       ("embedding collection has no Ftrl update", "HugeCTR's static collection tables take Ftrl from 23.06"),
       ("with SGD or AdaGrad only", "HugeCTR's static collection tables take SGD, AdaGrad or (23.06+) Ftrl only"),
       ("reader_check renders model.py only", "a script that only checks its data reader has no model to train"),
       ("the torch target reads one Parquet label column per label", "a label of several dimensions: the torch "
        "target refuses it (the features name labels of dimension 1)"),
       ("embedding tables take", "the tables hold more than this machine's memory for the measurement (HugeCTR "
        "trains them across GPUs); not run here"))


def why(message: str) -> str:
    return next((w for key, w in WHY if key in message), "")


def report_section(index: dict, results: dict, trained: dict, releases_of, release_key, label_of, cause) -> str:
    """The 'trains in PyTorch' section of docs/import_corpus.md: the counts and every exception with its reason."""
    single = [u for u in index["units"] if u["kind"] == "single" and u["hash"] in trained]
    counts: dict[str, int] = {}
    for u in single:
        counts[trained[u["hash"]]["status"]] = counts.get(trained[u["hash"]]["status"], 0) + 1
    n, ok = len(single), counts.get("trained", 0)
    out = [f"## Trains in PyTorch\n\n`python tools/import_corpus.py trains` takes each distinct unit that imports "
           "(reproduces in one release or more), at the newest release it reproduces at, as a user moving to PyTorch "
           "would: the spec `ctrgen import` "
           "writes (with `targets: [hugectr, torch]`, added where the import did not: then `ctrgen generate`'s "
           "refusal is the unit's line), the spec's columns as Parquet (64 synthetic rows; ids below each slot's "
           "rows: its cardinality, that of the slot whose rows a slot of size 0 shares, or a share of the "
           "`max_vocabulary_size` HugeCTR's `workspace_size_per_gpu_in_mb` implies), and trains 2 steps of "
           f"{ROWS // 2} rows on the CPU with the generated `train_torch.py` as `ctrgen train SPEC "
           "--train DIR --eval DIR --device cpu --max-iter 2` plans it (a Norm or Raw reader's spec takes the same "
           "columns as Parquet through `--train` / `--eval`; continuous training through the trainer's "
           "`--pass-train` / `--pass-eval`). *too large here*: embedding tables that need more than "
           f"{MEMORY_LIMIT >> 30} GiB with their gradient and the optimizer's states, not run on the measuring "
           "machine. The per-release column counts the release's reproduced units whose unit trained (each unit is "
           "trained once).\n\n"
           f"Of {n} units that import, **{ok} train** ({100.0 * ok / n:.1f}%)" +
           "".join(f", {counts[k]} {k}" for k in ("refused", "too large here", "crashed") if counts.get(k)) +
           (f"; of the {held} this machine holds, {100.0 * ok / held:.1f}% train" if (held := n - counts.get(
               "too large here", 0)) and held != n else "") +
           ".\n\n### Exceptions (distinct units)\n\n| units | outcome | cause | why |\n|---:|---|---|---|\n"]
    groups: dict[tuple[str, str], list] = {}
    for u in single:
        res = trained[u["hash"]]
        if res["status"] != "trained":
            groups.setdefault((res["status"], cause(res)), []).append(u)
    for (status, c), us in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f"| {len(us)} | {status} | {c.replace('|', '&#124;')} | "
                   f"{why(trained[us[0]['hash']].get('message', ''))} |\n")
    out.append("\nEvery exception, by cause:\n")
    for (status, c), us in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f"\n- {status}: {c}\n")
        for u in sorted(us, key=lambda u: label_of(u["members"][-1])):
            out.append(f"  - `{u['hash']}` `{label_of(u['members'][-1])}` ({trained[u['hash']]['release']})\n")
    return "".join(out) + "\n"


def per_release(index: dict, results: dict, trained: dict, release: str, releases_of) -> int:
    """The release's reproduced units whose unit trained."""
    return sum(1 for u in index["units"] if u["kind"] == "single" and release in releases_of(u)
               and results.get(f"{u['hash']}@{release}", {}).get("status") == "reproduced"
               and trained.get(u["hash"], {}).get("status") == "trained")
