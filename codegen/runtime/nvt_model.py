"""The Triton preprocessing model (``<name>_nvt``): raw request columns -> the model step's VCSR input (triton.md §3).

A generated ``<name>_nvt/1/model.py`` holds its configuration (request columns, labels, continuous columns, tables
and slot offsets, key dtype) and hands the stub's calls to ``Preprocess``. It loads the saved NVTabular workflow from
the version folder and compiles it once into numpy lookups (nvt_arrays): the categories files become arrays and
dicts, the fitted constants stay as they are, and probe rows transformed both ways must agree before the model
reports ready (the workflow stays the source of truth; a workflow with an operator that has no numpy step is run as
it is, slower). String columns (BYTES) stay the UTF-8 bytes the request carries. Each execute() takes every request
the dynamic batcher queued, transforms them in one pass and returns per request: DES (float32, the continuous
columns, sample-major), CATCOLUMN (every key of sample 0, table by table, slot by slot, then sample 1, ...; each key
shifted by its slot's offset) and ROWINDEX (int32, per table one CSR row-pointer array). A bad request gets HTTP 400
with a message (gRPC INVALID_ARGUMENT); the model stays loaded.

"""

import gc
import json
import os
import warnings

import numpy as np

from . import nvt_arrays
from .contract import CATCOLUMN, DES, ROWINDEX
from .nvt_import import import_nvtabular
from .nvt_check import probe_columns, self_check

class RequestError(Exception):
    """A bad request: answered with HTTP 400 (INVALID_ARG), the model stays ready."""


