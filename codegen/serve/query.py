"""Raw rows (Parquet or CSV) through a served ensemble over HTTP (tritonclient), as a client would send them.

The request is read from the server itself: the ensemble's inputs (names, Triton data types) from its metadata. A
list column ``C`` travels as ``C`` (padded, [rows, longest list]) and ``C__lengths`` ([rows, 1], int32), the
preprocessing model's convention. Missing values go as the workflow takes them (codegen.serve.raw_rows): NaN in a
float column, an empty list in a list column; other types cannot carry a null, and a row with one is refused naming
the row.

Values are read strictly in the ensemble's types: a CSV is read as text (every row must have the header's number of
fields) and each value converted exactly; a value that is not one of the type (``abc`` or ``1.5`` for an integer, a
number out of its range, Infinity) is one line naming the row and the column, never rounded or dropped.
"""

from __future__ import annotations

import contextlib
import math
import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from ..errors import UserError
from .raw_rows import JSON_SUFFIXES, read_json_rows, split_list

LENGTHS = "__lengths"
TEXT_SUFFIXES = (".csv", ".tsv", ".txt")
CSV_BLOCK = 1 << 22               # bytes the CSV reader parses at a time; longer than any row of raw features
NUMPY: dict[str, Any] = {"BOOL": np.bool_, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
         "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64, "FP16": np.float16,
         "FP32": np.float32, "FP64": np.float64, "BYTES": np.object_}


@dataclass
class Endpoint:
    url: str                          # host:port of the HTTP endpoint
    repo: Path | None = None          # the local repository, when the target was one


@dataclass
class Ensemble:
    name: str
    inputs: dict[str, str]            # input name -> Triton data type, in the server's order
    outputs: tuple[str, ...]          # output names, in the server's order (one per label of a multi-label model)
    max_batch_size: int = 0           # 0: no batching dimension

    @property
    def columns(self) -> list[str]:
        """The raw columns a row must have (a list column's ``__lengths`` input is derived from it)."""
        return [n for n in self.inputs if not (n.endswith(LENGTHS) and n[:-len(LENGTHS)] in self.inputs)]


@dataclass
class QueryResult:
    scores: np.ndarray                # (rows, columns) float64: each output's values per row, side by side
    columns: tuple[str, ...] = ()     # a name per column: the output's, or OUTPUT0[j] for its j-th value per row
    latencies_ms: list[float] = field(default_factory=list)     # one per request

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else float("nan")


@contextlib.contextmanager
def endpoint(target: str, *, timeout: float = 300.0):
    """``target`` is a repository folder (a private server on free loopback ports is started for the query and
    stopped after it) or the URL of a running server (``http://HOST:PORT`` or ``HOST:PORT``)."""
    path = Path(target)
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except (OSError, ValueError):      # a name too long for a path, a NUL: no folder; maybe a URL
        is_dir = exists = False
    if is_dir:
        import shutil

        from .repository import check_repository, server_for
        from .server import ServerError, free_port

        models = check_repository(path)
        scratch = Path(tempfile.mkdtemp(prefix="ctrgen-query-"))
        server = server_for(path, scratch, host="127.0.0.1", http_port=free_port(), grpc_port=free_port(),
                            metrics_port=None)
        try:
            try:
                server.start(load=models, timeout=timeout)
            except ServerError as exc:
                raise UserError.one(path, exc.cause, field="tritonserver") from None
            yield Endpoint(server.http_url, repo=path)
        finally:
            server.stop()
            shutil.rmtree(scratch, ignore_errors=True)
        return
    scheme, sep, rest = target.partition("://")
    if sep and scheme.lower() != "http":
        # The client speaks plain HTTP: an https:// URL sent without TLS would be a silent downgrade.
        raise UserError.one(target, f"a {scheme}:// URL cannot be queried: ctrgen query speaks plain HTTP only",
                            field="REPO-or-URL", fix="give http://HOST:PORT (for TLS, a local tunnel or proxy)")
    url = (rest if sep else target).rstrip("/")
    if ":" not in url or exists or not _host_port(url):
        raise UserError.one(target, "neither a repository folder nor a server URL", field="REPO-or-URL",
                            fix="pass the folder 'ctrgen assemble' wrote, or http://HOST:PORT of 'ctrgen serve'")
    yield Endpoint(url)


