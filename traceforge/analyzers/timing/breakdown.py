"""Temporal breakdown: where each step's GPU time went (compute, exposed communication,
exposed memcpy/memset, idle, unrecorded), per rank and step.

The five parts partition the step window exactly (interval algebra, integer ns), from
the timeline's sets (:meth:`traceforge.analyzers.timeline.core.Timeline.sets`): ``compute`` =
union of non-communication kernels (a graph replay's internal holes are idle, not
compute); ``exposed_comm`` = communication kernels outside compute; ``memory`` =
copies/memsets outside both; ``unrecorded`` = windows of replays the profiler did not
record; ``idle`` = the rest. Percentages divide by the recorded window (window minus
unrecorded), so that 100 - idle_pct is the timeline's busy %.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pandas as pd

from traceforge.analyzers.timeline import intervals as iv
from traceforge.analyzers.timeline.core import Sets, timeline
from traceforge.model import Trace

BREAKDOWN_COLUMNS = (
    "rank",
    "step",
    "window_ns",
    "compute_ns",
    "exposed_comm_ns",
    "memory_ns",
    "idle_ns",
    "unrecorded_ns",
    "compute_pct",
    "exposed_comm_pct",
    "memory_pct",
    "idle_pct",
)


def rank_of(trace: Trace, default: int = 0) -> int:
    """The trace's rank (``distributedInfo``), else ``default``."""
    return default if trace.meta.rank is None else int(trace.meta.rank)


def breakdown(
    traces: Trace | Sequence[Trace], *, steps: Sequence[int] | None = None
) -> pd.DataFrame:
    """One row per rank and step (and a ``step == -1`` total per rank when there are
    several steps) with the parts in ns and as % of the recorded window."""
    ts = [traces] if isinstance(traces, Trace) else list(traces)
    rows = []
    for i, t in enumerate(ts):
        tl = timeline(t)
        if tl.activity.empty:
            continue
        sets = tl.sets()
        win = tl.select(steps)
        per = [_parts(sets, int(cast(int, w.ts)), int(cast(int, w.end)))
               for w in win.itertuples(index=False)]
        for w, p in zip(win.itertuples(index=False), per, strict=True):
            rows.append(_row(rank_of(t, i), int(cast(int, w.step)), p))
        if len(per) > 1:
            rows.append(_row(rank_of(t, i), -1, tuple(int(sum(x)) for x in zip(*per, strict=True))))
    return cast("pd.DataFrame", pd.DataFrame(rows, columns=list(BREAKDOWN_COLUMNS)))


def _parts(s: Sets, lo: int, hi: int) -> tuple[int, int, int, int, int, int]:
    comp = iv.clip(s.compute, lo, hi)
    comm = iv.clip(s.comm, lo, hi)
    exposed = iv.difference(comm, comp)
    mem = iv.difference(iv.clip(s.memory, lo, hi), iv.union(comp, comm))
    busy = iv.total_within(s.busy, lo, hi)
    unrec = iv.total_within(s.unrecorded, lo, hi)
    return (hi - lo, iv.total(comp), iv.total(exposed), iv.total(mem), hi - lo - busy - unrec,
            unrec)


def _row(rank: int, step: int, p: tuple[int, ...]) -> dict[str, float | int]:
    recorded = p[0] - p[5]

    def pct(x: int) -> float:
        return 100.0 * x / recorded if recorded else 0.0

    return {
        "rank": rank,
        "step": step,
        "window_ns": p[0],
        "compute_ns": p[1],
        "exposed_comm_ns": p[2],
        "memory_ns": p[3],
        "idle_ns": p[4],
        "unrecorded_ns": p[5],
        "compute_pct": pct(p[1]),
        "exposed_comm_pct": pct(p[2]),
        "memory_pct": pct(p[3]),
        "idle_pct": pct(p[4]),
    }
