"""The paths' pieces of every step and rank (:class:`PathPieces`), and the tables summed
from them: time by category, the top ops and kernels.

The sums run on the pieces' integer label codes, a path at a time; the strings are
looked up only for the rows of the summed tables, and the segments table (one row per
piece, ~1M rows for the 46 steps of a 288 MB trace) is made only when it is read.
Group order, sums and ties are those of the pandas groupbys these replace (first
appearance, stable sorts, groups with a missing key left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.labels import Labels
from traceforge.analyzers.critical_path.segments import SEGMENT_COLUMNS, Pieces, pieces_frame

#: Kinds of pieces that count as ops and kernels in the top table.
WORK_KINDS = ("cpu_op", "kernel", "memcpy", "memset")
BY_CATEGORY_COLUMNS = ("step", "for_rank", "category", "ns", "pct")
TOP_COLUMNS = ("step", "for_rank", "kind", "name", "category", "ns", "pct", "count")


def _groups(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group, groups numbered in order of first appearance; the first row of
    each group. (A stable sort, not ``np.unique``, whose hashing is slower here.)"""
    order = np.argsort(key, kind="stable")
    sk = key[order]
    new = np.ones(len(sk), dtype=bool)
    new[1:] = sk[1:] != sk[:-1]
    first = order[new]  # stable: a run's first row is the value's first appearance
    g_sorted = np.cumsum(new) - 1
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(first), dtype=np.int64)
    rank[by_first] = np.arange(len(first))
    group = np.empty(len(key), dtype=np.int64)
    group[order] = rank[g_sorted]
    return group, first[by_first]


def _distinct(x: np.ndarray) -> np.ndarray:
    s = np.sort(x)
    return s[np.append(True, s[1:] != s[:-1])] if len(s) else s


def _sums(group: np.ndarray, x: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros(k, dtype=np.int64)
    np.add.at(out, group, x)
    return out


@dataclass(eq=False)
class PathPieces:
    """Every path's pieces in order (step by step, rank by rank), with their labels."""

    paths: list[Pieces]
    labels: Labels

    def frame(self) -> pd.DataFrame:
        """The segments table (SEGMENT_COLUMNS)."""
        if not self.paths:
            return cast("pd.DataFrame", pd.DataFrame(columns=list(SEGMENT_COLUMNS)))
        return pd.concat([pieces_frame(p, self.labels) for p in self.paths],
                         ignore_index=True)

    def _frame(self, cols: Sequence[str], parts: list[dict[str, np.ndarray]]) -> pd.DataFrame:
        """The paths' parts as one table of ``cols``, labels decoded, sorted by step,
        for_rank and most time first (an empty table of ``cols`` when there are none)."""
        if not parts:
            return cast("pd.DataFrame", pd.DataFrame(columns=list(cols)))
        data = {c: np.concatenate([p[c] for p in parts]) for c in cols}
        for c in ("kind", "name", "category"):
            if c in data:
                data[c] = self.labels.values[data[c]]
        t = pd.DataFrame(data).sort_values(["step", "for_rank", "ns"],
                                           ascending=[True, True, False], kind="stable")
        return cast("pd.DataFrame", t.reset_index(drop=True))

    def by_category(self) -> pd.DataFrame:
        """step, for_rank, category, ns, pct: each path's time by category."""
        never = self.labels.never_equal
        parts = []
        for p in self.paths:
            ok = ~never[p.category]
            cat, dur = p.category[ok], p.dur[ok]
            if not len(cat):
                continue
            g, first = _groups(cat)
            ns = _sums(g, dur, len(first))
            tot = ns.sum()
            pct = 100.0 * ns / tot if tot > 0 else np.zeros(len(ns))
            parts.append({"step": np.full(len(ns), p.step, dtype=np.int64),
                          "for_rank": np.full(len(ns), p.for_rank, dtype=np.int64),
                          "category": cat[first], "ns": ns, "pct": pct})
        return self._frame(BY_CATEGORY_COLUMNS, parts)

    def top(self, n: int) -> pd.DataFrame:
        """The ``n`` ops and kernels with the most time on each path: step, for_rank,
        kind, name, category, ns, pct (of the path), count (events: an op interrupted by
        its children is one event, several pieces)."""
        lab = self.labels
        work_codes = [i for i, v in enumerate(lab.values) if isinstance(v, str)
                      and v in WORK_KINDS]
        nv = len(lab.values)
        parts = []
        for p in self.paths:
            ok = (np.isin(p.kind, work_codes) & ~lab.never_equal[p.kind]
                  & ~lab.never_equal[p.name] & ~lab.never_equal[p.category])
            if not ok.any():
                continue
            kind, name, cat = p.kind[ok], p.name[ok], p.category[ok]
            g, first = _groups((kind * nv + name) * nv + cat)
            k = len(first)
            ns = _sums(g, p.dur[ok], k)
            # Distinct rows per group.
            row = p.row[ok]
            span = int(row.max()) - int(row.min()) + 1
            pair = _distinct(g * span + (row - row.min()))
            count = np.bincount(pair // span, minlength=k)
            tot = int(p.dur.sum())
            pct = 100.0 * ns / tot
            keep = np.argsort(-ns, kind="stable")[:n]
            parts.append({"step": np.full(len(keep), p.step, dtype=np.int64),
                          "for_rank": np.full(len(keep), p.for_rank, dtype=np.int64),
                          "kind": kind[first][keep], "name": name[first][keep],
                          "category": cat[first][keep], "ns": ns[keep], "pct": pct[keep],
                          "count": count[keep].astype(np.int64)})
        return self._frame(TOP_COLUMNS, parts)
