"""A what-if's longest path (any weights) by chains (``step._chained``: one-in-edge nodes
take their root's distance by pointer jumping, the merges are relaxed one by one) is the
relaxation of every node in topological order (``step._node_by_node``, the oracle), ties
and all; negative weights go to the oracle itself."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from traceforge.analyzers.critical_path import step as step_mod


def _dag(data: st.DataObject) -> tuple[step_mod._Dag, np.ndarray]:
    """A DAG of up to 40 nodes: edges go forward in a random topological order (several
    between one pair, chains of one-in-edge nodes, isolated nodes), weights 0..6 (ties)."""
    n = data.draw(st.integers(1, 40))
    rank = np.asarray(data.draw(st.permutations(range(n))), dtype=np.int64)
    edges = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                               max_size=3 * n))
    # Chains: many nodes with one in-edge from the node just before them.
    chain = data.draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=n))
    by_rank = np.argsort(rank)
    pairs = [(a, b) for a, b in edges if rank[a] < rank[b]]
    pairs += [(int(by_rank[r - 1]), int(by_rank[r])) for r in chain if r < n]
    u = np.asarray([a for a, _ in pairs], dtype=np.int64)
    v = np.asarray([b for _, b in pairs], dtype=np.int64)
    w = np.asarray(data.draw(st.lists(st.integers(0, 6), min_size=len(pairs),
                                      max_size=len(pairs))), dtype=np.int64)
    dag = step_mod._Dag.of(np.arange(n, dtype=np.int64), u, v, rank)
    return dag, w[dag.into_a]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_chains_give_the_relaxation_of_every_node(data: st.DataObject) -> None:
    dag, w_in = _dag(data)
    t_pos = data.draw(st.integers(0, len(dag.ids) - 1))
    want = step_mod._node_by_node(dag, w_in, t_pos)
    assert step_mod._chained(dag, w_in, t_pos).tolist() == want.tolist()
    assert step_mod._relaxed(dag, w_in, t_pos).tolist() == want.tolist()


def test_negative_weights_are_relaxed_node_by_node() -> None:
    """A negative weight (a node is then left at 0 when its best in-edge is below it):
    the chains' shortcut does not hold, and the oracle answers."""
    dag = step_mod._Dag.of(np.arange(3, dtype=np.int64), np.array([0, 1]), np.array([1, 2]),
                           np.arange(3))
    w_in = np.array([-5, 2])[dag.into_a]
    assert step_mod._relaxed(dag, w_in, 0).tolist() == \
        step_mod._node_by_node(dag, w_in, 0).tolist() != \
        step_mod._chained(dag, w_in, 0).tolist()
