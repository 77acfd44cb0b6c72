"""Overlap and breakdown on hand-built traces, and cross-rank skew."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import traceforge as tf
from tests.conftest import ev, shared
from tests.unit.analyzers.timing.test_idle import make_trace
from traceforge.model import TraceMeta

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def test_overlap_by_hand() -> None:
    # comm [0,100) on stream 9, compute [50,150) on stream 7, memcpy [140,170): overlap 50,
    # exposed comm 50, window [0,170).
    t = make_trace([ev(NCCL, "kernel", 0, 100, stream=9), ev("gemm", "kernel", 50, 100),
                    ev("Memcpy HtoD", "memcpy", 140, 30)])
    r = tf.overlap(t).ranks.iloc[0]
    assert (r["comm_ns"], r["overlap_ns"], r["exposed_comm_ns"], r["window_ns"]) == (
        100, 50, 50, 170)
    assert r["overlap_pct"] == pytest.approx(50.0)
    assert r["exposed_comm_pct"] == pytest.approx(100 * 50 / 170)
    b = tf.breakdown(t).iloc[0]
    # compute 100, exposed comm 50, memory outside both [150,170) = 20, idle 0.
    assert (b["compute_ns"], b["exposed_comm_ns"], b["memory_ns"], b["idle_ns"]) == (
        100, 50, 20, 0)


def test_skew_names_the_straggler() -> None:
    def rank(r: int, base: int, starts: list[int]) -> tf.Trace:
        t = make_trace([ev(NCCL, "kernel", s, 10) for s in starts])
        return tf.Trace(t.events, TraceMeta(rank=r, base_ns=base))

    # Absolute starts: rank 0 at 1000/2000, rank 1 at 1005/2030: rank 1 is last twice.
    s = tf.overlap([rank(0, 1000, [0, 1000]), rank(1, 995, [10, 1035])]).skew.set_index("rank")
    assert s.loc[1, "last_count"] == 2 and s.loc[0, "last_count"] == 0
    assert s.loc[1, "mean_lag_us"] == pytest.approx((5 + 30) / 2 / 1e3)


def test_ddp_parts_partition_each_step() -> None:
    traces = tf.load_run(shared("h200-ddp"))
    bd = tf.breakdown(traces)
    parts = bd[["compute_ns", "exposed_comm_ns", "memory_ns", "idle_ns"]].sum(axis=1)
    assert (parts == bd["window_ns"]).all()
    ov = tf.overlap(traces).ranks
    assert ((ov["overlap_ns"] + ov["exposed_comm_ns"]) == ov["comm_ns"]).all()
    # Oracle: every NCCL kernel in each raw file was launched inside one of the two steps.
    raw = [gzip.decompress(Path(t.meta.path).read_bytes()).count(b'"name": "ncclDevKernel')
           for t in traces]
    assert ov["comm_kernels"].tolist() == raw and raw[0] > 0
