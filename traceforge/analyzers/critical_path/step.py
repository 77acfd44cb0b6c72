"""One step's graph (the run's nodes inside the step's windows, with a shared window
start and one window end per rank) and the longest path into a rank's window end.

The graph is kept as edge arrays (``u``, ``v``, ``w``) and its topological order and
in-edge lists are built once per step and shared by every rank's path and every what-if,
which only change edge weights. The longest path is worked out on those arrays
(:func:`longest_into`), exactly as ``networkx.dag_longest_path`` picks it (the first
best predecessor in edge order): a networkx graph holds a dict per edge, ~1 KB, which
made 1M kernels cost 3.6 GiB. The ``DiGraph`` (:attr:`StepGraph.graph`) is built only when
someone asks for it (``CriticalPath.graphs``).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.edges import END, START
from traceforge.analyzers.critical_path.run_graph import RunGraph
from traceforge.model import lex_order

if TYPE_CHECKING:
    import networkx as nx

#: Node ids of the window's start (shared) and of each rank's window end (-2 - rank index).
S_NODE = -1


def t_node(ri: int) -> int:
    return -2 - ri


@dataclass(eq=False)
class StepGraph:
    """The graph of one step: every rank's nodes from the earliest window start (``lo``)
    to the latest window end; ``w0``/``w1`` each rank's window in the common clock."""

    step: int
    w0: np.ndarray
    w1: np.ndarray
    lo: int
    nodes: np.ndarray
    u: np.ndarray
    v: np.ndarray
    w: np.ndarray
    t: np.ndarray
    ref: np.ndarray
    ref2: np.ndarray
    erank: np.ndarray
    notes: list[str]
    #: The run's node times (global clock), shared, not copied: the topological order.
    run_ts: np.ndarray
    dag: _Dag | None = None
    keys: tuple[int, np.ndarray, np.ndarray] | None = None
    ids: np.ndarray | None = None

    @property
    def shift(self) -> int:
        """Added to node ids to index arrays (S and the T nodes are negative)."""
        return 2 + len(self.w0)

    @property
    def node_ids(self) -> np.ndarray:
        """Every node of the graph: S, the rank ends and the ends of every edge, sorted
        (computed once; node ids are dense integers, so a mark per id, not a sort)."""
        if self.ids is None:
            lo = t_node(len(self.w0) - 1) if len(self.w0) else S_NODE
            hi = int(max(self.u.max(initial=S_NODE), self.v.max(initial=S_NODE)))
            seen = np.zeros(hi - lo + 1, dtype=bool)
            seen[S_NODE - lo] = True
            seen[[t_node(ri) - lo for ri in range(len(self.w0))]] = True
            seen[self.u - lo] = True
            seen[self.v - lo] = True
            self.ids = np.flatnonzero(seen).astype(np.int64) + lo
        return self.ids

    @property
    def graph(self) -> nx.DiGraph:
        """The step's graph as a networkx DiGraph (built on each call: for the API)."""
        import networkx as nx

        g = nx.DiGraph()
        g.add_node(S_NODE)
        g.add_nodes_from(t_node(ri) for ri in range(len(self.w0)))
        g.add_weighted_edges_from(zip(self.u.tolist(), self.v.tolist(), self.w.tolist(),
                                      strict=True))
        return g

    def times(self, ids: np.ndarray) -> np.ndarray:
        """The time of each node id: S the window start, a rank's end its window end."""
        ts = self.run_ts[np.clip(ids, 0, None)]
        ts = np.where(ids == S_NODE, self.lo, ts)
        return np.where(ids < S_NODE, self.w1[np.clip(-2 - ids, 0, None)], ts)

    def order(self) -> _Dag:
        """The graph's topological order and in-edge lists, computed once."""
        if self.dag is None:
            ids = self.node_ids
            self.dag = _Dag.of(ids, self.u, self.v, self.times(ids))
        return self.dag


