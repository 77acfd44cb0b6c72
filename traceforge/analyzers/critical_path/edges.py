"""The vocabulary of the graph's edges: their type codes, and the arrays a rank's edges
are collected in while its graph is built.

Every other module of the package reads these codes (to build edges, to label a path's
time, to pick the work edges a what-if speeds up), so they live apart from all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Edge types, in the order of their codes in :attr:`CriticalPath.edges` ``type``.
EDGE_TYPES = ("host", "sync_span", "work", "launch", "stream", "event", "graph",
              "sync_wait", "collective", "window_start", "window_end")
(HOST, SYNC_SPAN, WORK, LAUNCH, STREAM, EVENT, GRAPH, SYNC_WAIT, COLLECTIVE,
 START, END) = range(len(EDGE_TYPES))


@dataclass
class Edges:
    u: list[np.ndarray] = field(default_factory=list)
    v: list[np.ndarray] = field(default_factory=list)
    w: list[np.ndarray] = field(default_factory=list)
    t: list[np.ndarray] = field(default_factory=list)
    ref: list[np.ndarray] = field(default_factory=list)
    ref2: list[np.ndarray] = field(default_factory=list)

    def add(self, u: Any, v: Any, w: Any, t: int, ref: Any, ref2: Any = -1) -> None:
        u = np.asarray(u, dtype=np.int64)
        self.u.append(u)
        self.v.append(np.asarray(v, dtype=np.int64))
        self.w.append(np.asarray(w, dtype=np.int64))
        self.t.append(np.full(len(u), t, dtype=np.int8))
        self.ref.append(np.asarray(ref, dtype=np.int64))
        self.ref2.append(np.broadcast_to(np.asarray(ref2, dtype=np.int64), u.shape))

    def arrays(self) -> tuple[np.ndarray, ...]:
        """u, v, w, t, ref, ref2 as one array each; the lists are emptied as each is
        joined (a rank's edges are tens of millions at 10M events: never held twice)."""
        if not self.u:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z, z.astype(np.int8), z, z
        out = []
        for parts in (self.u, self.v, self.w, self.t, self.ref, self.ref2):
            out.append(np.concatenate(parts))
            parts.clear()
        return tuple(out)
