"""Temporal breakdown: where each step's GPU time went (compute, exposed communication,
exposed memcpy/memset, idle), per rank and step.

The four parts partition the step window exactly (interval algebra, integer ns):
``compute`` = union of non-communication kernels, with each CUDA-graph replay counted busy
end to end (its internal holes are the graph's, not idle); ``exposed_comm`` = communication
kernels outside compute; ``memory`` = copies/memsets outside both; ``idle`` = the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers import intervals as iv
from traceforge.analyzers.launch import gpu_activity, step_windows
from traceforge.model import Trace

BREAKDOWN_COLUMNS = (
    "rank",
    "step",
    "window_ns",
    "compute_ns",
    "exposed_comm_ns",
    "memory_ns",
    "idle_ns",
    "compute_pct",
    "exposed_comm_pct",
    "memory_pct",
    "idle_pct",
)


@dataclass(frozen=True)
class Sets:
    """The busy sets of one trace: compute, communication, memory and their union."""

    compute: np.ndarray
    comm: np.ndarray
    memory: np.ndarray
    busy: np.ndarray


def activity_sets(acts: pd.DataFrame) -> Sets:
    """Split GPU activity (from :func:`gpu_activity`) into interval sets by class."""
    is_mem = acts["kind"].isin(("memcpy", "memset")).to_numpy()
    is_comm = (acts["cls"] == "communication").to_numpy() & ~is_mem
    comp = acts[~is_mem & ~is_comm]
    rep = (
        comp[comp["replay"] >= 0].groupby("replay")[["ts", "end"]].agg({"ts": "min", "end": "max"})
    )
    compute = iv.merge(
        np.concatenate([comp["ts"], rep["ts"]]), np.concatenate([comp["end"], rep["end"]])
    )
    c = acts[is_comm]
    comm = iv.merge(c["ts"].to_numpy(), c["end"].to_numpy())
    m = acts[is_mem]
    memory = iv.merge(m["ts"].to_numpy(), m["end"].to_numpy())
    return Sets(compute, comm, memory, iv.union(iv.union(compute, comm), memory))


def rank_of(trace: Trace, default: int = 0) -> int:
    """The trace's rank (``distributedInfo``), else ``default``."""
    return default if trace.meta.rank is None else int(trace.meta.rank)


def breakdown(
    traces: Trace | Sequence[Trace], *, steps: Sequence[int] | None = None
) -> pd.DataFrame:
    """One row per rank and step (and a ``step == -1`` total per rank when there are
    several steps) with the four parts in ns and as % of the step window."""
    ts = [traces] if isinstance(traces, Trace) else list(traces)
    rows = []
    for i, t in enumerate(ts):
        acts = gpu_activity(t)
        if acts.empty:
            continue
        sets = activity_sets(acts)
        win = step_windows(t, acts, steps)
        per = [
            _parts(sets, int(cast(int, w.ts)), int(cast(int, w.end)))
            for w in win.itertuples(index=False)
        ]
        for w, p in zip(win.itertuples(index=False), per, strict=True):
            rows.append(_row(rank_of(t, i), int(cast(int, w.step)), p))
        if len(per) > 1:
            rows.append(_row(rank_of(t, i), -1, tuple(int(sum(x)) for x in zip(*per, strict=True))))
    return cast("pd.DataFrame", pd.DataFrame(rows, columns=list(BREAKDOWN_COLUMNS)))


def _parts(s: Sets, lo: int, hi: int) -> tuple[int, int, int, int, int]:
    comp = iv.clip(s.compute, lo, hi)
    comm = iv.clip(s.comm, lo, hi)
    exposed = iv.difference(comm, comp)
    mem = iv.difference(iv.clip(s.memory, lo, hi), iv.union(comp, comm))
    busy = iv.total_within(s.busy, lo, hi)
    return hi - lo, iv.total(comp), iv.total(exposed), iv.total(mem), hi - lo - busy


def _row(rank: int, step: int, p: tuple[int, ...]) -> dict[str, float | int]:
    w = p[0]

    def pct(x: int) -> float:
        return 100.0 * x / w if w else 0.0

    return {
        "rank": rank,
        "step": step,
        "window_ns": w,
        "compute_ns": p[1],
        "exposed_comm_ns": p[2],
        "memory_ns": p[3],
        "idle_ns": p[4],
        "compute_pct": pct(p[1]),
        "exposed_comm_pct": pct(p[2]),
        "memory_pct": pct(p[3]),
        "idle_pct": pct(p[4]),
    }
