"""Collective bandwidth (``comm``): nccl-tests arithmetic on the raw JSON, and bad input."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import traceforge as tf
from tests.conftest import FIXTURES, ev, shared
from tests.support.raw_kineto import ns, read
from traceforge.analyzers.communication.instances import comm_reduce, comm_summary
from traceforge.analyzers.communication.sizes import bus_factor, kind_of
from traceforge.model import Device, TraceMeta

# -- the oracle: raw JSON, nccl-tests' formulas written out again ---------------------------
ELEM = {"Float": 4, "BFloat16": 2, "Half": 2, "Long": 8, "Int": 4, "Double": 8, "Byte": 1}
FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "_allgather_base": lambda n: (n - 1) / n,
          "broadcast": lambda n: 1.0, "barrier": lambda n: 1.0}  # a barrier moves 0 bytes
WITH_ARGS = ["external/hta/nccl_parser_config/nccl_data.json.gz",
             "external/tracelens/traces/b200/eager_trace.json.gz",
             "external/tracelens/traces/mi300/resnet_act_checkpoint.json.gz"]


def _raw_collectives(path: Path) -> list[dict[str, Any]]:
    """Kernels with collective args, by start: bytes (the all-gather's total is its output),
    the factor, start and end in ns."""
    out = []
    for e in read(path)["traceEvents"]:
        a = e.get("args") or {}
        if e.get("cat") != "kernel" or "In msg nelems" not in a:
            continue
        name = a["Collective name"]
        nelems = a["Out msg nelems"] if "allgather" in name else a["In msg nelems"]
        n = int(a["Group size"])
        out.append({"bytes": int(nelems) * ELEM[a["dtype"]], "factor": FACTOR[name](n),
                    "ts": ns(e["ts"]), "end": ns(e["ts"]) + ns(e["dur"])})
    return sorted(out, key=lambda x: x["ts"])


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-3 * abs(b)


@pytest.mark.parametrize("rel", WITH_ARGS)
def test_one_rank_bytes_and_busbw_match_raw_args(rel: str) -> None:
    path = shared(rel)
    raw = _raw_collectives(path)
    r = comm_reduce([comm_summary(tf.load(path))])
    got = r.instances.dropna(subset=["bytes"]).sort_values("start_ns")
    assert len(got) == len(raw) > 0
    for (_, g), x in zip(got.iterrows(), raw, strict=True):
        assert g["bytes"] == x["bytes"]
        dur = x["end"] - x["ts"]
        assert g["basis"] == "kernel" and math.isnan(g["sync_ns"])
        assert _close(g["busbw_gbps"], x["bytes"] * x["factor"] / dur)
        assert _close(g["algbw_kernel_gbps"], x["bytes"] / dur)


def test_two_ranks_sync_time_and_wait_match_raw_json() -> None:
    d = shared("h200-ddp")
    files = sorted(d.glob("ddp_rank*.pt.trace.json.gz"))
    raws = [_raw_collectives(f) for f in files]
    r = comm_reduce([comm_summary(tf.load(f)) for f in files])
    inst = r.instances.sort_values("start_ns").reset_index(drop=True)
    assert len(inst) == len(raws[0]) == len(raws[1]) == 40
    for i, (a, b) in enumerate(zip(*raws, strict=True)):
        g = inst.iloc[i]
        assert g["bytes"] == a["bytes"] == b["bytes"]
        sync = max(a["end"], b["end"]) - max(a["ts"], b["ts"])
        mean = (a["end"] - a["ts"] + b["end"] - b["ts"]) / 2
        assert _close(g["sync_ns"], sync) and _close(g["kernel_ns"], mean)
        assert _close(g["busbw_sync_gbps"], a["bytes"] * a["factor"] / sync)
        assert _close(g["busbw_kernel_gbps"], a["bytes"] * a["factor"] / mean)
        assert g["busbw_gbps"] == g["busbw_sync_gbps"]
        assert g["last_rank"] == (0 if a["ts"] > b["ts"] else 1)
        assert _close(g["wait_ns"] + 1, mean - sync + 1)
    # The H200's NVLink: 450 GB/s per direction.
    assert (inst["ceiling_gbps"] == 450).all()
    # Per rank: the first rank to start waits for the last.
    m = r.members
    assert (m.groupby("instance")["wait_ns"].min() == 0).all()
    # Per rank: the wait is from its own start to the last rank's, within its kernel.
    br = tf.comm([tf.load(f) for f in files]).by_rank.set_index("rank")
    for rank, mine in enumerate(raws):
        other = raws[1 - rank]
        want = sum(min(max(0, o["ts"] - x["ts"]), x["end"] - x["ts"])
                   for x, o in zip(mine, other, strict=True))
        assert br.loc[rank, "wait_ns"] == want
        assert br.loc[rank, "last_count"] == sum(x["ts"] > o["ts"]
                                                 for x, o in zip(mine, other, strict=True))


def test_issue_example_all_reduce_of_32768000_floats() -> None:
    # The issue: 32,768,000 float32 in 2.886 ms on rank 0, about 45 GB/s algbw.
    r = comm_reduce([comm_summary(tf.load(shared("h200-ddp") / "ddp_rank0.pt.trace.json.gz"))])
    row = r.instances.iloc[0]
    assert row["bytes"] == 32_768_000 * 4
    assert row["algbw_kernel_gbps"] == pytest.approx(131_072_000 / 2_885_945, rel=1e-6)
    assert row["busbw_kernel_gbps"] == row["algbw_kernel_gbps"]  # 2(n-1)/n = 1 for n = 2


def test_factors_are_nccl_tests() -> None:
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 8) == pytest.approx(0.875)
    assert bus_factor("reduce_scatter", 4) == pytest.approx(0.75)
    assert bus_factor("all_to_all", 2) == pytest.approx(0.5)
    assert bus_factor("broadcast", 8) == bus_factor("send_recv", 2) == 1.0
    assert math.isnan(bus_factor("barrier", 8)) and math.isnan(bus_factor("all_reduce", 0))
    assert kind_of("_reduce_scatter_base") == "reduce_scatter"
    assert kind_of("", "ncclDevKernel_AllGather_RING_LL(x)") == "all_gather"
    assert kind_of("", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)") == "send_recv"
    assert kind_of("", "ncclDevKernel_Generic(x)") == "unknown"
    assert kind_of("", "void (anonymous namespace)::multimem_all_reduce_kernel<x>") == "all_reduce"
    assert kind_of("all_to_all") == "all_to_all" and kind_of("reduce") == "reduce"


# -- bad input ------------------------------------------------------------------------------
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GOOD = {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024,
        "Group size": 2, "dtype": "Float", "Process Group Name": "0",
        "Process Group Ranks": "[0, 1]"}


def _rank(r: int, kernels: list[tuple[int, int, dict[str, Any]]], base: int = 0) -> tf.Trace:
    rows = [ev(NCCL, "kernel", ts, dur, stream=9, corr=i + 1)
            for i, (ts, dur, _) in enumerate(kernels)]
    meta = TraceMeta(rank=r, base_ns=base, devices=(Device(0, "NVIDIA H100 80GB HBM3",
                                                           "nvidia", 132, 80 * 2**30),))
    return tf.Trace.from_events(rows, meta, args=[a for _, _, a in kernels])


def test_bad_sizes_are_counted_never_raised() -> None:
    kernels = [(0, 100, GOOD),
               (200, 100, {**GOOD, "In msg nelems": "lots", "Out msg nelems": None}),
               (400, 100, {**GOOD, "dtype": "Quaternion"}), (600, 0, GOOD),
               (800, 100, {k: v for k, v in GOOD.items() if k != "In msg nelems"
                           and k != "Out msg nelems"}),
               (1000, 100, {**GOOD, "Group size": "x", "Process Group Ranks": "oops"})]
    r = comm_reduce([comm_summary(_rank(0, kernels))])
    i = r.instances.sort_values("start_ns").reset_index(drop=True)
    assert i.loc[0, "busbw_gbps"] == pytest.approx(4096 / 100)
    assert math.isnan(i.loc[1, "bytes"]) and math.isnan(i.loc[2, "bytes"])
    assert math.isnan(i.loc[3, "busbw_gbps"]) and i.loc[3, "bytes"] == 4096
    assert math.isnan(i.loc[4, "busbw_gbps"])
    assert i.loc[5, "group_size"] == -1 and math.isnan(i.loc[5, "busbw_gbps"])
    text = " ".join(r.notes)
    assert "unknown dtype (Quaternion)" in text and "zero duration" in text
    assert "carry no message size" in text


def test_group_size_disagreeing_with_matched_ranks_is_noted() -> None:
    four = {**GOOD, "Group size": 4, "Process Group Ranks": "[0, 1, 2, 3]"}
    r = comm_reduce([comm_summary(_rank(0, [(0, 100, four)], base=1000)),
                     comm_summary(_rank(1, [(0, 60, four)], base=1040))])
    row = r.instances.iloc[0]
    assert row["n_ranks"] == 2 and row["group_size"] == 4
    # Sync: last start 1040 to last end 1100 = 60 ns; factor 2*3/4 on 4096 bytes.
    assert row["sync_ns"] == 60 and row["busbw_gbps"] == pytest.approx(4096 * 1.5 / 60)
    assert row["wait_ns"] == pytest.approx(80 - 60) and row["last_rank"] == 1
    assert any("other than their group size" in n for n in r.notes)


def test_no_collectives_is_an_empty_answer() -> None:
    r = comm_reduce([comm_summary(tf.Trace.from_events([ev("gemm", "kernel", 0, 10)]))])
    assert r.instances.empty and not r.matched


# -- the verb and the notebook API -----------------------------------------------------------
def test_cli_run_and_one_rank(tmp_path: Path) -> None:
    import json

    from tests.conftest import cli_main

    code, out, _ = cli_main("comm", str(shared("h200-ddp")), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert sum(r["count"] for r in doc["by_size"]) == 40
    assert doc["ceilings"]["pg:0"]["gbps"] == 450
    assert any("waiting for the slowest rank" in f for f in doc["findings"])
    one = str(shared("h200-ddp") / "ddp_rank0.pt.trace.json.gz")
    code, out, _ = cli_main("comm", one, "--link-gbps", "100")
    assert code == 0 and "kernel time only" in out and "--link-gbps 100 GB/s" in out
    code, _, err = cli_main("comm", one, "--link-gbps", "0")
    assert code == 2 and "--link-gbps" in err


def test_api_matches_engine_and_no_comm_trace() -> None:
    files = sorted(shared("h200-ddp").glob("ddp_rank*.pt.trace.json.gz"))
    r = tf.comm([tf.load(f) for f in files])
    assert int(r.table["count"].sum()) == 40 and r.run.matched
    empty = tf.comm(tf.Trace.from_events([ev("gemm", "kernel", 0, 10)]))
    assert empty.table.empty and empty.findings == ()


def test_small_messages_finding() -> None:
    small = {**GOOD, "In msg nelems": 16, "Out msg nelems": 16}
    r = tf.comm(_rank(0, [(i * 100, 10, small) for i in range(8)]))
    assert any("latency-bound" in f for f in r.findings)


# -- calibrate --comm: the plumbing on CPU (gloo); GPUs measure the same way with NCCL -------
def test_calibrate_comm_gloo_writes_the_peaks_file(tmp_path: Path) -> None:
    import json

    from tests.conftest import cli_main

    pytest.importorskip("torch.distributed")
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({"schema": "traceforge-peaks/1", "device": "x",
                                 "matmul_tflops": {"bf16": 900.0}}))
    code, out, err = cli_main("calibrate", "--comm", "--backend", "gloo", "--ranks", "2",
                              "--iters", "2", "-o", str(peaks))
    assert code == 0, err
    doc = json.loads(peaks.read_text())
    assert doc["matmul_tflops"] == {"bf16": 900.0}  # kept
    assert doc["allreduce_busbw_gb_s"] > 0 and len(doc["allreduce"]) == 3
    row = doc["allreduce"][-1]
    assert row["busbw_gb_s"] == pytest.approx(row["bytes"] / row["ms"] / 1e6 * 1.0)
    # comm --peaks takes it as the ceiling.
    code, out, _ = cli_main("comm", str(shared("h200-ddp")), "--peaks", str(peaks))
    assert code == 0 and "measured all-reduce busbw" in out
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    code, _, err = cli_main("calibrate", "--comm", "--backend", "gloo", "-o", str(bad))
    assert code == 2 and "not overwritten" in err and bad.read_text() == "{"


# -- everywhere else: report, annotate ------------------------------------------------------
def test_annotate_puts_busbw_on_every_collective_kernel(tmp_path: Path) -> None:
    import json

    from tests.conftest import cli_main

    src = shared("h200-ddp") / "ddp_rank0.pt.trace.json.gz"
    out = tmp_path / "a.json"
    assert cli_main("annotate", str(src), "-o", str(out))[0] == 0
    raw = _raw_collectives(src)
    got = [e for e in json.loads(out.read_text())["traceEvents"]
           if e.get("cat") == "kernel" and "busbw_gbps" in e.get("args", {})]
    assert len(got) == len(raw) == 40
    got.sort(key=lambda e: float(e["ts"]))
    for e, x in zip(got, raw, strict=True):
        assert e["args"]["msg_bytes"] == x["bytes"]
        want = x["bytes"] * x["factor"] / (x["end"] - x["ts"])
        assert abs(e["args"]["busbw_gbps"] - want) <= 1e-3 * want + 1e-3
        assert abs(e["args"]["pct_of_ceiling"] - 100 * want / 450) < 0.01


def test_report_has_the_communication_section(tmp_path: Path) -> None:
    from tests.conftest import cli_main

    out = tmp_path / "r.md"
    assert cli_main("report", str(shared("h200-ddp")), "-o", str(out))[0] == 0
    text = out.read_text()
    assert "Collective bandwidth by kind and message size" in text
    assert "NVLink 4" in text


def test_scaling_splits_communication_into_bandwidth_and_wait() -> None:
    from dataclasses import replace

    from traceforge.analyzers.runs.inputs import TraceRun

    files = sorted(shared("h200-ddp").glob("ddp_rank*.pt.trace.json.gz"))
    ranks = tf.load_run([str(p) for p in files])
    t0 = ranks[0]
    single = replace(t0, events=t0.events[~t0.events["name"].astype(str).str.startswith(
        "ncclDevKernel")], meta=replace(t0.meta, world_size=1))
    r = tf.scaling([TraceRun("n1", (single,)), TraceRun("n2", tuple(ranks))])
    row = r.comm.set_index("gpus").loc[2]
    raws = [_raw_collectives(f) for f in files]
    moved = sum(a["bytes"] * a["factor"] for a in raws[0])
    sync = sum(max(a["end"], b["end"]) - max(a["ts"], b["ts"]) for a, b in zip(*raws,
                                                                              strict=True))
    assert _close(row["busbw_gbps"], moved / sync) and row["ceiling_gbps"] == 450
    per = r.ranks[r.ranks["gpus"] == 2]
    exposed = per["exposed_comm_ns"].mean() / 1e6
    assert _close(row["exposed_comm_ms"], exposed)
    assert _close(row["wait_ms"], per["straggler_wait_ns"].mean() / 1e6)
    assert _close(row["bandwidth_ms"], exposed * (1 - moved / sync / 450))
    assert row["bandwidth_ms"] + row["at_link_ms"] == pytest.approx(exposed)
    assert r.comm.set_index("gpus").loc[1, "collectives"] == 0


def test_compare_and_diff_line_up_nccl_and_rccl() -> None:
    nv = [tf.load(f) for f in sorted(shared("h200-ddp").glob("ddp_rank*.pt.trace.json.gz"))]
    amd = tf.load(shared("external/tracelens/traces/mi300/resnet_act_checkpoint.json.gz"))
    c = tf.compare([tf.TraceRun("h200", tuple(nv)), tf.TraceRun("mi300x", (amd,))])
    ar = c.comm[c.comm["kind"] == "all_reduce"].set_index("run")
    assert ar.loc["h200", "library"] == "NCCL" and ar.loc["mi300x", "library"] == "RCCL"
    direct = tf.comm(nv).run.instances
    moved = (direct["busbw_gbps"] * direct["sync_ns"]).sum()
    assert _close(ar.loc["h200", "busbw_gbps"], moved / direct["sync_ns"].sum())
    d = tf.diff(nv[0], amd).comm.set_index("kind")
    assert d.loc["all_reduce", "a_collectives"] == 40
    assert _close(d.loc["all_reduce", "busbw_ratio"],
                  d.loc["all_reduce", "b_busbw_gbps"] / d.loc["all_reduce", "a_busbw_gbps"])


# -- formats without kernel args: the enclosing NCCL NVTX range / RCCL API call -------------
def test_sizes_from_the_enclosing_nccl_call() -> None:
    generic = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"
    rows = [ev("NCCL:ncclAllReduce", "user_annotation", 0, 50, pid=1, tid=5),
            ev("cudaLaunchKernel", "runtime", 10, 5, pid=1, tid=5, corr=1),
            ev(generic, "kernel", 100, 200, stream=9, corr=1),
            ev("ncclAllGather", "other", 400, 50, pid=1, tid=5),
            ev("cudaLaunchKernel", "runtime", 410, 5, pid=1, tid=5, corr=2),
            ev(generic, "kernel", 500, 100, stream=9, corr=2),
            ev("cudaLaunchKernel", "runtime", 700, 5, pid=1, tid=5, corr=3),
            ev(generic, "kernel", 800, 100, stream=9, corr=3)]
    args = [{"count": 1000, "datatype": "ncclFloat32"}, {}, {},
            {"count": 10, "datatype": "ncclBfloat16", "nranks": 4}, {}, {}, {}, {}]
    t = tf.Trace.from_events(rows, TraceMeta(rank=0), args=args)
    i = tf.comm(t).run.instances.sort_values("start_ns").reset_index(drop=True)
    assert list(i["kind"]) == ["all_reduce", "all_gather", "unknown"]
    assert i.loc[0, "bytes"] == 4000 and i.loc[1, "bytes"] == 10 * 4 * 2
    assert i.loc[1, "busbw_gbps"] == pytest.approx(80 * 0.75 / 100)
    assert math.isnan(i.loc[2, "bytes"])


def test_report_finding_on_large_collectives_below_the_link() -> None:
    from traceforge.report.analysis import analyze
    from traceforge.report.findings import findings

    files = sorted(shared("h200-ddp").glob("ddp_rank*.pt.trace.json.gz"))
    ranks = [tf.load(f) for f in files]
    # At 450 GB/s the 128 MiB all-reduces run at 58%: no finding; against 1000 GB/s, one.
    assert not any(f.rule == "comm_below_link" for f in findings(analyze(ranks)))
    r = analyze(ranks)
    slow = r.comm.assign(ceiling_gbps=1000.0,
                         ceiling_pct=100 * r.comm["busbw_median_gbps"] / 1000.0)
    from dataclasses import replace

    got = [f for f in findings(replace(r, comm=slow)) if f.rule == "comm_below_link"]
    assert len(got) == 1 and "128 MiB+" in got[0].evidence


def test_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    from tests.conftest import cli_main

    bad = tmp_path / "x.pt.trace.json"
    bad.write_text('{"traceEvents": [')
    code, out, err = cli_main("comm", str(bad))
    assert code == 2 and "Traceback" not in err and str(bad.name) in err
    peaks = tmp_path / "p.json"
    peaks.write_text('{"schema": "traceforge-peaks/1", "matmul_tflops": {}, '
                     '"allreduce_busbw_gb_s": "fast"}')
    code, _, err = cli_main("comm", str(shared("h200-ddp")), "--peaks", str(peaks))
    assert code == 2 and "allreduce_busbw_gb_s" in err


def test_link_table_covers_the_devices_with_sources() -> None:
    from traceforge.analyzers.communication.links import device_link, links_table
    from traceforge.analyzers.costs.devices import known_devices

    t = links_table()
    keys = set(known_devices()["key"])
    assert set(t["devices"]) <= keys
    want = {"a100-sxm4-80gb": 300, "h100-sxm": 450, "h200": 450, "b200": 900,
            "mi300x": 448, "mi325x": 448, "mi350x": 537.6}
    for k, g in want.items():
        assert t["devices"][k]["gb_s"] == g and t["devices"][k]["source"] in t["sources"]
    c = device_link(Device(0, "NVIDIA H100 80GB HBM3", "nvidia", 132, 80 * 2**30))
    assert c is not None and c.gbps == 450 and "NVLink 4" in c.link and "datasheet" in c.source
    assert device_link(Device(0, "Tesla V100-SXM2-32GB", "nvidia")) is None


def test_rocprofv3_csv_rccl_api_names_the_generic_kernels(tmp_path: Path) -> None:
    # rocprofv3 --kernel-trace --hip-runtime-trace --rccl-trace writes these three CSVs;
    # RCCL's kernel is ncclDevKernel_Generic, the RCCL API call around its launch names it.
    d = tmp_path / "host" / "77"
    d.mkdir(parents=True)
    (d / "77_kernel_trace.csv").write_text(
        '"Kind","Agent_Id","Queue_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
        '"Correlation_Id","Start_Timestamp","End_Timestamp"\n'
        '"KERNEL_DISPATCH",1,1,77,1,16,"ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"'
        ',5,2000,2600\n')
    (d / "77_hip_api_trace.csv").write_text(
        '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp",'
        '"End_Timestamp"\n"HIP_RUNTIME_API","hipExtLaunchKernel",77,77,5,1100,1200\n')
    (d / "77_rccl_api_trace.csv").write_text(
        '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp",'
        '"End_Timestamp"\n"RCCL_API","ncclAllReduce",77,77,4,1000,1500\n')
    r = tf.comm(tf.load(tmp_path))
    inst = r.run.instances
    assert list(inst["kind"]) == ["all_reduce"] and inst["kernel_ns"].iloc[0] == 600
    assert any("carry no message size" in n for n in r.notes)
    assert any(n.startswith("rocprof: the kind comes from") for n in r.notes)


SWEEP = FIXTURES / "allreduce_h100x2"


def test_h100x2_all_reduce_sweep_against_raw_json_and_cuda_events() -> None:
    """An all-reduce sweep of float32, 1 KiB to 1 GiB, 5 calls a size, on 2 NVLink H100s
    (torch 2.11, NCCL 2.28.9; fixtures/allreduce_h100x2, made by examples/allreduce_sweep.py).
    Every instance's synchronized busbw equals the raw JSON's arithmetic. Against busbw timed
    with CUDA events around the same 5 calls replayed from a CUDA graph (unprofiled, no host
    time between the calls, averaged over the ranks, as nccl-tests times its loop), the median
    per size is within 5% from 16 MiB up. Below that the loop's time also holds the few
    microseconds between back-to-back collectives, which a kernel's own duration does not,
    so `comm` reads higher (README: the table)."""
    import json
    import statistics

    files = sorted(SWEEP.glob("allreduce_sweep_rank*.json.gz"))
    raws = [[x for x in _raw_collectives(f) if x["bytes"] > 0] for f in files]
    r = comm_reduce([comm_summary(tf.load(f)) for f in files])
    inst = r.instances[r.instances["bytes"] > 0].sort_values("start_ns").reset_index(drop=True)
    assert len(inst) == len(raws[0]) == len(raws[1]) == 21 * 5
    for i, (a, b) in enumerate(zip(*raws, strict=True)):
        sync = max(a["end"], b["end"]) - max(a["ts"], b["ts"])
        assert inst.loc[i, "bytes"] == a["bytes"] == b["bytes"]
        assert _close(inst.loc[i, "busbw_sync_gbps"], a["bytes"] * a["factor"] / sync)
    events = json.loads((SWEEP / "cuda_events.json").read_text())
    assert events["world"] == 2
    for row in events["rows"]:
        got = statistics.median(inst.loc[inst["bytes"] == row["bytes"], "busbw_sync_gbps"])
        want = row["graph"]["busbw_gbps"]
        if row["bytes"] >= 16 << 20:
            assert abs(got - want) <= 0.05 * want, (row, got)
        elif row["bytes"] >= 1 << 20:
            assert got > want, (row, got)  # the loop's gaps between collectives
    # NVLink 4 on the H100 SXM: 450 GB/s per direction; 1 GiB reaches ~73% of it.
    assert (inst["ceiling_gbps"] == 450).all()


def test_a_trace_without_a_rank_keeps_its_timeline(monkeypatch: pytest.MonkeyPatch) -> None:
    """``comm`` numbers rank-less traces by their place in the run without giving them new
    meta: the trace's own timeline is read (a trace with new meta worked its whole timeline
    out again: 25 s and 2.6 GB more in a report of 10M kernels), and each gets its rank."""
    from traceforge.analyzers.timeline import core

    r0 = FIXTURES / "capture_h200x2.ddp_train.sdpa.rank0.pt.trace.json.gz"
    r1 = FIXTURES / "capture_h200x2.ddp_train.sdpa.rank1.pt.trace.json.gz"
    from dataclasses import replace

    a, b = (t.with_meta(replace(t.meta, rank=None))  # as a trace without distributedInfo
            for t in (tf.load(r0, cache=False), tf.load(r1, cache=False)))
    core.timeline(a)
    core.timeline(b)
    built: list[int] = []
    build = core._build
    monkeypatch.setattr(core, "_build", lambda t: built.append(1) or build(t))
    run = tf.comm([a, b])
    alone = tf.comm(a)
    assert built == []
    assert sorted(set(run.run.instances["n_ranks"].tolist())) == [2]
    assert set(alone.run.instances["n_ranks"].tolist()) == {1}
    assert comm_summary(b, rank=1).rank == 1 and comm_summary(b).rank == 0
