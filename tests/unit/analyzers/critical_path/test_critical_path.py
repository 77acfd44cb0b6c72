"""Critical path: synthetic traces with hand-computed paths, the CLI, the Perfetto track,
and the 2-rank DDP fixtures (path covers the step, all-reduce on it, what-if bounded by the
exposed communication that ``overlap`` measures)."""

from __future__ import annotations

import json
from typing import Any

import networkx as nx
import pandas as pd
import pytest
from click.testing import CliRunner

from tests.conftest import FIXTURES, ev, make_trace, shared
from traceforge.analyzers.critical_path import (
    critical_only,
    critical_path,
    parse_what_if,
    path_tracks,
    report_data,
)
from traceforge.cli import cli
from traceforge.errors import AnalysisError, UsageError
from traceforge.model import Trace, TraceMeta
from traceforge.render.critical_path import PATH_PID, chrome_events

GEMM = "ampere_sgemm_128x64_nn"  # class gemm
ELT = "void at::native::vectorized_elementwise_kernel<4>"  # class elementwise
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def host(name: str, ts: int, dur: int, kind: str = "cpu_op", **kw: Any) -> dict[str, Any]:
    return ev(name, kind, ts, dur, pid=1, tid=1, **kw)


def launch(ts: int, dur: int, corr: int, name: str = "cudaLaunchKernel") -> dict[str, Any]:
    return host(name, ts, dur, "runtime", corr=corr)


def kern(name: str, ts: int, dur: int, corr: int, stream: int = 7, **kw: Any
         ) -> dict[str, Any]:
    return ev(name, "kernel", ts, dur, corr=corr, stream=stream, pid=0, tid=stream, **kw)


def path_of(r: Any, step: int = -1) -> list[tuple[str, str, int, int]]:
    """(kind, name, ts, dur) of each segment of the step's critical path."""
    s = critical_only(r, r.segments)
    s = s[s["step"] == step]
    return [(str(k), str(n), int(t), int(d)) for k, n, t, d in
            zip(s["kind"], s["name"], s["ts"], s["dur"], strict=True)]


def cats(r: Any) -> dict[str, int]:
    c = critical_only(r, r.by_category)
    return {str(k): int(v) for k, v in zip(c["category"], c["ns"], strict=True)}


# -- one rank --------------------------------------------------------------------------
def test_cpu_bound_path_runs_through_ops_and_the_launch_delay() -> None:
    t = make_trace([
        host("A", 0, 100), launch(10, 20, 1),
        host("B", 150, 150), launch(200, 20, 2),
        kern(ELT, 40, 20, 1), kern(GEMM, 230, 20, 2),
    ])
    r = critical_path(t)
    # Window: first kernel start (40) to last end (250). K2 waited for its launch (200,
    # the stream was idle since 60); before it the host: A to 100, idle, B to 200.
    assert path_of(r) == [("cpu_op", "A", 40, 60), ("idle", "host idle", 100, 50),
                          ("cpu_op", "B", 150, 50),
                          ("runtime", "cudaLaunchKernel", 200, 30),
                          ("kernel", GEMM, 230, 20)]
    assert int(r.steps["length_ns"].iloc[0]) == 250 - 40
    assert cats(r) == {"cpu op": 110, "idle": 50, "launch overhead": 30, "gemm": 20}


def test_gpu_bound_path_is_the_kernels_back_to_back_and_a_what_if() -> None:
    t = make_trace([
        host("A", 0, 40), launch(0, 10, 1), launch(10, 10, 2), launch(20, 10, 3),
        kern(GEMM, 50, 100, 1), kern(GEMM, 152, 100, 2), kern(GEMM, 255, 100, 3),
    ])
    r = critical_path(t, what_if=["gemm=2", "elementwise=3"])
    assert path_of(r) == [("kernel", GEMM, 50, 100), ("idle", "gpu idle", 150, 2),
                          ("kernel", GEMM, 152, 100), ("idle", "gpu idle", 252, 3),
                          ("kernel", GEMM, 255, 100)]
    assert cats(r) == {"gemm": 300, "idle": 5}
    wi = r.what_if.set_index("scenario")
    # GEMMs at half time keep their gaps: 50 + 2 + 50 + 3 + 50.
    assert int(wi.loc["gemm=2", "new_length_ns"]) == 155
    assert int(wi.loc["elementwise=3", "saved_ns"]) == 0
    assert int(wi.loc["gemm=2 elementwise=3", "new_length_ns"]) == 155