@dataclass(eq=False)
class _Dag:
    """Node ids; each edge's end points as node positions; the edges into each node in edge
    order (``into_a[indptr[i]:indptr[i + 1]]``); a topological order of node positions.
    Arrays, not lists: a step's graph is kept for its what-ifs (8 bytes a node, not ~36)."""

    ids: np.ndarray
    ui: np.ndarray
    vi: np.ndarray
    indptr: np.ndarray
    topo: np.ndarray
    into_a: np.ndarray

    @classmethod
    def of(cls, ids: np.ndarray, u: np.ndarray, v: np.ndarray, ts: np.ndarray) -> _Dag:
        n = len(ids)
        # Node and edge positions in 4 bytes where they fit (20M nodes and edges at 10M
        # events: half the DAG's memory); indptr stays int64.
        pos = np.int32 if max(n, len(u)) < 2**31 else np.int64
        ui = np.searchsorted(ids, u).astype(pos)
        vi = np.searchsorted(ids, v).astype(pos)
        by_v = np.argsort(vi, kind="stable").astype(pos)  # edges into a node keep their order
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(vi, minlength=n), out=indptr[1:])
        topo = _time_order(ui, vi, ts)
        if topo is None:
            topo = _kahn(n, ui, vi)
        return cls(ids, ui, vi, indptr, topo.astype(pos), by_v)


#: Rounds of the equal-time depth pass before the time order gives way to Kahn's algorithm.
_TIE_ROUNDS = 64


def _time_order(ui: np.ndarray, vi: np.ndarray, ts: np.ndarray) -> np.ndarray | None:
    """A topological order from the nodes' times: every edge's source is no later than its
    target, so nodes by time, those at one time by their depth in the graph of edges
    between them. None where that is no topological order (an edge back in time: clocks
    of ranks that disagree) or the equal-time chains are too deep: Kahn's algorithm then.
    Any topological order gives the same longest path (distances and each node's first
    best in-edge do not depend on it)."""
    n = len(ts)
    if np.any(ts[ui] > ts[vi]):
        return None
    tie = np.flatnonzero(ts[ui] == ts[vi])
    depth = np.zeros(n, dtype=np.int64)
    tu, tv = ui[tie], vi[tie]
    for _ in range(_TIE_ROUNDS):
        nxt = depth.copy()
        np.maximum.at(nxt, tv, depth[tu] + 1)
        if np.array_equal(nxt, depth):
            break
        depth = nxt
    else:
        return None
    topo = np.lexsort((depth, ts))
    pos = np.empty(n, dtype=np.int64)
    pos[topo] = np.arange(n, dtype=np.int64)
    if np.any(pos[ui] >= pos[vi]):
        return None
    return topo.astype(np.int64)


def _kahn(n: int, ui: np.ndarray, vi: np.ndarray) -> np.ndarray:
    """Kahn's algorithm: a node once everything into it is placed."""
    by_u = np.argsort(ui, kind="stable")
    outptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ui, minlength=n), out=outptr[1:])
    out_v = vi[by_u].tolist()
    optr = outptr.tolist()
    indeg = np.bincount(vi, minlength=n).tolist()
    topo = [i for i in range(n) if indeg[i] == 0]
    k = 0
    while k < len(topo):
        x = topo[k]
        k += 1
        for y in out_v[optr[x]:optr[x + 1]]:
            indeg[y] -= 1
            if indeg[y] == 0:
                topo.append(y)
    if len(topo) != n:
        raise ValueError("the step graph has a cycle")
    return np.asarray(topo, dtype=np.int64)


