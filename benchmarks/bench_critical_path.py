"""Critical path time on a 1-step trace of ~100k events, and the ratio to HTA on the same file.

Builds (once, under OUT) a Kineto trace of about EVENTS events by replicating a fixture
with ``make_big_trace.py``, analysed as one step (``--steps none``: the whole trace is one
window). Times, in the same run: traceforge's load, its shared timeline (the baseline every
analysis pays), ``critical_path`` (graph + path) and ``critical_path`` with a what-if; then
HTA 0.5.0's ``TraceAnalysis`` + ``critical_path_analysis`` of the whole trace when hta is
installed and pandas < 3 (HTA's CPA fails on pandas 3). Prints seconds and ratios.

    python benchmarks/bench_critical_path.py [SRC] [OUT] [--events 100000] [--no-hta]
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import math
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
DEFAULT_SRC = HERE.parent / "fixtures" / "eager.pt.trace.json.gz"


def _make(src: Path, out: Path, events: int) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    big = out / f"critpath_{events}.json"
    if big.exists():
        return big
    sys.path.insert(0, str(HERE))
    import make_big_trace

    raw = src.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    n = sum(1 for e in doc["traceEvents"] if e.get("ph") != "M")
    mb_per_copy = len(json.dumps(doc["traceEvents"])) / 1e6
    # Whole copies of the source, at least ``events`` events in all.
    make_big_trace.build(src, big, mb_per_copy * math.ceil(events / n))
    return big


def _time(f: Callable[..., Any], *a: Any, **kw: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = f(*a, **kw)
    return time.perf_counter() - t0, out


def _ours(path: Path) -> dict[str, float]:
    from traceforge.analyzers.critical_path import critical_path
    from traceforge.analyzers.timeline.core import timeline
    from traceforge.formats import load

    t_load, trace = _time(load, str(path))
    trace = trace.with_steps("none")
    t_tl, _ = _time(timeline, trace)
    t_cp, r = _time(critical_path, trace)
    t_wi, _ = _time(critical_path, trace, what_if=["gemm=2"])
    st = r.steps.iloc[0]
    print(f"  {len(trace.events):,} rows in the event table, {int(st['nodes']):,} nodes, "
          f"{int(st['edges']):,} edges, path {int(st['length_ns']) / 1e6:.3f} ms "
          f"(window {(int(st['end']) - int(st['ts'])) / 1e6:.3f} ms)")
    return {"load": t_load, "timeline": t_tl, "critical_path": t_cp, "with_what_if": t_wi}


def _hta(path: Path) -> float | None:
    try:
        import pandas as pd
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        print("  HTA: not installed")
        return None
    if int(pd.__version__.split(".")[0]) >= 3:
        print(f"  HTA: skipped, its critical path needs pandas < 3 (have {pd.__version__})")
        return None
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_files={0: str(path)})
    ta.critical_path_analysis(rank=0, annotation="", instance_id=None)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("src", type=Path, nargs="?", default=DEFAULT_SRC)
    ap.add_argument("out", type=Path, nargs="?", default=Path("/tmp/traceforge-bench"))
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--no-hta", action="store_true")
    a = ap.parse_args()
    path = _make(a.src, a.out, a.events)
    with path.open() as f:
        raw = sum(1 for e in json.load(f)["traceEvents"] if e.get("ph") != "M")
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB, {raw:,} trace events)")
    ours = _ours(path)
    for k, v in ours.items():
        print(f"  traceforge {k:<14} {v:7.2f} s")
    print(f"  critical_path / timeline: {ours['critical_path'] / ours['timeline']:.1f}x "
          "(the analysis on top of the shared model)")
    hta = None if a.no_hta else _hta(path)
    if hta is not None:
        tf_total = ours["load"] + ours["critical_path"]
        print(f"  HTA load + critical_path_analysis {hta:7.2f} s; traceforge load + "
              f"critical_path {tf_total:.2f} s: HTA/traceforge = {hta / tf_total:.1f}x")


if __name__ == "__main__":
    main()
