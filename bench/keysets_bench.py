"""How fast `ctrgen keysets` reads keys: a synthetic Criteo-shaped Norm file (Check_t.Sum and Non) and Parquet file.

    PYTHONPATH=. python bench/keysets_bench.py [--records 200000]

Prints records per second for each reader. The data is written with numpy here (27 slots, 1-2 keys per slot,
13 dense values), independently of the readers under test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def write_norm(path: Path, n: int, *, check_sum: bool, rng: np.random.Generator) -> None:
    slots, dense = 27, 13
    nnz = rng.integers(1, 3, size=(n, slots)).astype(np.int32)
    floats = rng.random((n, 1 + dense), dtype=np.float32)
    keys = rng.integers(0, 1 << 40, size=int(nnz.sum()), dtype=np.int64)
    header = np.array([int(check_sum), n, 1, dense, slots, 0, 0, 0], dtype="<i8").tobytes()
    out = [header if not check_sum else np.int32(64).tobytes() + header + bytes([sum(header) & 0xFF])]
    k = 0
    for r in range(n):
        body = [floats[r].tobytes()]
        for s in range(slots):
            body.append(nnz[r, s].tobytes())
            body.append(keys[k:k + nnz[r, s]].tobytes())
            k += nnz[r, s]
        b = b"".join(body)
        out.append(np.int32(len(b)).tobytes() + b + bytes([int(np.frombuffer(b, np.uint8).sum()) & 0xFF])
                   if check_sum else b)
    path.write_bytes(b"".join(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    n = ap.parse_args().records
    rng = np.random.default_rng(0)
    from codegen.keysets.norm import norm_keys
    from codegen.keysets.parquet import SlotLayout, parquet_keys

    with tempfile.TemporaryDirectory() as tmp:
        for check_sum in (True, False):
            f = Path(tmp) / f"bench_{int(check_sum)}.data"
            write_norm(f, n, check_sum=check_sum, rng=rng)
            t = time.perf_counter()
            keys, _ = norm_keys(f, "int64")
            dt = time.perf_counter() - t
            print(f"norm Check_t.{'Sum' if check_sum else 'Non'}: {n} records, {f.stat().st_size / 1e6:.1f} MB, "
                  f"{keys.size} unique keys in {dt:.2f} s = {n / dt:,.0f} records/s")
        import pyarrow as pa
        import pyarrow.parquet as pq

        sizes = rng.integers(10, 100_000, size=27)
        table = pa.table({f"C{i}": rng.integers(0, sizes[i], size=n) for i in range(27)})
        f = Path(tmp) / "bench.parquet"
        pq.write_table(table, f)
        layout = SlotLayout(tuple(f"C{i}" for i in range(27)), tuple(int(x) for x in sizes), "bench")
        t = time.perf_counter()
        keys, _ = parquet_keys(f, layout)
        dt = time.perf_counter() - t
        print(f"parquet: {n} rows x 27 columns, {keys.size} keys in {dt:.2f} s = {n / dt:,.0f} rows/s")


if __name__ == "__main__":
    main()
