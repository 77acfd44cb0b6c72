"""Outlier-step and profiler-overhead notes, and the host-time caveat (see the package)."""

from __future__ import annotations

import statistics

from traceforge.analyzers.timeline.core import outlier_steps, timeline
from traceforge.model import Trace
from traceforge.step_time import (
    MAD_SCALE,
    OUTLIER_K,
    OUTLIER_MIN_PCT,
    OVERHEAD_LARGE_PCT,
    run_step_time,
    summary_of,
)

#: The outlier rule in words, for notes and the README.
RULE = (f"|t - median| > {OUTLIER_K:g} x {MAD_SCALE} x MAD and > {OUTLIER_MIN_PCT:g}% of "
        "the median")


def outlier_note(trace: Trace, include_outliers: bool = False) -> str | None:
    """One line naming the trace's outlier steps and their times against the median, or
    None when it has none."""
    tl = timeline(trace)
    bad = outlier_steps(tl)
    if not bad:
        return None
    r = tl.steps.ranges
    dur = dict(zip(r["step"].tolist(), ((r["end"] - r["ts"]) / 1e6).tolist(), strict=True))
    med = statistics.median(dur.values())
    which = ", ".join(f"{s} ({dur[s]:,.2f} ms)" for s in bad)
    first = " (the first recorded step: profiler start-up or warm-up)" if bad[0] == min(dur) \
        else ""
    kept = ("kept in step statistics (--include-outliers)" if include_outliers else
            "left out of step statistics (--include-outliers keeps them)")
    return (f"outlier step(s) {which}{first} against a median step of {med:,.2f} ms "
            f"(rule: {RULE}); {kept}")


def overhead_note(trace: Trace) -> str | None:
    """Profiled vs unprofiled step time from the capture summary the trace carries, or
    None without one (or without unprofiled steps)."""
    st = run_step_time(summary_of(trace.meta.extra))
    if st is None or st.overhead_pct is None or st.profiled_s is None:
        return None
    words = (f"profiler overhead {st.overhead_pct:+.1f}%: median profiled step "
             f"{st.profiled_s * 1e3:,.2f} ms vs {st.ms:,.2f} ms unprofiled ({st.label})")
    if st.overhead_large:
        words += (f"; at {OVERHEAD_LARGE_PCT:g}% or more, host-time findings (launch-bound, "
                  "host waits, the CPU side of the critical path) are qualified")
    return words


def step_notes(trace: Trace, include_outliers: bool = False) -> list[str]:
    """The outlier and overhead notes of a trace (those that apply)."""
    return [n for n in (outlier_note(trace, include_outliers), overhead_note(trace)) if n]


def host_time_caveat(trace: Trace, steps: list[int] | None = None) -> str | None:
    """Why host-time findings on ``trace`` (on ``steps``, when given: the steps a finding
    rests on) should not be taken at face value, or None when they stand: the profiler's
    overhead is large, or every one of those steps is an outlier."""
    why = []
    st = run_step_time(summary_of(trace.meta.extra))
    if st is not None and st.overhead_large and st.overhead_pct is not None:
        why.append(f"the profiler slowed the recorded steps by {st.overhead_pct:.0f}% "
                   f"({st.profiled_s * 1e3 if st.profiled_s else 0:,.2f} ms vs {st.ms:,.2f} "
                   "ms unprofiled)")
    bad = set(outlier_steps(timeline(trace)))
    if steps and bad and set(steps) <= bad:
        why.append(f"only outlier step(s) {', '.join(map(str, sorted(steps)))} support it "
                   "(inflated, e.g. by profiler start-up)")
    return "; ".join(why) if why else None


__all__ = ["RULE", "host_time_caveat", "outlier_note", "overhead_note", "step_notes"]
