"""Training data: features.json (the columns by role), the Parquet files of a split read and checked against it, and
the two ways a split reaches the steps: Columns (whole, on the device or in pinned host memory) and Stream (row
groups read ahead on a thread), and which of them a rank's files take (load_data)."""

from __future__ import annotations

import collections
import concurrent.futures
import os
import queue
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from .checks import agree, check_finite, check_split, read_json
from .checks import data_files  # noqa: F401  (its home is checks, without torch: ctrgen train counts files with it)
from .contract import FEATURES_FORMATS, layout_of
from .distributed import world
from .errors import DataError
from .kernels import RowKernels


def load_features(path: Path, layout: dict) -> dict:
    """features.json, refused unless its columns are ``layout`` (what the generated code was written for)."""
    features = read_json(path, "features file", "pass --features the features.json generated with this script")
    if not isinstance(features, dict) or features.get("ctrgen_torch_features") not in FEATURES_FORMATS:
        raise DataError(f"{path}: not a ctrgen features file (fix: use the features.json generated with this script)")
    if layout_of(features) != layout:
        raise DataError(f"{path}: its columns {layout_of(features)} are not the ones this script was generated for "
                        f"{layout} (fix: regenerate both with 'ctrgen generate')")
    return features


def _check_type(file: Path, name: str, typ: pa.DataType, kind: str, want: str) -> None:
    ok = {"ids": pa.types.is_integer(typ),
          "id lists": (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and pa.types.is_integer(typ.value_type),
          "numbers": pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_boolean(typ)}[kind]
    if not ok:
        raise DataError(f"{file}: column {name!r}: type {typ}, expected {kind} (features.json: {want})")


def column_names(features: dict) -> list[str]:
    return [c["name"] for c in features["labels"] + features["continuous"]] + \
        [c["name"] for s in features["sparse"] for c in s["columns"]]


def check_schema(file: Path, features: dict) -> None:
    """Every column features.json names is in the file, with a type of its role."""
    try:
        schema = pq.read_schema(file)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{file}: not a Parquet file ({exc})") from None
    roles = [(c, "numbers") for c in features["labels"] + features["continuous"]]
    roles += [(c, "id lists" if c["multi_hot"] else "ids") for s in features["sparse"] for c in s["columns"]]
    for col, kind in roles:
        if col["name"] not in schema.names:
            raise DataError(f"{file}: column {col['name']!r} is missing (features.json lists it: "
                            f"{col['dtype']}{', multi-hot' if col.get('multi_hot') else ''})")
        _check_type(file, col["name"], schema.field(col["name"]).type, kind, col["dtype"])


def to_numpy(array: pa.Array) -> np.ndarray:
    """A null-free Arrow array of numbers or booleans as numpy, read from its buffer (pyarrow's to_numpy imports
    pandas where it is installed: a fraction of a second of start-up)."""
    typ, start, n = array.type, array.offset, len(array)
    data = array.buffers()[1]
    if pa.types.is_boolean(typ):
        if n == 0:
            return np.zeros(0, dtype=bool)
        bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
        return bits[start:start + n].astype(bool)
    kind = "float" if pa.types.is_floating(typ) else "int" if pa.types.is_signed_integer(typ) else "uint"
    dtype = np.dtype(f"{kind}{typ.bit_width}")
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(data, dtype=dtype, count=n, offset=start * dtype.itemsize)


def table_arrays(table: pa.Table, features: dict, file: Path) -> list[np.ndarray]:
    """[labels (N, labels), dense (N, continuous) float32, per sparse input int64 ids (N, slots, nnz), -1 padding
    the lists] of a table read from `file`, its ids checked against the cardinalities."""
    n = table.num_rows

    def numbers(cols: list[dict], kind: str) -> np.ndarray:
        out = np.zeros((n, len(cols)), dtype=np.float32)
        for j, c in enumerate(cols):
            column = table.column(c["name"]).combine_chunks()
            if column.null_count:
                raise DataError(f"{file}: column {c['name']!r} has {column.null_count} null value(s)")
            out[:, j] = to_numpy(column)
            check_finite(file, c["name"], out[:, j], kind)
        return out

    arrays = [numbers(features["labels"], "label"), numbers(features["continuous"], "continuous")]
    for s in features["sparse"]:
        ids = np.full((n, len(s["columns"]), s["nnz"]), -1, dtype=np.int64)
        rows = {c["name"]: c["cardinality"] for c in s["columns"]}
        for j, c in enumerate(s["columns"]):
            column = table.column(c["name"]).combine_chunks()
            if column.null_count:
                raise DataError(f"{file}: column {c['name']!r} has {column.null_count} null value(s)")
            if c["multi_hot"]:
                offsets = to_numpy(column.offsets).astype(np.int64)
                values = to_numpy(column.flatten()).astype(np.int64)
                lengths = np.diff(offsets)
                if n and lengths.max() > s["nnz"]:
                    row = int(np.argmax(lengths > s["nnz"]))
                    raise DataError(f"{file}: column {c['name']!r}: row {row} lists {lengths[row]} ids, more "
                                    f"than nnz_per_slot {s['nnz']} (fix: raise nnz_per_slot in the spec)")
                row_of = np.repeat(np.arange(n), lengths)
                ids[row_of, j, np.arange(len(values)) - np.repeat(offsets[:-1] - offsets[0], lengths)] = values
            else:
                values = to_numpy(column).astype(np.int64)
                ids[:, j, 0] = values
            # A slot of size 0 (slot_size_array) holds ids of the slot whose rows it shares (HugeCTR's offsets).
            bound = rows[c["shares"]] if c.get("shares") else c["cardinality"]
            bad = (values < 0) | (values >= bound)
            if bad.any():
                first = int(values[np.argmax(bad)])
                where = (f"the cardinality of column {c['shares']!r}, whose rows this slot of size 0 shares"
                         if c.get("shares") else "the cardinality in features.json")
                raise DataError(f"{file}: column {c['name']!r}: id {first} is outside [0, {bound}) ({where}) (fix: "
                                "regenerate with the workflow that wrote this data: 'ctrgen lock', then 'ctrgen "
                                "generate')")
        arrays.append(ids)
    return arrays


def row_bytes(features: dict) -> int:
    """Bytes one row takes in memory once read (float32 labels and continuous columns, int64 ids)."""
    return 4 * (len(features["labels"]) + len(features["continuous"])) + \
        sum(8 * len(s["columns"]) * s["nnz"] for s in features["sparse"])


def count_rows(files: list[Path]) -> int:
    try:
        return sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{files[0]}: not a Parquet file ({exc})") from None


def read_split(files: list[Path], features: dict, max_rows: int | None = None) -> dict:
    """Read and check the columns features.json names: labels (N, labels) and dense (N, continuous) float32, and per
    sparse input an int64 id array (N, slots, nnz) with -1 padding the lists."""
    parts = []
    rows = 0
    for file in files:
        check_schema(file, features)
        table = pq.ParquetFile(file).read(columns=column_names(features))   # not read_table: it imports pyarrow.dataset
        if max_rows is not None:
            table = table.slice(0, max_rows - rows)
        parts.append(table_arrays(table, features, file))
        rows += table.num_rows
        if max_rows is not None and rows >= max_rows:
            break
    return {"labels": np.concatenate([p[0] for p in parts]), "dense": np.concatenate([p[1] for p in parts]),
            "sparse": [np.concatenate([p[k] for p in parts]) for k in range(2, len(parts[0]))]}


class Columns:
    """One split as tensors: on the device when it fits (batches are gathered there), else in pinned host memory."""

    placement = "host"   # where the trainer put it: gpu, host (--data-on)

    def __init__(self, arrays: dict, device: torch.device, on_device: bool):
        self.n = len(arrays["labels"])
        where = device if on_device else torch.device("cpu")
        self.tensors = [torch.from_numpy(arrays["labels"]), torch.from_numpy(arrays["dense"]),
                        *[torch.from_numpy(ids) for ids in arrays["sparse"]]]
        self.tensors = [t.to(where) for t in self.tensors]
        if device.type == "cuda" and not on_device:
            self.tensors = [t.pin_memory() for t in self.tensors]
        self.device = device
        self.kernels = False   # set by the trainer (compiled GPU runs, columns on the GPU): RowKernels gather

    @staticmethod
    def nbytes(arrays: dict) -> int:
        return arrays["labels"].nbytes + arrays["dense"].nbytes + sum(a.nbytes for a in arrays["sparse"])

    def batch(self, index: torch.Tensor) -> list[torch.Tensor]:
        """[labels, dense, *sparse ids] for the rows in index (a tensor on the columns' device)."""
        if self.kernels:
            return [RowKernels.gather(t.view(len(t), -1), index, t.dtype).view(-1, *t.shape[1:]) if t[0].numel()
                    else t.new_empty((len(index), *t.shape[1:])) for t in self.tensors]
        return [t.index_select(0, index).to(self.device, non_blocking=True) for t in self.tensors]

    def epoch(self, seed: int) -> torch.Tensor:
        """This epoch's order of the rows (the same seed on every rank)."""
        generator = torch.Generator(device=self.tensors[0].device)
        generator.manual_seed(seed)
        return torch.randperm(self.n, generator=generator, device=self.tensors[0].device)

    def advance(self) -> None:
        pass

    def stop(self) -> None:
        pass


# ---- streaming data ------------------------------------------------------------------------------------------------

class Stream:
    """Training batches read from this rank's Parquet files while the GPU trains: a background thread reads row
    group after row group (files in a per-epoch order), shuffles rows within a window of --shuffle-window rows,
    and queues batches in pinned host memory; each step copies the next one into fixed device buffers (so a CUDA
    graph can read them). An epoch is the whole of the files, every full batch of it."""

    placement = "stream"
    kernels = False      # batches arrive whole: no RowKernels gather

    def __init__(self, files: list[Path], features: dict, device: torch.device, batch_size: int, window: int):
        self.files, self.features, self.device = files, features, device
        self.batch_size, self.window = batch_size, max(window, batch_size)
        self.groups = []
        for file in files:
            check_schema(file, features)
            meta = pq.ParquetFile(file).metadata
            self.groups += [(file, g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]
        self.n = sum(rows for _, _, rows in self.groups)
        widths = [len(features["labels"]), len(features["continuous"])]
        self.buffers = [torch.zeros(batch_size, w, device=device) for w in widths]
        self.buffers += [torch.zeros(batch_size, len(s["columns"]), s["nnz"], dtype=torch.int64, device=device)
                         for s in features["sparse"]]
        self.tensors = self.buffers          # where batches live (the device), as Columns.tensors
        self.thread: threading.Thread | None = None
        self.queue: queue.Queue = queue.Queue(maxsize=4)
        self.stop_event = threading.Event()

    def batch(self, index) -> list[torch.Tensor]:
        return self.buffers

    def epoch(self, seed: int) -> None:
        self.stop()
        self.stop_event = threading.Event()
        self.queue = queue.Queue(maxsize=4)
        self.thread = threading.Thread(target=self._read, args=(seed, self.queue, self.stop_event), daemon=True)
        self.thread.start()

    def advance(self) -> None:
        item = self.queue.get()
        if isinstance(item, BaseException):
            raise item
        for buffer, part in zip(self.buffers, item):
            buffer.copy_(part, non_blocking=True)

    def stop(self) -> None:
        if self.thread is not None:
            self.stop_event.set()
            while self.thread.is_alive():
                try:
                    self.queue.get(timeout=0.1)
                except queue.Empty:
                    pass
            self.thread = None

    def _put(self, item, q, stop) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def _group(self, k: int) -> list[torch.Tensor]:
        file, group, _ = self.groups[k]
        table = pq.ParquetFile(file).read_row_group(group, columns=column_names(self.features))
        return [torch.from_numpy(a) for a in table_arrays(table, self.features, file)]

    def _read(self, seed: int, q, stop) -> None:
        try:
            rng = np.random.default_rng(seed)
            pinned = self.device.type == "cuda"
            pending = None
            # Two row groups are read and converted ahead (pyarrow and numpy release the GIL for most of it).
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                ahead: collections.deque = collections.deque()
                order = list(rng.permutation(len(self.groups)))
                while order or ahead:
                    while order and len(ahead) < 2:
                        ahead.append(pool.submit(self._group, order.pop(0)))
                    part = ahead.popleft().result()
                    pending = part if pending is None else [torch.cat([a, b]) for a, b in zip(pending, part)]
                    if len(pending[0]) < self.window:
                        continue
                    pending = self._emit(pending, rng, pinned, q, stop)
                    if pending is None:
                        for future in ahead:
                            future.cancel()
                        return
            if pending is not None:
                self._emit(pending, rng, pinned, q, stop)
        except BaseException as exc:   # noqa: BLE001 (re-raised in the training thread)
            self._put(exc, q, stop)

    def _emit(self, arrays: list, rng, pinned: bool, q, stop):
        """Shuffle the window, queue its full batches; returns the rows left over (None when stopped)."""
        order = torch.from_numpy(rng.permutation(len(arrays[0])))
        arrays = [a.index_select(0, order) for a in arrays]   # one gather per window; batches are then slices
        full = len(order) // self.batch_size * self.batch_size
        for start in range(0, full, self.batch_size):
            parts = [a[start:start + self.batch_size] for a in arrays]
            if pinned:
                parts = [p.pin_memory() for p in parts]
            if not self._put(parts, q, stop):
                return None
        return [a[full:] for a in arrays]


def data_placement(asked: str, nbytes: int, device: torch.device) -> str:
    """gpu, host or stream for a split of `nbytes` once read (--data-on auto decides by the free memory)."""
    if asked in ("gpu", "device"):
        return "gpu" if device.type == "cuda" else "host"
    if asked != "auto":
        return asked
    if device.type == "cuda" and nbytes < 0.5 * torch.cuda.mem_get_info(device)[0]:
        return "gpu"
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        available = None
    return "stream" if available is not None and nbytes > 0.5 * available else "host"


def load_data(args, sources: list[str], eval_source: str, features: dict,
              device: torch.device, losses=None) -> tuple[Columns | Stream, Columns]:
    """This rank's training files and evaluation rows; a problem on any rank stops every rank."""
    rank, size = world()
    problem = ""
    train: Columns | Stream | None = None
    valid: Columns | None = None
    try:
        files = [f for source in sources for f in data_files(source)]
        if len(files) < size:
            raise DataError(f"{sources[0]}: {len(files)} training file(s) for {size} ranks; each rank reads whole "
                            f"files (fix: write at least {size} files, e.g. NVTabular's out_files_per_proc, or start "
                            "fewer ranks)")
        mine = files[rank::size]
        place = data_placement(args.data_on, count_rows(mine) * row_bytes(features), device)
        eval_arrays = read_split(data_files(eval_source), features, max_rows=args.max_eval_batches * args.eval_batch_size)
        eval_arrays = {"labels": eval_arrays["labels"][rank::size], "dense": eval_arrays["dense"][rank::size],
                       "sparse": [ids[rank::size] for ids in eval_arrays["sparse"]]}
        if place == "stream":
            train = Stream(mine, features, device, args.batch_size, args.shuffle_window)
        else:
            train = Columns(read_split(mine, features), device, place == "gpu" or device.type == "cpu")
        valid = Columns(eval_arrays, device, place != "host" or device.type == "cpu")
        train.placement = place if device.type == "cuda" else "host" if place == "gpu" else place
        check_split(args, train, valid, losses)
    except DataError as exc:
        problem = str(exc)
    problem = agree(problem, device)
    if problem:
        raise DataError(problem)
    assert train is not None and valid is not None
    return train, valid
