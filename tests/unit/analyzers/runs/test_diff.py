"""traceforge.diff: a hand-checked pair, the H100 eager/compiled fixtures, and the CLI."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import ev, make_trace, shared
from traceforge.cli import cli

GEMM = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNN"
ELT = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >()"




def _pair() -> tuple[tf.Trace, tf.Trace]:
    # A: one 1000 ns step; a GEMM (50 ns) and two add kernels (30 + 20 ns) launched by aten::add.
    a = make_trace([
        ev("ProfilerStep#1", "user_annotation", ts=0, dur=1000),
        ev("aten::add", "cpu_op", ts=5, dur=40, ext=5),
        ev("cudaLaunchKernel", "runtime", ts=10, dur=5, corr=1),
        ev("cudaLaunchKernel", "runtime", ts=20, dur=5, corr=2, ext=5),
        ev("cudaLaunchKernel", "runtime", ts=30, dur=5, corr=3, ext=5),
        ev(GEMM, ts=100, dur=50, corr=1),
        ev(ELT, ts=200, dur=30, corr=2, ext=5),
        ev(ELT, ts=240, dur=20, corr=3, ext=5),
    ])
    # B: one 400 ns step; the same GEMM (40 ns) and one fused add (10 ns). A kernel launched
    # after the step (ts 500) must not count, although it runs inside nothing.
    b = make_trace([
        ev("ProfilerStep#1", "user_annotation", ts=0, dur=400),
        ev("cudaLaunchKernel", "runtime", ts=10, dur=5, corr=1),
        ev("cudaLaunchKernel", "runtime", ts=20, dur=5, corr=2),
        ev("cudaLaunchKernel", "runtime", ts=500, dur=5, corr=3),
        ev(GEMM, ts=100, dur=40, corr=1),
        ev("triton_poi_fused_add_0", ts=150, dur=10, corr=2),
        ev("triton_poi_fused_mul_1", ts=600, dur=1000, corr=3),
    ])
    return a, b


def test_hand_checked_pair() -> None:
    a, b = _pair()
    d = tf.diff(a, b)
    assert d.metric("kernels") == (3.0, 2.0)
    assert d.metric("GPU time") == pytest.approx((100e-6, 50e-6))  # ms per step
    assert d.metric("step time") == pytest.approx((1000e-6, 400e-6))
    assert d.step_time_speedup == pytest.approx(2.5)
    assert d.gpu_time_speedup == pytest.approx(2.0)
    # busy: A = 50 + 30 + 20 (no overlap); idle inside [100, 260) = 160 - 100 = 60 ns
    assert d.metric("GPU idle") == pytest.approx((60e-6, 10e-6))
    by_class = d.by_class.set_index("class")
    assert by_class.loc["gemm", "a_us"] == pytest.approx(0.050)
    assert by_class.loc["gemm", "b_us"] == pytest.approx(0.040)
    assert by_class.loc["gemm", "speedup"] == pytest.approx(1.25)
    assert by_class.loc["elementwise", "b_us"] == 0.0
    assert list(d.only_a["name"]) == ["vectorized_elementwise_kernel"]
    assert d.only_a["calls"].iloc[0] == 2
    assert list(d.only_b["name"]) == ["triton_poi_fused_add_0"]  # the mul kernel is outside
    rep = d.replacements.iloc[0]
    assert rep["fused_kernel"] == "triton_poi_fused_add_0"
    assert rep["replaces"] == "vectorized_elementwise_kernel"
    assert rep["a_us"] == pytest.approx(0.050)
    assert rep["a_calls"] == 2


def test_identical_runs_have_no_change() -> None:
    a, _ = _pair()
    d = tf.diff(a, a)
    assert (d.summary["delta"] == 0).all()
    assert d.only_a.empty and d.only_b.empty and d.replacements.empty
    assert (d.by_class["speedup"] == 1.0).all()


def _raw(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rb") as f:
        evs: list[dict[str, Any]] = json.load(f)["traceEvents"]
    return evs


def _raw_step_kernels(path: Path) -> tuple[int, int, float, int, list[int]]:
    """From the raw JSON: steps, kernels launched inside steps, their summed dur (us), names,
    and the kernels each step launched."""
    evs = _raw(path)
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in evs
             if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"
             and e.get("cat") == "user_annotation"]
    launch = {e["args"]["correlation"]: e["ts"] for e in evs
              if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    n, total, names = 0, 0.0, set()
    per = [0] * len(steps)
    for e in evs:
        if e.get("cat") != "kernel":
            continue
        at = launch.get(e["args"].get("correlation"), e["ts"])
        for i, (s, t) in enumerate(steps):
            if s <= at < t:
                n += 1
                per[i] += 1
                total += e["dur"]
                names.add(e["name"])
                break
    return len(steps), n, total, len(names), per


def test_h100_eager_vs_compiled_against_raw_json() -> None:
    pa, pb = shared("h100/eager.pt.trace.json.gz"), shared("h100/compiled.pt.trace.json.gz")
    d = tf.diff(tf.load(pa), tf.load(pb))
    for path, side in ((pa, 0), (pb, 1)):
        steps, n, dur_us, names, per = _raw_step_kernels(path)
        assert d.metric("steps")[side] == steps
        # Kernels per step: the median of the steps' counts, a whole number (issue 24).
        assert d.metric("kernels")[side] == round(statistics.median(per))
        assert d.metric("kernel time")[side] == pytest.approx(dur_us / 1e3 / steps, rel=1e-6)
        assert d.metric("distinct kernels")[side] == names
    # Compiled replaces eager's thousands of small kernels with fewer fused ones.
    ka, kb = d.metric("kernels")
    assert kb < ka
    assert (d.only_b["family"].str.startswith("triton_")).any()
    assert not d.replacements.empty
    # Class times add up to the GPU time of each side.
    assert d.by_class["a_us"].sum() / 1e3 == pytest.approx(d.metric("GPU time")[0])
    assert d.by_class["b_us"].sum() / 1e3 == pytest.approx(d.metric("GPU time")[1])


def test_cli_diff_formats() -> None:
    a, b = shared("h100/eager.pt.trace.json.gz"), shared("h100/compiled.pt.trace.json.gz")
    r = CliRunner().invoke(cli, ["diff", str(a), str(b), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert {"summary", "by_class", "only_a", "only_b", "replacements", "ops"} <= set(doc)
    r = CliRunner().invoke(cli, ["diff", str(a), str(b), "--format", "md", "-n", "3"])
    assert r.exit_code == 0
    assert "| metric | unit | a | b | delta | ratio |" in r.output


def test_cpu_only_traces_diff() -> None:
    t = make_trace([ev("ProfilerStep#1", "user_annotation", ts=0, dur=1000),
                    ev("aten::add", "cpu_op", ts=10, dur=100)])
    d = tf.diff(t, t)
    assert d.metric("kernels") == (0.0, 0.0)
    assert d.by_class.empty and d.only_a.empty