class Preprocess:
    """The TritonPythonModel of a generated preprocessing model: ``config`` holds what the generated model.py names
    (MODEL_NAME, WORKFLOW_DIR, REQUEST, LABELS, CONTINUOUS, TABLES, KEY_DTYPE), ``pb_utils`` is the stub's
    triton_python_backend_utils."""

    def __init__(self, config, pb_utils):
        self.pb = pb_utils
        self.name, self.workflow_dir = config.MODEL_NAME, config.WORKFLOW_DIR
        self.request, self.labels = config.REQUEST, config.LABELS
        self.continuous, self.tables = config.CONTINUOUS, config.TABLES
        self.key_dtype = np.dtype(config.KEY_DTYPE)
        self.list_columns = any(is_list for _, _, is_list in self.request)
        self.slot_offsets = np.array([offset for _, slots in self.tables for _, offset, _, _ in slots], dtype=np.int64)
        self.rowindex: dict = {}     # ROWINDEX of one-hot requests, by row count

    def initialize(self, args):
        nvtabular = import_nvtabular()
        here = os.path.join(args["model_repository"], args["model_version"])
        path = os.path.join(here, self.workflow_dir)
        if not os.path.isdir(path):
            raise self.pb.TritonModelException(f"{self.name}: no saved workflow at {path!r} (run ctrgen assemble)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            workflow = nvtabular.Workflow.load(path)
        present = [c for c in self.labels if c in workflow.input_schema.column_names]
        if present:
            workflow.remove_inputs(present)
        wanted = [name for name, _, _ in self.request]
        got = list(workflow.input_schema.column_names)
        if sorted(got) != sorted(wanted):
            raise self.pb.TritonModelException(
                f"{self.name}: the workflow reads {got}, but this model was generated for {wanted}: "
                "regenerate the repository from this workflow's features lock")
        self._check_cardinalities(nvtabular, workflow)
        self.workflow = workflow
        self.arrays = arrays = nvt_arrays
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.plan = arrays.compile_workflow(workflow)
        except arrays.Unsupported as exc:
            self.plan = None
            self.pb.Logger.log_warn(f"{self.name}: {exc} has no numpy step: each request runs the workflow")
        if self.plan is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                problem = self_check(workflow, self.plan, probe_columns(workflow, self.plan, self.request))
            if problem:
                raise self.pb.TritonModelException(
                    f"{self.name}: the numpy lookups disagree with the saved workflow ({problem}); refusing to "
                    "serve answers the workflow would not give")
        config = json.loads(args["model_config"])
        self.outputs = [o["name"] for o in config["output"]]
        # What initialize built lives as long as the model: out of the collector's full passes (the lookups of a real
        # dataset are millions of objects, scanned on every full collection otherwise).
        gc.freeze()
        # The stub turns each BYTES input into an object array by calling this function of the module by name: the
        # vectorized one (same arrays) is set in this model's own stub process; a server whose stub has no such
        # function keeps its own decoding.
        stock = getattr(self.pb, "deserialize_bytes_tensor", None)
        strings = any(dtype == "object" for _, dtype, _ in self.request)
        if strings and callable(stock) and not hasattr(stock, "original"):
            self.pb.deserialize_bytes_tensor = arrays.fast_bytes_deserializer(stock)

    def _check_cardinalities(self, nvtabular, workflow):
        sizes = nvtabular.ops.get_embedding_sizes(workflow)
        merged = {}
        for part in (sizes if isinstance(sizes, tuple) else (sizes,)):
            merged.update(part)
        for table, slots in self.tables:
            for column, _offset, _keys, cardinality in slots:
                if column not in merged:
                    raise self.pb.TritonModelException(
                        f"{self.name}: the workflow has no categorical output column {column!r}")
                if int(merged[column][0]) != cardinality:
                    raise self.pb.TritonModelException(
                        f"{self.name}: column {column!r} has cardinality {int(merged[column][0])} in the workflow, "
                        f"but table {table!r} was trained with {cardinality}: keys would be shifted wrongly")

    def execute(self, requests):
        """Every queued request in one transform; a bad request gets its own error, the others their answers."""
        responses = [None] * len(requests)
        good = []
        for i, request in enumerate(requests):
            try:
                good.append((i, self._read(request)))
            except RequestError as exc:
                responses[i] = self._error(str(exc), self.pb.TritonError.INVALID_ARG)
        if good:
            try:
                outs = self._transform_many([columns for _, columns in good])
            except Exception:  # one request broke the shared pass: answer each on its own, with its own error
                outs = None
            for k, (i, columns) in enumerate(good):
                try:
                    out = outs[k] if outs is not None else self._transform_many([columns])[0]
                    rows = len(next(iter(columns.values())))
                    responses[i] = self.pb.InferenceResponse(output_tensors=self._vcsr(out, rows))
                except RequestError as exc:
                    responses[i] = self._error(str(exc), self.pb.TritonError.INVALID_ARG)
                except Exception as exc:  # the workflow failed on this data: report it, keep serving
                    responses[i] = self._error(f"{self.name}: {type(exc).__name__}: {exc}",
                                               self.pb.TritonError.INTERNAL)
        return responses

    def _transform_many(self, batches):
        """[{column: array}] -> [{output column: array or Ragged}], one pass over all rows. Each request keeps its own
        row index (0..rows-1), as the workflow sees a request frame."""
        arrays = self.arrays
        sizes = [len(next(iter(columns.values()))) for columns in batches]
        if self.plan is not None and len(batches) == 1:     # one request: its columns as they are
            columns = batches[0]
            try:
                return [self.plan.transform({name: (arrays.Ragged(*c) if isinstance(c, tuple) else c)
                                             for name, c in columns.items()} if self.list_columns else columns)]
            except arrays.Fallback:
                return [self._workflow_transform(columns)]
        if self.plan is not None:
            joined = {name: _concat([columns[name] for columns in batches], arrays) for name, _, _ in self.request}
            index = np.concatenate([np.arange(n) for n in sizes])
            try:
                out = self.plan.transform(joined, index)
            except arrays.Fallback:
                out = None
            if out is not None:
                return _split(out, sizes, arrays)
        return [self._workflow_transform(columns) for columns in batches]

    def _workflow_transform(self, columns):
        """The workflow itself (pandas): for operators or values the numpy steps do not cover."""
        import pandas as pd
        from merlin.dag.executors import LocalExecutor

        rows = len(next(iter(columns.values())))
        text = self.arrays.text                  # the workflow reads strings as str
        frame = pd.DataFrame({name: (_lists(text(c[0]), c[1]) if isinstance(c, tuple) else text(c))
                              for name, c in columns.items()})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = LocalExecutor().transform(frame, [self.workflow.output_node])
        if len(out) != rows:
            raise RequestError(f"{self.name}: the workflow returned {len(out)} rows for {rows}")
        result = {}
        for name in out.columns:
            series = out[name]
            first = series.iloc[0] if rows else None
            if rows and isinstance(first, (list, tuple, np.ndarray)):
                lengths = np.array([len(v) for v in series], dtype=np.int64)
                flat = np.concatenate([np.asarray(v) for v in series]) if lengths.sum() else np.zeros(0, np.int64)
                result[name] = self.arrays.Ragged(flat, np.concatenate([[0], np.cumsum(lengths)]))
            else:
                result[name] = series.to_numpy()
        return result

    def _vcsr(self, out, rows):
        result = {}
        if self.continuous:
            # (columns, rows) transposed: reshape copies it sample-major
            result[DES] = np.array([np.asarray(out[c], dtype=np.float32) for c in self.continuous]).T.reshape(1, -1)
        else:
            result[DES] = np.zeros((1, 0), dtype=np.float32)
        if not any(isinstance(out[column], self.arrays.Ragged) for _, slots in self.tables for column, *_ in slots):
            # One key per (sample, slot): a (sample, slot) matrix in table and slot order is already sample-major.
            keys = np.array([np.asarray(out[column], dtype=np.int64) for _, slots in self.tables
                             for column, *_ in slots]).T + self.slot_offsets
            result[CATCOLUMN] = keys.astype(self.key_dtype, copy=False).reshape(1, -1)
            result[ROWINDEX] = self._one_hot_rowindex(rows)
            return [self.pb.Tensor(name, result[name]) for name in self.outputs]
        values, sample_of, slot_of, rowindex = [], [], [], []
        slot = 0
        for table, slots in self.tables:
            counts = np.zeros((rows, len(slots)), dtype=np.int64)
            for j, (column, offset, max_keys, _cardinality) in enumerate(slots):
                column_out = out[column]
                if isinstance(column_out, self.arrays.Ragged):
                    keys, lengths = column_out.values.astype(np.int64), column_out.lengths
                else:
                    keys, lengths = np.asarray(column_out, dtype=np.int64), np.ones(rows, dtype=np.int64)
                if lengths.size and lengths.max() > max_keys:
                    bad = int(np.argmax(lengths > max_keys))
                    raise RequestError(f"{self.name}: row {bad} has {int(lengths[bad])} keys in slot {column!r} "
                                       f"of table {table!r}, more than its {max_keys} (nnz_per_slot)")
                counts[:, j] = lengths
                values.append(keys + offset)
                sample_of.append(np.repeat(np.arange(rows), lengths))
                slot_of.append(np.full(len(keys), slot + j))
            slot += len(slots)
            rowindex.append(np.concatenate([[0], np.cumsum(counts.ravel())]))
        keys = np.concatenate(values) if values else np.zeros(0, dtype=np.int64)
        # Sample-major: sample 0's keys table by table and slot by slot, then sample 1, ... (stable keeps list order).
        order = np.lexsort((np.concatenate(slot_of), np.concatenate(sample_of))) if values else np.zeros(0, int)
        result[CATCOLUMN] = keys[order].astype(self.key_dtype).reshape(1, -1)
        result[ROWINDEX] = np.concatenate(rowindex).astype(np.int32).reshape(1, -1)
        return [self.pb.Tensor(name, result[name]) for name in self.outputs]

    def _one_hot_rowindex(self, rows):
        """ROWINDEX when every (sample, slot) has one key: per table 0, 1, ..., batch x slots (the same for every
        request of `rows` samples; nothing writes to the cached array)."""
        if rows not in self.rowindex:
            if len(self.rowindex) >= 256:
                self.rowindex.clear()
            self.rowindex[rows] = np.concatenate([np.arange(rows * len(slots) + 1, dtype=np.int32)
                                                  for _, slots in self.tables]).reshape(1, -1)
        return self.rowindex[rows]

    def _error(self, message, code):
        return self.pb.InferenceResponse(output_tensors=[], error=self.pb.TritonError(message, code))

    def _read(self, request):
        """The request's columns ({name: 1-D array, or padded rows + lengths for a list column}), all with one row
        count."""
        columns, rows = {}, None
        # One pass over the inputs (self.pb.get_input_tensor_by_name lists and scans them all for each name).
        tensors = {tensor.name(): tensor for tensor in request.inputs()}
        for name, dtype, is_list in self.request:
            if is_list:
                padded = self._tensor(tensors, name, dtype, matrix=True)
                lengths = self._tensor(tensors, name + "__lengths", "int32").astype(np.int64)
                if len(lengths) != len(padded) or (lengths.size and (lengths.min() < 0 or
                                                                     lengths.max() > padded.shape[1])):
                    raise RequestError(f"{self.name}: {name + '__lengths'!r} must give 0..{padded.shape[1]} "
                                       f"values for each of the {len(padded)} rows of {name!r}")
                keep = np.arange(padded.shape[1])[None, :] < lengths[:, None]
                column = (padded[keep], np.concatenate([[0], np.cumsum(lengths)]))
                count = len(padded)
            else:
                column = self._tensor(tensors, name, dtype)
                count = len(column)
            if rows is not None and count != rows:
                raise RequestError(f"{self.name}: input {name!r} has {count} rows, expected {rows}")
            rows = count
            columns[name] = column
        return columns

    def _tensor(self, tensors, name, dtype, matrix=False):
        """One request input as a 1-D array ([batch, 1] or [batch]; [batch, n] with ``matrix``), checked against the
        dtype the model was generated for."""
        tensor = tensors.get(name)
        if tensor is None:
            raise RequestError(f"{self.name}: missing input {name!r}")
        array = tensor.as_numpy()
        if matrix:
            if array.ndim != 2:
                raise RequestError(f"{self.name}: input {name!r} must have shape [batch, n], got {list(array.shape)}")
        elif array.ndim == 2 and array.shape[1] == 1:
            array = array[:, 0]
        if not matrix and array.ndim != 1:
            raise RequestError(f"{self.name}: input {name!r} must have shape [batch, 1], got {list(array.shape)}")
        if dtype == "object":              # kept as bytes: the lookups hold the UTF-8 bytes of each category
            if array.dtype != np.object_:
                raise RequestError(f"{self.name}: input {name!r} must be BYTES, got {array.dtype}")
            return array
        if array.dtype != np.dtype(dtype):
            raise RequestError(f"{self.name}: input {name!r} must be {dtype}, got {array.dtype}")
        return array


def _concat(parts, arrays):
    if isinstance(parts[0], tuple):          # (flat values, offsets) of a list column
        values = np.concatenate([p[0] for p in parts])
        offsets, start = [np.zeros(1, np.int64)], 0
        for p in parts:
            offsets.append(p[1][1:] + start)
            start += p[1][-1]
        return arrays.Ragged(values, np.concatenate(offsets))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _split(out, sizes, arrays):
    if len(sizes) == 1:
        return [out]
    result, start = [], 0
    for n in sizes:
        result.append({name: (c.take(start, start + n) if isinstance(c, arrays.Ragged) else c[start:start + n])
                       for name, c in out.items()})
        start += n
    return result


def _lists(values, offsets):
    return [values[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
