"""Reading one large Kineto file with 1, 2, 4, ... chunk workers, against the decode floor.

The Kineto reader cuts a large file's events into chunks and decodes each in a forked
worker (``traceforge/formats/kineto_chunks.py``). This prints, for each worker count, the
time of ``traceforge.formats.chrome.read`` for the whole table and for the GPU rows only,
side by side with the typed msgspec decode of the same file in one process (the floor
``bench_load.py`` uses). Every case runs in a fresh interpreter, round-robin; medians.

    python benchmarks/bench_chunks.py [--trace big.json] [--workers 1,2,4,8,16] [--repeat 3]
                                      [--gz]

``--gz`` also reads the file gzipped (``big.json.gz`` beside it, written once at level 6),
whose chunks decode while the rest of the file decompresses.

Without --trace, builds benchmarks/out/big.json (~288 MB) from fixtures/eager.pt.trace.json.gz.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_load import DECODE, big_trace  # noqa: E402  (the same floor and trace)

READ = """
import os, time
os.environ['TRACEFORGE_PARSE_WORKERS'] = str(W)
from traceforge.formats import chrome
t0 = time.perf_counter()
chrome.read(P, None if K == 'all' else ['kernel', 'memcpy', 'memset', 'gpu_annotation', 'sync'])
INPROC = time.perf_counter() - t0
"""


def run(code: str, **names: object) -> float:
    with tempfile.NamedTemporaryFile("r", suffix=".json") as res:
        head = "".join(f"{k} = {v!r}\n" for k, v in names.items())
        prog = f"{head}{code}\nimport json; json.dump(INPROC, open({res.name!r}, 'w'))"
        subprocess.run([sys.executable, "-c", prog], cwd=REPO, check=True)
        return float(json.load(res))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trace", type=Path)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gz", action="store_true")
    a = ap.parse_args()
    trace = a.trace or big_trace()
    workers = [int(w) for w in a.workers.split(",")]
    cases: list[tuple[str, str, dict[str, object], Path]] = [
        ("typed msgspec decode (floor)", DECODE, {}, trace)]
    for k in ("all", "gpu"):
        for w in workers:
            cases.append((f"read, {'whole table' if k == 'all' else 'GPU rows'}, {w} worker(s)",
                          READ, {"W": w, "K": k}, trace))
    if a.gz:
        gz = trace.with_name(trace.name + ".gz")
        if not gz.exists():
            with trace.open("rb") as f, gzip.open(gz, "wb", compresslevel=6) as g:
                shutil.copyfileobj(f, g)
        for w in workers:
            cases.append((f"read .gz, whole table, {w} worker(s)", READ, {"W": w, "K": "all"},
                          gz))
    got: dict[str, list[float]] = {name: [] for name, _, _, _ in cases}
    for _ in range(a.repeat):
        for name, code, extra, path in cases:
            got[name].append(run(code, P=str(path), **extra))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB); {cores} cores; "
          f"median of {a.repeat}, seconds in-process")
    floor = statistics.median(got["typed msgspec decode (floor)"])
    one = {k: statistics.median(got[f"{k}, 1 worker(s)"])
           for k in ("read .gz, whole table", "read, whole table", "read, GPU rows")
           if f"{k}, 1 worker(s)" in got}
    print(f"{'case':40} {'s':>7} {'/ floor':>8} {'vs 1 worker':>11}")
    for name, times in got.items():
        m = statistics.median(times)
        base = next((v for k, v in one.items() if name.startswith(k + ",")), None)
        speed = f"{base / m:.2f}x" if base else ""
        print(f"{name:40} {m:7.3f} {m / floor:7.2f}x {speed:>11}")


if __name__ == "__main__":
    main()
