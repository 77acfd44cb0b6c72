"""Compute/communication overlap per rank, and cross-rank skew of collective starts.

``overlap_pct`` is HTA's ``comp_comm_overlap_pctg``: time where communication and compute
kernels run together / communication time. ``exposed_comm_pct`` is TraceLens's view:
communication not hidden behind compute, as % of the step windows. Compute and
communication are unions of recorded kernels from the shared timeline (never the whole
extent of a graph replay); windows of unrecorded replays are left out of both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceforge.analyzers.timeline import intervals as iv
from traceforge.analyzers.timeline.core import timeline
from traceforge.analyzers.timing.breakdown import rank_of
from traceforge.model import Tables, Trace

OVERLAP_COLUMNS = (
    "rank",
    "window_ns",
    "comm_ns",
    "compute_ns",
    "overlap_ns",
    "exposed_comm_ns",
    "overlap_pct",
    "exposed_comm_pct",
    "comm_kernels",
)
SKEW_COLUMNS = ("rank", "collectives", "last_count", "last_pct", "mean_lag_us", "max_lag_us")


@dataclass(frozen=True)
class OverlapReport(Tables):
    """``ranks``: one row per rank (OVERLAP_COLUMNS). ``skew``: per rank, how often its
    collectives started last and by how much it lagged the earliest rank (empty for one
    rank). ``notes``: plain-language caveats (e.g. unequal collective counts).
    ``window_ns`` is the recorded window (unrecorded replays left out)."""

    ranks: pd.DataFrame
    skew: pd.DataFrame
    notes: tuple[str, ...] = ()
    step_source: str = ""


def overlap(
    traces: Trace | Sequence[Trace], *, steps: Sequence[int] | None = None
) -> OverlapReport:
    """Overlap of communication with compute per rank, inside the step windows."""
    ts = [traces] if isinstance(traces, Trace) else list(traces)
    rows = []
    starts: dict[int, np.ndarray] = {}
    sources = set()
    for i, t in enumerate(ts):
        tl = timeline(t)
        acts = tl.activity
        if acts.empty:
            continue
        sources.add(tl.step_source)
        rank = rank_of(t, i)
        windows = tl.window_set(steps)
        s = tl.sets()
        comm = iv.intersect(s.comm, windows)
        comp = iv.intersect(s.compute, windows)
        both = iv.total(iv.intersect(comm, comp))
        exposed = iv.total(iv.difference(comm, comp))
        c = iv.total(comm)
        w = iv.total(windows) - iv.total(iv.intersect(s.unrecorded, windows))
        is_comm = (acts["cls"] == "communication") & (acts["kind"] == "kernel")
        cts = acts.loc[is_comm, "ts"].to_numpy()
        inside = inside_intervals(windows, cts)
        starts[rank] = cts[inside] + t.meta.base_ns
        rows.append(
            {
                "rank": rank,
                "window_ns": w,
                "comm_ns": c,
                "compute_ns": iv.total(comp),
                "overlap_ns": both,
                "exposed_comm_ns": exposed,
                "overlap_pct": 100.0 * both / c if c else float("nan"),
                "exposed_comm_pct": 100.0 * exposed / w if w else 0.0,
                "comm_kernels": int(inside.sum()),
            }
        )
    ranks = pd.DataFrame(rows, columns=list(OVERLAP_COLUMNS))
    skew, notes = collective_skew(starts)
    return OverlapReport(ranks, skew, notes, ", ".join(sorted(sources)))


def inside_intervals(s: np.ndarray, t: np.ndarray) -> np.ndarray:
    if len(s) == 0:
        return np.zeros(len(t), dtype=bool)
    i = np.searchsorted(s[:, 0], t, side="right") - 1
    ok = i >= 0
    ok[ok] &= t[ok] < s[i[ok], 1]
    return np.asarray(ok)


def collective_skew(starts: dict[int, np.ndarray]) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Match the k-th collective kernel of every rank (collectives are issued in the same
    order on every rank of a process group) and compare absolute start times."""
    if len(starts) < 2:
        return pd.DataFrame(columns=list(SKEW_COLUMNS)), ()
    ranks = sorted(starts)
    counts = {r: len(starts[r]) for r in ranks}
    n = min(counts.values())
    notes: tuple[str, ...] = ()
    if len(set(counts.values())) > 1:
        notes = (
            f"ranks ran different numbers of communication kernels ({counts}); "
            f"skew compares the first {n} of each",
        )
    if n == 0:
        return pd.DataFrame(columns=list(SKEW_COLUMNS)), notes
    m = np.stack([np.sort(starts[r])[:n] for r in ranks])  # ranks x collectives
    lag = m - m.min(axis=0)
    last = np.argmax(m, axis=0)
    rows = [
        {
            "rank": r,
            "collectives": n,
            "last_count": int((last == k).sum()),
            "last_pct": 100.0 * float((last == k).mean()),
            "mean_lag_us": float(lag[k].mean()) / 1e3,
            "max_lag_us": float(lag[k].max()) / 1e3,
        }
        for k, r in enumerate(ranks)
    ]
    return pd.DataFrame(rows, columns=list(SKEW_COLUMNS)), notes
