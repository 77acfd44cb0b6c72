"""``traceforge annotate``: the analysis drawn on the trace reads back through traceforge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import ev, make_trace, shared
from traceforge.cli import cli
from traceforge.render.annotate import ANALYSIS_PID, annotated_document
from traceforge.render.critical_path import PATH_PID
from traceforge.render.document import document_bytes, dumps_chrome
from traceforge.report.annotations import annotation_data

GEMM = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"




def _small() -> tf.Trace:
    # Step [0, 10 us). GEMM 1 runs [1000, 3000); GEMM 2 is launched at 5000 (after GEMM 1
    # ended; the host was busy in aten::mm from 3500) and runs [6000, 8000). NCCL runs
    # [2000, 4000) on another stream: overlapped [2000, 3000), exposed [3000, 4000).
    return make_trace([
        ev("ProfilerStep#1", "user_annotation", ts=0, dur=10_000, pid=1, tid=1),
        ev("aten::mm", "cpu_op", ts=3_500, dur=1_700, pid=1, tid=1, ext=3),
        ev("cudaLaunchKernel", "runtime", ts=500, dur=100, corr=1, pid=1, tid=1),
        ev("cudaLaunchKernel", "runtime", ts=5_000, dur=100, corr=2, pid=1, tid=1, ext=3),
        ev("ncclLaunch", "runtime", ts=1_500, dur=100, corr=3, pid=1, tid=1),
        ev(GEMM, ts=1_000, dur=2_000, corr=1, pid=0, tid=7),
        ev(GEMM, ts=6_000, dur=2_000, corr=2, ext=3, pid=0, tid=7),
        ev(NCCL, ts=2_000, dur=2_000, corr=3, pid=0, tid=20, stream=20),
    ], path="small.json")


def _write(tmp_path: Path, trace: tf.Trace) -> Path:
    src = tmp_path / "small.json"
    ann = annotation_data(trace, top_n=2, min_gap_ns=0)
    src.write_bytes(dumps_chrome(annotated_document(trace, ann)))
    return src


def test_small_trace_annotations_read_back(tmp_path: Path) -> None:
    back = tf.load(_write(tmp_path, _small()))
    pid = ANALYSIS_PID
    assert back.meta.process_names[pid] == "traceforge analysis (rank 0)"
    assert back.meta.thread_names[(pid, 1)] == "idle: host_bound"
    extra = back.events[back.events["pid"] == pid]
    idle = extra[extra["tid"] == 1]
    # device-level gaps inside the step window [1000, 8000): [4000, 6000) only; the
    # stream-7 hole [3000, 6000) is covered by NCCL until 4000.
    assert idle[["ts", "dur"]].values.tolist() == [[4000, 2000]]
    assert idle["name"].astype(str).tolist() == ["host_bound"]
    steps = extra[extra["tid"] == 10]
    assert steps["name"].astype(str).tolist()[:1] == ["step 1"]
    kernels = back.kernels()
    assert len(kernels) == 3
    args = back.args(kernels.index.to_numpy())
    by_name = {str(n): a for n, a in zip(kernels["name"], args, strict=True)}
    assert by_name[GEMM]["class"] == "gemm" and by_name[GEMM]["family"] == "nvjet_sm90"
    assert by_name[NCCL]["class"] == "communication"
    assert by_name[GEMM]["top_kernel"] == 1  # 4000 ns in total, the heaviest
    assert by_name[NCCL]["top_kernel"] == 2


def test_overlap_counter_by_hand(tmp_path: Path) -> None:
    doc = json.loads(_write(tmp_path, _small()).read_bytes())
    c = [(x["ts"], x["args"]["overlapped"], x["args"]["exposed"])
         for x in doc["traceEvents"] if x.get("ph") == "C"]
    assert c == [(0.0, 0, 0), (2.0, 1, 0), (3.0, 0, 1), (4.0, 0, 0)]


def test_critical_path_track_and_arrow_by_hand(tmp_path: Path) -> None:
    # The step's GPU window is [1000, 8000): GEMM 1 starts it, GEMM 2 ends it. GEMM 2
    # waited for its launch call (5000), made inside aten::mm (from 3500), which the host
    # thread reached after ncclLaunch (1500): the path runs on the host thread until the
    # launch, then hops to stream 7 at 6000, where GEMM 2 starts.
    t = _small()
    ann = annotation_data(t, top_n=2, min_gap_ns=0)
    for out in (tmp_path / "a.json", tmp_path / "a.pftrace"):
        out.write_bytes(document_bytes(annotated_document(t, ann), out))
        back = tf.load(out)
        assert back.meta.process_names[PATH_PID] == "critical path (rank 0)"
        path = back.events[back.events["pid"] == PATH_PID].sort_values("ts")
        assert int(path["dur"].sum()) == 7000
        assert int(path["ts"].min()) == 1000 and int((path["ts"] + path["dur"]).max()) == 8000
        names = path["name"].astype(str).tolist()
        assert names.index("ncclLaunch") < names.index("aten::mm") < names.index(
            "cudaLaunchKernel") < names.index(GEMM) == len(names) - 1
        assert path[["ts", "dur"]].to_numpy()[-1].tolist() == [6000, 2000]
    fl = tf.load(tmp_path / "a.json").flows
    hop = fl[fl["cat"].astype(str) == "critical_path"]
    assert sorted(hop["ph"].astype(str)) == ["f", "s"]
    f = hop[hop["ph"].astype(str) == "f"].iloc[0]
    assert (int(f["pid"]), int(f["tid"]), int(f["ts"])) == (0, 7, 6000)
    # The Perfetto converter binds the arrow to slices: the three launches' arrows and the
    # path's hop, which ends on GEMM 2 (where launch 3's arrow ends too).
    pf = tf.load(tmp_path / "a.pftrace").flows
    assert len(pf) == 2 * 3 + 2
    ends = pf[(pf["ph"].astype(str) == "f") & (pf["ts"] == 6000)]
    assert ends[["pid", "tid"]].to_numpy().tolist() == [[0, 7], [0, 7]]


def test_roofline_rates_on_kernels_by_hand(tmp_path: Path) -> None:
    from tests.unit.analyzers.costs.test_roofline import synthetic

    t = synthetic()
    out = tmp_path / "rates.json"
    out.write_bytes(dumps_chrome(annotated_document(t, annotation_data(t))))
    back = tf.load(out)
    g = back.gpu()
    args = {str(n): a for n, a in zip(g["name"], back.args(g.index.to_numpy()), strict=True)}
    flops = 2.0 * 4096**3  # a 4096^3 bf16 mm in 1 ms, on an H100 (989.5 TFLOP/s bf16)
    mm = args["gemm_kernel"]
    assert mm["achieved_tflops_per_s"] == round(flops / 1e-3 / 1e12, 3)
    assert mm["pct_of_bound"] == round(100 * flops / 989.5e12 / 1e-3, 2)
    assert mm["bound"] == "compute" and mm["roofline_dtype"] == "bf16"
    add = args["add_kernel"]  # 3 x 2^20 bf16 elements read or written in 10 us
    assert add["bound"] == "memory" and add["achieved_tb_per_s"] == round(
        3 * 2**20 * 2 / 10e-6 / 1e12, 4)
    assert add["pct_of_bound"] == round(100 * 3 * 2**20 * 2 / 10e-6 / 3.35e12, 2)
    assert "pct_of_bound" not in args["orphan_kernel"]  # work unknown: nothing claimed


def _raw_steps(path: Path) -> int:
    import gzip

    with gzip.open(path) as f:
        evs = json.load(f)["traceEvents"]
    return sum(1 for x in evs if str(x.get("name", "")).startswith("ProfilerStep#")
               and x.get("cat") == "user_annotation")


@pytest.mark.parametrize("suffix", [".json.gz", ".pftrace"])
def test_fixture_annotated_reads_back(tmp_path: Path, suffix: str) -> None:
    src = shared("h100/compiled.pt.trace.json.gz")
    out = tmp_path / f"annotated{suffix}"
    before = src.stat().st_mtime_ns
    r = CliRunner().invoke(cli, ["annotate", str(src), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert src.stat().st_mtime_ns == before
    orig, back = tf.load(src), tf.load(out)
    assert len(back.kernels()) == len(orig.kernels())
    names = set(back.meta.thread_names.values())
    assert {"idle: host_bound", "GPU step windows", "top 10 kernels by GPU time"} <= names
    extra = back.events[back.events["pid"] == ANALYSIS_PID]
    slices = extra[(extra["tid"] == 10) & (extra["dur"] > 0)]
    assert len(slices) == _raw_steps(src)
    top = extra[extra["tid"] == 11]
    assert len(top) > 0 and top["name"].astype(str).str.startswith("#1 ").any()
    # Each step's critical path: its pieces add up to the step's path length.
    cp = tf.critical_path(orig)
    want = dict(zip(cp.steps["step"], cp.steps["length_ns"], strict=True))
    path = back.events[back.events["pid"] == PATH_PID]
    steps = [a["step"] for a in back.args(path.index.to_numpy())]
    got = path.assign(step=steps).groupby("step")["dur"].sum().to_dict()
    assert got == want and len(want) == _raw_steps(src)
    # Compiled regions record no shapes: only the memsets' work is known, and rated.
    rated = [a for a in back.args(back.gpu().index.to_numpy()) if "pct_of_bound" in a]
    want_rated = tf.roofline(orig).kernels["pct_of_bound"].notna().sum()
    assert len(rated) == want_rated > 0
    assert all(a["bound"] in ("compute", "memory") for a in rated)


def test_annotate_rejects_unknown_suffix(tmp_path: Path) -> None:
    src = shared("h100/compiled.pt.trace.json.gz")
    r = CliRunner().invoke(cli, ["annotate", str(src), "-o", str(tmp_path / "x.txt")])
    assert r.exit_code != 0 and not (tmp_path / "x.txt").exists()


def test_critical_path_worked_out_beside_equals_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """``annotation_data`` works out every step's critical path on another core while the
    other analyses run: the same tracks as on one core, and an error there is the same
    note."""
    import pandas as pd

    from traceforge import forks
    from traceforge.errors import AnalysisError
    from traceforge.report import annotations

    src = shared("h100/compiled.pt.trace.json.gz")
    monkeypatch.setattr(forks, "cores", lambda: 1)
    alone = annotation_data(tf.load(src, cache=False))
    monkeypatch.setattr(forks, "cores", lambda: 2)
    beside = annotation_data(tf.load(src, cache=False))
    assert len(alone.path) == len(beside.path) > 0
    for a, b in zip(alone.path, beside.path, strict=True):
        assert a.rank == b.rank
        assert a.pieces == b.pieces > 0 and a.kinds == b.kinds
        pd.testing.assert_frame_equal(a.drawn, b.drawn)
        pd.testing.assert_frame_equal(a.flows, b.flows)
    assert alone.notes == beside.notes

    def fails(trace: object) -> object:
        raise AnalysisError("no step has GPU work")

    monkeypatch.setattr(annotations, "critical_path", fails)
    got = annotation_data(tf.load(src, cache=False))
    assert got.path == () and "critical path not drawn: no step has GPU work" in got.notes


@pytest.mark.parametrize("src", ["compiled", "counters"])
def test_drawn_while_the_path_is_worked_out_equals_drawn_after(src: str) -> None:
    """``annotate`` builds what it draws but the path (``source_but_path``) while the path
    is worked out (``annotation_data(meanwhile=...)``, called once, before the path is
    asked for, with no path yet) and adds the path after: the same document (dicts, and
    bytes as .pftrace and .json) as drawing it all at the end; with counters too."""
    from dataclasses import replace

    from tests.conftest import FIXTURES
    from traceforge import forks
    from traceforge.analyzers.counters.measured import measured_kernels
    from traceforge.formats.counter_files import read_counters
    from traceforge.render.annotate import annotated_source, source_but_path
    from traceforge.report import annotations

    if src == "compiled":
        t, counters = tf.load(FIXTURES / "compiled.pt.trace.json.gz", cache=False), None
    else:
        t = tf.load(FIXTURES / "counters" / "probe.pt.trace.json.gz", cache=False)
        c = read_counters(FIXTURES / "counters" / "probe.ncu-raw.csv")
        counters = measured_kernels(t, c.launches).per_launch.set_index("row")
    seen: list[str] = []
    real = annotations._path_of
    early = []

    def path_of(trace: tf.Trace) -> object:
        seen.append("path")
        return real(trace)

    def draw(a: annotations.Annotations) -> None:
        assert a.path == () and seen == []
        seen.append("drawn")
        early.append(source_but_path(t, a if counters is None else replace(a, counters=counters)))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(forks, "cores", lambda: 1)  # (the path worked out when asked for)
        mp.setattr(annotations, "_path_of", path_of)
        ann = annotation_data(t, meanwhile=draw)
    assert seen == ["drawn", "path"] and len(ann.path) > 0
    if counters is not None:
        ann = replace(ann, counters=counters)
    for out in ("x.pftrace", "x.json"):
        late = document_bytes(annotated_source(t, ann), out)
        first = source_but_path(t, ann if counters is None else replace(ann, counters=counters))
        assert document_bytes(annotated_source(t, ann, first), out) == late
    got = annotated_source(t, ann, early[0])
    assert got.document() == annotated_source(t, ann).document()
