"""Cross-checks of overlap and temporal breakdown against HTA 0.5.0 (skipped without hta).

HTA analyses only the GPU activity launched before the last ProfilerStep starts (when a
trace has two or more steps) and measures over first-kernel-start..last-kernel-end. To
compare the arithmetic rather than the windowing, :func:`_hta_selection` applies HTA's
selection to our trace, and the trace's step markers are dropped so that our window is the
activity's extent, like HTA's. HTA quirk found doing this: it takes the *latest* event
named ProfilerStep*, which in torch >= 2.x traces is the GPU-side projection
(``gpu_user_annotation`` ProfilerStep#3 at 69.0 ms in ddp_rank0, while the host step
starts at 48.0 ms), so HTA's "all but the last step" reaches into the last step.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import replace

import pytest

import traceforge as tf
from tests.conftest import hta_module, shared
from traceforge.model import GPU_KINDS, Trace

pytestmark = pytest.mark.hta
hta_ta = hta_module()


def _hta(dirpath: str) -> tuple[dict[int, float], dict[int, dict[str, float]]]:
    """HTA's overlap % and temporal breakdown per rank."""
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ta = hta_ta.TraceAnalysis(trace_dir=dirpath)
            o = ta.get_comm_comp_overlap(visualize=False)
            b = ta.get_temporal_breakdown(visualize=False)
    finally:
        logging.disable(logging.NOTSET)
    ov = dict(zip(o["rank"], o["comp_comm_overlap_pctg"], strict=True))
    bd = {int(r["rank"]): dict(r) for _, r in b.iterrows()}
    return ov, bd


def _hta_selection(t: Trace) -> Trace:
    ev = t.events
    names = ev["name"].astype(str)
    is_step = names.str.startswith("ProfilerStep")
    if is_step.sum() >= 2:
        last = int(ev.loc[is_step, "ts"].max())
        host = ev[ev["kind"].isin(("runtime", "driver")) & (ev["ts"] < last)]
        gpu = ev["kind"].isin(GPU_KINDS)
        ev = ev[(~gpu) | ev["corr"].isin(host["corr"])]
    return replace(t, events=ev[~ev["name"].astype(str).str.startswith("ProfilerStep")])


@pytest.mark.parametrize("rel,tol", [
    # V100 traces with whole-us timestamps: HTA's rounding changes nothing.
    ("external/param/dlrm_kineto", 0.05),
    # H200 ns-resolution timestamps: HTA rounds every start up and end down to whole us
    # (anchors.md §9). With its rounding on, rank 0's overlap is 21.87 % against our
    # 22.96 %; with HTA_DISABLE_NS_ROUNDING=1 HTA says 22.96 % too, so the 1.1 pp are
    # HTA's rounding (test_hta_rounding_explains_ddp_difference), and we compare unrounded.
    ("h200-ddp", 0.05),
])
def test_overlap_and_breakdown_match_hta(
    rel: str, tol: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = shared(rel)
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    hov, hbd = _hta(str(d))
    traces = [_hta_selection(t) for t in tf.load_run(d)]
    ours = tf.overlap(traces).ranks.set_index("rank")
    bd = tf.breakdown(traces).set_index("rank")
    assert sorted(hov) == sorted(ours.index)
    for r, pct in hov.items():
        assert ours.loc[r, "overlap_pct"] == pytest.approx(pct, abs=tol), r
        h = hbd[r]
        row = bd.loc[r]
        assert row["idle_pct"] == pytest.approx(h["idle_time_pctg"], abs=tol), r
        assert row["compute_pct"] == pytest.approx(h["compute_time_pctg"], abs=tol), r
        # HTA's non_compute = everything busy that is not compute: our exposed comm + memory.
        nc = row["exposed_comm_pct"] + row["memory_pct"]
        assert nc == pytest.approx(h["non_compute_time_pctg"], abs=tol), r


def test_hta_rounding_explains_ddp_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    d = shared("h200-ddp")
    monkeypatch.delenv("HTA_DISABLE_NS_ROUNDING", raising=False)
    rounded, _ = _hta(str(d))
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    exact, _ = _hta(str(d))
    ours = tf.overlap([_hta_selection(t) for t in tf.load_run(d)]).ranks.set_index("rank")
    assert ours.loc[0, "overlap_pct"] == pytest.approx(exact[0], abs=0.05)
    # Rounding to whole us moves HTA's own answer by more than our tolerance.
    assert abs(rounded[0] - exact[0]) > 0.5


def test_hta_oracle_parses_ranks_without_forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle loads a multi-rank folder with no multiprocessing Pool (conftest's
    _hta_in_process): HTA's default fork pool, started from an xdist worker, hung CI."""
    import multiprocessing.pool

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("HTA started a multiprocessing Pool in the test process")

    monkeypatch.setattr(multiprocessing.pool.Pool, "__init__", no_pool)
    ov, _ = _hta(str(shared("h200-ddp")))
    assert sorted(ov) == [0, 1]
