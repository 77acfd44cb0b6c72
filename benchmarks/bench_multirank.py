"""Multi-rank load + analysis time vs number of ranks, and the ratio to HTA on the same files.

Builds (once, under OUT) one big Kineto trace per rank from a fixture with
``make_big_trace.py``, stamping ``distributedInfo.rank``; then for 1, 2, 4, 8 ranks times
``load_run`` (process pool) + ``overlap`` + ``breakdown``, and HTA 0.5.0's TraceAnalysis +
get_comm_comp_overlap + get_temporal_breakdown when hta is installed. Prints a table of
seconds and the HTA/traceforge ratio measured in the same run.

    python benchmarks/bench_multirank.py SRC OUT [--mb 100] [--ranks 8]
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import subprocess
import sys
import time
import warnings
from pathlib import Path


def _make(src: Path, out: Path, mb: int, ranks: int) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    base = out / "base.json"
    if not base.exists():
        here = Path(__file__).parent
        subprocess.run([sys.executable, str(here / "make_big_trace.py"), str(src), str(base),
                        "--mb", str(mb)], check=True)
    files = []
    raw = base.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    for r in range(ranks):
        p = out / f"rank{r}.json"
        if not p.exists():
            doc["distributedInfo"] = {"rank": r, "world_size": ranks, "backend": "nccl"}
            p.write_text(json.dumps(doc))
        files.append(p)
    return files


def _ours(files: list[Path]) -> float:
    import traceforge as tf

    t0 = time.perf_counter()
    traces = tf.load_run(files)
    tf.overlap(traces)
    tf.breakdown(traces)
    return time.perf_counter() - t0


def _hta(files: list[Path]) -> float | None:
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        return None
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_files={i: str(f) for i, f in enumerate(files)})
    ta.get_comm_comp_overlap(visualize=False)
    ta.get_temporal_breakdown(visualize=False)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--no-hta", action="store_true")
    a = ap.parse_args()
    files = _make(a.src, a.out, a.mb, a.ranks)
    print(f"{'ranks':>5} {'traceforge s':>13} {'hta s':>8} {'hta/tf':>7}")
    n = 1
    while n <= a.ranks:
        ours = _ours(files[:n])
        hta = None if a.no_hta else _hta(files[:n])
        ratio = f"{hta / ours:7.1f}" if hta else "      -"
        print(f"{n:>5} {ours:>13.2f} {hta if hta else float('nan'):>8.2f} {ratio}", flush=True)
        n *= 2


if __name__ == "__main__":
    main()
