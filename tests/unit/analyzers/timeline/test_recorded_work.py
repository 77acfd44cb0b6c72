"""A heuristic never removes recorded work (issue 24, item 6).

* graph launches without graph ids whose replays hold 1, 2 and 8 kernels from one launch
  site: every kernel is busy, nothing is excluded, a note says the site is only a hint;
* a replay truly cut by the end of the profiler window: noted, its missing part estimated,
  its recorded kernels still busy;
* on every repo fixture and the shared fixtures (skipped when absent): busy and compute
  time are never below the union of the recorded GPU intervals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import EXTERNAL, FIXTURES, SHARED, ev, make_trace
from traceforge.analyzers.timeline import intervals as iv
from traceforge.analyzers.timeline.core import busy_table, timeline
from traceforge.analyzers.timing.summary import summary
from traceforge.model import GPU_KINDS, Trace


def _replays(counts: list[int], *, graph: int | None = None) -> list[dict[str, Any]]:
    """Graph launches from one op, replay i holding counts[i] kernels of 100 ns, 200 ns
    apart; replays 5 us apart."""
    rows: list[dict[str, Any]] = [ev("CompiledFunction", "cpu_op", 0, 100_000, tid=1)]
    for i, n in enumerate(counts):
        t0 = 1000 + 5000 * i
        rows.append(ev("cudaGraphLaunch", "runtime", t0 - 500, 10, corr=100 + i, tid=1))
        extra = {} if graph is None else {"graph": graph}
        rows += [ev(f"triton_k{i}_{j}", ts=t0 + 200 * j, dur=100, corr=100 + i, **extra)
                 for j in range(n)]
    return rows


def _union(trace: Trace) -> int:
    g = trace.events[trace.events["kind"].isin(GPU_KINDS)]
    ts, end = g["ts"].to_numpy(), (g["ts"] + g["dur"]).to_numpy()
    total = 0
    for d in np.unique(g["device"].to_numpy()):
        sel = g["device"].to_numpy() == d
        total += iv.total(iv.merge(ts[sel], end[sel]))
    return total


def test_graph_launches_without_ids_and_varying_replays_drop_nothing() -> None:
    t = make_trace(_replays([1, 2, 8, 1, 2, 8, 8]))
    tl = timeline(t)
    assert set(tl.replays["status"]) == {"complete", "varies"}
    assert (tl.replays["gap_ts"] == -1).all()
    b = busy_table(tl).iloc[0]
    assert b["busy_ns"] == (1 + 2 + 8 + 1 + 2 + 8 + 8) * 100 == _union(t)
    assert b["unrecorded_ns"] == 0
    assert iv.total(tl.sets().compute) == _union(t)
    assert any("nothing is excluded" in n for n in tl.notes)
    assert not any("not recorded in full" in n for n in tl.notes)
    s = summary(t)
    assert s.facts["gpu_busy_pct"] == pytest.approx(100.0 * b["busy_ns"] / b["window_ns"])


@pytest.mark.parametrize("graph", [None, 7])
def test_replay_cut_by_the_profiler_window_is_noted_and_estimated(graph: int | None) -> None:
    # Four replays of one 8-kernel graph; the profiler stopped after 3 kernels of the last.
    t = make_trace(_replays([8, 8, 8, 3], graph=graph))
    tl = timeline(t)
    r = tl.replays.set_index("replay")
    assert r.loc[103, "status"] == ("partial" if graph is not None else "cut")
    assert (r.loc[[100, 101, 102], "status"] == "complete").all()
    # The complete replays span 7 * 200 + 100 = 1500 ns; the cut one 500 ns.
    assert r.loc[103, "missing_ns"] == 1000
    b = busy_table(tl).iloc[0]
    assert b["busy_ns"] == (8 * 3 + 3) * 100 == _union(t)  # its 3 kernels stay busy
    note = next(n for n in tl.notes if "not recorded in full" in n)
    assert "1 of 4" in note and "0.001 ms of kernels" in note


def _fixture_paths() -> list[Path]:
    paths = sorted(FIXTURES.rglob("*.pt.trace.json.gz"))
    for folder in ("h100", "h200-ddp", "h200-graphs", "h200-nsys"):
        paths += sorted((SHARED / folder).glob("*.json.gz")) if (SHARED / folder).is_dir() else []
    if EXTERNAL.is_dir():
        # Kineto traces of every vendor up to 2 MB (hta/trace_diff/test holds
        # cudaGraphLaunch calls); the larger ones cost minutes on shared cores.
        paths += sorted(p for p in EXTERNAL.rglob("*.json.gz") if p.stat().st_size < 2_000_000)
    return paths


@pytest.mark.parametrize("path", _fixture_paths(), ids=lambda p: p.name)
def test_busy_is_never_below_the_recorded_union(path: Path) -> None:
    from traceforge.errors import TraceforgeError
    from traceforge.formats import load

    try:
        t = load(path)
        tl = timeline(t)
    except TraceforgeError as e:
        pytest.skip(f"not a trace this property applies to: {e}")
    if tl.activity.empty:
        pytest.skip("no GPU activity")
    for d in tl.devices:
        a = tl.activity[tl.activity["device"] == d]
        union = iv.merge(a["ts"].to_numpy(), a["end"].to_numpy())
        assert iv.total(tl.busy(d)) >= iv.total(union)
        assert iv.total(iv.intersect(tl.unrecorded(d), union)) == 0
    s = tl.sets()
    assert iv.total(s.busy) >= iv.total(iv.merge(tl.activity["ts"].to_numpy(),
                                                 tl.activity["end"].to_numpy()))
    b = busy_table(tl)
    win = tl.window_set()
    for row in b[b["device"] >= 0].itertuples():
        a = tl.activity[tl.activity["device"] == row.device]
        inside = iv.total(iv.intersect(iv.merge(a["ts"].to_numpy(), a["end"].to_numpy()), win))
        assert row.busy_ns >= inside
        assert row.idle_ns >= 0
