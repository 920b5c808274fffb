"""Raw rows (Parquet or CSV) through a served ensemble over HTTP (tritonclient), as a client would send them.

The request is read from the server itself: the ensemble's inputs (names, Triton data types) from its metadata. A
list column ``C`` travels as ``C`` (padded, [rows, longest list]) and ``C__lengths`` ([rows, 1], int32), the
preprocessing model's convention. Float columns carry nulls as NaN; other types cannot carry a null, and a row with
one is refused naming the row.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import UserError

LENGTHS = "__lengths"
NUMPY = {"BOOL": np.bool_, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
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
    output: str
    max_batch_size: int = 0           # 0: no batching dimension

    @property
    def columns(self) -> list[str]:
        """The raw columns a row must have (a list column's ``__lengths`` input is derived from it)."""
        return [n for n in self.inputs if not (n.endswith(LENGTHS) and n[:-len(LENGTHS)] in self.inputs)]


@dataclass
class QueryResult:
    scores: np.ndarray
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
    if path.is_dir():
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
    url = target.split("://", 1)[-1].rstrip("/")
    if ":" not in url or path.exists():
        raise UserError.one(target, "neither a repository folder nor a server URL", field="REPO-or-URL",
                            fix="pass the folder 'ctrgen assemble' wrote, or http://HOST:PORT of 'ctrgen serve'")
    yield Endpoint(url)


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
                    output=meta["outputs"][0]["name"], max_batch_size=int(configs[model].get("max_batch_size", 0)))


def read_rows(data: Path, columns: list[str], rows: int | None):
    """The columns of the first ``rows`` rows of a Parquet or CSV file; a missing column is one line, exit 2."""
    import pandas as pd

    if not data.is_file():
        raise UserError.one(data, "data file not found", field="--data", fix="pass a Parquet or CSV file")
    suffix = data.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            present = pq.read_schema(data).names
            _check_columns(data, present, columns)
            frame = pq.read_table(data, columns=columns).to_pandas()
        elif suffix in (".csv", ".tsv", ".txt"):
            present = list(pd.read_csv(data, nrows=0, sep="\t" if suffix == ".tsv" else ",").columns)
            _check_columns(data, present, columns)
            frame = pd.read_csv(data, usecols=columns, nrows=rows, sep="\t" if suffix == ".tsv" else ",")
        else:
            raise UserError.one(data, f"unknown data format {suffix or '(no suffix)'!r}", field="--data",
                                fix="pass a .parquet or .csv file")
    except UserError:
        raise
    except Exception as exc:         # pyarrow / pandas parse errors
        raise UserError.one(data, f"cannot read the file ({type(exc).__name__}: {exc})", field="--data") from None
    if rows is not None:
        frame = frame.head(rows)
    if len(frame) == 0:
        raise UserError.one(data, "no rows to send", field="--data")
    return frame[columns].reset_index(drop=True)


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
            padded = np.zeros((len(lists), max(1, int(lengths.max(initial=0)))), dtype=NUMPY[dtype])
            for i, v in enumerate(lists):
                padded[i, :len(v)] = _typed(v, dtype, data, col, start + i)
            out[col], out[col + LENGTHS] = padded, lengths.reshape(-1, 1)
        else:
            out[col] = _typed(values, dtype, data, col, start).reshape(-1, 1)
    return out


def _typed(values: np.ndarray, dtype: str, data: Path, col: str, start: int) -> np.ndarray:
    import pandas as pd

    if dtype.startswith("FP"):
        return np.asarray(pd.to_numeric(pd.Series(values), errors="coerce"), dtype=NUMPY[dtype])
    nulls = pd.isna(pd.Series(values, dtype=object)).to_numpy()
    if nulls.any():
        row = start + int(np.argmax(nulls))
        raise UserError.one(data, f"row {row} is null, and an input of type {dtype} cannot carry a null", field=col,
                            fix="fill the column, or send it as a float column the workflow fills (FillMissing)")
    if dtype == "BYTES":
        return np.array([v if isinstance(v, bytes) else str(v).encode() for v in values], dtype=np.object_)
    return np.asarray(values).astype(NUMPY[dtype])


def batch_size_for(ensemble: Ensemble, wanted: int | None) -> int:
    """``wanted``, at most the ensemble's max_batch_size (its default)."""
    limit = ensemble.max_batch_size or 1
    return limit if wanted is None else min(wanted, limit)


def score(conn, ensemble: Ensemble, frame, data: Path, *, batch_size: int, progress=None) -> QueryResult:
    """Send ``frame`` in requests of ``batch_size`` rows; the scores in row order and each request's latency."""
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException

    scores, latencies = [], []
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
                                outputs=[http.InferRequestedOutput(ensemble.output, binary_data=True)])
        except InferenceServerException as exc:
            raise UserError.one(data, f"the server refused rows {start}..{start + len(part) - 1}: {exc.message()}",
                                field=ensemble.name) from None
        latencies.append((time.perf_counter() - began) * 1000)
        scores.append(np.asarray(result.as_numpy(ensemble.output), dtype=np.float64).reshape(len(part), -1)[:, 0])
        if progress is not None:
            progress(len(part))
    return QueryResult(np.concatenate(scores), latencies)
