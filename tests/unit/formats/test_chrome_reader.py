"""Kineto / Chrome JSON reader: hand-checkable documents and every quirk we handle."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from traceforge import load
from traceforge.analyzers.timeline.steps import host_steps
from traceforge.errors import TraceFormatError
from traceforge.formats.chrome import us_to_ns


def write(tmp_path: Path, doc: Any, name: str = "t.json", gz: bool = False) -> Path:
    p = tmp_path / name
    data = json.dumps(doc).encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def kineto_doc(**top: Any) -> dict[str, Any]:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 11,
         "ts": 1000.5, "dur": 20.25, "args": {"External id": 5, "Input Dims": [[4, 8], [8, 2]]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11,
         "ts": 1005.0, "dur": 4.0, "args": {"External id": 5, "correlation": 77}},
        {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_TNT",
         "pid": 0, "tid": 7, "ts": 1012.125, "dur": 3.5,
         "args": {"External id": 5, "correlation": 77, "device": 0, "stream": 7,
                  "grid": [4, 1, 1], "block": [128, 1, 1]}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": 10, "tid": 11, "ts": 1005.0},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": 0, "tid": 7, "ts": 1012.125,
         "bp": "e"},
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 10, "tid": 11,
         "ts": 1001.0},
        {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 10, "tid": 12,
         "ts": 1030.0, "bp": "e"},
        {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": 10, "tid": 11, "args": {"name": "main"}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 10, "tid": 11,
         "ts": 999.0, "dur": 40.0, "args": {"External id": 1}},
    ]
    doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events}
    doc.update(top)
    return doc


def test_times_are_int_ns_relative_to_first_event(tmp_path: Path) -> None:
    # GIVEN a trace whose earliest event (the step) starts at 999.0 us
    t = load(write(tmp_path, kineto_doc()))
    ev = t.events.set_index("name")
    # THEN ts is ns since that event, and float-us durations are exact ns
    assert ev.loc["ProfilerStep#4", "ts"] == 0
    assert ev.loc["aten::mm", "ts"] == 1500 and ev.loc["aten::mm", "dur"] == 20250
    assert ev.loc["nvjet_sm90_tst_128x64_64x8_1x2_h_bz_TNT", "ts"] == 13125
    assert t.events["ts"].dtype == np.int64 and t.events["dur"].dtype == np.int64
    assert t.meta.base_ns == 999_000  # no baseTimeNanoseconds: absolute us -> ns


def test_base_time_nanoseconds_is_added(tmp_path: Path) -> None:
    t = load(write(tmp_path, kineto_doc(baseTimeNanoseconds=1_700_000_000_000_000_000)))
    assert t.meta.base_ns == 1_700_000_000_000_000_000 + 999_000


def test_kinds_links_and_lazy_args(tmp_path: Path) -> None:
    t = load(write(tmp_path, kineto_doc(), gz=True, name="x.pt.trace.json.gz"))
    kinds = dict(zip(t.events["name"].astype(str), t.events["kind"].astype(str), strict=True))
    assert kinds["aten::mm"] == "cpu_op"
    assert kinds["cudaLaunchKernel"] == "runtime"
    assert kinds["nvjet_sm90_tst_128x64_64x8_1x2_h_bz_TNT"] == "kernel"
    k = t.kernels().iloc[0]
    assert (k["corr"], k["ext"], k["device"], k["stream"]) == (77, 5, 0, 7)
    launch = t.events[t.events["name"] == "cudaLaunchKernel"].iloc[0]
    assert launch["corr"] == k["corr"] and launch["device"] == -1
    (args,) = t.args(t.kernels().index)
    assert args["grid"] == [4, 1, 1] and args["block"] == [128, 1, 1]
    # ac2g flows are not tabled (the same link is the shared correlation id); others are.
    fl = t.flows
    assert fl["cat"].astype(str).tolist() == ["fwdbwd", "fwdbwd"]
    assert fl["ph"].astype(str).tolist() == ["s", "f"] and fl["ts"].tolist() == [2000, 31000]
    assert t.meta.process_names[10] == "python3"
    assert t.meta.thread_names[(10, 11)] == "main"
    steps = host_steps(t).ranges
    assert steps["step"].tolist() == [4] and (steps["end"] - steps["ts"]).tolist() == [40_000]


def test_bare_list_legacy_schema(tmp_path: Path) -> None:
    # The Jan-2021 Kineto format: a top-level list, capitalised categories, string tids.
    events = [
        {"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 1, "tid": "4093687616",
         "ts": 100, "dur": 5, "args": {"External id": 3}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": "4093687616",
         "ts": 101, "dur": 2, "args": {"correlation": 9, "external id": 3}},
        {"ph": "X", "cat": "Kernel", "name": "void add_kernel<float>(float*)", "pid": 0,
         "tid": "stream 7", "ts": 110, "dur": 3, "args": {"correlation": 9, "device": 0,
                                                         "stream": 7}},
    ]
    t = load(write(tmp_path, events))
    assert t.counts() == {"cpu_op": 1, "runtime": 1, "kernel": 1}
    k = t.kernels().iloc[0]
    assert (k["device"], k["stream"], k["corr"]) == (0, 7, 9)
    assert t.events["tid"].iloc[0] == 4093687616


def test_string_timestamps_and_begin_end_pairs(tmp_path: Path) -> None:
    events = [
        {"ph": "B", "name": "range", "pid": 1, "tid": 2, "ts": "10"},
        {"ph": "E", "name": "range", "pid": 1, "tid": 2, "ts": "25"},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 3, "ts": "12", "dur": "2"},
        {},
    ]
    t = load(write(tmp_path, {"traceEvents": events}))
    r = t.events.set_index("name")
    assert r.loc["range", "dur"] == 15_000 and r.loc["k", "ts"] == 2_000


def test_us_to_ns_is_exact_for_relative_kineto_timestamps() -> None:
    # Kineto writes 3-decimal microseconds; near 2**42 us a float ulp is ~1 ns, so naive
    # rounding can be off by one. Check every ns in a window against exact integer math.
    base = 4_460_705_509_000_000  # ns; the H100 fixtures' relative timestamps are ~4.46e15 ns
    ns = np.arange(base, base + 20_000, dtype=np.int64)
    text = [f"{n // 1000}.{n % 1000:03d}" for n in ns.tolist()]
    us = np.array([float(s) for s in text])
    assert (us_to_ns(us) == ns).all()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty file"),
        (b"   \n", "empty file"),
        (b"hello", "not a supported trace"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}', "truncated JSON"),
        (b'{"foo": 1}', "not a trace"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "dur": 2}]}', "has no ts"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1}]}', "has no dur"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": -3}]}', "negative duration"),
        (b'{"traceEvents": [{"ph": "X", "name": "\xff\xfe", "ts": 1, "dur": 2}]}', "UTF-8"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path: Path, content: bytes, problem: str) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(TraceFormatError) as e:
        load(p)
    assert str(p) in str(e.value) and problem in str(e.value)
    assert "\n" not in str(e.value)
    assert sorted(tmp_path.iterdir()) == before  # nothing written beside the input


def test_truncated_gzip_and_missing_file(tmp_path: Path) -> None:
    good = gzip.compress(json.dumps(kineto_doc()).encode())
    p = tmp_path / "cut.json.gz"
    p.write_bytes(good[: len(good) // 2])
    with pytest.raises(TraceFormatError, match="gzip"):
        load(p)
    with pytest.raises(TraceFormatError, match="no such file"):
        load(tmp_path / "missing.json")
    with pytest.raises(TraceFormatError, match="directory"):
        load(tmp_path)


def test_unknown_category_still_loads_and_is_kind_other(tmp_path: Path) -> None:
    # The fast schema decodes cat as a Literal of Kineto's categories; any other string
    # takes the second typed schema and must give the same table.
    doc = kineto_doc()
    doc["traceEvents"].append({"ph": "X", "cat": "my_vendor_thing", "name": "x", "pid": 10,
                               "tid": 11, "ts": 1002.0, "dur": 1.0})
    t = load(write(tmp_path, doc))
    row = t.events[t.events["name"] == "x"].iloc[0]
    assert (row["cat"], row["kind"], row["dur"]) == ("my_vendor_thing", "other", 1000)
    assert len(t.kernels()) == 1 and t.meta.notes == ()


def test_cpu_only_and_mtia_traces_say_so(tmp_path: Path) -> None:
    doc = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 2},
        {"ph": "X", "cat": "mtia_ccp_events", "name": "mtia_kernel", "pid": 2, "tid": 3,
         "ts": 2, "dur": 2},
    ]}
    t = load(write(tmp_path, doc))
    assert t.kernels().empty
    assert any("CPU-only" in n for n in t.meta.notes)
    assert any("MTIA activity (mtia_ccp_events)" in n for n in t.meta.notes)
    assert load(write(tmp_path, kineto_doc(), name="gpu.json")).meta.notes == ()


def test_the_collector_is_paused_and_back_as_it_was() -> None:
    """``paused_gc`` (the reader's load, the args decodes, the writers' batches): the cyclic
    collector is off inside and back as it was after, an error included."""
    import gc

    from traceforge.formats.source import paused_gc

    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), paused_gc():
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # a caller's own pause is left alone
    finally:
        gc.enable()
