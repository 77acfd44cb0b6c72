"""A what-if's longest path (any weights) along the graph's chains (``relaxation.Chains``:
one-in-edge nodes take their root's distance by pointer jumping, the merges are relaxed
one by one) is the relaxation of every node in topological order
(``relaxation.node_by_node``, the oracle), ties and all; the chains are found once per
graph and hold for every set of weights on it; negative weights go to the oracle itself."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from traceforge.analyzers.critical_path import step as step_mod
from traceforge.analyzers.critical_path.relaxation import Chains, node_by_node


def _dag(data: st.DataObject) -> tuple[step_mod._Dag, list[np.ndarray]]:
    """A DAG of up to 40 nodes: edges go forward in a random topological order (several
    between one pair, chains of one-in-edge nodes, isolated nodes), and three sets of
    weights 0..6 (ties) in its in-edge order."""
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
    dag = step_mod._Dag.of(np.arange(n, dtype=np.int64), u, v, rank)
    weights = [np.asarray(data.draw(st.lists(st.integers(0, 6), min_size=len(pairs),
                                             max_size=len(pairs))), dtype=np.int64)
               for _ in range(3)]
    return dag, [w[dag.into_a] for w in weights]


def _oracle(dag: step_mod._Dag, w_in: np.ndarray, t_pos: int) -> list[int]:
    got: list[int] = node_by_node(dag.ui, dag.into_a, dag.indptr, dag.topo, w_in,
                                  t_pos).tolist()
    return got


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_chains_give_the_relaxation_of_every_node(data: st.DataObject) -> None:
    dag, weights = _dag(data)
    t_pos = data.draw(st.integers(0, len(dag.ids) - 1))
    for w_in in weights:  # (the chains found for the first weights serve the others)
        want = _oracle(dag, w_in, t_pos)
        assert dag.chains().path(w_in, dag.topo, t_pos).tolist() == want
        assert step_mod._relaxed(dag, w_in, t_pos).tolist() == want
        fresh = Chains.of(dag.ui, dag.into_a, dag.indptr, dag.topo)
        assert fresh.path(w_in, dag.topo, t_pos).tolist() == want


def test_the_chains_are_found_once_per_graph() -> None:
    dag = step_mod._Dag.of(np.arange(4, dtype=np.int64), np.array([0, 1, 0, 2]),
                           np.array([1, 2, 2, 3]), np.arange(4))
    first = dag.chains()
    for w in ([1, 1, 5, 0], [4, 4, 1, 0]):
        w_in = np.asarray(w)[dag.into_a]
        assert step_mod._relaxed(dag, w_in, 0).tolist() == _oracle(dag, w_in, 0)
    assert dag.chains() is first


def test_negative_weights_are_relaxed_node_by_node() -> None:
    """A negative weight (a node is then left at 0 when its best in-edge is below it):
    the chains' shortcut does not hold, and the oracle answers."""
    dag = step_mod._Dag.of(np.arange(3, dtype=np.int64), np.array([0, 1]), np.array([1, 2]),
                           np.arange(3))
    w_in = np.array([-5, 2])[dag.into_a]
    assert step_mod._relaxed(dag, w_in, 0).tolist() == _oracle(dag, w_in, 0) != \
        dag.chains().path(w_in, dag.topo, 0).tolist()
