"""What ``annotate`` and the report take from a result: each rank's share of the
critical paths as tracks and flow hops (:func:`path_tracks`), and the report's tables
(:func:`report_data`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.result import CriticalPath, critical_only


@dataclass(frozen=True)
class PathTrack:
    """What ``annotate`` draws on one rank's trace: the pieces of each step's critical
    path that ran on that rank (``segments``, in its clock) and the hops between tracks
    (``flows``: id, from_pid, from_tid, from_ts, to_pid, to_tid, to_ts) where the path
    moves from one thread or stream to another."""

    rank: int
    segments: pd.DataFrame
    flows: pd.DataFrame


def path_tracks(result: CriticalPath) -> list[PathTrack]:
    """Each rank's share of the steps' critical paths, for a track and flow arrows."""
    seg = critical_only(result, result.segments)
    out = []
    for rank, s in seg.groupby("rank", sort=True):
        s = s.sort_values(["step", "order"], kind="stable").reset_index(drop=True)
        # Hops inside this rank's share: consecutive pieces of one path on two tracks.
        nxt = s.shift(-1)
        hop = (((s["pid"] != nxt["pid"]) | (s["tid"] != nxt["tid"]))
               & (s["step"] == nxt["step"]) & (nxt["order"] == s["order"] + 1))
        i = np.flatnonzero(hop.to_numpy())
        flows = pd.DataFrame({
            "id": np.arange(len(i), dtype=np.int64),
            "from_pid": s["pid"].to_numpy()[i], "from_tid": s["tid"].to_numpy()[i],
            "from_ts": (s["ts"] + s["dur"]).to_numpy()[i],
            "to_pid": s["pid"].to_numpy()[i + 1], "to_tid": s["tid"].to_numpy()[i + 1],
            "to_ts": s["ts"].to_numpy()[i + 1]})
        out.append(PathTrack(int(cast(Any, rank)), s, flows))
    return out


@dataclass(frozen=True)
class ReportData:
    """What the HTML report shows of the critical paths: ``bar``, the mean time per step
    by category (category, ns, pct); ``by_step`` the same per step; ``what_if`` the
    what-if table; ``top`` the ops and kernels on the paths. Critical paths only."""

    bar: pd.DataFrame
    by_step: pd.DataFrame
    what_if: pd.DataFrame
    top: pd.DataFrame
    notes: tuple[str, ...]


def report_data(result: CriticalPath) -> ReportData:
    """The category bar (mean over the steps) and the what-if table for the report."""
    bc = critical_only(result, result.by_category)
    if bc.empty:
        bar = pd.DataFrame(columns=["category", "ns", "pct"])
    else:
        nsteps = max(int(bc["step"].nunique()), 1)
        bar = (bc.groupby("category", sort=False)["ns"].sum() / nsteps).reset_index()
        total = float(bar["ns"].sum())
        bar["pct"] = 100.0 * bar["ns"] / total if total else 0.0
        bar = bar.sort_values("ns", ascending=False, kind="stable").reset_index(drop=True)
    return ReportData(cast("pd.DataFrame", bar), bc, critical_only(result, result.what_if),
                      critical_only(result, result.top), result.notes)