def step_graph(run: RunGraph, step: int, wins: list[pd.DataFrame]) -> StepGraph:
    w0s = np.array([int(w["ts"].iloc[0]) for w in wins], dtype=np.int64) + run.offset
    w1s = np.array([int(w["end"].iloc[0]) for w in wins], dtype=np.int64) + run.offset
    lo, hi = int(w0s.min()), int(w1s.max())
    notes: list[str] = []
    ts = run.node_ts
    ix = run.by_time()
    inside = ix.nodes(lo, hi)  # (their ids; the run's others are not looked at)
    # The nodes that set each rank's window end: its activity starts/ends at that time.
    # A window without GPU work ends where its host range does: the last event before
    # that leads to it (or the window's start, when the rank has none), through idle time.
    used = ix.used
    ends: list[np.ndarray] = []
    for ri, r in enumerate(run.ranks):
        a0 = run.base[ri] + 2 * r.n_host
        a1 = a0 + 2 * len(r.acts)
        e = ix.nodes(int(w1s[ri]), int(w1s[ri]))
        e = e[(e >= a0) & (e < a1)]
        if len(e) == 0:
            rn = inside[(inside >= run.base[ri]) & (inside < a1)]
            rn = rn[(ts[rn] <= w1s[ri]) & used[rn]]
            e = rn[[int(np.argmax(ts[rn]))]] if len(rn) else np.array([S_NODE])
        ends.append(e)
    sel = ix.edges(lo, hi)
    u, v, w = run.u[sel], run.v[sel], run.w[sel]
    before = (ts[u] < lo) | (ts[u] > hi)
    # Edges from before the window start at the window's start, with what is left of them.
    w = np.where(before, np.maximum(0, ts[u] + w - lo), w)
    u = np.where(before, S_NODE, u)
    # One edge per node pair, the longest: a DiGraph keeps one. (The other columns are
    # taken once, for the edges kept: at 10M events each copy is hundreds of MB.)
    order = lex_order((w, v, u))
    u, v, w = u[order], v[order], w[order]
    last = np.flatnonzero(np.append((u[1:] != u[:-1]) | (v[1:] != v[:-1]), True)[:len(u)])
    u, v, w = u[last], v[last], w[last]
    keep = sel[order[last]]
    del order
    t, ref, ref2, erk = (a[keep] for a in (run.t, run.ref, run.ref2, run.erank))
    nodes = inside[used[inside]]
    # Nodes nothing leads to (a thread's first range, a kernel whose launch is not in the
    # trace): the window's start leads to them, as idle time.
    led = np.zeros(int(max(nodes.max(initial=-1), v.max(initial=-1))) + 1, dtype=bool)
    led[v[v >= 0]] = True  # (node ids are dense: a mark each, not a sort of both)
    orphan = nodes[~led[nodes]]
    te = np.concatenate(ends) if ends else np.zeros(0, np.int64)
    tr = np.concatenate([np.full(len(e), ri) for ri, e in enumerate(ends)]).astype(np.int64)
    te_ts = np.where(te >= 0, ts[np.clip(te, 0, None)], lo)
    u = np.concatenate([u, np.full(len(orphan), S_NODE), te])
    v = np.concatenate([v, orphan, -2 - tr])
    w = np.concatenate([w, ts[orphan] - lo, w1s[tr] - te_ts])
    t = np.concatenate([t, np.full(len(orphan), START, np.int8),
                        np.full(len(te), END, np.int8)])
    ref = np.concatenate([ref, np.full(len(orphan) + len(te), -1)])
    ref2 = np.concatenate([ref2, np.full(len(orphan) + len(te), -1)])
    erk = np.concatenate([erk, run.node_rank[orphan], tr])
    return StepGraph(step, w0s, w1s, lo, nodes, u, v, w, t, ref, ref2, erk, notes, ts)


def longest_into(sp: StepGraph, ri: int, weights: np.ndarray | None = None) -> np.ndarray:
    """The longest path into rank ``ri``'s window end, its node ids in order (``weights``:
    the edges' weights, ``sp.w`` when None; a what-if passes its own, on the same graph).

    As ``nx.dag_longest_path`` on the step graph while the edges into this rank's end
    weigh more than all weights together (so that the longest path ends there): each node
    takes the first predecessor, in edge order, with the longest distance (none when that
    is negative), and the path is followed back from the end.
    """
    dag = sp.order()
    wa = (sp.w if weights is None else weights).astype(np.int64)
    t_pos = int(np.searchsorted(dag.ids, t_node(ri)))
    big = int(sp.w.sum()) + 1
    into_a = dag.into_a
    # The other ranks' ends weigh nothing, as in the graph; this rank's end weighs most.
    for tj in range(len(sp.w0)):
        p = int(np.searchsorted(dag.ids, t_node(tj)))
        wa[into_a[dag.indptr[p]:dag.indptr[p + 1]]] = big if tj == ri else 0
    tight = _tight(sp, dag, wa[into_a]) if weights is None else None
    path_pos = _path_back(tight) if tight is not None else _relaxed(dag, wa[into_a], t_pos)
    path = dag.ids[path_pos]
    t = t_node(ri)
    if not len(path) or path[-1] != t:
        path = np.append(path, t)
    if path[0] != S_NODE:
        path = np.insert(path, 0, S_NODE)
    return np.asarray(path, dtype=np.int64)


