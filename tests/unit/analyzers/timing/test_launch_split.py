"""Launch delay is two things (issue 24, item 5): queue time (the kernel waited behind
earlier GPU work on its stream) and launch latency (the GPU sat idle until the launch
arrived). Hand-built traces; only launch latency counts toward launch-bound."""

from __future__ import annotations

from typing import Any

import pytest

import traceforge as tf
from tests.conftest import ev, make_trace


def _launch(name: str, call: int, start: int, dur: int, corr: int, **kw: Any
            ) -> list[dict[str, Any]]:
    return [ev("cudaLaunchKernel", "runtime", call, 5, corr=corr, tid=1),
            ev(name, ts=start, dur=dur, corr=corr, **kw)]


def test_queue_time_and_launch_latency() -> None:
    rows = [ev("ProfilerStep#1", "user_annotation", 0, 4000, tid=1)]
    rows += _launch("K1", 0, 10, 1000, 1)  # stream free: 10 ns latency
    rows += _launch("K2", 20, 1015, 100, 2)  # queued behind K1 until 1010, then 5 ns
    rows += _launch("K3", 3000, 3008, 100, 3)  # stream idle since 1115: 8 ns latency
    rows += _launch("K4", 3001, 3108, 10, 4, stream=9)  # another stream, free: 107 ns
    k = tf.launch(make_trace(rows)).kernels.set_index("name")
    assert k.loc["K1", ["queue_ns", "launch_latency_ns"]].tolist() == [0, 10]
    assert k.loc["K2", ["queue_ns", "launch_latency_ns"]].tolist() == [990, 5]
    assert k.loc["K3", ["queue_ns", "launch_latency_ns"]].tolist() == [0, 8]
    assert k.loc["K4", ["queue_ns", "launch_latency_ns"]].tolist() == [0, 107]
    # The two parts add up to the launch delay.
    assert (k["queue_ns"] + k["launch_latency_ns"] == k["launch_delay_ns"]).all()


def test_a_full_queue_is_not_launch_bound() -> None:
    # The CPU ran far ahead (a compiled run): every kernel queued behind the previous one,
    # launch delays grow to ms, but the GPU never waited for a launch.
    rows = [ev("ProfilerStep#1", "user_annotation", 0, 20_000, tid=1)]
    for i in range(10):
        rows += _launch(f"K{i}", 10 * i, 100 + 1000 * i, 1000, i + 1)
    rep = tf.launch(make_trace(rows))
    s = rep.steps.iloc[0]
    assert s["median_queue_us"] > 4 and s["median_launch_latency_us"] == 0
    assert s["host_wait_ns"] == 0 and s["verdict"] == "gpu-bound"


def test_launch_latency_makes_a_step_launch_bound() -> None:
    # Each launch arrives after the previous kernel finished: the GPU waits on the CPU.
    rows = [ev("ProfilerStep#1", "user_annotation", 0, 20_000, tid=1)]
    for i in range(10):
        rows += _launch(f"K{i}", 2000 * i, 2000 * i + 900, 100, i + 1)
    s = tf.launch(make_trace(rows)).steps.iloc[0]
    assert s["median_queue_us"] == 0 and s["median_launch_latency_us"] == pytest.approx(0.9)
    assert s["verdict"] == "launch-bound"
    assert s["kernels"] == 10
