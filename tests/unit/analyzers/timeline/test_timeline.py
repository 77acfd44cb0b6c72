"""The shared timeline against independent computations: raw-file arithmetic and
hand-built traces (issue "One timeline for every analysis").

* busy = the union of recorded GPU activity, to the nanosecond, on a CUDA-graph trace;
* holes between the nodes of a graph replay are ``graph_internal`` idle;
* a replay whose kernels were dropped is neither busy nor idle, with a note;
* every verb shows the same busy % for the same trace;
* steps come from ProfilerStep, traceforge capture's NVTX ``step N``, or --steps-from.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import FIXTURES, cli_main, ev, make_trace, shared
from traceforge.analyzers.timeline import intervals as iv
from traceforge.analyzers.timeline.core import busy_table, timeline
from traceforge.analyzers.timing.idle import idle_gaps
from traceforge.analyzers.timing.summary import summary
from traceforge.cli import cli
from traceforge.report.analysis import analyze

GRAPHS = FIXTURES / "h200-graphs" / "cudagraphs.pt.trace.json.gz"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _raw_gpu(path: Path) -> list[tuple[int, int, int]]:
    """(start ns, end ns, correlation) of every kernel/memcpy/memset, read with exact
    decimals from the JSON (no float rounding, no traceforge code)."""
    doc = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    out = []
    for e in doc["traceEvents"]:
        if e.get("cat") in GPU_CATS and e.get("ph") == "X":
            ts = int(Decimal(e["ts"]) * 1000)
            out.append((ts, ts + int(Decimal(e["dur"]) * 1000),
                        int(e.get("args", {}).get("correlation", -1))))
    return out


def _union_len(iv_list: list[tuple[int, int]]) -> int:
    total, reach_s, reach_e = 0, None, None
    for s, e in sorted(iv_list):
        if reach_e is None or s > reach_e:
            if reach_e is not None and reach_s is not None:
                total += reach_e - reach_s
            reach_s, reach_e = s, e
        else:
            reach_e = max(reach_e, e)
    if reach_e is not None and reach_s is not None:
        total += reach_e - reach_s
    return total


def test_graph_trace_busy_is_the_union_of_recorded_activity() -> None:
    raw = _raw_gpu(GRAPHS)
    busy = _union_len([(s, e) for s, e, _ in raw])
    r = CliRunner().invoke(cli, ["idle", str(GRAPHS), "--steps", "none", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    rows = {x["cause"]: x for x in doc["summary"]}
    assert rows["busy"]["idle_ns"] == busy  # to the nanosecond
    span = max(e for _, e, _ in raw) - min(s for s, _, _ in raw)
    assert doc["span_ns"] == span
    assert rows["busy"]["pct"] == pytest.approx(100.0 * busy / span)
    assert round(rows["busy"]["pct"], 1) == 78.2  # not the 99.8% of counting replays busy
    # Holes inside each replay (activities sharing one graph launch's correlation id),
    # counted from the raw file: the replay's extent minus all GPU activity inside it.
    by_corr: dict[int, list[tuple[int, int]]] = {}
    for s, e, c in raw:
        by_corr.setdefault(c, []).append((s, e))
    inside = 0
    for c, ivs in by_corr.items():
        if c < 0 or len(ivs) < 2:
            continue
        lo, hi = min(s for s, _ in ivs), max(e for _, e in ivs)
        covered = _union_len([(max(s, lo), min(e, hi)) for s, e, _ in raw if s < hi and e > lo])
        inside += (hi - lo) - covered
    assert rows["graph_internal"]["idle_ns"] == inside
    assert rows["graph_internal"]["gaps"] > 2000


def _dropped_replay() -> tf.Trace:
    # Two replays of one graph from the same op; the profiler recorded the kernels of the
    # first only. Then an eager kernel, launched late.
    return make_trace([
        ev("aten::graph_replay", "cpu_op", 0, 2000, tid=1),
        ev("cudaGraphLaunch", "runtime", 10, 5, corr=1, tid=1),
        ev("A", ts=100, dur=50, corr=1), ev("B", ts=160, dur=40, corr=1),
        ev("cudaGraphLaunch", "runtime", 210, 5, corr=2, tid=1),  # kernels dropped
        ev("cudaLaunchKernel", "runtime", 600, 5, corr=3, tid=1),
        ev("C", ts=700, dur=100, corr=3),
    ])


def test_dropped_replay_is_neither_busy_nor_idle() -> None:
    t = _dropped_replay()
    tl = timeline(t)
    r = tl.replays.set_index("replay")
    assert r.loc[2, "status"] == "unrecorded" and r.loc[1, "status"] == "complete"
    # Its window: from the end of the work before it (B ends at 200; launched at 210, so
    # from 210) to the start of the next work (C at 700).
    assert (r.loc[2, "gap_ts"], r.loc[2, "gap_end"]) == (210, 700)
    b = busy_table(tl).iloc[0]
    assert (b["window_ns"], b["unrecorded_ns"], b["busy_ns"], b["idle_ns"]) == (700, 490, 190, 20)
    assert b["busy_pct"] == pytest.approx(100 * 190 / 210)
    assert any("1 of 2 graph replays" in n for n in tl.notes)
    rep = idle_gaps(t)
    s = rep.summary.set_index("cause")
    assert s.loc["unrecorded", "idle_ns"] == 490
    assert s.loc["graph_internal", "idle_ns"] == 10  # between A and B
    assert rep.gaps["dur"].sum() == 20  # [150,160) inside the replay, [200,210) before


def test_partial_replay_window_is_unrecorded() -> None:
    # Three replays of one graph (graph id 5); the middle one recorded one of its two
    # kernels.
    rows: list[dict[str, Any]] = [ev("aten::replay", "cpu_op", 0, 5000, tid=1)]
    for i, (t0, kernels) in enumerate([(100, 2), (1000, 1), (2000, 2)]):
        rows.append(ev("cudaGraphLaunch", "runtime", t0 - 50, 5, corr=10 + i, tid=1))
        rows += [ev(f"K{j}", ts=t0 + 200 * j, dur=100, corr=10 + i, graph=5)
                 for j in range(kernels)]
    tl = timeline(make_trace(rows))
    r = tl.replays.set_index("replay")
    assert list(r["status"]) == ["complete", "partial", "complete"]
    # From the end of the previous replay (400) to the next one's first kernel (2000).
    assert (r.loc[11, "gap_ts"], r.loc[11, "gap_end"]) == (950, 2000)
    # Estimated: the complete replays span 300 ns, this one 100 ns.
    assert r.loc[11, "missing_ns"] == 200
    # Its recorded kernel [1000, 1100) stays busy; the rest of the window is unrecorded.
    b = busy_table(tl).iloc[0]
    assert b["busy_ns"] == 500
    assert b["unrecorded_ns"] == 1050 - 100


def test_every_verb_shows_the_same_busy_pct() -> None:
    path = FIXTURES / "eager.pt.trace.json.gz"
    t = tf.load(path)
    expect = float(busy_table(timeline(t))["busy_pct"].iloc[-1])
    assert summary(t).facts["gpu_busy_pct"] == pytest.approx(expect)
    s = idle_gaps(t).summary
    assert float(s.loc[s["cause"] == "busy", "pct"].iloc[0]) == pytest.approx(expect)
    b = tf.breakdown(t)
    assert 100.0 - float(b.loc[b["step"] == -1, "idle_pct"].iloc[0]) == pytest.approx(expect)
    run = analyze([t])
    assert run.facts["busy_pct"] == pytest.approx(expect)
    assert float(run.overview["gpu_busy_pct"].iloc[0]) == pytest.approx(expect)
    d = tf.diff(t, t)
    assert d.metric("GPU busy %")[0] == pytest.approx(expect)
    # The CLI prints the same number.
    r = CliRunner().invoke(cli, ["info", str(path), "--format", "json"])
    assert json.loads(r.output)["facts"]["gpu_busy_pct"] == pytest.approx(expect)
    from traceforge.render.html import render_html

    html = render_html([run], [])
    assert f"{expect:.1f}%" in html


def test_info_json_is_typed() -> None:
    r = CliRunner().invoke(cli, ["info", str(FIXTURES / "eager.pt.trace.json.gz"),
                                 "--format", "json"])
    facts = json.loads(r.output)["facts"]
    assert facts["steps"] == [2, 3] and facts["step_source"] == "ProfilerStep#N"
    # Durations are exact ns under one name everywhere (span_ns: JSON and tf.info).
    assert isinstance(facts["span_ns"], int) and isinstance(facts["kernels"], int)
    assert isinstance(facts["events"], int) and facts["rank"] is None or True


@pytest.fixture(scope="module")
def fa2_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = shared("h200-nsys/policy_fa2.sqlite.gz")
    out = tmp_path_factory.mktemp("nsys") / "policy_fa2.sqlite"
    with gzip.open(src) as f, out.open("wb") as g:
        shutil.copyfileobj(f, g)
    return out


def _nvtx_ranges(db: Path, name: str) -> list[tuple[int, int]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT start, end FROM NVTX_EVENTS WHERE text = ? ORDER BY start",
                            (name,)).fetchall()
    finally:
        conn.close()


def test_nsys_steps_from_nvtx_ranges(fa2_db: Path) -> None:
    ranges = _nvtx_ranges(fa2_db, "policy_inference")
    assert len(ranges) == 10
    r = CliRunner().invoke(cli, ["info", str(fa2_db), "--steps-from", "policy_inference",
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    facts = json.loads(r.output)["facts"]
    assert facts["steps"] == list(range(10))
    assert facts["step_source"] == "ranges matching 'policy_inference'"
    mean = np.mean([e - s for s, e in ranges]) / 1e6
    assert facts["step_time_ns"] == pytest.approx(mean * 1e6, abs=1)
    r = CliRunner().invoke(cli, ["launch", str(fa2_db), "--steps-from", "policy_inference",
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    assert [s["step"] for s in json.loads(r.output)["steps"]] == list(range(10))
    # Without the option the export has no step markers: the whole trace, said so.
    r = CliRunner().invoke(cli, ["info", str(fa2_db), "--format", "json"])
    assert json.loads(r.output)["facts"]["steps"] == []
    code, _, err = cli_main("info", str(fa2_db), "--steps-from", "no_such_range")
    assert code == 2 and "no range matches" in err and len(err.splitlines()) == 1


def test_nsys_capture_step_ranges_found_without_options(fa2_db: Path, tmp_path: Path) -> None:
    # traceforge capture --backend nsys pushes NVTX ranges named "step N": rename the
    # export's ranges so, as a capture would have written them.
    db = tmp_path / "capture.sqlite"
    shutil.copy(fa2_db, db)
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT rowid FROM NVTX_EVENTS WHERE text = 'policy_inference' "
                        "ORDER BY start").fetchall()
    for i, (rowid,) in enumerate(rows):
        conn.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = ?", (f"step {i + 3}", rowid))
    conn.commit()
    conn.close()
    t = tf.load(db)
    tl = timeline(t)
    assert tl.step_source == "NVTX 'step N' (traceforge capture)"
    assert tl.steps.ranges["step"].tolist() == list(range(3, 13))
    # Every kernel launched inside a step belongs to it; the GPU windows tile.
    w = tl.windows
    assert (w["ts"].to_numpy()[1:] == w["end"].to_numpy()[:-1]).all()
    # capture marks its warm-up steps with an empty range inside; the many-rank verbs
    # load only the timeline's kinds and still leave those steps out.
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, globalTid, text) "
                 "SELECT start + 1, start + 2, eventType, globalTid, "
                 "'traceforge: step 3 warm-up' FROM NVTX_EVENTS WHERE text = 'step 3'")
    conn.commit()
    conn.close()
    from traceforge.analyzers.runs.rank_summaries import TIMELINE_KINDS

    t = tf.load(db, kinds=TIMELINE_KINDS, cache=False)
    assert timeline(t).steps.ranges["step"].tolist() == list(range(4, 13))


def test_steps_none_and_regex_on_kineto() -> None:
    path = str(FIXTURES / "eager.pt.trace.json.gz")
    t = tf.load(path)
    assert timeline(t).step_source == "ProfilerStep#N"
    w = timeline(t.with_steps("policy_inference")).windows
    assert len(w) == 2  # one policy_inference range per profiled step
    whole = timeline(t.with_steps("none"))
    a = whole.activity
    assert whole.windows[["ts", "end"]].values.tolist() == [[int(a["ts"].min()),
                                                             int(a["end"].max())]]
    r = CliRunner().invoke(cli, ["breakdown", path, "--steps", "none", "--format", "json"])
    doc = json.loads(r.output)
    assert doc["steps_from"] == "none (whole trace)" and doc["breakdown"][0]["step"] == -1
    code, _, err = cli_main("idle", path, "--steps-from", "(")
    assert code == 2 and "not a regex" in err and len(err.splitlines()) == 1


def test_op_attribution_agrees_with_kineto_external_ids() -> None:
    # Kineto stamps each kernel with its launching op's External id; the timeline finds
    # the op by nesting instead (a rule that works on every format). They must agree.
    t = tf.load(FIXTURES / "eager.pt.trace.json.gz")
    a = timeline(t).activity
    ev_ = t.events
    ops = ev_[(ev_["kind"] == "cpu_op") & (ev_["ext"] >= 0)]
    inner = ops.assign(d=ops["dur"]).sort_values("d").drop_duplicates("ext")
    by_ext = dict(zip(inner["ext"], inner["name"].astype(str), strict=True))
    k = a[(a["ext"] >= 0) & (a["replay"] < 0)]
    want = [by_ext.get(int(x), "") for x in k["ext"]]
    assert len(k) > 1000
    assert (k["op_name"].to_numpy() == np.array(want, dtype=object)).mean() == 1.0


def test_multirank_report_has_every_rank() -> None:
    r0 = FIXTURES / "capture_h200x2.ddp_train.sdpa.rank0.pt.trace.json.gz"
    r1 = FIXTURES / "capture_h200x2.ddp_train.sdpa.rank1.pt.trace.json.gz"
    from traceforge.formats.multirank import load_run

    run = analyze(load_run([r0, r1]))
    assert run.ranks == 2 and run.label == "sdpa"  # the capture mode names the run
    for name in ("overview", "by_class", "top_kernels", "ops", "idle_summary", "launch"):
        assert sorted(set(getattr(run, name)["rank"])) == [0, 1], name
    busy = run.overview["gpu_busy_pct"].astype(float)
    assert run.facts["busy_pct"] == pytest.approx(busy.mean())


def test_union_helper_matches_interval_module() -> None:
    rng = np.random.default_rng(1)
    s = rng.integers(0, 1000, 200)
    e = s + rng.integers(0, 50, 200)
    assert _union_len(list(zip(s.tolist(), e.tolist(), strict=True))) == iv.total(iv.merge(s, e))


def test_capture_tail_range_marked_unfinished_is_no_step() -> None:
    # capture --backend nsys pushes "step N" at each step() and at the start; the range
    # open at exit is the program's tail, marked inside so the reader leaves it out (the
    # H100 sweep's nsys trace had a 165 ms "step 6" of teardown with 2 us of GPU work).
    rows = []
    for i in range(3):
        rows += [ev(f"step {i}", "user_annotation", ts=i * 1000, dur=1000, pid=1, tid=1),
                 ev("k", ts=i * 1000 + 100, dur=500)]
    rows.append(ev("traceforge: step 2 unfinished", "user_annotation", ts=2500, dur=0,
                   pid=1, tid=1))
    tl = timeline(make_trace(rows))
    assert tl.step_source == "NVTX 'step N' (traceforge capture)"
    assert tl.steps.ranges["step"].tolist() == [0, 1]
    # Without the mark (traces from before it existed) every range is a step.
    assert timeline(make_trace(rows[:-1])).steps.ranges["step"].tolist() == [0, 1, 2]
    # Warm-up steps are marked too and left out, unless nothing would remain.
    warm = ev("traceforge: step 0 warm-up", "user_annotation", ts=900, dur=0, pid=1, tid=1)
    assert timeline(make_trace([*rows, warm])).steps.ranges["step"].tolist() == [1]
    warm1 = ev("traceforge: step 1 warm-up", "user_annotation", ts=1900, dur=0, pid=1, tid=1)
    assert timeline(make_trace([*rows, warm, warm1])).steps.ranges["step"].tolist() == [0, 1]