def _tight(sp: StepGraph, dag: _Dag, w_in: np.ndarray) -> tuple[np.ndarray, int] | None:
    """The longest path's predecessors and end, vectorized, where the step's times say
    them: every node's time is the latest of its in-edges' source time + weight (the
    graph is built so), so its distance is its time from the window start, and its
    predecessor the first in-edge, in edge order, that reaches it then: what the
    relaxation in topological order finds. Checked for every node (the rank ends' take
    the latest of their in-edges); None where a time contradicts its edges (the
    relaxation then) or for a what-if's weights (no times for those)."""
    n = len(dag.ids)
    indptr = dag.indptr
    src = dag.ui[dag.into_a]
    dist = sp.times(dag.ids) - sp.lo
    has_in = indptr[1:] > indptr[:-1]
    t_pos = np.searchsorted(dag.ids, [t_node(tj) for tj in range(len(sp.w0))])
    reach = dist[src] + w_in
    starts = indptr[:-1][has_in]  # each node's in-edges: one run of the edges, in order
    best = np.maximum.reduceat(reach, starts) if len(starts) else reach[:0]
    # The rank ends (no edges out of them) are as far as their weighted in-edges say.
    at = np.cumsum(has_in) - 1
    t_in = t_pos[has_in[t_pos]]
    dist[t_in] = best[at[t_in]]
    if dist.min(initial=0) < 0 or np.any(dist[~has_in] != 0) or np.any(best != dist[has_in]):
        return None
    k = np.where(reach == np.repeat(dist, np.diff(indptr)), np.arange(len(src)), len(src))
    prev = np.arange(n, dtype=np.int64)
    if len(starts):
        prev[has_in] = src[np.minimum.reduceat(k, starts)]
    # The end with the longest distance, the first in topological order on ties.
    ends = np.flatnonzero(dist == dist.max(initial=0))
    pos = np.empty(n, dtype=np.int64)
    pos[dag.topo] = np.arange(n, dtype=np.int64)
    return prev, int(ends[np.argmin(pos[ends])]) if len(ends) else 0


def _path_back(tight: tuple[np.ndarray, int]) -> np.ndarray:
    """Node positions from the first node to ``end``, following the predecessors."""
    prev, x = tight
    out = array("q", [x])  # 8 bytes a node (a list of ints: ~36): 20M nodes at 10M events
    up = np.ascontiguousarray(prev, dtype=np.int64).data  # (Python ints, twice as fast)
    while True:
        y = up[x]
        if y == x:
            return np.array(np.frombuffer(out, dtype=np.int64)[::-1])
        out.append(y)
        x = y


def _relaxed(dag: _Dag, w_in: np.ndarray, t_pos: int) -> np.ndarray:
    """:func:`longest_into`'s path for any weights (a what-if's): by chains where no
    weight is negative (:func:`_chained`), else node by node (:func:`_node_by_node`)."""
    if len(w_in) and (int(w_in.min()) < 0 or float(w_in.sum(dtype=np.float64)) >= 2.0**62):
        return _node_by_node(dag, w_in, t_pos)
    return _chained(dag, w_in, t_pos)


def _chained(dag: _Dag, w_in: np.ndarray, t_pos: int) -> np.ndarray:
    """:func:`_node_by_node`'s path where no weight is negative (so every node's distance
    is its best in-edge's, and a node with one in-edge takes it): most nodes have one
    in-edge (a range's end, a kernel's end, the calls of a thread between two waits), and
    such a node's distance is that of the nearest node up its chain with none or several
    (its *root*) plus the weights between, found for all at once by pointer jumping. Only
    the nodes with several in-edges are relaxed one by one, in topological order, each
    in-edge's source as its root's distance plus its chain's weights: on the 226 MB nsys
    export, 1.26M of 3.76M nodes."""
    n = len(dag.ids)
    indptr = dag.indptr
    src = dag.ui[dag.into_a].astype(np.int64)
    indeg = np.diff(indptr)
    single = indeg == 1
    root = np.arange(n, dtype=np.int64)
    acc = np.zeros(n, dtype=np.int64)
    one = np.flatnonzero(single)
    root[one] = src[indptr[:-1][one]]
    acc[one] = w_in[indptr[:-1][one]]
    prev = root.copy()  # (a node with one in-edge comes from its source)
    active = one[single[root[one]]]
    while len(active):  # (each round halves the way to the root)
        up = root[active]
        acc[active] += acc[up]
        root[active] = root[up]
        active = active[single[root[active]]]
    merge = dag.topo[indeg[dag.topo] >= 2]
    at = acc
    if len(merge):
        # The merges' in-edges, merge after merge in topological order, each merge's in
        # edge order: its source's root, the way from there, the source.
        count = indeg[merge]
        edge = np.repeat(indptr[:-1][merge] - (np.cumsum(count) - count), count) + \
            np.arange(int(count.sum()))
        e_src = src[edge]
        best, pick = _merged(n, merge.tolist(), count.tolist(), root[e_src].tolist(),
                             (acc[e_src] + w_in[edge]).tolist())
        prev[merge] = e_src[np.asarray(pick, dtype=np.int64)]
        at = np.zeros(n, dtype=np.int64)
        at[merge] = best
        at = at[root] + acc
    # The end with the longest distance, the first in topological order on ties.
    top = int(dag.topo[int(np.argmax(at[dag.topo]))]) if n else t_pos
    return _path_back((prev, top))


