"""``--mode eager,fa2,compiled``: one process per mode, then the numbers a write-up shows.

Each mode runs in its own process so that one mode's compiled graphs, SDPA flags and
allocator state cannot leak into the next.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from traceforge.capture.options import CaptureOptions, to_args
from traceforge.capture.trace_file import read_summary
from traceforge.step_time import StepTime, run_step_time

#: The comparison table's columns. The step-time group (step time, its label, throughput,
#: profiled step and overhead) is built in one place, :func:`step_columns`, for every
#: table that shows a run's step time.
COLUMNS = ("mode", "latency_ms", "hz", "samples_per_s", "tokens_per_s", "profiled_ms",
           "overhead_pct", "peak_gib", "speedup", "kernels_per_step", "trace_mib",
           "first_step_s", "timed_steps", "exit")


def latency_s(summary: dict[str, Any]) -> tuple[float | None, str]:
    """The run's step time (:func:`traceforge.step_time.run_step_time`) and its label."""
    st = run_step_time(summary)
    return (st.seconds, st.label) if st is not None else (None, "none")


def step_columns(st: StepTime | None) -> dict[str, Any]:
    """The step-time group of a table row: latency_ms (the run's step time), hz,
    samples_per_s, tokens_per_s, profiled_ms, overhead_pct and timed_steps (its label)."""
    if st is None:
        return {"latency_ms": None, "hz": None, "samples_per_s": None, "tokens_per_s": None,
                "profiled_ms": None, "overhead_pct": None, "timed_steps": "none"}
    return {"latency_ms": st.ms, "hz": 1.0 / st.seconds if st.seconds else None,
            "samples_per_s": st.samples_per_s, "tokens_per_s": st.tokens_per_s,
            "profiled_ms": st.profiled_s * 1e3 if st.profiled_s is not None else None,
            "overhead_pct": st.overhead_pct, "timed_steps": st.label}


def row(summary: dict[str, Any], base: float | None) -> dict[str, Any]:
    st = run_step_time(summary)
    lat = st.seconds if st is not None else None
    walls = summary.get("steps", {}).get("wall_s", [])
    peaks = [p for p in summary.get("steps", {}).get("peak_memory_bytes", []) if p is not None]
    trace = summary.get("trace") or {}
    recorded = summary.get("steps", {}).get("recorded", [])
    mode = summary.get("mode", {})
    return {
        "mode": mode.get("mode") if isinstance(mode, dict) else mode,
        **step_columns(st),
        "peak_gib": max(peaks) / 2**30 if peaks else None,
        "speedup": base / lat if base and lat else None,
        # An estimate from the capture alone (all kernel events / recorded steps); the
        # analyses' kernels per step is traceforge.analyzers.timeline.steps.kernels_per_step.
        "kernels_per_step": (round(trace.get("kernel_events", 0) / len(recorded))
                             if trace and recorded else None),
        "trace_mib": trace.get("bytes", 0) / 2**20 if trace else None,
        # warm-up: compilation, autotuning, CUDA-graph recording, allocator growth
        "first_step_s": walls[0] if walls else None,
        "exit": summary.get("exit_status"),
    }


def comparison(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of COLUMNS, speedup relative to the first summary's latency."""
    base = latency_s(summaries[0])[0] if summaries else None
    return [row(s, base) for s in summaries]


def run_modes(modes: tuple[str, ...], opts: CaptureOptions,
              target_words: list[str]) -> tuple[int, list[dict[str, Any]]]:
    """Capture ``target_words`` once per mode; returns the worst exit status and summaries."""
    worst = 0
    summaries: list[dict[str, Any]] = []
    for mode in modes:
        cmd = [sys.executable, "-m", "traceforge", "capture", *to_args(opts, mode), "--",
               *target_words]
        stale = _summary_path(opts.out, f"{opts.name}.{mode}")
        if stale is not None:
            stale.unlink()  # so a mode that fails early is not shown with an old run's numbers
        try:
            # The targets' own output goes to stderr: stdout is for the comparison (--format).
            rc = subprocess.call(cmd, stdout=sys.stderr)
        except KeyboardInterrupt:
            return 130, summaries
        worst = worst or rc
        path = _summary_path(opts.out, f"{opts.name}.{mode}")
        if path is not None:
            summaries.append(read_summary(path))
        else:
            summaries.append({"mode": {"mode": mode}, "exit_status": rc})
    return worst, summaries


def _summary_path(out: Path, stem: str) -> Path | None:
    """The mode's summary; for a torchrun launch, rank 0's."""
    for p in (out / f"{stem}.summary.json", out / f"{stem}.rank0.summary.json"):
        if p.exists():
            return p
    return None
