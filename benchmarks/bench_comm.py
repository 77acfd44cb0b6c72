"""``comm`` over many synthetic ranks: the driver's peak memory and time against ranks.

Builds (once, under OUT/inputs) RANKS synthetic Kineto rank traces with
``bench_multirank.build_inputs`` (the two DDP rank fixtures grown to ~MB each, even ranks
from rank 0, odd from rank 1; each carries its 40 all-reduces with their args), then runs,
each case in a fresh driver process so that its peak RSS is its own:

* ``engine``: the way ``traceforge comm`` runs: :func:`traceforge.map_ranks` of
  ``comm_summary`` (per-rank summaries on the local process pool) and ``comm_report``
  in the driver, at each rank count of ``--rank-counts``;
* ``load_run``: every rank's trace loaded in the driver and ``tf.comm`` on them (the
  one-process path), at the smallest rank count, as the baseline.

Prints the driver's peak RSS (``getrusage(RUSAGE_SELF)``: the driver only) and seconds per
case, and each engine case's peak as a ratio to the smallest engine case: flat in ranks
means the ratio stays near 1. Writes OUT/comm.json. No GPU is used.

    python benchmarks/bench_comm.py OUT --ranks 64 --mb 2 --rank-counts 8,64
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_multirank import build_inputs, rss_mib, run_case  # noqa: E402  (the rank files)


def _case(spec: dict[str, Any]) -> dict[str, Any]:
    import pandas  # noqa: F401  (imported before the baseline, like the work's modules)

    import traceforge as tf
    from traceforge.analyzers.communication.instances import comm_summary
    from traceforge.analyzers.communication.table import comm_report
    from traceforge.analyzers.runs.rank_summaries import TIMELINE_KINDS

    files = [Path(f) for f in spec["files"]]
    base = rss_mib()
    t0 = time.perf_counter()
    if spec["kind"] == "engine":
        ranked = tf.map_ranks(files, comm_summary, kinds=TIMELINE_KINDS,
                              workers=spec["workers"])
        r = comm_report([x.value for x in ranked])
    else:
        r = tf.comm(tf.load_run(files, workers=spec["workers"]))
    seconds = time.perf_counter() - t0
    return {**spec, "files": len(files), "seconds": seconds, "driver_peak_mib": rss_mib(),
            "driver_base_mib": base, "collectives": int(r.table["count"].sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--mb", type=float, default=2.0, help="size of each rank file")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rank-counts", default="8,32,64")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.case:
        print(json.dumps(_case(json.loads(a.case))))
        return
    if a.out is None:
        ap.error("give an output folder")
    files = build_inputs(a.out, a.ranks, a.mb)
    cache = a.out / "cache"
    counts = sorted(int(x) for x in a.rank_counts.split(","))
    # Warm the cache once (every case then maps cached tables, as a second run does).
    run_case({"kind": "engine", "files": [str(f) for f in files], "workers": a.workers},
             cache, __file__)
    rows = []
    for n in counts:
        rows.append(run_case({"kind": "engine", "files": [str(f) for f in files[:n]],
                              "workers": a.workers}, cache, __file__))
    rows.append(run_case({"kind": "load_run", "files": [str(f) for f in files[:counts[0]]],
                          "workers": a.workers}, cache, __file__))
    ref = rows[0]["driver_peak_mib"]
    print(f"{'case':10} {'ranks':>5} {'collectives':>11} {'seconds':>8} {'peak MiB':>9} "
          f"{'x smallest':>10}")
    for r in rows:
        print(f"{r['kind']:10} {r['files']:5d} {r['collectives']:11d} {r['seconds']:8.2f} "
              f"{r['driver_peak_mib']:9.1f} {r['driver_peak_mib'] / ref:10.2f}")
    (a.out / "comm.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
