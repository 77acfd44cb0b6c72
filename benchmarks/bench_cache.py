"""Which on-disk layout the trace cache uses: Arrow IPC (mapped, compressed) vs Parquet.

Loads a trace once, then for each layout writes the normalized event table, and times a
full read into the model's columns (numpy / categorical) and a read of the GPU rows only
(what top-kernels needs), each best of ``--repeat``, all in this one process. Also prints
the cost of storing Kineto ``args`` (the raw JSON of every event, the alternative the
cache does not take) next to the source-row column it stores instead.

    python benchmarks/bench_cache.py [--trace benchmarks/out/big.json] [--repeat 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq

from traceforge.formats import arrow_frames, load
from traceforge.model import GPU_KINDS, KINDS

HERE = Path(__file__).resolve().parent


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trace", type=Path, default=HERE / "out" / "big.json")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    trace = load(a.trace, cache=False)
    table = pa.table({c: arrow_frames.column_array(trace.events[c]) for c in trace.events.columns})
    gpu_codes = [KINDS.index(k) for k in GPU_KINDS]
    d = Path(tempfile.mkdtemp(prefix="tf-cache-bench-"))
    print(f"{a.trace}: {len(trace.events):,} events; times best of {a.repeat}")
    print(f"{'layout':28} {'MB':>7} {'write s':>8} {'read all s':>10} {'read GPU s':>10}")

    def frame(t: pa.Table, rows: np.ndarray | None) -> None:
        for c in t.column_names:
            arrow_frames.column(t.column(c), rows)

    def ipc(compression: str | None) -> None:
        p = d / f"ipc-{compression}.arrow"

        def write() -> None:
            opts = pa.ipc.IpcWriteOptions(compression=compression)
            with pa.OSFile(str(p), "wb") as f, pa.ipc.new_file(f, table.schema, options=opts) as w:
                w.write_table(table, max_chunksize=table.num_rows)

        def read(gpu: bool) -> None:
            t = pa.ipc.open_file(pa.memory_map(str(p))).read_all()
            rows = None
            if gpu:
                codes = t.column("kind").combine_chunks().indices.to_numpy()
                rows = np.flatnonzero(np.isin(codes, gpu_codes))
            frame(t, rows)

        w = best(write, a.repeat)
        print(f"{'Arrow IPC ' + (compression or 'uncompressed, mapped'):28} "
              f"{p.stat().st_size / 1e6:7.1f} {w:8.3f} {best(lambda: read(False), a.repeat):10.3f} "
              f"{best(lambda: read(True), a.repeat):10.3f}")

    def parquet(compression: str) -> None:
        p = d / f"pq-{compression}.parquet"

        def write() -> None:
            pq.write_table(table, str(p), compression=compression)

        def read(gpu: bool) -> None:
            t = pq.read_table(str(p), memory_map=True)
            rows = None
            if gpu:
                codes = t.column("kind").combine_chunks().indices.to_numpy()
                rows = np.flatnonzero(np.isin(codes, gpu_codes))
            frame(t, rows)

        w = best(write, a.repeat)
        print(f"{'Parquet ' + compression:28} {p.stat().st_size / 1e6:7.1f} {w:8.3f} "
              f"{best(lambda: read(False), a.repeat):10.3f} "
              f"{best(lambda: read(True), a.repeat):10.3f}")

    ipc(None)
    ipc("lz4")
    ipc("zstd")
    parquet("snappy")
    parquet("zstd")

    # Kineto args: the raw JSON of each event's args (what storing them would take) vs the
    # int64 source row the cache keeps and re-reads the source with on demand.
    import msgspec

    from traceforge.formats.kineto_schema import ArgsDoc
    from traceforge.formats.source import read_bytes

    if trace.meta.format != "kineto":
        return
    raw = read_bytes(a.trace)
    t0 = time.perf_counter()
    items = msgspec.json.decode(raw, type=ArgsDoc).traceEvents
    decode_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    args = pa.array([bytes(it.args) for it in items], type=pa.binary())
    build_s = time.perf_counter() - t0
    print(f"Kineto args as raw JSON per event: {args.nbytes / 1e6:.1f} MB, "
          f"{decode_s + build_s:.2f} s to extract at write time; the source-row column "
          f"instead: {len(trace.events) * 8 / 1e6:.1f} MB, args re-read on demand in "
          f"~{decode_s:.2f} s (decode) + the file read")


if __name__ == "__main__":
    main()
