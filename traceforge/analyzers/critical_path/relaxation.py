"""The longest path of a step's graph for any edge weights (a what-if's), by relaxation in
topological order: the first best in-edge of each node wins, as ``networkx`` picks it.

The graph is given as node positions: ``ui`` (each edge's source), ``into_a`` (the edges
into each node, ``into_a[indptr[i]:indptr[i + 1]]``, in edge order), ``topo`` (a
topological order); weights ``w_in`` come in ``into_a``'s order. :func:`node_by_node`
relaxes every node in Python and answers for any weights. :class:`Chains` answers where
no weight is negative, with most of the work done once per graph: a node with one in-edge
(a range's end, a kernel's end, the calls of a thread between two waits) takes the
distance of the nearest node up its chain with none or several in-edges (its *root*) plus
the weights between, and only the nodes with several in-edges are relaxed one by one.
Which nodes chain to which root, and in which pointer-jumping rounds, depends on the
graph alone, so a step's what-ifs (the same graph, other weights) share it.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np


@dataclass(eq=False)
class Chains:
    """What the chained relaxation finds from the graph alone (:meth:`of`), kept for every
    set of weights on it (:meth:`path`)."""

    #: The nodes with one in-edge, that edge's place in ``into_a`` order and its source.
    one: np.ndarray
    first: np.ndarray
    source: np.ndarray
    #: Per pointer-jumping round, the nodes moved up their chain and the nodes they took
    #: the way from (each round halves the way to the root).
    jumps: list[tuple[np.ndarray, np.ndarray]]
    #: Each node's root (itself where it has none or several in-edges).
    root: np.ndarray
    #: The nodes with several in-edges, in topological order; their in-edges (places in
    #: ``into_a`` order, merge after merge, each merge's in edge order) and those edges'
    #: sources; as lists for the relaxation: the merges, their in-edge counts and the
    #: roots of their in-edges' sources.
    merge: np.ndarray
    edge: np.ndarray
    e_src: np.ndarray
    merges: list[int]
    counts: list[int]
    e_root: list[int]

    @classmethod
    def of(cls, ui: np.ndarray, into_a: np.ndarray, indptr: np.ndarray, topo: np.ndarray
           ) -> Chains:
        n = len(indptr) - 1
        # Positions as intp, though 4 bytes would hold them: numpy converts any other
        # index array on each use, which made a what-if ~25% slower (the jumps, most of
        # what is kept: 13 rounds of ~1.2M nodes, 209 MB, on the 226 MB nsys export).
        pos = np.intp
        indeg = np.diff(indptr)
        single = indeg == 1
        one = np.flatnonzero(single).astype(pos)
        first = indptr[:-1][one].astype(pos)
        source = ui[into_a[first]].astype(pos)
        root = np.arange(n, dtype=pos)
        root[one] = source
        jumps: list[tuple[np.ndarray, np.ndarray]] = []
        active = one[single[source]]
        while len(active):
            up = root[active]
            jumps.append((active, up))
            root[active] = root[up]
            active = active[single[root[active]]]
        merge = topo[indeg[topo] >= 2].astype(pos)
        count = indeg[merge]
        edge = (np.repeat(indptr[:-1][merge] - (np.cumsum(count) - count), count) +
                np.arange(int(count.sum()))).astype(pos)
        e_src = ui[into_a[edge]].astype(pos)
        return cls(one, first, source, jumps, root, merge, edge, e_src, merge.tolist(),
                   count.tolist(), root[e_src].tolist())

    def path(self, w_in: np.ndarray, topo: np.ndarray, t_pos: int) -> np.ndarray:
        """:func:`node_by_node`'s path for weights ``w_in`` of which none is negative (so
        every node's distance is its best in-edge's, and a node with one in-edge takes
        it), their sum below 2**62."""
        n = len(self.root)
        acc = np.zeros(n, dtype=np.int64)  # each node's way from its root
        acc[self.one] = w_in[self.first]
        for active, up in self.jumps:
            acc[active] += acc[up]
        prev = np.arange(n, dtype=np.int64)
        prev[self.one] = self.source
        at = acc
        if len(self.merge):
            best, pick = _merged(n, self.merges, self.counts, self.e_root,
                                 (acc[self.e_src] + w_in[self.edge]).tolist())
            prev[self.merge] = self.e_src[np.asarray(pick, dtype=np.int64)]
            at = np.zeros(n, dtype=np.int64)
            at[self.merge] = best
            at = at[self.root] + acc
        # The end with the longest distance, the first in topological order on ties.
        top = int(topo[int(np.argmax(at[topo]))]) if n else t_pos
        return path_back(prev, top)


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


def node_by_node(ui: np.ndarray, into_a: np.ndarray, indptr_a: np.ndarray, topo_a: np.ndarray,
                 w_in: np.ndarray, t_pos: int) -> np.ndarray:
    """The longest path's node positions by relaxing each node in topological order
    (Python lists: any weights; a node whose best in-edge is negative stays at 0 with no
    predecessor); ``t_pos`` where the graph has no node."""
    # Per node, its in-edges' sources and weights in edge order (one list per node).
    src = ui[into_a].tolist()
    wt = w_in.tolist()
    n = len(indptr_a) - 1
    dist = [0] * n
    prev = list(range(n))
    indptr = indptr_a.tolist()
    topo = topo_a.tolist()
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
    return path_back(np.asarray(prev, dtype=np.int64), top)


def path_back(prev: np.ndarray, x: int) -> np.ndarray:
    """Node positions from the first node to ``x``, following the predecessors ``prev``
    (a first node is its own)."""
    out = array("q", [x])  # 8 bytes a node (a list of ints: ~36): 20M nodes at 10M events
    up = np.ascontiguousarray(prev, dtype=np.int64).data  # (Python ints, twice as fast)
    while True:
        y = up[x]
        if y == x:
            return np.array(np.frombuffer(out, dtype=np.int64)[::-1])
        out.append(y)
        x = y
