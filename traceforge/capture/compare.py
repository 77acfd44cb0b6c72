"""``--mode eager,fa2,compiled``: one process per mode, then the numbers a write-up shows.

Each mode runs in its own process so that one mode's compiled graphs, SDPA flags and
allocator state cannot leak into the next.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from traceforge.capture.options import CaptureOptions, to_args
from traceforge.capture.trace_file import read_summary

COLUMNS = ("mode", "latency_ms", "hz", "peak_gib", "speedup", "kernels_per_step", "trace_mib",
           "first_step_s", "timed_steps", "exit")


def latency_s(summary: dict[str, Any]) -> tuple[float | None, str]:
    """Median step time and which steps it is over.

    Steps after the recorded window ran without the profiler, so they are preferred; the
    recorded steps (profiler overhead included) are the fallback.
    """
    steps = summary.get("steps", {})
    walls: list[float] = steps.get("wall_s", [])
    recorded: list[int] = steps.get("recorded", [])
    sched = steps.get("schedule", {})
    first_after = (max(recorded) + 1 if recorded else
                   sched.get("wait", 0) + sched.get("warmup", 0) + sched.get("active", 0))
    after = walls[first_after:]
    if after:
        return statistics.median(after), "unprofiled"
    inside = [walls[i] for i in recorded if i < len(walls)]
    if inside:
        return statistics.median(inside), "profiled"
    return None, "none"


def row(summary: dict[str, Any], base: float | None) -> dict[str, Any]:
    lat, which = latency_s(summary)
    walls = summary.get("steps", {}).get("wall_s", [])
    peaks = [p for p in summary.get("steps", {}).get("peak_memory_bytes", []) if p is not None]
    trace = summary.get("trace") or {}
    recorded = summary.get("steps", {}).get("recorded", [])
    mode = summary.get("mode", {})
    return {
        "mode": mode.get("mode") if isinstance(mode, dict) else mode,
        "latency_ms": lat * 1e3 if lat is not None else None,
        "hz": 1.0 / lat if lat else None,
        "peak_gib": max(peaks) / 2**30 if peaks else None,
        "speedup": base / lat if base and lat else None,
        "kernels_per_step": (trace.get("kernel_events", 0) / len(recorded)
                             if trace and recorded else None),
        "trace_mib": trace.get("bytes", 0) / 2**20 if trace else None,
        # warm-up: compilation, autotuning, CUDA-graph recording, allocator growth
        "first_step_s": walls[0] if walls else None,
        "timed_steps": which,
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
