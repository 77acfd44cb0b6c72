"""Findings about the profiled run itself, and the qualification of host-time findings.

The profiled run is not the run: profiler start-up inflates the first recorded step, and
the profiler's own host work slows every recorded step. Two things live here:

* :func:`first_step_outlier`: a finding when the run's first recorded step is an outlier
  step (the rule of :mod:`traceforge.step_time`), which step statistics leave out;
* :func:`qualify`: a host-time finding (launch-bound, host waits, synchronization, low GPU
  busy) is qualified when the profiler's overhead on the run is large
  (:data:`traceforge.step_time.OVERHEAD_LARGE_PCT`), and withheld -- turned into a low
  severity note -- when only outlier steps support it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from traceforge.step_time import OUTLIER_K, OUTLIER_MIN_PCT

if TYPE_CHECKING:
    from traceforge.report.analysis import RunAnalysis
    from traceforge.report.findings import Finding

#: Findings drawn from host time: the profiler's host overhead inflates them.
HOST_RULES = frozenset({"launch_bound", "sync_stalls", "gpu_busy_low"})


def first_step_outlier(r: RunAnalysis) -> Finding | None:
    """The run's first recorded step is an outlier step."""
    from traceforge.report.findings import Finding

    if not r.outliers or r.first_step is None or r.outliers[0][0] != r.first_step:
        return None
    step, ms = r.outliers[0]
    med = r.median_step_ms or 0.0
    times = f", {ms / med:.1f}x" if med else ""
    return Finding(
        "first_step_outlier", "low",
        "The first recorded step is an outlier: profiler start-up, not the workload",
        f"Step {step} took {ms:,.2f} ms{times} the median step ({med:,.2f} ms; outlier rule: "
        f"more than {OUTLIER_K:g} scaled MADs and {OUTLIER_MIN_PCT:g}% from the median). "
        "It is left out of step statistics; findings it alone supports are withheld.",
        "Record more steps after a longer warm-up (traceforge capture --steps WAIT,WARMUP,"
        "ACTIVE), and judge the run by its unprofiled step time.",
    )


def qualify(r: RunAnalysis, f: Finding, steps: list[int] | None = None) -> Finding:
    """``f`` as it should be shown, given what the profiler did to the run. ``steps``:
    the steps the finding rests on (None: the whole run)."""
    if f.rule not in HOST_RULES:
        return f
    bad = {s for s, _ in r.outliers}
    if steps and bad and set(steps) <= bad:
        which = ", ".join(str(s) for s in sorted(steps))
        return replace(f, severity="low", title=f"Withheld: {f.title}",
                       evidence=f"Only outlier step(s) {which} support this (inflated, e.g. "
                                f"by profiler start-up): not a finding about the workload. "
                                f"{f.evidence}")
    overhead = r.run_info.get("overhead_pct")
    if r.run_info.get("overhead_large") and overhead is not None:
        prof = r.run_info.get("profiled_ms")
        return replace(f, title=f"{f.title} (qualified: profiler overhead {overhead:.0f}%)",
                       evidence=f"{f.evidence} Qualified: the profiler slowed the recorded "
                                f"steps by {overhead:.0f}% ({prof or 0:,.2f} ms vs "
                                f"{r.run_info.get('latency_ms', 0):,.2f} ms unprofiled), so "
                                "host time is inflated; confirm on an unprofiled run.")
    return f
