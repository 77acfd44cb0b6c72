"""Perfetto protobuf: writer output checked with protobuf classes; reader on hand-built traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import traceforge as tf
from traceforge.errors import TraceFormatError
from traceforge.render.perfetto import chrome_to_pftrace

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

DOC: dict[str, Any] = {
    "traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": 10, "tid": 11, "args": {"name": "main"}},
        {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 10, "tid": 11, "ts": 1.0, "dur": 10.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11,
         "ts": 2.0, "dur": 3.0, "args": {"correlation": 5}},
        # Starts inside "outer" but ends after it: must not break the nesting.
        {"ph": "X", "cat": "cpu_op", "name": "straddle", "pid": 10, "tid": 11, "ts": 9.0,
         "dur": 4.0},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 6.5, "dur": 2.25,
         "args": {"correlation": 5, "device": 0, "stream": 7}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 10, "tid": 11, "ts": 2.0},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 6.5,
         "bp": "e"},
        {"ph": "B", "cat": "user_annotation", "name": "step", "pid": 10, "tid": 12, "ts": 0.5},
        {"ph": "E", "pid": 10, "tid": 12, "ts": 20.0},
        {"ph": "i", "cat": "marker", "name": "mark", "pid": 10, "tid": 12, "ts": 3.0, "s": "t"},
        {"ph": "C", "name": "mem", "pid": 10, "ts": 4.0, "args": {"bytes": 1024}},
        {"ph": "C", "name": "mem", "pid": 10, "ts": 8.0, "args": {"bytes": 2048}},
    ]
}


def _write(tmp_path: Path, data: bytes, name: str = "t.pftrace") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_writer_output_is_well_nested_trackevent() -> None:
    trace = pb.Trace.FromString(chrome_to_pftrace(DOC))
    open_: dict[int, list[int]] = {}
    begins = 0
    last_ts = 0
    for pkt in trace.packet:
        if not pkt.HasField("track_event"):
            continue
        assert pkt.timestamp >= last_ts  # one sequence, sorted
        last_ts = pkt.timestamp
        te = pkt.track_event
        if te.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            open_.setdefault(te.track_uuid, []).append(pkt.timestamp)
            begins += 1
        elif te.type == pb.TrackEvent.TYPE_SLICE_END:
            assert open_[te.track_uuid], "END without BEGIN on its track"
            open_[te.track_uuid].pop()
    assert begins == 5 and all(not s for s in open_.values())
    names = {p.track_descriptor.process.process_name for p in trace.packet
             if p.HasField("track_descriptor")}
    assert "python3" in names


def test_reader_reads_what_the_writer_wrote(tmp_path: Path) -> None:
    t = tf.load(_write(tmp_path, chrome_to_pftrace(DOC)))
    assert t.meta.format == "perfetto"
    ev = t.events.set_index(t.events["name"].astype(str))
    assert ev.loc["gemm", "kind"] == "kernel" and ev.loc["gemm", "dur"] == 2250
    assert ev.loc["gemm", "ts"] - ev.loc["step", "ts"] == 6000
    assert ev.loc["straddle", "dur"] == 4000 and ev.loc["straddle", "tid"] == 11
    assert ev.loc["step", "dur"] == 19500 and ev.loc["mark", "dur"] == 0
    assert ev.loc["cudaLaunchKernel", "corr"] == ev.loc["gemm", "corr"] == 5
    assert ev.loc["gemm", "stream"] == 7
    assert t.meta.process_names[10] == "python3"
    assert t.meta.thread_names[(10, 11)] == "main"
    c = t.meta.extra["counters"]
    assert c["value"].tolist() == [1024.0, 2048.0] and (c["ts"].diff().dropna() == 4000).all()
    assert sorted(t.flows["ph"].astype(str)) == ["f", "s"]


def _incremental_trace() -> bytes:
    """A trace as the Perfetto SDK writes it: interned names, incremental clock 64."""
    tr = pb.Trace()
    p = tr.packet.add()
    p.trusted_packet_sequence_id = 3
    p.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    p.trace_packet_defaults.timestamp_clock_id = 64
    snap = p.clock_snapshot
    c = snap.clocks.add()
    c.clock_id, c.timestamp = 6, 1_000_000  # BOOTTIME
    c = snap.clocks.add()
    c.clock_id, c.timestamp, c.is_incremental = 64, 0, True
    p = tr.packet.add()
    p.trusted_packet_sequence_id = 3
    p.track_descriptor.uuid = 77
    p.track_descriptor.thread.pid, p.track_descriptor.thread.tid = 4, 5
    p.track_descriptor.thread.thread_name = "worker"
    for delta, typ, iid in ((100, pb.TrackEvent.TYPE_SLICE_BEGIN, 1),
                            (50, pb.TrackEvent.TYPE_SLICE_END, 0),
                            (25, pb.TrackEvent.TYPE_SLICE_BEGIN, 1),
                            (10, pb.TrackEvent.TYPE_SLICE_END, 0)):
        p = tr.packet.add()
        p.trusted_packet_sequence_id = 3
        p.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        p.timestamp = delta
        p.track_event.type = typ
        p.track_event.track_uuid = 77
        if iid:
            p.track_event.name_iid = iid
            p.track_event.category_iids.append(1)
            if not p.interned_data.event_names:
                en = p.interned_data.event_names.add()
                en.iid, en.name = 1, "hipLaunchKernel"
                ec = p.interned_data.event_categories.add()
                ec.iid, ec.name = 1, "hip_api"
    data: bytes = tr.SerializeToString()
    return data


def test_incremental_clock_and_interning(tmp_path: Path) -> None:
    # Named .bin: the format is sniffed from the content.
    t = tf.load(_write(tmp_path, _incremental_trace(), "capture.bin"))
    assert t.events["name"].astype(str).tolist() == ["hipLaunchKernel"] * 2
    assert t.events["kind"].astype(str).tolist() == ["runtime"] * 2
    assert t.events["dur"].tolist() == [50, 10]
    assert t.events["ts"].tolist() == [0, 75]  # 100+50+25 - 100
    assert t.meta.base_ns == 1_000_100
    assert t.meta.thread_names[(4, 5)] == "worker"


def test_truncated_protobuf_says_where(tmp_path: Path) -> None:
    data = chrome_to_pftrace(DOC)
    p = _write(tmp_path, data[: len(data) - 7])
    with pytest.raises(TraceFormatError, match=r"truncated protobuf: packet \d+ at byte \d+"):
        tf.load(p)


def test_garbage_with_pftrace_suffix_is_one_line_error(tmp_path: Path) -> None:
    p = _write(tmp_path, b"\x0a\xff\xff\xff\xff\x0f garbage")
    with pytest.raises(TraceFormatError):
        tf.load(p)


def test_json_after_a_newline_is_read_without_the_protobuf_classes(tmp_path: Path) -> None:
    """PyTorch writes its traces starting "\\n  {": a newline is also a packet's field key,
    but the sniff tells JSON apart before importing the protobuf classes (~45 ms)."""
    import json
    import os
    import subprocess
    import sys

    src = tmp_path / "t.json"
    src.write_text("\n  " + json.dumps(DOC))
    code = ("import sys, traceforge as tf; t = tf.load(sys.argv[1]); "
            "print(t.meta.format, len(t.events), "
            "'perfetto.protos.perfetto.trace.perfetto_trace_pb2' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True,
                         text=True, check=True,
                         env={**os.environ, "TRACEFORGE_NO_CACHE": "1"})
    fmt, n, imported = out.stdout.split()
    assert fmt == "kineto" and int(n) > 0 and imported == "False", out.stdout