def _merged(n: int, merges: list[int], count: list[int], e_root: list[int],
            e_len: list[int]) -> tuple[list[int], list[int]]:
    """Each merge's distance and best in-edge (its position among the edges given),
    relaxed in the order given (topological): its in-edges, in order, are the next
    ``count`` of ``e_root`` (the source's root, whose distance is known by then) and
    ``e_len`` (the way from that root through the edge); the first best in-edge wins."""
    dist = [0] * n
    best_of = [0] * len(merges)
    pick = [0] * len(merges)
    k = 0
    for i, (x, c) in enumerate(zip(merges, count, strict=True)):
        best, bk = dist[e_root[k]] + e_len[k], k
        if c == 2:
            d = dist[e_root[k + 1]] + e_len[k + 1]
            if d > best:
                best, bk = d, k + 1
        else:
            for j in range(k + 1, k + c):
                d = dist[e_root[j]] + e_len[j]
                if d > best:
                    best, bk = d, j
        dist[x] = best_of[i] = best
        pick[i] = bk
        k += c
    return best_of, pick


def _node_by_node(dag: _Dag, w_in: np.ndarray, t_pos: int) -> np.ndarray:
    """:func:`longest_into`'s path by relaxing each node in topological order (Python
    lists: any weights)."""
    # Per node, its in-edges' sources and weights in edge order (one list per node).
    src = dag.ui[dag.into_a].tolist()
    wt = w_in.tolist()
    n = len(dag.ids)
    dist = [0] * n
    prev = list(range(n))
    indptr = dag.indptr.tolist()
    topo = dag.topo.tolist()
    for x in topo:
        lo, hi = indptr[x], indptr[x + 1]
        if lo == hi:
            continue
        if hi - lo == 1:
            d = dist[src[lo]] + wt[lo]
            if d >= 0:
                dist[x], prev[x] = d, src[lo]
            continue
        best, bu = dist[src[lo]] + wt[lo], src[lo]
        for k in range(lo + 1, hi):
            d = dist[src[k]] + wt[k]
            if d > best:
                best, bu = d, src[k]
        if best >= 0:
            dist[x], prev[x] = best, bu
    # The end with the longest distance, the first in topological order on ties.
    top = max(topo, key=dist.__getitem__) if topo else t_pos
    del topo, indptr, src, wt
    return _path_back((np.asarray(prev, dtype=np.int64), top))


def _keys(sp: StepGraph) -> tuple[int, np.ndarray, np.ndarray]:
    """(n, the edges' keys sorted, their order): an edge (u, v) is key (u + shift) * n +
    (v + shift); computed once per step."""
    if sp.keys is None:
        n = int(max(sp.u.max(initial=0), sp.v.max(initial=0))) + 1 + sp.shift
        key = (sp.u + sp.shift) * n + (sp.v + sp.shift)
        order = np.argsort(key, kind="stable")
        sp.keys = (n, key[order], order)
    return sp.keys


def _find(sp: StepGraph, q: np.ndarray) -> np.ndarray:
    _, skey, order = _keys(sp)
    if not len(order):
        return np.full(len(q), -1, dtype=np.int64)
    i = np.clip(np.searchsorted(skey, q), 0, len(order) - 1)
    return np.asarray(np.where(skey[i] == q, order[i], -1))


def edge_index_pairs(sp: StepGraph, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """Row of each ``(u, v)`` pair in the step's edge arrays (-1: not an edge)."""
    if not pairs:
        return np.zeros(0, dtype=np.int64)
    n = _keys(sp)[0]
    q = np.array([(a + sp.shift) * n + (b + sp.shift) for a, b in pairs], dtype=np.int64)
    return _find(sp, q)


def edge_index(sp: StepGraph, path: Sequence[int] | np.ndarray) -> np.ndarray:
    """Row of each consecutive path pair in the step's edge arrays (-1: not an edge)."""
    p = np.asarray(path, dtype=np.int64) + sp.shift
    n = _keys(sp)[0]
    return _find(sp, p[:-1] * n + p[1:])
