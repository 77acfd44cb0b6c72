"""Critical path on HTA's own critical-path traces, against two oracles: the analysed
window computed from the raw JSON, and the kernels on HTA 0.5.0's critical path for the
same annotation instance (HTA runs in the test).

The annotations: HTA's tests analyse ``[param|...|measure|forward]`` (simple_add,
alexnet), ``ProfilerStep`` (cuda_event_sync) and the whole trace (multi-stream). The
measure annotation occurs twice, the second nested in the first; traceforge's steps leave
nested matches out, so both tools analyse instance 0, the outer one.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import hta_module, shared
from traceforge.analyzers.critical_path import critical_path
from traceforge.formats import load

MEASURE = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
#: name -> (HTA annotation, HTA instance, traceforge steps_from, step)
CASES: dict[str, tuple[str, int | None, str | None, int]] = {
    "simple_add": (MEASURE, 0, re.escape(MEASURE), 0),
    "alexnet": (MEASURE, 0, re.escape(MEASURE), 0),
    "cuda_event_sync": ("ProfilerStep", 0, None, 100),
    "cuda_event_sync_multi_stream": ("", None, "none", -1),
}
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _file(name: str) -> Path:
    d = shared(f"external/hta/critical_path/{name}")
    return next(d.glob("*.json.gz"))


def _raw(name: str) -> list[dict[str, Any]]:
    with gzip.open(_file(name)) as f:
        events: list[dict[str, Any]] = json.load(f)["traceEvents"]
    return events


def _raw_window_us(name: str) -> tuple[float, float]:
    """The analysed window from the raw JSON: from the first GPU activity launched inside
    the annotation to the last end of those (the whole GPU span without annotation)."""
    events = _raw(name)
    ann, inst, _, _ = CASES[name]
    gpu = [e for e in events if e.get("cat") in GPU_CATS]
    if ann:
        spans = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                 and ann in e["name"]]
        a = sorted(spans, key=lambda e: e["ts"])[inst or 0]
        lo, hi = a["ts"], a["ts"] + a["dur"]
        calls = {e["args"]["correlation"]: e["ts"] for e in events
                 if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
        gpu = [e for e in gpu if lo <= calls.get(e["args"].get("correlation"), -1) < hi]
    return min(e["ts"] for e in gpu), max(e["ts"] + e["dur"] for e in gpu)


def _ours(name: str) -> tuple[int, set[int]]:
    _, _, rule, step = CASES[name]
    t = load(str(_file(name))).with_steps(rule)
    r = critical_path(t, steps=None if step < 0 else [step])
    seg = r.segments[r.segments["kind"].isin(("kernel", "memcpy", "memset"))]
    corr = t.events["corr"].reindex(seg["row"].to_numpy())
    return int(r.steps["length_ns"].iloc[0]), {int(c) for c in corr}


def _hta(name: str) -> set[int]:
    """Correlation ids of the GPU activities on HTA's critical path."""
    TraceAnalysis = hta_module(pandas3_ok=False).TraceAnalysis  # noqa: N806 - HTA's name

    ann, inst, _, _ = CASES[name]
    ta = TraceAnalysis(trace_dir=str(_file(name).parent))
    g, ok = ta.critical_path_analysis(rank=0, annotation=ann, instance_id=inst)
    assert ok
    df = ta.t.get_trace(0)
    sym = ta.t.symbol_table.get_sym_table()
    on = df.loc[sorted(g.critical_path_events_set)]
    on = on[[sym[int(c)] in GPU_CATS for c in on["cat"]]]
    return {int(c) for c in on["correlation"]}


@pytest.mark.parametrize("name", list(CASES))
def test_path_length_is_the_analysed_window(name: str) -> None:
    lo, hi = _raw_window_us(name)
    length, _ = _ours(name)
    # The raw file has integer microseconds; traceforge's ns come from them through float
    # us relative to the trace's base (sub-microsecond rounding).
    assert abs(length - (hi - lo) * 1000) <= 1000


@pytest.mark.hta
@pytest.mark.parametrize("name", ["simple_add", "alexnet", "cuda_event_sync"])
def test_kernels_on_the_path_agree_with_hta(name: str) -> None:
    _, ours = _ours(name)
    assert ours == _hta(name)
    assert ours  # the comparison is not vacuous


@pytest.mark.hta
def test_multi_stream_differs_from_hta_only_at_a_microsecond_tie() -> None:
    name = "cuda_event_sync_multi_stream"
    _, ours = _ours(name)
    theirs = _hta(name)
    # HTA also puts the memset before the last GEMM (corr 1411) on its path; traceforge
    # has the GEMM's launch call instead. Why: in the raw file the memset ends in the
    # very microsecond the GEMM's cudaLaunchKernel starts, a tie. HTA takes a launch edge
    # only when the stream's last kernel ended strictly before the launch call, so a tie
    # is a kernel-kernel edge; traceforge's clock (float microseconds relative to the
    # trace base) puts the call 24 ns after the memset's end, so the launch bound it.
    assert theirs - ours == {1411} and ours <= theirs
    by_corr = {(e["args"].get("correlation"), e.get("cat")): e for e in _raw(name)
               if "correlation" in e.get("args", {})}
    memset = by_corr[(1411, "gpu_memset")]
    call = by_corr[(1413, "cuda_runtime")]
    assert memset["ts"] + memset["dur"] == call["ts"]
    t = load(str(_file(name)))
    ev = t.events
    m_end = int((ev["ts"] + ev["dur"])[(ev["corr"] == 1411) & (ev["kind"] == "memset")].iloc[0])
    c_ts = int(ev["ts"][(ev["corr"] == 1413) & (ev["kind"] == "runtime")].iloc[0])
    assert c_ts > m_end
