"""ROCm readers, checked against counts and sums taken from the raw files in the test."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

import traceforge as tf
from tests.conftest import shared
from traceforge.errors import TraceFormatError

SDK = "external/rocprofiler-sdk"
FD = "external/hpctrainingexamples/finite-difference"
KOKKOS = "external/kokkos_rocprof/6f0a1c4a"
V3_TRACES = ("kernel_trace.csv", "hip_runtime_trace.csv", "memory_copy_trace.csv",
             "marker_api_trace.csv", "hsa_api_trace.csv", "hip_compile_trace.csv")


def _rows(p: Path) -> list[dict[str, str]]:
    with p.open(newline="") as f:
        return list(csv.DictReader(f))


def _kernel_sums(t: tf.Trace) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for name, g in t.kernels().groupby("name", observed=True):
        out[str(name)] = (len(g), int(g["dur"].sum()))
    return out


def test_rocprofv3_json_dispatches() -> None:
    p = shared("external/tracelens/rocprof/908_results.json.gz")
    raw = json.loads(gzip.decompress(p.read_bytes()))["rocprofiler-sdk-tool"]
    disp = [r for proc in raw for r in proc["buffer_records"]["kernel_dispatch"]]
    t = tf.load(p)
    k = t.kernels()
    assert len(k) == len(disp) == 43915
    assert int(k["dur"].sum()) == sum(r["end_timestamp"] - r["start_timestamp"] for r in disp)
    assert len(t.meta.devices) == 8 and t.meta.devices[0].vendor == "amd"
    assert set(k["device"].tolist()) <= set(range(8))
    assert (k["name"].astype(str) != "").all()


@pytest.mark.parametrize("name", V3_TRACES)
def test_rocprofv3_csv_counts_and_durations(name: str) -> None:
    p = shared(f"{SDK}/{name}")
    rows = _rows(p)
    t = tf.load(p)
    assert len(t.events) == len(rows)
    assert int(t.events["dur"].sum()) == sum(
        int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in rows)
    if name == "kernel_trace.csv":
        assert len(t.kernels()) == len(rows)
        assert sorted(t.kernels()["corr"].tolist()) == sorted(int(r["Correlation_Id"])
                                                              for r in rows)


def test_rocprofv3_directory_loads_as_one_trace(tmp_path: Path) -> None:
    src = shared(SDK)
    d = tmp_path / "host" / "1234"
    d.mkdir(parents=True)
    for n in V3_TRACES:
        shutil.copyfile(src / n, d / f"1234_{n}")
    shutil.copyfile(src / "kernel_names.csv", d / "1234_counter_collection.csv")  # ignored
    t = tf.load(tmp_path)
    assert len(t.events) == sum(len(_rows(src / n)) for n in V3_TRACES)
    assert len(t.kernels()) == len(_rows(src / "kernel_trace.csv"))


def test_newer_kernel_csv_layout(tmp_path: Path) -> None:
    # The newer layout: "Agent N" ids, Stream_Id, register/LDS columns.
    p = tmp_path / "9_kernel_trace.csv"
    p.write_text(
        '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id",'
        '"Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size",'
        '"Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X",'
        '"Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
        '"KERNEL_DISPATCH","Agent 4",2,3,77,1,5,"gemm_kernel",10,1000,1600,0,0,8,0,16,'
        '64,1,1,1024,1,1\n'
    )
    t = tf.load(p)
    k = t.kernels()
    assert k[["device", "stream", "corr", "dur"]].values.tolist() == [[4, 3, 10, 600]]


def test_legacy_results_csv_matches_stats_csv() -> None:
    t = tf.load(shared(f"{FD}/results.csv"))
    stats = _rows(shared(f"{FD}/results.stats.csv"))
    ours = _kernel_sums(t)
    assert {r["Name"] for r in stats} == set(ours)
    for r in stats:
        assert ours[r["Name"]] == (int(r["Calls"]), int(r["TotalDurationNs"]))


def test_legacy_db_equals_csv() -> None:
    a = tf.load(shared(f"{FD}/results.csv"))
    b = tf.load(shared(f"{FD}/results.db"))
    assert b.meta.format == "rocprof-db"
    assert _kernel_sums(a) == _kernel_sums(b)


def test_kokkos_legacy_json_and_db_agree_with_stats() -> None:
    j = tf.load(shared(f"{KOKKOS}/results.json"))
    db = tf.load(shared(f"{KOKKOS}/results.db"))
    assert j.meta.format == "rocprof-json"
    # rocprof v1 leaves names with commas unquoted in this file: split from the right.
    lines = shared(f"{KOKKOS}/results.stats.csv").read_text().splitlines()[1:]
    want = {}
    for line in lines:
        name, calls, total, _, _ = line.rsplit(",", 4)
        want[name] = (int(calls), int(total))
    # rocprof counts barrier packets ("Unknown command type", 0 ns) as kernels; we do not.
    assert want.pop("Unknown command type") == (4, 0)
    assert _kernel_sums(j) == want
    assert _kernel_sums(db) == want
    conn = sqlite3.connect(f"file:{shared(f'{KOKKOS}/results.db')}?mode=ro", uri=True)
    (n_hip,) = conn.execute("SELECT COUNT(*) FROM HIP").fetchone()
    conn.close()
    assert len(db.of_kind("runtime")) == len(j.of_kind("runtime")) == n_hip
    hip_stats = _rows(shared(f"{KOKKOS}/results.hip_stats.csv"))
    calls: dict[str, int] = defaultdict(int)
    for n in j.of_kind("runtime")["name"].astype(str):
        calls[n] += 1
    assert all(calls[r["Name"]] == int(r["Calls"]) for r in hip_stats)


def test_summaries_and_bad_columns_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="summary"):
        tf.load(shared(f"{FD}/results.stats.csv"))
    bad = tmp_path / "1_kernel_trace.csv"
    bad.write_text('"Kind","Agent_Id","Kernel_Name","Correlation_Id","Start_Timestamp"\n'
                   '"KERNEL_DISPATCH",1,"k",1,5\n')
    with pytest.raises(TraceFormatError, match="missing End_Timestamp"):
        tf.load(bad)