def test_sync_wait_goes_through_the_kernel_it_waited_for() -> None:
    t = make_trace([
        host("A", 0, 20), launch(5, 10, 1),
        host("cudaDeviceSynchronize", 30, 495, "runtime"),
        host("B", 530, 30), launch(535, 10, 2),
        kern(GEMM, 20, 500, 1), kern(ELT, 550, 10, 2),
    ])
    r = critical_path(t, what_if={"gemm": 2})
    assert path_of(r) == [("kernel", GEMM, 20, 500),
                          ("sync", "cudaDeviceSynchronize", 520, 5),
                          ("idle", "host idle", 525, 5), ("cpu_op", "B", 530, 5),
                          ("runtime", "cudaLaunchKernel", 535, 15),
                          ("kernel", ELT, 550, 10)]
    # The sync returns 5 ns after the (now 250 ns) GEMM: everything after moves up 250.
    assert int(r.what_if["new_length_ns"].iloc[0]) == 540 - 250


def _two_streams(with_sync_events: bool) -> Trace:
    rows = [
        launch(0, 5, 10), launch(5, 5, 1), host("cudaEventRecord", 10, 2, "runtime", corr=2),
        host("cudaStreamWaitEvent", 12, 2, "runtime", corr=3), launch(14, 10, 4),
        kern(ELT, 100, 121, 10, stream=9),  # a decoy on a third stream, ends at 221
        kern(GEMM, 20, 200, 1, stream=7),  # the recorded work, ends at 220
        kern(ELT, 222, 100, 4, stream=8),  # waits for the event
    ]
    args: list[dict[str, Any]] = [{} for _ in rows]
    if with_sync_events:
        rows.append(ev("Stream Wait Event", "sync", 222, 1, stream=8, corr=3, device=0))
        args.append({"wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": 2})
    return Trace.from_events(rows, TraceMeta(format="synthetic"), args=args)


def test_two_stream_event_dependency_from_cuda_sync_events() -> None:
    r = critical_path(_two_streams(True))
    # Kineto says the wait was on the event recorded on stream 7 after the GEMM.
    assert path_of(r) == [("kernel", GEMM, 20, 200), ("sync", "stream wait", 220, 2),
                          ("kernel", ELT, 222, 100)]
    assert not r.notes


def test_two_stream_event_dependency_inferred_without_sync_events() -> None:
    r = critical_path(_two_streams(False))
    # Without the record's stream the latest other work launched before the wait is
    # taken (the decoy, ending at 221), and a note says the edge was inferred.
    assert path_of(r)[-2:] == [("sync", "stream wait", 221, 1), ("kernel", ELT, 222, 100)]
    assert any("without CUDA sync events" in n for n in r.notes)


def test_graph_replay_nodes_follow_the_launch_and_each_other() -> None:
    rows = [launch(0, 20, 5, "cudaGraphLaunch")]
    rows += [kern(GEMM, 30, 50, 5, graph=1), kern(ELT, 81, 51, 5, stream=8, graph=1),
             kern(GEMM, 82, 49, 5, graph=1), kern(GEMM, 133, 50, 5, graph=1)]
    r = critical_path(make_trace(rows))
    # The branch on stream 8 starts after the first node (graph dependency), and the last
    # node waits for it (ends at 132) rather than for its stream predecessor (131).
    assert path_of(r) == [("kernel", GEMM, 30, 50), ("idle", "graph dependency", 80, 1),
                          ("kernel", ELT, 81, 51), ("idle", "graph dependency", 132, 1),
                          ("kernel", GEMM, 133, 50)]
    assert int(r.steps["length_ns"].iloc[0]) == 183 - 30


