"""Breakdown: a CUDA-graph replay counts as compute end to end, not as idle."""

from __future__ import annotations

import traceforge as tf
from tests.conftest import ev
from tests.unit.analyzers.timing.test_idle import make_trace


def test_graph_replay_holes_are_idle() -> None:
    t = make_trace([
        ev("cudaGraphLaunch", "runtime", 0, 10, corr=5, tid=1),
        ev("A", "kernel", 20, 30, corr=5), ev("B", "kernel", 60, 30, corr=5),
        ev("Memcpy DtoH", "memcpy", 95, 10, corr=8),
    ])
    b = tf.breakdown(t).iloc[0]
    # Window [20, 105): the replay's kernels are compute (60 ns), its 10 ns hole between
    # nodes is idle (a GPU bubble, graph_internal in idle), the copy's [95, 105) is memory
    # and [90, 95) idle.
    assert (b["window_ns"], b["compute_ns"], b["memory_ns"], b["idle_ns"]) == (85, 60, 10, 15)
