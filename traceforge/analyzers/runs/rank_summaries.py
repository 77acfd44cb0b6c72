"""Per-rank summaries and their reductions for ``overlap``, ``breakdown`` and ``idle``.

Each multi-rank verb runs as *summary* (one rank's trace -> the few rows its answer needs
from that rank, small enough to cross the network) and *reduce* (the ranks' summaries, in
rank order -> the answer), so the engine (:mod:`traceforge.engine`) can run the
summaries wherever the files are. ``reduce(summary(t) for t in ranks)`` is exactly the
analyzer over the whole run (``overlap(ranks)``, ``breakdown(ranks)``, ``idle_gaps`` per
rank): the summaries call the analyzers on one rank each, and the reductions only
concatenate or, for overlap's skew, run the analyzer's own cross-rank step.

These pairs belong beside their analyzers, as the kernels, critical-path and scaling
ones are; they live here while overlap.py, breakdown.py and idle.py are rewritten on
another branch, and can move in when that lands.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
import pandas as pd

from traceforge.analyzers.timeline.core import timeline
from traceforge.analyzers.timing.breakdown import BREAKDOWN_COLUMNS, breakdown
from traceforge.analyzers.timing.idle import IdleReport, idle_gaps

# The overlap analyzer's own cross-rank step and window test: the skew is defined once.
from traceforge.analyzers.timing.overlap import (
    OVERLAP_COLUMNS,
    OverlapReport,
    collective_skew,
    inside_intervals,
    overlap,
)
from traceforge.model import GPU_KINDS, Trace

#: The event kinds the shared timeline reads (GPU activity, launch calls, the ops and
#: annotations it attributes work to, step ranges; a --steps-from regex may match GPU
#: annotations): what overlap, breakdown and scaling load of each rank.
TIMELINE_KINDS: tuple[str, ...] = (*GPU_KINDS, "runtime", "driver", "cpu_op",
                                   "user_annotation", "gpu_annotation")
#: The timeline's kinds without the framework ops, which are most of a Kineto trace's rows
#: (three quarters of the 288 MB benchmark trace): overlap, breakdown and scaling need the
#: steps, the launches and the GPU activity, never an op. Old Kineto traces file
#: ProfilerStep#N as an op, so a rank that finds no steps this way is read again with
#: :data:`TIMELINE_KINDS` (``traceforge.commands.engine.Engine.step_runs``).
STEP_KINDS: tuple[str, ...] = tuple(k for k in TIMELINE_KINDS if k != "cpu_op")

Records = list[dict[Hashable, Any]]


# -- overlap -------------------------------------------------------------------------------
@dataclass(frozen=True)
class OverlapRank:
    """One rank's part of :func:`~traceforge.analyzers.timing.overlap.overlap`: its row (none
    without GPU activity), the absolute start times (ns) of its communication kernels in
    the step windows, for the skew, and where its steps came from."""

    rows: Records
    starts: np.ndarray | None
    step_source: str | None


def _key(name: str, **options: Any) -> str:
    """A derived-table key for a summary made with ``options`` (steps as a tuple)."""
    steps = options.get("steps")
    if steps is not None:
        options["steps"] = tuple(int(s) for s in steps)
    return f"{name}|{sorted(options.items())!r}"


def overlap_summary(trace: Trace, *, steps: Sequence[int] | None = None) -> OverlapRank:
    """One rank's :class:`OverlapRank` (reduce with :func:`overlap_reduce`); a derived
    table of the trace (a later run on the cached trace reads it back)."""
    return trace.derived(_key("overlap_summary", steps=steps),
                         lambda: _overlap_summary(trace, steps))


def _overlap_summary(trace: Trace, steps: Sequence[int] | None) -> OverlapRank:
    tl = timeline(trace)
    if tl.activity.empty:
        return OverlapRank([], None, None)
    rows = overlap(trace, steps=steps).ranks.to_dict("records")
    acts = tl.activity
    # The kernels overlap() matches across ranks: communication kernels inside the windows.
    is_comm = (acts["cls"] == "communication") & (acts["kind"] == "kernel")
    cts = acts.loc[is_comm, "ts"].to_numpy()
    starts = cts[inside_intervals(tl.window_set(steps), cts)] + trace.meta.base_ns
    return OverlapRank(rows, starts, tl.step_source)


def overlap_reduce(parts: Sequence[OverlapRank]) -> OverlapReport:
    """The run's :class:`~traceforge.analyzers.timing.overlap.OverlapReport` from its ranks'
    summaries (in rank order)."""
    rows = [r for p in parts for r in p.rows]
    starts = {int(p.rows[0]["rank"]): p.starts for p in parts
              if p.starts is not None and p.rows}
    skew, notes = collective_skew(starts)
    sources = {p.step_source for p in parts if p.step_source is not None}
    return OverlapReport(pd.DataFrame(rows, columns=list(OVERLAP_COLUMNS)), skew, notes,
                         ", ".join(sorted(sources)))


# -- breakdown -----------------------------------------------------------------------------
@dataclass(frozen=True)
class BreakdownRank:
    """One rank's :func:`~traceforge.analyzers.timing.breakdown.breakdown` rows and step source."""

    rows: Records
    step_source: str


