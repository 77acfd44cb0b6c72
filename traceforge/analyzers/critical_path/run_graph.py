"""The run's graph: every rank's graph on one clock and in one id space, joined by
collective edges (no rank's collective ends before the last rank started it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceforge.analyzers.communication.collectives import match
from traceforge.analyzers.critical_path.edges import COLLECTIVE, WORK
from traceforge.analyzers.critical_path.rank import RankGraph


@dataclass(eq=False)
class RunGraph:
    ranks: list[RankGraph]
    base: np.ndarray  # first global node id of each rank
    offset: np.ndarray  # ns to add to a rank's ts for the common clock
    node_ts: np.ndarray  # global clock
    node_rank: np.ndarray  # index into ranks
    u: np.ndarray
    v: np.ndarray
    w: np.ndarray
    t: np.ndarray
    ref: np.ndarray
    ref2: np.ndarray  # host edges: end of the run of chain pieces (ref: its start)
    erank: np.ndarray  # index into ranks of the edge's ref
    notes: list[str]
    _index: TimeIndex | None = field(default=None, init=False, repr=False)

    def by_time(self) -> TimeIndex:
        """The nodes and edges in time order (built once): a step finds its own with two
        binary searches, not a pass over the whole run's (steps x run: quadratic)."""
        if self._index is None:
            node_order = np.argsort(self.node_ts, kind="stable")
            v_ts = self.node_ts[self.v]
            edge_order = np.argsort(v_ts, kind="stable")
            used = np.zeros(len(self.node_ts), dtype=bool)
            used[self.u] = True
            used[self.v] = True
            self._index = TimeIndex(node_order, self.node_ts[node_order], edge_order,
                                    v_ts[edge_order], used)
        return self._index


@dataclass(eq=False)
class TimeIndex:
    """A run's node ids by time (``node_ts``: theirs), its edge indices by the time of the
    node they lead to (``edge_ts``), and which nodes some edge touches (``used``, by id)."""

    node_order: np.ndarray
    node_ts: np.ndarray
    edge_order: np.ndarray
    edge_ts: np.ndarray
    used: np.ndarray

    def nodes(self, lo: int, hi: int) -> np.ndarray:
        """Ids of the nodes at ``lo <= time <= hi``, ascending."""
        a = np.searchsorted(self.node_ts, lo, side="left")
        b = np.searchsorted(self.node_ts, hi, side="right")
        return np.sort(self.node_order[a:b])

    def edges(self, lo: int, hi: int) -> np.ndarray:
        """Indices of the edges into nodes at ``lo <= time <= hi``, ascending."""
        a = np.searchsorted(self.edge_ts, lo, side="left")
        b = np.searchsorted(self.edge_ts, hi, side="right")
        return np.sort(self.edge_order[a:b])


def join_ranks(ranks: list[RankGraph]) -> RunGraph:
    if len(ranks) == 1:
        return _one_rank(ranks[0])
    bases = np.array([r.base_ns for r in ranks], dtype=np.int64)
    offset = bases - bases.min() if len(ranks) > 1 else np.zeros(len(ranks), np.int64)
    sizes = np.array([len(r.node_ts) for r in ranks], dtype=np.int64)
    base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    node_ts = np.concatenate([r.node_ts + offset[i] for i, r in enumerate(ranks)])
    node_rank = np.repeat(np.arange(len(ranks)), sizes)
    us, vs, ws, tt, refs, refs2, er = [], [], [], [], [], [], []
    for i, r in enumerate(ranks):
        us.append(r.u + base[i])
        vs.append(r.v + base[i])
        ws.append(r.w)
        tt.append(r.t)
        refs.append(r.ref)
        refs2.append(r.ref2)
        er.append(np.full(len(r.u), i, dtype=np.int64))
    notes = [f"rank {r.rank}: {n}" for r in ranks for n in r.notes] if len(ranks) > 1 else \
        list(ranks[0].notes)
    run = RunGraph(ranks, base, offset, node_ts, node_rank.astype(np.int64),
               np.concatenate(us), np.concatenate(vs), np.concatenate(ws),
               np.concatenate(tt), np.concatenate(refs), np.concatenate(refs2),
               np.concatenate(er), notes)
    if len(ranks) > 1:
        _collective_edges(run)
    return run


def _one_rank(r: RankGraph) -> RunGraph:
    """One rank's graph as the run's: its arrays themselves (nothing is shifted, and the
    run never writes into them), not copies: at 10M events they are gigabytes."""
    def i64(a: np.ndarray) -> np.ndarray:
        return np.asarray(a, dtype=np.int64)

    n, e = len(r.node_ts), len(r.u)
    return RunGraph([r], np.zeros(1, np.int64), np.zeros(1, np.int64), i64(r.node_ts),
                    np.zeros(n, np.int64), i64(r.u), i64(r.v), i64(r.w), r.t, i64(r.ref),
                    i64(r.ref2), np.zeros(e, np.int64), list(r.notes))


def _collective_edges(run: RunGraph) -> None:
    """Across ranks: each member's start -> every member's end, weighted by the time from
    the last start to that end; these replace the members' own work edges."""
    tables = [r.comm.assign(rank=i) for i, r in enumerate(run.ranks)]
    col = match(tables)
    run.notes += list(col.notes)
    m = col.members
    comm = sum(len(t) for t in tables)
    if m.empty:
        if comm:
            run.notes.append("communication kernels could not be matched across ranks: "
                             "collectives are single-rank work edges")
        return
    ri, ai = m["rank"].to_numpy(), m["act"].to_numpy()
    nh = np.array([r.n_host for r in run.ranks], dtype=np.int64)
    start = run.base[ri] + 2 * nh[ri] + 2 * ai
    g = pd.DataFrame({"inst": m["instance"].to_numpy(), "rank": ri, "act": ai,
                      "s": start, "e": start + 1, "ts": run.node_ts[start],
                      "end": run.node_ts[start + 1]})
    p = g.merge(g[["inst", "s", "ts"]].rename(columns={"s": "qs", "ts": "qts"}), on="inst")
    skew = p["qts"] > p["end"]
    if skew.any():
        run.notes.append(f"{int(skew.sum())} collective pairs where one rank started after "
                         "another had ended (clocks of different hosts?): those edges left out")
    p = p[~skew]
    last = p.groupby(["inst", "rank"])["qts"].transform("max")
    tail = (p["end"] - last).to_numpy()
    # Drop the members' own work edges, then add the cross-rank ones.
    own = np.zeros(len(run.u), dtype=bool)
    key = pd.MultiIndex.from_arrays([g["rank"], g["act"]])
    w_idx = np.flatnonzero(run.t == WORK)
    hit = pd.MultiIndex.from_arrays([run.erank[w_idx], run.ref[w_idx]]).isin(key)
    # only the members' own duration edges (start -> end), not overlap-substitute edges
    is_dur = run.v[w_idx] == run.u[w_idx] + 1
    own[w_idx[hit & is_dur]] = True
    keep = ~own
    run.u = np.concatenate([run.u[keep], p["qs"].to_numpy()])
    run.v = np.concatenate([run.v[keep], p["e"].to_numpy()])
    run.w = np.concatenate([run.w[keep], tail])
    run.t = np.concatenate([run.t[keep], np.full(len(p), COLLECTIVE, np.int8)])
    run.ref = np.concatenate([run.ref[keep], p["act"].to_numpy()])
    run.ref2 = np.concatenate([run.ref2[keep], np.full(len(p), -1, np.int64)])
    run.erank = np.concatenate([run.erank[keep], p["rank"].to_numpy()])