def _host_port(url: str) -> bool:
    """Whether ``url`` is HOST:PORT (a name, IPv4 or bracketed IPv6 address, and a port of 1-65535)."""
    m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]{1,253}):(\d{1,5})", url)     # 253: DNS's longest name
    return m is not None and 0 < int(m.group(2)) < 65536


@contextlib.contextmanager
def client(url: str):
    import tritonclient.http as http

    conn = http.InferenceServerClient(url, network_timeout=120.0, connection_timeout=10.0)
    try:
        yield conn
    finally:
        conn.close()


def find_ensemble(conn, url: str, model: str | None = None) -> Ensemble:
    from tritonclient.utils import InferenceServerException

    try:
        index = conn.get_model_repository_index()
    except (InferenceServerException, OSError) as exc:
        raise UserError.one(url, f"no Triton server answers there ({exc})", field="REPO-or-URL",
                            fix="start one with 'ctrgen serve REPO', or pass the repository folder") from None
    ready = [m["name"] for m in index if m.get("state") == "READY"]
    configs = {m: conn.get_model_config(m) for m in ready}
    ensembles = [m for m in ready if configs[m].get("platform") == "ensemble"]
    if model is None:
        if len(ensembles) != 1:
            raise UserError.one(url, f"{len(ensembles)} ensembles are ready ({', '.join(ensembles) or 'none'})",
                                field="--model", fix="name the ensemble to query with --model")
        model = ensembles[0]
    elif model not in ready:
        raise UserError.one(url, f"model {model!r} is not ready (ready: {', '.join(ready) or 'none'})",
                            field="--model")
    meta = conn.get_model_metadata(model)
    return Ensemble(name=model, inputs={i["name"]: i["datatype"] for i in meta["inputs"]},
                    outputs=tuple(o["name"] for o in meta["outputs"]), max_batch_size=int(configs[model].get("max_batch_size", 0)))


def read_rows(data: Path, columns: list[str], rows: int | None, sep: str | None = None):
    """The columns of the first ``rows`` rows of a Parquet, CSV (``sep``: its field separator; default ',', a tab for
    .tsv) or JSON file; a missing column is one line, exit 2. A CSV's columns are text, as written, a JSON file's
    Python values (:func:`typed_frame` converts both)."""
    if not data.is_file():
        raise UserError.one(data, "data file not found", field="--data", fix="pass a Parquet or CSV file")
    suffix = data.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            present = pq.read_schema(data).names
            _check_columns(data, present, columns)
            frame = pq.read_table(data, columns=columns).to_pandas()
        elif suffix in TEXT_SUFFIXES:
            frame = _read_csv_text(data, columns, rows, sep or ("\t" if suffix == ".tsv" else ","))
        elif suffix in JSON_SUFFIXES:
            frame = read_json_rows(data, columns, rows)
        else:
            raise UserError.one(data, f"unknown data format {suffix or '(no suffix)'!r}", field="--data",
                                fix="pass a .parquet, .csv or .json file")
    except UserError:
        raise
    except Exception as exc:         # pyarrow / pandas parse errors
        if "straddles two block boundaries" in str(exc):
            raise UserError.one(data, f"a field is longer than the CSV reader's block of {CSV_BLOCK >> 20} MiB: no "
                                "input value is that long", field="--data", fix="check the file") from None
        raise UserError.one(data, f"cannot read the file ({type(exc).__name__}: {exc})", field="--data") from None
    if rows is not None:
        frame = frame.head(rows)
    if len(frame) == 0:
        raise UserError.one(data, "no rows to send", field="--data")
    return frame[columns].reset_index(drop=True)


