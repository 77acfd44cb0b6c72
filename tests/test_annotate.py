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
from traceforge.render.chrome_json import dumps_chrome
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


def test_annotate_rejects_unknown_suffix(tmp_path: Path) -> None:
    src = shared("h100/compiled.pt.trace.json.gz")
    r = CliRunner().invoke(cli, ["annotate", str(src), "-o", str(tmp_path / "x.txt")])
    assert r.exit_code != 0 and not (tmp_path / "x.txt").exists()
