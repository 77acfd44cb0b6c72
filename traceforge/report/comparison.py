"""Several runs in one report: which traces form a run, the comparison table of their
latency, throughput, memory and speedup, and their scaling when their GPU counts differ.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from traceforge.analyzers.runs.inputs import TraceRun
from traceforge.analyzers.runs.scaling import ScalingReport, scaling
from traceforge.errors import TraceforgeError
from traceforge.model import Trace
from traceforge.report.analysis import RunAnalysis


def group_runs(traces: Sequence[Trace]) -> list[list[Trace]]:
    """Split traces into runs: the ranks of one distributed run (same world size, distinct
    ranks) form one run, and traces of several world sizes (a scaling sweep) one run per
    world size; otherwise every trace is a run of its own (eager vs compiled)."""
    ranks = [t.meta.rank for t in traces]
    worlds = [t.meta.world_size for t in traces]
    if len(traces) < 2 or None in ranks or None in worlds or max(
            int(w or 0) for w in worlds) < 2:
        return [[t] for t in traces]
    groups: dict[int, list[Trace]] = {}
    for t in traces:
        groups.setdefault(int(t.meta.world_size or 0), []).append(t)
    for g in groups.values():
        rs = [int(t.meta.rank or 0) for t in g]
        if len(set(rs)) < len(rs) or len(g) > int(g[0].meta.world_size or 0):
            return [[t] for t in traces]  # not the ranks of one run each
    return [sorted(g, key=lambda t: int(t.meta.rank or 0)) for g in groups.values()]


def run_gpus(traces: Sequence[Trace]) -> int:
    """A run's GPU count: its ranks' world size, else its number of rank traces."""
    return max((t.meta.world_size or 0 for t in traces), default=0) or len(traces)


def scaling_of(runs: Sequence[RunAnalysis], traces: Sequence[Sequence[Trace]]
               ) -> ScalingReport | None:
    """Scaling of runs of one workload at different GPU counts (one run per count, at
    least two counts), else None: runs at one count are compared, not scaled."""
    counts = [run_gpus(ts) for ts in traces]
    if len(set(counts)) < 2 or len(set(counts)) < len(counts):
        return None
    try:
        return scaling([TraceRun(r.label, tuple(ts)) for r, ts in zip(runs, traces,
                                                                        strict=True)])
    except TraceforgeError:
        return None  # e.g. a run without steps or GPU activity: no step time to scale


#: What ``compare_runs``'s latency column holds when no capture measured it.
PROFILED = "profiled (mean host step)"


def compare_runs(runs: Sequence[RunAnalysis]) -> pd.DataFrame:
    """One row per run: latency, throughput, memory, GPU busy, kernels and speedup.

    Latency is the run's step time (:func:`traceforge.step_time.run_step_time`: the median
    of the unprofiled steps after the recorded window) when the trace carries a capture
    summary, else the run's step time (:func:`traceforge.analyzers.timeline.core.step_time_ns`,
    the same number ``diff`` divides); ``latency_from`` says which. ``speedup`` = the first
    run's latency / this run's, given only where both come from the same source.
    """
    rows = []
    for r in runs:
        lat = r.run_info.get("latency_ms", r.facts.get("step_ms"))
        src = r.run_info.get("source", "capture") if "latency_ms" in r.run_info else PROFILED
        steps = r.facts.get("steps") or 1.0
        rows.append({
            "run": r.label, "device": r.device_name, "ranks": r.ranks,
            "latency_ms": lat, "latency_from": src if lat is not None else "",
            "throughput_per_s": 1e3 / lat if lat else None,
            "samples_per_s": r.run_info.get("samples_per_s"),
            "tokens_per_s": r.run_info.get("tokens_per_s"),
            "overhead_pct": r.run_info.get("overhead_pct"),
            "memory_gib": r.run_info.get("memory_gib"),
            "gpu_busy_pct": r.facts.get("busy_pct"),
            "kernels_per_step": int(r.facts.get("kernels_per_step",
                                                round(r.facts.get("kernels", 0.0) / steps))),
        })
    out: pd.DataFrame = pd.DataFrame(rows)
    if len(out):
        base, base_src = out["latency_ms"].iloc[0], out["latency_from"].iloc[0]
        out["speedup"] = [base / x if base and x and s == base_src else None
                          for x, s in zip(out["latency_ms"], out["latency_from"], strict=True)]
        for col in ("memory_gib", "samples_per_s", "tokens_per_s", "overhead_pct"):
            if out[col].isna().all():
                out = out.drop(columns=col)
    return out