def _read_csv_text(data: Path, columns: list[str], rows: int | None, sep: str):
    """The columns of a CSV as text, exactly as written (no type guessed, no NA value read): request_tensors converts
    them to the ensemble's types. A row with more or fewer fields than the header is refused (pyarrow's reader)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    with pcsv.open_csv(data, read_options=pcsv.ReadOptions(block_size=CSV_BLOCK),
                       parse_options=pcsv.ParseOptions(delimiter=sep)) as probe:
        present = probe.schema.names
    _check_columns(data, present, columns)
    reader = pcsv.open_csv(data, read_options=pcsv.ReadOptions(block_size=CSV_BLOCK),
                           parse_options=pcsv.ParseOptions(delimiter=sep),
                           convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in present},
                                                               include_columns=columns, strings_can_be_null=False,
                                                               quoted_strings_can_be_null=False))
    batches, have = [], 0
    for batch in reader:
        batches.append(batch)
        have += batch.num_rows
        if rows is not None and have >= rows:
            break
    return pa.Table.from_batches(batches, schema=reader.schema).to_pandas()


def typed_frame(frame, ensemble: Ensemble, data: Path, list_seps: dict[str, str] | None = None):
    """A frame read from CSV text or JSON with each column converted exactly to the ensemble's type (floats as
    float64, as a Parquet file holds them; text as str); a list column's CSV text is split on its separator in
    ``list_seps`` (the spec's etl.inputs.multi_hot), a missing list is an empty one."""
    typed = frame.copy()
    for col in ensemble.columns:
        dtype = ensemble.inputs[col]
        if ensemble.inputs.get(col + LENGTHS) is not None:
            sep = (list_seps or {}).get(col)
            typed[col] = pd_object([_typed_list(split_list(v, sep, data, col, i), dtype, data, col, i)
                                    for i, v in enumerate(frame[col].to_numpy(dtype=object))])
        elif dtype != "BYTES":
            values = _typed(frame[col].to_numpy(dtype=object), dtype, data, col, 0)
            typed[col] = values.astype(np.float64) if dtype.startswith("FP") else values
    return typed


def pd_object(values: list):
    import pandas as pd

    return pd.Series(values, dtype=object)


def _typed_list(items: list, dtype: str, data: Path, col: str, row: int) -> np.ndarray:
    """One row's list in the Triton type ``dtype``, each item exactly (a null item is refused naming the row); text
    stays text, as the workflow reads it offline (request_tensors encodes it for the request)."""
    if dtype == "BYTES":
        if any(v is None for v in items):
            _refuse_null(data, col, dtype, row)
        return np.array([v.decode() if isinstance(v, bytes) else str(v) for v in items], dtype=np.object_)
    return np.array([_one_value(v, dtype, data, col, row) for v in items], dtype=NUMPY[dtype])


def _check_columns(data: Path, present: list[str], columns: list[str]) -> None:
    missing = [c for c in columns if c not in present]
    if missing:
        raise UserError.one(data, f"column {missing[0]!r} is missing ({len(missing)} of the {len(columns)} columns "
                            f"the ensemble reads: {', '.join(missing)})", field=missing[0],
                            fix=f"the file needs the workflow's input columns: {', '.join(columns)}")


def request_tensors(frame, ensemble: Ensemble, data: Path, start: int = 0) -> dict[str, np.ndarray]:
    """Numpy arrays of one request (rows of ``frame``), in the ensemble's data types."""
    out = {}
    for col in ensemble.columns:
        dtype = ensemble.inputs[col]
        values = frame[col].to_numpy()
        if ensemble.inputs.get(col + LENGTHS) is not None:
            lists = [np.asarray([] if v is None else v) for v in values]
            lengths = np.array([len(v) for v in lists], np.int32)
            padded = np.full((len(lists), max(1, int(lengths.max(initial=0)))), b"" if dtype == "BYTES" else 0,
                             dtype=NUMPY[dtype])
            for i, v in enumerate(lists):
                padded[i, :len(v)] = _typed(v, dtype, data, col, start + i)
            out[col], out[col + LENGTHS] = padded, lengths.reshape(-1, 1)
        else:
            out[col] = _typed(values, dtype, data, col, start).reshape(-1, 1)
    return out


# Text a CSV writes for a missing float (pandas writes "", Spark "null"): NaN, which a float input carries.
_FLOAT_NULLS = {"", "nan", "NaN", "NA", "null", "NULL", "None"}
_INTEGER = re.compile(r"\s*[-+]?\d+\s*")


def _typed(values: np.ndarray, dtype: str, data: Path, col: str, start: int) -> np.ndarray:
    """``values`` as an array of the Triton type ``dtype``, exactly: nothing rounded, wrapped or guessed."""
    import pandas as pd

    if dtype == "BYTES":
        nulls = pd.isna(pd.Series(values, dtype=object)).to_numpy()
        if nulls.any():
            _refuse_null(data, col, dtype, start + int(np.argmax(nulls)))
        return np.array([v if isinstance(v, bytes) else str(v).encode() for v in values], dtype=np.object_)
    np_type = NUMPY[dtype]
    if values.dtype.kind in "biuf":     # typed data (Parquet): checked as a whole
        return _typed_numbers(values, dtype, data, col, start)
    out = np.empty(len(values), dtype=np_type)
    for i, v in enumerate(values):
        out[i] = _one_value(v, dtype, data, col, start + i)
    return out


def _typed_numbers(values: np.ndarray, dtype: str, data: Path, col: str, start: int) -> np.ndarray:
    np_type = NUMPY[dtype]
    if dtype.startswith("FP"):
        finite_or_nan = np.isnan(values) | np.isfinite(values) if values.dtype.kind == "f" else None
        with np.errstate(over="ignore"):
            out = values.astype(np_type)
        bad = (np.isinf(out) & ~np.isinf(values)) if finite_or_nan is not None else np.isinf(out)
        if bad.any():
            i = int(np.argmax(bad))
            _refuse(data, col, dtype, start + i, values[i], "out of its range")
        return out
    if dtype == "BOOL":
        bad = ~np.isin(values, (0, 1))
        if bad.any():
            i = int(np.argmax(bad))
            _refuse(data, col, dtype, start + i, values[i], "not true/false (1/0)")
        return values.astype(np.bool_)
    info = np.iinfo(np_type)
    if values.dtype.kind == "f":
        nan = np.isnan(values)
        if nan.any():
            _refuse_null(data, col, dtype, start + int(np.argmax(nan)))
        frac = values != np.floor(values)
        if frac.any():
            i = int(np.argmax(frac))
            _refuse(data, col, dtype, start + i, values[i], "not a whole number")
    low, high = values < info.min, values > info.max
    if low.any() or high.any():
        i = int(np.argmax(low | high))
        _refuse(data, col, dtype, start + i, values[i], f"out of its range {info.min}..{info.max}")
    return values.astype(np_type)


def _one_value(v, dtype: str, data: Path, col: str, row: int):
    """One value (text from a CSV, or a Python object) in the Triton type ``dtype``."""
    import pandas as pd

    if not isinstance(v, (str, bytes)) and pd.isna(v):      # None, NaN, pd.NA (a nullable column's null)
        if dtype.startswith("FP"):
            return math.nan
        _refuse_null(data, col, dtype, row)
    if not isinstance(v, str):
        if isinstance(v, (bool, np.bool_)) and dtype != "BOOL":     # JSON true: never silently 1
            _refuse(data, col, dtype, row, v, "true/false, not a number")
        if not isinstance(v, (bool, int, float, np.number, np.bool_)):
            _refuse(data, col, dtype, row, v, f"a {type(v).__name__}, not a number")
        return _typed_numbers(np.asarray([v]), dtype, data, col, row)[0]
    if dtype.startswith("FP"):
        if v.strip() in _FLOAT_NULLS:
            return math.nan
        try:
            value = float(v) if len(v) < 64 else math.inf
        except ValueError:
            _refuse(data, col, dtype, row, v, "not a number")
        with np.errstate(over="ignore"):
            in_range = math.isfinite(value) and math.isfinite(NUMPY[dtype](value))
        if not in_range:
            _refuse(data, col, dtype, row, v, "not a finite number of its range")
        return value
    if dtype == "BOOL":
        word = v.strip().lower()
        if word not in ("true", "false", "1", "0"):
            _refuse(data, col, dtype, row, v, "not true/false (1/0)")
        return word in ("true", "1")
    if v.strip() == "":
        _refuse_null(data, col, dtype, row)
    if not _INTEGER.fullmatch(v):
        _refuse(data, col, dtype, row, v, "not a whole number")
    info = np.iinfo(NUMPY[dtype])
    number = int(v) if len(v.strip()) <= 21 else math.inf      # longer than any 64-bit integer: never converted
    if not info.min <= number <= info.max:
        _refuse(data, col, dtype, row, v, f"out of its range {info.min}..{info.max}")
    return number


def _refuse_null(data: Path, col: str, dtype: str, row: int) -> NoReturn:
    raise UserError.one(data, f"row {row} is null, and an input of type {dtype} cannot carry a null", field=col,
                        fix="fill the column, or send it as a float column the workflow fills (FillMissing)")


def _refuse(data: Path, col: str, dtype: str, row: int, value, why: str) -> NoReturn:
    shown = str(value) if len(str(value)) <= 40 else f"{str(value)[:20]}... ({len(str(value))} characters)"
    raise UserError.one(data, f"row {row}: {shown!r} is {why}, which an input of type {dtype} needs", field=col,
                        fix="correct the value (the server would get another number than the file holds)")


def batch_size_for(ensemble: Ensemble, wanted: int | None) -> int:
    """``wanted``, at most the ensemble's max_batch_size (its default)."""
    limit = ensemble.max_batch_size or 1
    return limit if wanted is None else min(wanted, limit)


def score(conn, ensemble: Ensemble, frame, data: Path, *, batch_size: int, progress=None) -> QueryResult:
    """Send ``frame`` in requests of ``batch_size`` rows; the scores in row order, a column per output (several for
    an output of several values per row: the HugeCTR backend's labels side by side), and each request's latency."""
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException

    scores: list[np.ndarray] = []
    latencies: list[float] = []
    widths: list[int] = []
    for start in range(0, len(frame), batch_size):
        part = frame.iloc[start:start + batch_size]
        inputs = []
        for name, array in request_tensors(part, ensemble, data, start).items():
            tensor = http.InferInput(name, list(array.shape), ensemble.inputs[name])
            tensor.set_data_from_numpy(array, binary_data=True)
            inputs.append(tensor)
        began = time.perf_counter()
        try:
            result = conn.infer(ensemble.name, inputs,
                                outputs=[http.InferRequestedOutput(o, binary_data=True) for o in ensemble.outputs])
        except InferenceServerException as exc:
            raise UserError.one(data, f"the server refused rows {start}..{start + len(part) - 1}: {exc.message()}",
                                field=ensemble.name) from None
        latencies.append((time.perf_counter() - began) * 1000)
        parts = [np.asarray(result.as_numpy(o), dtype=np.float64).reshape(len(part), -1) for o in ensemble.outputs]
        widths = widths or [p.shape[1] for p in parts]
        if [p.shape[1] for p in parts] != widths:
            raise UserError.one(data, f"rows {start}..{start + len(part) - 1}: the outputs have "
                                f"{[p.shape[1] for p in parts]} values per row, earlier requests {widths}",
                                field=ensemble.name)
        scores.append(np.concatenate(parts, axis=1))
        if progress is not None:
            progress(len(part))
    columns = tuple(o if w == 1 else f"{o}[{j}]" for o, w in zip(ensemble.outputs, widths) for j in range(w))
    return QueryResult(np.concatenate(scores), columns, latencies)