def test_steps_window_and_path_length_per_step() -> None:
    rows = []
    for s, base in ((1, 0), (2, 1000)):
        rows += [host(f"ProfilerStep#{s}", base, 900, "user_annotation"),
                 host("fwd", base + 10, 100), launch(base + 20, 10, s),
                 kern(GEMM, base + 50, 300, s)]
    r = critical_path(make_trace(rows))
    st = r.steps.set_index("step")
    # Step 1's window ends where step 2's GPU work starts (1050), step 2's at its end.
    assert st.loc[1, "length_ns"] == 1050 - 50 and st.loc[2, "length_ns"] == 300
    # Step 1 ends in step 2's launch: after its GEMM the host ran step 2's "fwd".
    assert path_of(r, 1)[-1] == ("runtime", "cudaLaunchKernel", 1020, 30)
    assert critical_path(make_trace(rows), steps=[2]).steps["step"].tolist() == [2]


def test_a_step_without_gpu_work_at_its_end_still_has_a_path_of_its_window() -> None:
    rows = [host("ProfilerStep#1", 0, 500, "user_annotation"), launch(10, 10, 1),
            kern(GEMM, 50, 100, 1),
            host("ProfilerStep#2", 600, 100, "user_annotation"), host("opt", 610, 50)]
    r = critical_path(make_trace(rows))
    st = r.steps.set_index("step")
    # Step 2 launched nothing: step 1's window ends where step 2's host range starts.
    assert (st["length_ns"] == st["end"] - st["ts"]).all()
    assert path_of(r, 1)[-1][1] == "nothing recorded"


