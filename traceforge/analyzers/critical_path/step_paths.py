"""The paths of every step, on the available cores: each step's graph, each rank's path
and its what-ifs (:func:`step_paths`), and the step graphs as tables built when asked for
(:class:`StepTables`).

Steps are independent once the run's graph is built, so a trace of many steps is split
into one run of steps per core (:func:`traceforge.forks.forked_map`: children forked from
this process read the run's graph it built, and hand back only the paths' pieces as
integer arrays). The result does not depend on where a step ran: a child that cannot
start, fails or dies has its steps worked out here. A what-if only changes the weights of
the step graph's work edges: its path is taken again on the same graph (same topological
order and in-edge lists), with each activity's speedup looked up once per run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.labels import Labels
from traceforge.analyzers.critical_path.run_graph import RunGraph
from traceforge.analyzers.critical_path.segments import Pieces, edge_pieces, path_edges
from traceforge.analyzers.critical_path.step import StepGraph, longest_into, step_graph
from traceforge.analyzers.critical_path.what_if import edge_factors, what_if_length
from traceforge.forks import ForkError, can_fork, cores, forked_map

#: Below this many edges in the run's graph the steps run here (a fork costs more).
PARALLEL_EDGES = 200_000

T = TypeVar("T")


@dataclass(eq=False)
class StepOut:
    """One step's rows of the steps and what-if tables, its paths' pieces, its notes."""

    rows: list[dict[str, Any]]
    what_if: list[dict[str, Any]]
    pieces: list[Pieces]
    notes: list[str]


#: A what-if scenario: its label and, per rank, each activity's speedup.
Scenario = tuple[str, list[np.ndarray]]


def one_step(run: RunGraph, lab: Labels, n: int, wins: list[pd.DataFrame],
             scenarios: Sequence[Scenario]) -> StepOut:
    sp = step_graph(run, n, wins)
    out = StepOut([], [], [], list(sp.notes))
    last = int(np.argmax(sp.w1))
    nodes, edges = len(sp.node_ids), len(sp.u)
    # Every rank's path and what-ifs first: the step's order and edge lookup (at 10M
    # events ~1 GB) are then let go before the paths are labelled into pieces.
    found = []
    for ri, r in enumerate(run.ranks):
        if not r.acts.empty:
            found.append((ri, path_edges(sp, longest_into(sp, ri)),
                          [what_if_length(sp, ri, edge_factors(sp, fac))
                           for _, fac in scenarios]))
    sp.dag = sp.keys = sp.ids = None
    for ri, e, news in found:
        r = run.ranks[ri]
        p = edge_pieces(run, lab, sp, e, ri)
        length = int(p.dur.sum())
        window = int(sp.w1[ri] - sp.w0[ri])
        if length != window:
            out.notes.append(f"step {n}, rank {r.rank}: path {length} ns != window {window} "
                             "ns (timestamps that contradict the dependencies)")
        out.pieces.append(p)
        out.rows.append({"step": n, "rank": r.rank, "critical": ri == last,
                         "length_ns": length, "ts": int(sp.w0[ri] - run.offset[ri]),
                         "end": int(sp.w1[ri] - run.offset[ri]),
                         "ranks_crossed": len(pd.unique(p.rank)),  # not a sort of every piece
                         "nodes": nodes, "edges": edges})
        for (label, _), new in zip(scenarios, news, strict=True):
            out.what_if.append({"step": n, "rank": r.rank, "critical": ri == last,
                                "scenario": label, "length_ns": length,
                                "new_length_ns": new, "saved_ns": length - new,
                                "saved_pct": 100.0 * (length - new) / length if length
                                else 0.0})
    return out


def step_paths(run: RunGraph, lab: Labels, numbers: Sequence[int],
               wins: Sequence[list[pd.DataFrame]], factors: Sequence[tuple[str, dict[str,
                                                                                  float]]]
               ) -> list[StepOut]:
    """:func:`one_step` of every step, in step order, on up to one process per core."""
    scenarios = [(label, [lab.factors(f, ri) for ri in range(len(run.ranks))])
                 for label, f in factors]

    def steps(idx: Sequence[int]) -> list[StepOut]:
        return [one_step(run, lab, numbers[i], wins[i], scenarios) for i in idx]

    run.by_time()  # (built once, before children fork)
    k = min(cores(), len(numbers))
    if k > 1 and len(run.u) >= PARALLEL_EDGES and can_fork():
        parts = [c.tolist() for c in np.array_split(np.arange(len(numbers)), k)]
        try:
            done = forked_map(lambda i: steps(parts[i]), k)
            return [s for d in done for s in d]
        except (ForkError, OSError):
            pass  # worked out here instead
    return steps(range(len(numbers)))


class StepTables(Mapping[int, T]):
    """Step -> a table of its graph (``make(step graph)``), built when asked for: the
    graphs of all steps of a large trace are ~10 bytes an edge each as arrays, ~1 KB an
    edge as a networkx graph, and most callers read none of them."""

    def __init__(self, graphs: LazyGraphs, make: Any) -> None:
        self._graphs = graphs
        self._make = make

    def __getitem__(self, step: int) -> T:
        out: T = self._make(self._graphs.get(step))
        return out

    def __iter__(self) -> Iterator[int]:
        return iter(self._graphs.numbers)

    def __len__(self) -> int:
        return len(self._graphs.numbers)


class LazyGraphs:
    """The step graphs, each built once, when first asked for."""

    def __init__(self, run: RunGraph, numbers: Sequence[int],
                 wins: Sequence[list[pd.DataFrame]]) -> None:
        self.run = run
        self.numbers = list(numbers)
        self._wins = dict(zip(numbers, wins, strict=True))
        self._done: dict[int, StepGraph] = {}

    def get(self, step: int) -> StepGraph:
        if step not in self._wins:
            raise KeyError(step)
        if step not in self._done:
            self._done[step] = step_graph(self.run, step, self._wins[step])
        return self._done[step]
