"""One step's graph (the run's nodes inside the step's windows, with a shared window
start and one window end per rank) and the longest path into a rank's window end.

The graph and its topological order are built once per step and shared by every rank's
path and every what-if, which only change edge weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.edges import END, START
from traceforge.analyzers.critical_path.run_graph import RunGraph

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
    graph: nx.DiGraph
    notes: list[str]
    topo: list[int] | None = None

    @property
    def shift(self) -> int:
        """Added to node ids to index arrays (S and the T nodes are negative)."""
        return 2 + len(self.w0)

    def order(self) -> list[int]:
        """A topological order of the graph, computed once for every path and what-if."""
        if self.topo is None:
            import networkx as nx

            self.topo = list(nx.topological_sort(self.graph))
        return self.topo


def step_graph(run: RunGraph, step: int, wins: list[pd.DataFrame]) -> StepGraph:
    w0s = np.array([int(w["ts"].iloc[0]) for w in wins], dtype=np.int64) + run.offset
    w1s = np.array([int(w["end"].iloc[0]) for w in wins], dtype=np.int64) + run.offset
    lo, hi = int(w0s.min()), int(w1s.max())
    notes: list[str] = []
    ts = run.node_ts
    inside = (ts >= lo) & (ts <= hi)
    # The nodes that set each rank's window end: its activity starts/ends at that time.
    # A window without GPU work ends where its host range does: the last event before
    # that leads to it (or the window's start, when the rank has none), through idle time.
    used = np.zeros(len(ts), dtype=bool)
    used[run.u] = True
    used[run.v] = True
    ends: list[np.ndarray] = []
    for ri, r in enumerate(run.ranks):
        a0 = run.base[ri] + 2 * r.n_host
        a1 = a0 + 2 * len(r.acts)
        e = np.arange(a0, a1)[ts[a0:a1] == w1s[ri]]
        if len(e) == 0:
            rn = np.arange(run.base[ri], a1)
            rn = rn[(ts[rn] <= w1s[ri]) & (ts[rn] >= lo) & used[rn]]
            e = rn[[int(np.argmax(ts[rn]))]] if len(rn) else np.array([S_NODE])
        ends.append(e)
    sel = inside[run.v]
    u, v, w, t, ref, ref2, erk = (a[sel] for a in (run.u, run.v, run.w, run.t, run.ref,
                                                   run.ref2, run.erank))
    before = ~inside[u]
    # Edges from before the window start at the window's start, with what is left of them.
    w = np.where(before, np.maximum(0, ts[u] + w - lo), w)
    u = np.where(before, S_NODE, u)
    # One edge per node pair, the longest: a DiGraph keeps one.
    order = np.lexsort((w, v, u))
    u, v, w, t, ref, ref2, erk = (a[order] for a in (u, v, w, t, ref, ref2, erk))
    last = np.append((u[1:] != u[:-1]) | (v[1:] != v[:-1]), True)[:len(u)]
    u, v, w, t, ref, ref2, erk = (a[last] for a in (u, v, w, t, ref, ref2, erk))
    nodes = np.flatnonzero(inside & used)
    # Nodes nothing leads to (a thread's first range, a kernel whose launch is not in the
    # trace): the window's start leads to them, as idle time.
    orphan = nodes[~np.isin(nodes, v)]
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
    # networkx is imported where a path is first worked out: it is ~60 ms of a command's
    # start-up, and the report works its path out beside its other analyses.
    import networkx as nx

    g = nx.DiGraph()
    g.add_node(S_NODE)
    g.add_nodes_from(t_node(ri) for ri in range(len(run.ranks)))
    g.add_weighted_edges_from(zip(u.tolist(), v.tolist(), w.tolist(), strict=True))
    return StepGraph(step, w0s, w1s, lo, nodes, u, v, w, t, ref, ref2, erk, g, notes)


def longest_into(sp: StepGraph, ri: int, changed: Mapping[tuple[int, int], int] | None = None
                  ) -> list[int]:
    """The longest path into rank ``ri``'s window end, with some edge weights changed.

    ``nx.dag_longest_path`` finds the longest path of the whole graph; while it runs, the
    edges into this rank's end weigh more than all weights together, so that path ends
    there. The step graph and its topological order are shared by every rank and what-if.
    """
    import networkx as nx

    g = sp.graph
    t = t_node(ri)
    big = int(sp.w.sum()) + 1
    into = list(g.pred[t])
    old = {k: g.edges[k]["weight"] for k in changed or {}}
    try:
        for k, w in (changed or {}).items():
            g.edges[k]["weight"] = w
        for x in into:
            g.edges[x, t]["weight"] = big
        path = [int(x) for x in nx.dag_longest_path(g, weight="weight", topo_order=sp.order())]
    finally:
        for x in into:
            g.edges[x, t]["weight"] = 0
        for k, w in old.items():
            g.edges[k]["weight"] = w
    if not path or path[-1] != t:
        path.append(t)
    if path[0] != S_NODE:
        path.insert(0, S_NODE)
    return path


def edge_index(sp: StepGraph, path: Sequence[int]) -> np.ndarray:
    """Row of each consecutive path pair in the step's edge arrays (-1: not an edge)."""
    p = np.asarray(path, dtype=np.int64) + sp.shift
    n = int(max(sp.u.max(initial=0), sp.v.max(initial=0))) + 1 + sp.shift
    key = (sp.u + sp.shift) * n + (sp.v + sp.shift)
    order = np.argsort(key, kind="stable")
    q = p[:-1] * n + p[1:]
    if not len(order):
        return np.full(len(q), -1, dtype=np.int64)
    i = np.clip(np.searchsorted(key[order], q), 0, len(order) - 1)
    return np.where(key[order][i] == q, order[i], -1)
