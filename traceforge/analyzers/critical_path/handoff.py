"""What ``annotate`` and the report take from a result: each rank's share of the
critical paths as tracks and flow hops (:func:`path_tracks`), and the report's tables
(:func:`report_data`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.result import CriticalPath, critical_only
from traceforge.analyzers.critical_path.segments import SEGMENT_COLUMNS

#: Slices a step's path is drawn in, at most, before its runs of one thread are drawn as
#: one slice whatever their kinds (:func:`drawn_pieces`).
MAX_DRAWN_PER_STEP = 10_000


@dataclass(frozen=True)
class PathTrack:
    """What ``annotate`` draws on one rank's trace: the pieces of each step's critical
    path that ran on that rank (in its clock) as they are drawn (``drawn``:
    :func:`drawn_pieces`, ``kinds`` the kinds whose time its ``mixed`` slices list),
    how many pieces of the path they stand for (``pieces``), and the hops between tracks
    (``flows``: id, from_pid, from_tid, from_ts, to_pid, to_tid, to_ts) where the path
    moves from one thread or stream to another."""

    rank: int
    drawn: pd.DataFrame
    kinds: tuple[str, ...]
    pieces: int
    flows: pd.DataFrame

    @classmethod
    def of(cls, rank: int, segments: pd.DataFrame, flows: pd.DataFrame) -> PathTrack:
        """The track of ``segments`` (one rank's pieces, SEGMENT_COLUMNS, by step and
        order)."""
        m, kinds = drawn_pieces(segments)
        return cls(rank, m, tuple(kinds), len(segments), flows)


def path_tracks(result: CriticalPath) -> list[PathTrack]:
    """Each rank's share of the steps' critical paths, for a track and flow arrows.

    Worked out on the paths' arrays and label codes (``result.pieces``), not on the
    segments table: the strings are looked up only for the slices drawn (~6x fewer rows
    than pieces on a large trace)."""
    crit = result.steps.loc[result.steps["critical"], ["step", "rank"]]
    want = set(zip(crit["step"].tolist(), crit["rank"].tolist(), strict=True))
    paths = [p for p in result.pieces.paths if (p.step, p.for_rank) in want]
    if not paths:
        return []
    sizes = [len(p.ts) for p in paths]
    cols: dict[str, np.ndarray] = {
        "step": np.repeat(np.asarray([p.step for p in paths], dtype=np.int64), sizes),
        "for_rank": np.repeat(np.asarray([p.for_rank for p in paths], dtype=np.int64), sizes),
        "order": np.concatenate([np.arange(k, dtype=np.int64) for k in sizes]),
    }
    for c in ("rank", "kind", "name", "category", "ts", "dur", "row", "pid", "tid"):
        cols[c] = np.concatenate([getattr(p, c) for p in paths])
    # In the segments table's order: by step, then order (stable).
    if not _in_order(cols["step"], cols["order"]):
        by = np.lexsort((cols["order"], cols["step"]))
        cols = {c: v[by] for c, v in cols.items()}
    values = result.pieces.labels.values
    out = []
    for rank in np.unique(cols["rank"]).tolist():
        mine = cols["rank"] == rank
        share = cols if mine.all() else {k: v[mine] for k, v in cols.items()}
        m, kinds = _drawn(_Coded(share, values), SEGMENT_COLUMNS)
        out.append(PathTrack(int(rank), m, tuple(kinds), len(share["ts"]), _hops(share)))
    return out


def _in_order(step: np.ndarray, order: np.ndarray) -> bool:
    """Whether rows are by step, then order (each pair after the one before)."""
    return bool(((step[1:] > step[:-1])
                 | ((step[1:] == step[:-1]) & (order[1:] > order[:-1]))).all())


def _hops(c: dict[str, np.ndarray]) -> pd.DataFrame:
    """The path's moves between tracks within a rank's share: consecutive pieces of one
    path on two tracks."""
    step, order, pid, tid = c["step"], c["order"], c["pid"], c["tid"]
    hop = (((pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1]))
           & (step[1:] == step[:-1]) & (order[1:] == order[:-1] + 1))
    i = np.flatnonzero(hop)
    hops: pd.DataFrame = pd.DataFrame({
        "id": np.arange(len(i), dtype=np.int64),
        "from_pid": pid[i], "from_tid": tid[i], "from_ts": (c["ts"] + c["dur"])[i],
        "to_pid": pid[i + 1], "to_tid": tid[i + 1], "to_ts": c["ts"][i + 1]})
    return hops


class _Pieces(Protocol):
    """One rank's pieces, by step and order, as :func:`_drawn` reads them: int columns
    (``ints``), each piece's kind as a code (``kind``, equal codes for equal kinds) with
    its text (``kind_text``), and the values of a column for some rows (``take``)."""

    ints: dict[str, np.ndarray]
    kind: np.ndarray
    kind_text: np.ndarray

    def take(self, col: str, rows: np.ndarray) -> Any: ...


class _Framed:
    """:class:`_Pieces` of a segments table (sorted, index reset)."""

    def __init__(self, s: pd.DataFrame) -> None:
        self.s = s
        self.ints: dict[str, np.ndarray] = {c: s[c].to_numpy()
                                            for c in ("step", "pid", "tid", "order")}
        self.ints.update({c: s[c].to_numpy(np.int64) for c in ("ts", "dur")})
        # Kinds compared as codes (a missing one as the text "nan", as astype(str) has it).
        col = s["kind"]
        codes, uniq = pd.factorize(col if isinstance(col.dtype, pd.CategoricalDtype)
                                   else col.astype(str))
        self.kind_text = np.asarray([*map(str, np.asarray(uniq, dtype=object).tolist()),
                                     "nan"], dtype=object)
        self.kind = np.where(codes < 0, len(self.kind_text) - 1, codes)

    def take(self, col: str, rows: np.ndarray) -> Any:
        return self.s[col].take(rows).array  # (categoricals stay categorical)


class _Coded:
    """:class:`_Pieces` of a rank's share of ``PathPieces``: ``kind``, ``name`` and
    ``category`` codes into ``values``, looked up for the rows taken only (typed as the
    segments table types them: a column of strings, missing ones among them, is a
    string column)."""

    def __init__(self, c: dict[str, np.ndarray], values: np.ndarray) -> None:
        self.ints: dict[str, np.ndarray] = c
        self.values = values
        used = np.unique(c["kind"])
        text = [str(v) for v in values[used].tolist()]
        canon = {t: j for j, t in enumerate(dict.fromkeys(text))}
        lut = np.zeros(int(used.max()) + 1 if len(used) else 1, dtype=np.int64)
        lut[used] = [canon[t] for t in text]
        self.kind, self.kind_text = lut[c["kind"]], np.asarray(list(canon), dtype=object)

    def take(self, col: str, rows: np.ndarray) -> Any:
        v = self.ints[col][rows]
        if col not in ("kind", "name", "category"):
            return v
        return pd.Series(self.values[v], dtype=pd.Series(self.values[np.unique(v)]).dtype
                         ).array


def drawn_pieces(seg: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``seg`` (one rank's path pieces) as ``annotate`` draws them: :func:`merged_pieces`,
    and where that leaves a step more than :data:`MAX_DRAWN_PER_STEP` slices (a path that
    alternates two kinds on one stream: a million tiny kernels and the idle time between
    them), that step's runs of one thread merged whatever their kinds (``kind``
    ``mixed`` where a run holds several, its time per kind in ``<kind>_ns`` columns, the
    kinds listed second). The drawn slices are a readable size; the full path, piece by
    piece, is ``traceforge critical-path`` / ``tf.critical_path``."""
    if seg.empty:
        return merged_pieces(seg), []
    return _drawn(_Framed(_sorted(seg)), list(seg.columns))


