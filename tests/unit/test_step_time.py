"""The profiled run is not the run (issue 24, items 1, 2 and 7).

A synthetic trace carries a capture summary with a 15.7 s compile step, five profiled
steps (the first inflated to 100.7 ms by profiler start-up) and six unprofiled steps of
~32 ms. Every place that shows the run's step time shows the median of the unprofiled
steps (32.10 ms) with the same label; the launch-bound verdict that only the inflated
first step supports is withheld; the overhead is shown.
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest

import traceforge as tf
from tests.conftest import ev, make_trace
from traceforge.analyzers.runs.inputs import TraceRun
from traceforge.capture.compare import comparison
from traceforge.render.report_file import render_report
from traceforge.run_loader import facts_of
from traceforge.step_time import outliers, run_step_time

UNPROFILED = [0.0321, 0.0320, 0.0322, 0.0319, 0.0321, 0.0323]
PROFILED = [0.1007, 0.0409, 0.0410, 0.0405, 0.0412]
RUN_MS = statistics.median(UNPROFILED) * 1e3  # 32.10
LABEL = "capture, median of 6 unprofiled steps"


def _summary(batch: float | None = None) -> dict[str, Any]:
    return {"version": 1, "mode": {"mode": "compiled"}, "exit_status": 0,
            "batch_per_gpu": batch,
            "steps": {"schedule": {"wait": 3, "warmup": 1, "active": 5},
                      "recorded": [4, 5, 6, 7, 8],
                      "wall_s": [15.7, 0.05, 0.04, 0.035, *PROFILED, *UNPROFILED],
                      "peak_memory_bytes": [2**30] * 15}}


def _trace(batch: float | None = None, name: str = "compiled") -> tf.Trace:
    """Steps 4..8 (ns): step 4 lasts 100 us, the GPU idles waiting for each of ten short
    launches (launch-bound); steps 5..8 last 40 us, one long kernel keeps the GPU busy."""
    rows: list[dict[str, Any]] = []
    t, corr = 0, 1
    for step in range(4, 9):
        dur = 100_000 if step == 4 else 40_000
        rows.append(ev(f"ProfilerStep#{step}", "user_annotation", t, dur, tid=1))
        if step == 4:
            for i in range(10):
                lt = t + 500 + 9_000 * i
                rows.append(ev("cudaLaunchKernel", "runtime", lt, 300, corr=corr, tid=1))
                rows.append(ev("small_kernel", ts=lt + 2_000, dur=1_000, corr=corr))
                corr += 1
        else:
            rows.append(ev("cudaLaunchKernel", "runtime", t + 200, 300, corr=corr, tid=1))
            rows.append(ev("big_kernel", ts=t + 1_000, dur=38_500, corr=corr))
            corr += 1
        t += dur
    return make_trace(rows, path=f"{name}.pt.trace.json.gz",
                      extra={"traceforge": _summary(batch)})


def test_the_one_definition() -> None:
    st = run_step_time(_summary())
    assert st is not None and st.source == "unprofiled"
    assert st.ms == pytest.approx(RUN_MS) and st.label == LABEL
    # The profiled steps' median, the inflated first step left out as an outlier.
    assert st.outlier_steps == (4,)
    assert st.profiled_s == pytest.approx(statistics.median(PROFILED[1:]))
    assert st.overhead_pct == pytest.approx(100 * (st.profiled_s / st.seconds - 1))
    assert st.overhead_large
    # Not the median of every step (compile step and profiled steps included).
    assert st.ms != pytest.approx(statistics.median(_summary()["steps"]["wall_s"]) * 1e3)
    # No step after the window: the profiled steps stand in, labelled so.
    s = _summary()
    s["steps"]["wall_s"] = s["steps"]["wall_s"][:9]
    fb = run_step_time(s)
    assert fb is not None and fb.source == "profiled" and "profiled" in fb.label


def test_outlier_rule() -> None:
    assert outliers([40.0, 40.0, 41.0, 100.0]) == [False, False, False, True]
    assert outliers([40.0, 41.0]) == [False, False]  # fewer than three: no test
    assert not any(outliers([40.0, 40.1, 39.9, 40.2]))  # within 10% of the median


def test_every_place_shows_the_same_step_time() -> None:
    a, b = _trace(batch=64), _trace(batch=64, name="other")
    # capture's comparison table and the facts capture folders give compare/scaling
    row = comparison([_summary(64)])[0]
    assert row["latency_ms"] == pytest.approx(RUN_MS) and row["timed_steps"] == LABEL
    assert row["samples_per_s"] == pytest.approx(64 / (RUN_MS / 1e3))
    assert row["overhead_pct"] > 25
    assert facts_of([_summary()])["latency_ms"] == pytest.approx(RUN_MS)
    # tf.*
    assert tf.run_step_time(a).ms == pytest.approx(RUN_MS)
    info = tf.info(a).facts
    assert info["run_step_time_ns"] == round(RUN_MS * 1e6)
    assert info["run_step_time_from"] == LABEL
    assert info["outlier_steps"] == [4]
    # diff
    d = tf.diff(a, b)
    assert d.metric("run step time") == pytest.approx((RUN_MS, RUN_MS))
    assert d.metric("samples/s")[0] == pytest.approx(64 / (RUN_MS / 1e3))
    # compare
    c = tf.compare([a, b])
    assert c.runs["latency_ms"].tolist() == pytest.approx([RUN_MS, RUN_MS])
    assert set(c.runs["latency_from"]) == {LABEL}
    # scaling: the capture's step time beside the profiled one
    sc = tf.scaling([TraceRun("one", (a,), {"gpus": 1}), TraceRun("two", (b,), {"gpus": 2})])
    assert sc.runs["wall_step_ms"].tolist() == pytest.approx([RUN_MS, RUN_MS])
    # report, HTML and Markdown
    rep = tf.report(a)
    assert rep.runs[0].run_info["latency_ms"] == pytest.approx(RUN_MS)
    for fmt in ("md", "html"):
        text = render_report(rep, fmt)
        assert f"{RUN_MS:,.2f} ms" in text and LABEL in text
        assert "profiler overhead" in text


def test_launch_bound_only_in_the_inflated_first_step_is_withheld() -> None:
    t = _trace()
    lo = tf.launch(t).steps.set_index("step")
    assert lo.loc[4, "verdict"] == "launch-bound"
    assert (lo.loc[[5, 6, 7, 8], "verdict"] == "gpu-bound").all()
    found = {f.rule: f for f in tf.report(t).findings}
    f = found["launch_bound"]
    assert f.title.startswith("Withheld") and f.severity == "low"
    assert "outlier step(s) 4" in f.evidence
    assert "first_step_outlier" in found
    # Without the outlier (steps 5..8 only), there is no launch-bound finding at all;
    # the step time leaves the outlier out unless asked.
    assert tf.info(t).facts["step_time_ns"] == 40_000
    assert tf.info(t, include_outliers=True).facts["step_time_ns"] == 52_000


def test_capture_says_which_steps_were_recorded_and_which_ran_unprofiled() -> None:
    from traceforge.capture.session import step_lines

    lines = step_lines(_summary(batch=64))
    assert lines[0] == "steps 4-8 recorded (profiled), 9-14 ran unprofiled (6 step(s))"
    assert f"step time {RUN_MS:,.2f} ms ({LABEL})" in lines[1]
    assert "samples/s" in lines[1] and "profiler overhead +" in lines[1]
    assert lines[2].startswith("outlier step(s) 4")


def test_batch_and_tokens_go_with_any_capture() -> None:
    from traceforge.capture.options import CaptureOptions, Steps, to_args

    args = to_args(CaptureOptions(batch=32.0, tokens=4096.0, steps=Steps(2, 2, 5)))
    assert args[args.index("--batch") + 1] == "32.0"
    assert args[args.index("--tokens-per-step") + 1] == "4096.0"


def test_nsys_captures_are_profiled_throughout() -> None:
    s = _summary()
    s["backend"] = "nsys"
    st = run_step_time(s)
    assert st is not None and st.source == "profiled" and st.overhead_pct is None
    assert st.label.endswith("steps, all under nsys")
    # Steps from the end of the warm-up (wait 3 + warmup 1) on, outliers left out.
    walls = s["steps"]["wall_s"][4:]
    flags = outliers(walls)
    assert st.ms == pytest.approx(1e3 * statistics.median(
        [w for w, bad in zip(walls, flags, strict=True) if not bad]))
    assert 4 in st.outlier_steps
