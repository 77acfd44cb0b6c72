"""``path_tracks`` against the way it was done before it worked on codes: the segments table
of the critical paths, one rank at a time, merged and drawn by pandas and a three-key sort
(written out here), on random paths (touching and not, ties in duration, several threads,
kinds, ranks and steps, over the drawing bound and under it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceforge.analyzers.critical_path import critical_only, handoff, path_tracks
from traceforge.analyzers.critical_path.labels import Labels
from traceforge.analyzers.critical_path.result import CriticalPath
from traceforge.analyzers.critical_path.segments import Pieces
from traceforge.analyzers.critical_path.totals import PathPieces

VALUES = np.asarray(["kernel", "idle", "runtime", "cpu_op", "gemm", "aten::mm", "k1", "k2",
                     "cudaLaunchKernel"], dtype=object)
KINDS, NAMES = [0, 1, 2, 3], [4, 5, 6, 7, 8]


def _merged(seg: pd.DataFrame, by_kind: bool = True) -> pd.DataFrame:
    """The merge as it was written before (pandas, a lexsort for the heaviest piece)."""
    s = seg.sort_values(["step", "order"], kind="stable").reset_index(drop=True)
    ts, dur = s["ts"].to_numpy(np.int64), s["dur"].to_numpy(np.int64)
    kind = s["kind"].astype(str).to_numpy()
    same = np.ones(len(s), dtype=bool)
    same[0] = False
    for col in ("step", "pid", "tid"):
        v = s[col].to_numpy()
        same[1:] &= v[1:] == v[:-1]
    if by_kind:
        same[1:] &= kind[1:] == kind[:-1]
    same[1:] &= s["order"].to_numpy()[1:] == s["order"].to_numpy()[:-1] + 1
    same[1:] &= ts[1:] == ts[:-1] + dur[:-1]
    run = np.cumsum(~same) - 1
    first = np.flatnonzero(~same)
    last = np.r_[first[1:], len(s)] - 1
    order = np.lexsort((np.arange(len(s)), -dur, run))
    heavy = order[np.r_[0, np.flatnonzero(np.diff(run[order])) + 1]]
    out: pd.DataFrame = s.iloc[first].reset_index(drop=True)
    for col in ("name", "category", "row"):
        out[col] = s[col].take(heavy).array
    out["dur"] = ts[last] + dur[last] - ts[first]
    out["last_order"] = s["order"].to_numpy()[last]
    out["pieces"] = last - first + 1
    if not by_kind:
        changed = np.zeros(len(s), dtype=np.int64)
        changed[1:] = same[1:] & (kind[1:] != kind[:-1])
        mixed = np.add.reduceat(changed, first) > 0
        out["kind"] = np.where(mixed, "mixed", kind[heavy]).astype(object)
        for k in sorted(set(kind[np.repeat(mixed, last - first + 1)].tolist())):
            out[f"{k}_ns"] = np.where(mixed, np.bincount(run, weights=np.where(
                kind == k, dur, 0), minlength=len(first)), 0).astype(np.int64)
    return out


def _drawn(seg: pd.DataFrame, bound: int) -> tuple[pd.DataFrame, list[str]]:
    m = _merged(seg)
    per_step = m["step"].value_counts()
    over = per_step.index[per_step > bound]
    if not len(over):
        return m, []
    wide = _merged(seg[seg["step"].isin(over)], by_kind=False)
    kinds = [c[:-3] for c in wide.columns if c.endswith("_ns") and c not in m.columns]
    out = pd.concat([m[~m["step"].isin(over)].assign(**{f"{k}_ns": 0 for k in kinds}), wide],
                    ignore_index=True)
    return out.sort_values(["step", "order"], kind="stable").reset_index(drop=True), kinds


@st.composite
def paths(draw: Any) -> CriticalPath:
    """Random paths of a few steps and ranks: each piece on one of two threads of a rank,
    of a random kind and name, touching the one before or after a gap."""
    steps = sorted(draw(st.sets(st.integers(0, 9), min_size=1, max_size=3)))
    ranks = draw(st.integers(1, 3))
    got, rows = [], []
    for step in steps:
        for for_rank in range(ranks):
            n = draw(st.integers(0, 40))
            t = 1000 * step
            cols: dict[str, list[int]] = {c: [] for c in ("rank", "kind", "name", "category",
                                                           "ts", "dur", "row", "pid", "tid")}
            for _ in range(n):
                t += draw(st.sampled_from([0, 0, 0, 1, 5]))
                d = draw(st.sampled_from([1, 2, 2, 3, 7]))
                r = draw(st.integers(0, ranks - 1))
                for c, v in (("rank", r), ("kind", draw(st.sampled_from(KINDS))),
                             ("name", draw(st.sampled_from(NAMES))),
                             ("category", draw(st.sampled_from(NAMES))), ("ts", t),
                             ("dur", d), ("row", draw(st.integers(-1, 50))),
                             ("pid", 100 + r), ("tid", draw(st.sampled_from([1, 2])))):
                    cols[c].append(v)
                t += d
            arr = {c: np.asarray(v, dtype=np.int64) for c, v in cols.items()}
            got.append(Pieces(step, for_rank, **arr))
        critical = draw(st.integers(0, ranks - 1))
        rows += [(step, r, r == critical) for r in range(ranks)]
    lab = Labels(VALUES, np.zeros(len(VALUES), dtype=bool), [], {})
    empty = pd.DataFrame()
    return CriticalPath(steps=pd.DataFrame(rows, columns=["step", "rank", "critical"]),
                        pieces=PathPieces(got, lab), by_category=empty, top=empty,
                        what_if=empty)


@settings(max_examples=150, deadline=None)
@given(paths(), st.sampled_from([3, 10_000]))
def test_path_tracks_equal_the_segments_table_drawn(result: CriticalPath, bound: int) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(handoff, "MAX_DRAWN_PER_STEP", bound)
        tracks = {t.rank: t for t in path_tracks(result)}
    seg = critical_only(result, result.segments)
    assert sorted(tracks) == sorted(set(seg["rank"].tolist()))
    for rank, track in tracks.items():
        mine = seg[seg["rank"] == rank].sort_values(["step", "order"], kind="stable")
        mine = mine.reset_index(drop=True)
        want, kinds = _drawn(mine, bound)
        assert track.kinds == tuple(kinds) and track.pieces == len(mine)
        # (The table's text columns are object where a path of no pieces joined it: the
        # same text either way, as the renderer writes it.)
        pd.testing.assert_frame_equal(track.drawn, want, check_dtype=False)
        assert track.drawn.astype(str).values.tolist() == want.astype(str).values.tolist()
        nxt = mine.shift(-1)
        hop = (((mine["pid"] != nxt["pid"]) | (mine["tid"] != nxt["tid"]))
               & (mine["step"] == nxt["step"]) & (nxt["order"] == mine["order"] + 1))
        assert track.flows["to_ts"].tolist() == mine["ts"].shift(-1)[hop].astype(
            np.int64).tolist()
        assert int(track.drawn["dur"].sum()) == int(mine["dur"].sum())
