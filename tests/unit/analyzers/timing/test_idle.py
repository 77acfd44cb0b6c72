"""Idle gaps: one hand-built trace per cause, CUDA-graph replays, attribution, real traces.

In every synthetic trace kernel K1 runs [20, 100) and kernel K2 starts at 310, so the one
gap is [100, 310) = 210 ns and the window (no steps: the activity's extent) is [20, 360).
"""

from __future__ import annotations

from typing import Any

import pytest

import traceforge as tf
from tests.conftest import FIXTURES, ev, shared
from tests.conftest import make_trace as _make_trace
from traceforge.model import EVENT_COLUMNS


def make_trace(rows: list[dict[str, Any]]) -> Any:
    """make_trace with -1 in the int columns a row leaves out (rows here mix host and GPU)."""
    for r in rows:
        for c, t in EVENT_COLUMNS.items():
            if t == "int64":
                r.setdefault(c, -1)
    return _make_trace(rows)


def _trace(l2_ts: int, *, op: bool = True, sync: bool = False) -> Any:
    rows = [
        ev("cudaLaunchKernel", "runtime", 10, 5, corr=1, tid=1, pid=1),
        ev("K1", "kernel", 20, 80, corr=1),
        ev("cudaLaunchKernel", "runtime", l2_ts, 5, corr=2, tid=1, pid=1),
        ev("K2", "kernel", 310, 50, corr=2),
    ]
    if op:
        rows.append(ev("aten::mm", "cpu_op", 0, 400, tid=1, pid=1))
    if sync:
        rows.append(ev("cudaDeviceSynchronize", "runtime", 90, 200, tid=1, pid=1))
    return make_trace(rows)


@pytest.mark.parametrize("l2_ts,op,sync,cause", [
    (300, True, False, "host_bound"),  # the CPU issued K2 200 ns after the GPU went idle
    (50, True, False, "launch_latency"),  # issued before the gap, yet K2 started late
    (300, True, True, "sync"),  # a device sync covers 190 of the 210 ns
    (300, False, False, "other"),  # nothing traced ran on the host meanwhile
])
def test_each_cause(l2_ts: int, op: bool, sync: bool, cause: str) -> None:
    r = tf.idle_gaps(_trace(l2_ts, op=op, sync=sync))
    assert r.gaps[["ts", "dur", "cause"]].values.tolist() == [[100, 210, cause]]
    assert r.span_ns == 340
    s = r.summary.set_index("cause")
    assert s.loc[cause, "idle_ns"] == 210
    assert s.loc[cause, "pct"] == pytest.approx(100 * 210 / 340)
    assert s["pct"].sum() == pytest.approx(100.0)


def test_attribution_and_threshold() -> None:
    r = tf.idle_gaps(_trace(300), min_gap_ns=211)
    assert r.gaps.empty and r.summary.set_index("cause").loc["host_bound", "idle_ns"] == 210
    g = tf.idle_gaps(_trace(300)).gaps.iloc[0]
    assert (g["cpu_op"], g["next_name"], g["launch_name"]) == ("aten::mm", "K2",
                                                              "cudaLaunchKernel")


def test_holes_inside_a_graph_replay_are_graph_internal() -> None:
    # One cudaGraphLaunch replays three kernels with 10 ns holes between them, then an
    # eager kernel follows 40 ns after the replay, launched after the replay ended. The
    # holes are GPU bubbles between graph nodes: idle, with their own cause.
    rows = [
        ev("cudaGraphLaunch", "runtime", 0, 10, corr=5, tid=1),
        ev("A", "kernel", 20, 30, corr=5), ev("B", "kernel", 60, 30, corr=5),
        ev("C", "kernel", 100, 30, corr=5),
        ev("aten::add", "cpu_op", 0, 200, tid=1),
        ev("cudaLaunchKernel", "runtime", 150, 5, corr=6, tid=1),
        ev("D", "kernel", 170, 10, corr=6),
    ]
    t = make_trace(rows)
    r = tf.idle_gaps(t)
    assert r.gaps[["ts", "dur", "cause"]].values.tolist() == [
        [50, 10, "graph_internal"], [90, 10, "graph_internal"], [130, 40, "host_bound"]]
    s = r.summary.set_index("cause")
    assert s.loc["busy", "idle_ns"] == 100 and s.loc["graph_internal", "idle_ns"] == 20
    lo = tf.launch_overhead(t)
    k = lo.kernels.set_index("name")
    assert k.loc["A", "launch_delay_ns"] == 20  # first node: from the graph launch call
    assert (k.loc[["B", "C"], "launch_delay_ns"] == -1).all()  # replayed, not launched
    assert lo.steps.loc[0, "graph_replays"] == 1 and lo.steps.loc[0, "launches"] == 2


def test_steps_split_the_gpu_timeline() -> None:
    rows = [
        ev("ProfilerStep#1", "user_annotation", 0, 100, tid=1),
        ev("ProfilerStep#2", "user_annotation", 100, 100, tid=1),
        ev("cudaLaunchKernel", "runtime", 10, 5, corr=1, tid=1),
        ev("K1", "kernel", 50, 100, corr=1),
        ev("cudaLaunchKernel", "runtime", 110, 5, corr=2, tid=1),
        ev("K2", "kernel", 170, 30, corr=2),
    ]
    r = tf.idle_gaps(make_trace(rows))
    # Step 1's GPU window is [50, 170) (until step 2's first kernel), step 2's [170, 200).
    assert r.span_ns == 150
    assert r.gaps[["step", "ts", "dur"]].values.tolist() == [[1, 150, 20]]


def test_no_gpu_activity_gives_an_empty_report() -> None:
    r = tf.idle_gaps(make_trace([ev("aten::mm", "cpu_op", 0, 10)]))
    assert r.gaps.empty and r.span_ns == 0


def test_real_ddp_trace_adds_up() -> None:
    t = tf.load(shared("h200-ddp/ddp_rank0.pt.trace.json.gz"))
    r = tf.idle_gaps(t, per_stream=True)
    for _, s in r.summary.groupby(["device", "stream"]):
        assert s["pct"].sum() == pytest.approx(100.0)
    dev = r.summary[(r.summary["stream"] == -1) & (r.summary["cause"] != "busy")]
    hist = r.histogram[r.histogram["stream"] == -1]
    assert hist["idle_ns"].sum() == dev["idle_ns"].sum()
    bd = tf.breakdown(t)
    assert dev["idle_ns"].sum() == bd.loc[bd["step"] == -1, "idle_ns"].item()


def test_limit_lists_the_longest_gaps_with_the_same_attribution() -> None:
    """``limit`` lists the longest gaps (the first of equal ones) in time order, each
    attributed as in the full list; summary and histogram stay whole."""
    t = tf.load(FIXTURES / "eager.pt.trace.json.gz")
    full = tf.idle_gaps(t)
    assert len(full.gaps) > 20 and full.gaps["cpu_op"].ne("").any()
    top = tf.idle_gaps(t, limit=20)
    want = full.gaps.sort_values("dur", ascending=False, kind="stable").head(20).sort_index()
    assert top.gaps.to_dict("records") == want.to_dict("records")
    assert top.summary.equals(full.summary) and top.histogram.equals(full.histogram)