def merged_pieces(seg: pd.DataFrame, by_kind: bool = True) -> pd.DataFrame:
    """``seg`` (one rank's path pieces, by step and order) with each run of touching pieces
    of one step, thread and kind as one row: ``ts`` of the first, ``dur`` to the end of
    the last, ``name``/``category``/``row`` of the heaviest, ``order`` of the first,
    ``last_order`` and ``pieces``. A run of one piece is that piece unchanged.
    ``by_kind=False``: runs of one step and thread whatever their kinds; a run of several
    kinds is of kind ``mixed``, and ``<kind>_ns`` columns hold each run's time per kind
    (0 where it has none)."""
    if seg.empty:
        empty: pd.DataFrame = seg.assign(pieces=np.ones(0, dtype=np.int64),
                                         last_order=seg["order"])
        return empty
    f = _Framed(_sorted(seg))
    return _merged(f, None, list(seg.columns), by_kind)


def _sorted(seg: pd.DataFrame) -> pd.DataFrame:
    s = seg
    if not _in_order(seg["step"].to_numpy(), seg["order"].to_numpy()):
        s = seg.sort_values(["step", "order"], kind="stable")
    out: pd.DataFrame = s.reset_index(drop=True)
    return out


def _drawn(p: _Pieces, columns: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """:func:`drawn_pieces` of ``p``, its table's columns ``columns``."""
    m = _merged(p, None, columns, True)
    per_step = m["step"].value_counts()
    over = per_step.index[per_step > MAX_DRAWN_PER_STEP]
    if not len(over):
        return m, []
    wide = _merged(p, np.flatnonzero(np.isin(p.ints["step"], over.to_numpy())), columns,
                   False)
    kinds = [c[:-3] for c in wide.columns if c.endswith("_ns") and c not in m.columns]
    out = pd.concat([m[~m["step"].isin(over)].assign(**{f"{k}_ns": 0 for k in kinds}), wide],
                    ignore_index=True)
    return out.sort_values(["step", "order"], kind="stable").reset_index(drop=True), kinds


def _merged(p: _Pieces, rows: np.ndarray | None, columns: Sequence[str], by_kind: bool
            ) -> pd.DataFrame:
    """:func:`merged_pieces` of rows ``rows`` (ascending; None: all) of ``p``."""
    ints = p.ints

    def pick(v: np.ndarray) -> np.ndarray:
        return v if rows is None else v[rows]

    step, pid, tid, order = (pick(ints[c]) for c in ("step", "pid", "tid", "order"))
    ts, dur, kind = pick(ints["ts"]), pick(ints["dur"]), pick(p.kind)
    n = len(ts)
    same = np.ones(n, dtype=bool)
    same[0] = False
    for v in (step, pid, tid):
        same[1:] &= v[1:] == v[:-1]
    if by_kind:
        same[1:] &= kind[1:] == kind[:-1]
    same[1:] &= order[1:] == order[:-1] + 1
    same[1:] &= ts[1:] == ts[:-1] + dur[:-1]
    run = np.cumsum(~same) - 1
    first = np.flatnonzero(~same)
    last = np.r_[first[1:], n] - 1
    # Heaviest piece of each run (the first of equals): its name labels the slice.
    longest = np.maximum.reduceat(dur, first)
    heavy = np.minimum.reduceat(np.where(dur == longest[run], np.arange(n), n), first)
    out: dict[str, Any] = {}
    at_heavy, at_first = (heavy, first) if rows is None else (rows[heavy], rows[first])
    for c in columns:
        out[c] = p.take(c, at_heavy if c in ("name", "category", "row") else at_first)
    out["dur"] = ts[last] + dur[last] - ts[first]
    out["last_order"] = order[last]
    out["pieces"] = last - first + 1
    if not by_kind:
        changed = np.zeros(n, dtype=np.int64)
        changed[1:] = same[1:] & (kind[1:] != kind[:-1])
        mixed = np.add.reduceat(changed, first) > 0
        out["kind"] = np.where(mixed, "mixed", p.kind_text[kind[heavy]]).astype(object)
        in_mixed = np.repeat(mixed, last - first + 1)
        for k in sorted(set(p.kind_text[np.unique(kind[in_mixed])].tolist())):
            out[f"{k}_ns"] = np.where(mixed, np.bincount(run, weights=np.where(
                p.kind_text[kind] == k, dur, 0), minlength=len(first)), 0).astype(np.int64)
    frame: pd.DataFrame = pd.DataFrame(out)
    return frame


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