def test_amd_hip_trace() -> None:
    from traceforge.formats import load

    p = shared("external/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    r = critical_path(load(str(p)))
    assert (r.steps["length_ns"] == r.steps["end"] - r.steps["ts"]).all()
    seg = r.segments
    assert {"hipLaunchKernel", "hipDeviceSynchronize"} & set(seg["name"])
    assert (seg["kind"] == "kernel").any()


# -- four ranks, one slow --------------------------------------------------------------
def _rank(r: int, slow: bool) -> Trace:
    """Rank r of a 4-rank step: compute C, then an all-reduce N, then a last kernel F, in
    that order on one stream.
    Clocks differ: rank r's trace starts 100*r ns later (base_ns), its ts are shifted."""
    shift = 1000 - 100 * r  # local = global + shift
    g = 400 if slow else 0  # the slow rank's data loader holds the host until 400
    rows = [host("dataloader", 0, 400)] if slow else []
    rows += [launch(g, 3, 1), launch(g + 5, 3, 2, "cuLaunchKernelEx"), launch(g + 8, 2, 3)]
    rows += [kern(GEMM, g + 10, 100, 1),
             kern(NCCL, g + 110, 560 - (g + 110), 2),
             kern(ELT, 561, 39, 3)]
    for x in rows:
        x["ts"] += shift
    return make_trace(rows, rank=r, base_ns=10**12 + 100 * r)


def test_four_ranks_path_crosses_into_the_slow_rank_at_the_collective() -> None:
    traces = [_rank(r, r == 3) for r in range(4)]
    r = critical_path(traces, what_if=["communication=1000"])
    st = r.steps.set_index("rank")
    assert st["length_ns"].to_dict() == {0: 590, 1: 590, 2: 590, 3: 190}
    assert st["critical"].to_dict() == {0: True, 1: False, 2: False, 3: False}
    seg = critical_only(r, r.segments)
    got = [(int(k), str(n), int(t), int(d)) for k, n, t, d in
           zip(seg["rank"], seg["name"], seg["ts"], seg["dur"], strict=True)]
    # Rank 0's all-reduce could not end before rank 3 started its own (510 on the common
    # clock): the path runs through rank 3's data loader, launch and compute, then back on
    # rank 0 for the rest of the all-reduce and the last kernel. ts in each rank's clock.
    s3, s0 = 1000 - 300, 1000
    assert got == [(3, "dataloader", 10 + s3, 390), (3, "cudaLaunchKernel", 400 + s3, 10),
                   (3, GEMM, 410 + s3, 100), (0, NCCL, 510 + s0, 50),
                   (0, "gpu idle", 560 + s0, 1), (0, ELT, 561 + s0, 39)]
    wi = r.what_if[r.what_if["critical"]]
    assert int(wi["new_length_ns"].iloc[0]) == 590 - 50  # the all-reduce's own 50 ns


def test_collectives_match_by_order_per_stream_and_group_arg() -> None:
    from traceforge.analyzers.communication.collectives import comm_kernels, match
    from traceforge.analyzers.timeline.core import timeline

    traces = [_rank(r, False) for r in range(2)]
    tabs = [comm_kernels(t, timeline(t).activity, i) for i, t in enumerate(traces)]
    m = match(tabs).members
    assert m[["instance", "rank", "seq"]].values.tolist() == [[0, 0, 0], [0, 1, 0]]
    assert m["group"].tolist() == ["stream#0", "stream#0"]


# -- API, errors, CLI, handoff -----------------------------------------------------------
def test_graph_is_a_dag_whose_longest_path_is_the_window() -> None:
    t = make_trace([host("A", 0, 100), launch(0, 10, 1), kern(GEMM, 50, 100, 1)])
    r = critical_path(t)
    g = r.graphs[-1]
    assert isinstance(g, nx.DiGraph) and nx.is_directed_acyclic_graph(g)
    assert nx.dag_longest_path_length(g) == 100
    assert set(r.edges[-1]["type"]) >= {"work", "launch", "host"}


def test_what_if_specs_and_errors() -> None:
    assert parse_what_if(["gemm=2 nccl=1.5"]) == {"gemm": 2.0, "nccl": 1.5}
    for bad in (["gemm"], ["gemm=0"], ["gemm=x"]):
        with pytest.raises(UsageError):
            parse_what_if(bad)
    t = make_trace([launch(0, 10, 1), kern(GEMM, 50, 100, 1)])
    with pytest.raises(UsageError, match="gemmm"):
        critical_path(t, what_if=["gemmm=2"])
    with pytest.raises(AnalysisError, match="no GPU activity"):
        critical_path(make_trace([host("A", 0, 10)]))
    # A known family these traces lack (nccl on one GPU) saves nothing, with a note.
    r = critical_path(t, what_if=["gemm=2", "nccl=1.5"])
    assert int(r.what_if.set_index("scenario").loc["nccl=1.5", "saved_ns"]) == 0
    assert any("no nccl kernels" in n for n in r.notes)


def test_cli_table_json_csv_and_what_if_words(tmp_path: Any) -> None:
    p = FIXTURES / "compiled.pt.trace.json.gz"
    run = CliRunner().invoke
    res = run(cli, ["critical-path", str(p), "--steps", "2", "--what-if",
                    "triton=2", "gemm=1.5", "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    (st,) = doc["steps"]
    assert st["step"] == 2 and st["length_ns"] == sum(s["dur"] for s in st["segments"])
    assert sum(st["by_category"].values()) == st["length_ns"]
    assert {w["scenario"] for w in st["what_if"]} == {"triton=2", "gemm=1.5",
                                                      "triton=2 gemm=1.5"}
    assert set(st["segments"][0]) >= {"rank", "kind", "name", "ts", "dur", "category"}
    for fmt in ("table", "md", "csv"):
        res = run(cli, ["critical-path", str(p), "--format", fmt])
        assert res.exit_code == 0, res.output
    res = run(cli, ["critical-path", str(p), "--what-if", "nope=2"])
    assert res.exit_code != 0 and "nope" in str(res.exception or res.output)


def test_cli_bad_input_is_one_line_exit_2(tmp_path: Any) -> None:
    from traceforge.cli import main

    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    for argv in (["critical-path", str(bad)], ["critical-path", str(tmp_path / "none.json")],
                 ["critical-path", str(FIXTURES / "eager.pt.trace.json.gz"), "--what-if",
                  "gemm=-1"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2


def test_graph_replays_of_a_compiled_trace_are_on_the_path() -> None:
    from traceforge.analyzers.timeline.core import timeline
    from traceforge.formats import load

    t = load(str(FIXTURES / "compiled.pt.trace.json.gz"))
    r = critical_path(t)
    st = r.steps.set_index("step")
    assert (st["length_ns"] == st["end"] - st["ts"]).all()
    # torch.compile reduce-overhead: the step is one CUDA graph replay after another, so
    # the path is the replayed kernels (HTA drops them, HTA#290), > half of each step.
    kern = r.segments[r.segments["kind"] == "kernel"]
    replay = timeline(t).activity.set_index("row").loc[kern["row"], "replay"]
    assert (replay >= 0).all()
    per_step = kern.groupby("step")["dur"].sum()
    assert (per_step > 0.5 * st["length_ns"]).all()


def test_path_tracks_and_chrome_events_for_perfetto() -> None:
    traces = [_rank(r, r == 3) for r in range(4)]
    res = critical_path(traces)
    tracks = {t.rank: t for t in path_tracks(res)}
    assert set(tracks) == {0, 3}  # the critical path ran on ranks 3 and 0
    t3 = tracks[3]
    # Rank 3's share: data loader -> launch (host thread) -> GEMM (stream 7): one hop.
    assert t3.flows[["from_tid", "to_tid"]].values.tolist() == [[1, 7]]
    evs = chrome_events(t3, flow_id_base=100)
    slices = [e for e in evs if e["ph"] == "X"]
    assert [e["name"] for e in slices] == ["dataloader", "cudaLaunchKernel", GEMM]
    assert all(e["pid"] == PATH_PID + 3 for e in slices)
    assert slices[0]["ts"] == pytest.approx((10 + 700) / 1000)
    s, f = (e for e in evs if e["ph"] in "sf")
    assert s["id"] == f["id"] == 100 and f["bp"] == "e"
    assert (s["pid"], s["tid"], f["pid"], f["tid"]) == (1, 1, 0, 7)
    assert s["ts"] < f["ts"]
    rd = report_data(res)
    assert rd.bar["ns"].sum() == 590 and set(rd.bar.columns) == {"category", "ns", "pct"}


# -- the 2-rank DDP fixtures -------------------------------------------------------------
DDP = [FIXTURES / f"capture_h200x2.ddp_train.sdpa.rank{r}.pt.trace.json.gz" for r in (0, 1)]


@pytest.fixture(scope="module", params=["fixtures", "shared/h200-ddp"])
def ddp(request: Any) -> Any:
    from traceforge.analyzers.timing.overlap import overlap
    from traceforge.formats.multirank import load_run

    files = DDP if request.param == "fixtures" else str(shared("h200-ddp"))
    traces = load_run([str(p) for p in files] if isinstance(files, list) else files)
    return traces, critical_path(traces, what_if=["nccl=1000"]), {
        s: overlap(traces, steps=[s]).ranks.set_index("rank") for s in (2, 3)}


def test_ddp_path_covers_each_ranks_step(ddp: Any) -> None:
    traces, r, _ = ddp
    from traceforge.analyzers.timeline.core import timeline

    for row in r.steps.itertuples():
        w = timeline(traces[row.rank]).windows.set_index("step")
        assert row.length_ns == w.loc[row.step, "end"] - w.loc[row.step, "ts"]
        seg = r.segments[(r.segments["step"] == row.step) & (r.segments["for_rank"] == row.rank)]
        assert seg["dur"].sum() == row.length_ns
    assert not [n for n in r.notes if "!=" in n]


def test_path_tracks_are_the_segments_tables_drawn(ddp: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``path_tracks`` works on the paths' codes, looking strings up only for the slices
    it keeps: each rank's track is what the segments table (the critical paths' rows of
    that rank, by step and order) gives, merged and drawn, with the same hops; so too
    where steps are past the drawing bound (merged whatever their kinds)."""
    from traceforge.analyzers.critical_path import critical_only, handoff

    _, r, _ = ddp
    for bound in (handoff.MAX_DRAWN_PER_STEP, 50):
        monkeypatch.setattr(handoff, "MAX_DRAWN_PER_STEP", bound)
        tracks = path_tracks(r)
        seg = critical_only(r, r.segments)
        assert sorted(t.rank for t in tracks) == sorted(set(seg["rank"].tolist()))
        for t in tracks:
            mine = seg[seg["rank"] == t.rank].sort_values(["step", "order"], kind="stable")
            want = handoff.PathTrack.of(t.rank, mine.reset_index(drop=True), t.flows)
            assert t.pieces == want.pieces == len(mine)
            assert t.kinds == want.kinds and (bound == 50) == bool(t.kinds)
            pd.testing.assert_frame_equal(t.drawn, want.drawn)
            # The hops: consecutive pieces of one path on two tracks.
            nxt = mine.shift(-1)
            hop = (((mine["pid"] != nxt["pid"]) | (mine["tid"] != nxt["tid"]))
                   & (mine["step"] == nxt["step"]) & (nxt["order"] == mine["order"] + 1))
            assert len(t.flows) == int(hop.sum())
            assert t.flows["from_ts"].tolist() == (mine["ts"] + mine["dur"])[hop].tolist()


def test_ddp_last_all_reduce_of_backward_is_on_rank_0s_path(ddp: Any) -> None:
    traces, r, _ = ddp
    from traceforge.analyzers.timeline.core import timeline

    for step in (2, 3):
        a = timeline(traces[0]).activity
        comm = a[(a["cls"] == "communication") & (a["step"] == step)]
        last = int(comm.sort_values("end")["row"].iloc[-1])
        seg = r.segments[(r.segments["step"] == step) & (r.segments["for_rank"] == 0)]
        on = seg[(seg["rank"] == 0) & (seg["kind"] == "kernel")]
        assert last in set(on["row"]), step
        # ... reached from rank 1, which started that all-reduce last: rank 1 is the
        # straggler (rank 0 spends several times longer in NCCL kernels, waiting for it), and its
        # host-bound step is the run's critical path.
        assert set(seg["rank"]) == {0, 1}
    crit = r.steps[r.steps["critical"]]
    assert crit["rank"].tolist() == [1, 1]


def test_ddp_what_if_nccl_saves_at_most_the_exposed_communication(ddp: Any) -> None:
    _, r, ov = ddp
    for row in r.what_if.itertuples():
        exposed = int(ov[row.step].loc[row.rank, "exposed_comm_ns"])
        assert 0 <= row.saved_ns <= exposed
    assert (r.what_if.loc[r.what_if["rank"] == 0, "saved_ns"] > 0).all()


@pytest.mark.parametrize("zstd", [True, False])
def test_rank_graph_round_trips_compressed(monkeypatch: pytest.MonkeyPatch, zstd: bool
                                          ) -> None:
    """A rank's graph crosses to the driver and is stored beside a cached trace pickled
    and compressed: zstd when pyarrow has the codec, else zlib; either way it unpickles to
    the same graph and the same path."""
    import pickle

    import numpy as np
    import pandas as pd

    from traceforge.analyzers.critical_path import rank as rank_mod
    from traceforge.analyzers.critical_path import rank_graph

    if not zstd:
        monkeypatch.setattr(rank_mod, "_zstd", lambda: None)
    t = make_trace([
        host("A", 0, 100), launch(10, 20, 1),
        host("B", 150, 150), launch(200, 20, 2),
        kern(ELT, 40, 20, 1), kern(GEMM, 230, 20, 2),
    ])
    g = rank_graph(t)
    blob = pickle.dumps(g)
    assert g.__getstate__()[:1] == (b"Z" if zstd else b"z")
    back = pickle.loads(blob)
    for k, v in vars(g).items():
        w = getattr(back, k)
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(v, w)
            assert v.dtype == w.dtype
        elif isinstance(v, pd.DataFrame):
            pd.testing.assert_frame_equal(v, w)
        elif k != "chain":
            assert v == w, k
    for k, v in vars(g.chain).items():
        np.testing.assert_array_equal(v, getattr(back.chain, k))