def breakdown_summary(trace: Trace, *, steps: Sequence[int] | None = None) -> BreakdownRank:
    """One rank's :class:`BreakdownRank` (reduce with :func:`breakdown_reduce`); a
    derived table of the trace."""
    return trace.derived(_key("breakdown_summary", steps=steps), lambda: BreakdownRank(
        breakdown(trace, steps=steps).to_dict("records"), timeline(trace).step_source))


def breakdown_reduce(parts: Sequence[BreakdownRank]) -> tuple[pd.DataFrame, str]:
    """The run's breakdown table and the first rank's step source."""
    rows = [r for p in parts for r in p.rows]
    df = cast("pd.DataFrame", pd.DataFrame(rows, columns=list(BREAKDOWN_COLUMNS)))
    return df, parts[0].step_source if parts else ""


# -- idle ----------------------------------------------------------------------------------
def idle_summary(trace: Trace, *, limit: int = 0, min_gap_ns: int = 0,
                 per_stream: bool = False, steps: Sequence[int] | None = None
                 ) -> IdleReport:
    """One rank's :func:`~traceforge.analyzers.timing.idle.idle_gaps` with only its ``limit``
    longest gaps listed (all when 0): the run's longest gaps are among every rank's own
    longest, so the summary and histogram stay whole and the gap list stays small. A
    derived table of the trace."""
    def make() -> IdleReport:
        rep = idle_gaps(trace, min_gap_ns=min_gap_ns, per_stream=per_stream, steps=steps,
                        limit=limit)
        return replace(rep, gaps=_longest(rep.gaps, limit))

    key = _key("idle_summary", limit=limit, min_gap_ns=min_gap_ns, per_stream=per_stream,
               steps=steps)
    return trace.derived(key, make)


def _longest(gaps: pd.DataFrame, limit: int) -> pd.DataFrame:
    out = gaps.sort_values("dur", ascending=False, kind="stable")
    return cast("pd.DataFrame", out if limit <= 0 else out.head(limit))


@dataclass(frozen=True)
class IdleRun:
    """:func:`~traceforge.analyzers.timing.idle.idle_gaps` over the ranks of a run: ``gaps``, the
    ``limit`` longest gaps of all ranks (longest first), ``summary`` and ``histogram``
    of every rank, each with a ``rank`` column when there are several; ``span_ns`` the
    ranks' windows together; ``notes`` the analyses' notes."""

    gaps: pd.DataFrame
    summary: pd.DataFrame
    histogram: pd.DataFrame
    span_ns: int
    step_source: str
    notes: tuple[str, ...]
    multi: bool


def idle_reduce(parts: Sequence[tuple[int, IdleReport]], *, limit: int = 0) -> IdleRun:
    """The run's :class:`IdleRun` from (rank, :func:`idle_summary`) pairs in rank order."""
    multi = len(parts) > 1

    def tag(frames: list[pd.DataFrame]) -> pd.DataFrame:
        if not multi:
            return frames[0]
        tagged = [f.assign(rank=r) for (r, _), f in zip(parts, frames, strict=True)]
        return cast("pd.DataFrame", pd.concat(tagged, ignore_index=True))

    reps = [rep for _, rep in parts]
    gaps = _longest(tag([r.gaps for r in reps]), limit).reset_index(drop=True)
    return IdleRun(gaps, tag([r.summary for r in reps]), tag([r.histogram for r in reps]),
                   sum(r.span_ns for r in reps), reps[0].step_source,
                   tuple(n for r in reps for n in r.notes), multi)


__all__ = ["STEP_KINDS", "TIMELINE_KINDS", "BreakdownRank", "IdleRun", "OverlapRank",
           "breakdown_reduce", "breakdown_summary", "idle_reduce", "idle_summary",
           "overlap_reduce", "overlap_summary"]
