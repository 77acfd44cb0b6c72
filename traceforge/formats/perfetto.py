"""Perfetto protobuf reader: ``.pftrace``, ``.perfetto-trace``, rocprofv3 ``-f pftrace``.

Reads TrackEvent traces with the ``perfetto_trace_pb2`` classes of the ``perfetto`` wheel;
no trace_processor binary is used. The outer ``Trace`` message is split into packets by
hand (field 1, length-delimited) so a truncated file names the byte where it stops, and
packets are decoded one at a time. Understood: track descriptors (process, thread,
named and counter tracks), SLICE_BEGIN/END, INSTANT, COUNTER, interned event names,
categories and debug-annotation names, ``flow_ids``/``terminating_flow_ids``, packet
defaults and sequence-scoped incremental clocks (the Perfetto SDK's default encoding,
converted to absolute time with the sequence's ClockSnapshot).

Counters are not events of the model; they are kept in ``meta.extra["counters"]``
(a DataFrame: track, ts, value).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from traceforge.errors import TraceFormatError
from traceforge.formats.source import read_bytes
from traceforge.formats.symbols import demangle_names
from traceforge.model import FLOW_COLUMNS, GPU_KINDS, Trace, TraceMeta, normalize_events

NAME = "perfetto"
SUFFIXES = (".pftrace", ".perfetto-trace", ".pb", ".pftrace.gz")

# Categories (lower case) that Kineto, our writer and rocprofv3 put on slices -> kind.
_KIND_OF_CAT = {
    "kernel": "kernel", "kernel_dispatch": "kernel",
    "gpu_memcpy": "memcpy", "memcpy": "memcpy", "memory_copy": "memcpy",
    "gpu_memset": "memset", "memset": "memset",
    "cuda_runtime": "runtime", "runtime": "runtime", "hip_api": "runtime",
    "hip_runtime_api": "runtime", "hip_runtime_api_ext": "runtime",
    "cuda_driver": "driver", "cpu_op": "cpu_op", "operator": "cpu_op",
    "user_annotation": "user_annotation", "marker_api": "user_annotation",
    "gpu_user_annotation": "gpu_annotation", "python_function": "python",
    "cuda_sync": "sync",
}
_ID_ARGS = {
    "corr": ("correlation", "corr_id", "correlation_id"),
    "ext": ("External id", "external id"),
    "device": ("device", "agent_id", "device_id"),
    "stream": ("stream", "stream_id", "queue_id", "queue"),
    "graph": ("graph id",),
}
_INCREMENTAL_CLEARED = 1  # TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
_BOOTTIME = 6


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise IndexError(pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError(pos)


def sniff(path: Path, head: bytes) -> bool:
    """Starts like a ``Trace`` message: a length-delimited field 1 holding a TracePacket."""
    if head[:1] != b"\x0a":
        return False
    if head.lstrip()[:1] in (b"{", b"[") and not path.name.endswith(SUFFIXES):
        # JSON after a newline (how PyTorch writes its traces), not a packet: decided
        # without importing the protobuf classes (~45 ms for every JSON trace's read).
        return False
    try:
        n, pos = _uvarint(head, 1)
    except (IndexError, ValueError):
        return False
    if pos + n > len(head):  # first packet longer than the head: trust the suffix hint
        return path.name.endswith(SUFFIXES)
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    except ImportError:
        return path.name.endswith(SUFFIXES)
    try:
        pkt = pb.TracePacket.FromString(head[pos:pos + n])
    except Exception:  # noqa: BLE001 - any decode failure means "not ours"
        return False
    return bool(pkt.ListFields())


def packets(raw: bytes, path: Path) -> Iterator[bytes]:
    """The serialized TracePackets of a Trace message, with a clear error on truncation."""
    pos, k, n = 0, 0, len(raw)
    while pos < n:
        start = pos
        try:
            tag, pos = _uvarint(raw, pos)
            wt = tag & 7
            if wt == 2:
                size, pos = _uvarint(raw, pos)
            elif wt == 0:
                _, pos = _uvarint(raw, pos)
                continue
            else:
                size = {1: 8, 5: 4}.get(wt, -1)
                if size < 0:
                    raise TraceFormatError(
                        path, f"not a Perfetto trace (bad field at byte {start})")
        except (IndexError, ValueError):
            raise TraceFormatError(
                path, f"truncated protobuf: stops inside packet {k} header at byte {start} of {n}"
            ) from None
        if pos + size > n:
            raise TraceFormatError(
                path, f"truncated protobuf: packet {k} at byte {start} needs {size} bytes, "
                f"only {n - pos} remain"
            )
        if tag >> 3 == 1 and wt == 2:
            yield raw[pos:pos + size]
            k += 1
        pos += size


class _Seq:
    """Interning tables, defaults and incremental clocks of one packet sequence."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.cats: dict[int, str] = {}
        self.ann: dict[int, str] = {}
        self.track: int | None = None
        self.clock: int | None = None
        self.incr: dict[int, list[int]] = {}  # clock id -> [last value, boot ref, ref, mult]

    def clear(self) -> None:
        self.names.clear()
        self.cats.clear()
        self.ann.clear()


def _annotation(d: Any, seq: _Seq) -> tuple[str, Any]:
    name = _text(d.name) if d.HasField("name") else seq.ann.get(d.name_iid, str(d.name_iid))
    which = d.WhichOneof("value")
    if which is None:
        return name, None
    v = getattr(d, which)
    if which in ("nested_value",):
        return name, str(v)
    return name, v if isinstance(v, (int, float, str, bool)) else str(v)


def read(path: str | Path) -> Trace:
    """Read a Perfetto TrackEvent protobuf trace into a Trace."""
    p = Path(path)
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    except ImportError:
        raise TraceFormatError(
            p, "reading Perfetto traces needs the perfetto and protobuf packages "
            "(dependencies of traceforge; reinstall it or pip install perfetto protobuf)"
        ) from None
    raw = read_bytes(p)
    tracks: dict[int, dict[str, Any]] = {}
    seqs: dict[int, _Seq] = {}
    open_: dict[int, list[dict[str, Any]]] = {}
    rows: list[dict[str, Any]] = []
    counters: list[tuple[int, int, float]] = []
    from google.protobuf.message import DecodeError

    TE = pb.TrackEvent
    for k, data in enumerate(packets(raw, p)):
        try:
            pkt = pb.TracePacket.FromString(data)
        except DecodeError as e:
            raise TraceFormatError(p, f"packet {k} is not a valid TracePacket ({e})") from None
        seq = seqs.setdefault(pkt.trusted_packet_sequence_id, _Seq())
        if pkt.sequence_flags & _INCREMENTAL_CLEARED or pkt.incremental_state_cleared:
            seq.clear()
        if pkt.HasField("trace_packet_defaults"):
            d = pkt.trace_packet_defaults
            if d.HasField("timestamp_clock_id"):
                seq.clock = d.timestamp_clock_id
            if d.track_event_defaults.HasField("track_uuid"):
                seq.track = d.track_event_defaults.track_uuid
        if pkt.HasField("clock_snapshot"):
            _snapshot(pkt.clock_snapshot, seq)
        if pkt.HasField("interned_data"):
            i = pkt.interned_data
            seq.names.update((e.iid, _text(e.name)) for e in i.event_names)
            seq.cats.update((e.iid, _text(e.name)) for e in i.event_categories)
            seq.ann.update((e.iid, _text(e.name)) for e in i.debug_annotation_names)
        if pkt.HasField("track_descriptor"):
            _track(pkt.track_descriptor, tracks)
        if not pkt.HasField("track_event"):
            continue
        te = pkt.track_event
        ts = _timestamp(pkt, seq)
        track = te.track_uuid if te.HasField("track_uuid") else (seq.track or 0)
        if te.type == TE.TYPE_SLICE_END:
            stack = open_.get(track)
            if stack:
                r = stack.pop()
                if ts < r["ts"]:  # the one policy of every reader (columns.check_intervals)
                    raise TraceFormatError(
                        p, f"slice {r['name'][:80]!r} ends before it starts; traceforge "
                        "refuses rather than guess its time")
                r["dur"] = ts - r["ts"]
                rows.append(r)
            continue
        if te.type == TE.TYPE_COUNTER:
            v = te.double_counter_value if te.HasField("double_counter_value") else te.counter_value
            counters.append((track, ts, float(v)))
            continue
        name = _text(te.name) if te.HasField("name") else seq.names.get(te.name_iid, "")
        cats = [_text(c) for c in te.categories] or [seq.cats.get(c, "") for c in
                                                     te.category_iids]
        r = {"name": name, "cat": ",".join(c for c in cats if c), "ts": ts, "dur": 0,
             "track": track, "args": dict(_annotation(a, seq) for a in te.debug_annotations),
             "flows": list(te.flow_ids), "ends": list(te.terminating_flow_ids)}
        if te.type == TE.TYPE_SLICE_BEGIN:
            open_.setdefault(track, []).append(r)
        else:  # instants (and events of unspecified type) have no duration
            rows.append(r)
    unclosed = sum(len(s) for s in open_.values())
    return _build(p, rows, tracks, counters, unclosed)


def _text(v: Any) -> str:
    """A proto string field as text: a damaged field can come back as bytes."""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _snapshot(cs: Any, seq: _Seq) -> None:
    boot = next((c.timestamp for c in cs.clocks if c.clock_id == _BOOTTIME), None)
    for c in cs.clocks:
        if c.clock_id >= 64 or c.is_incremental:
            mult = c.unit_multiplier_ns or 1
            seq.incr[c.clock_id] = [c.timestamp, boot if boot is not None else c.timestamp,
                                    c.timestamp, mult, int(c.is_incremental)]


def _timestamp(pkt: Any, seq: _Seq) -> int:
    ts = int(pkt.timestamp)
    clock = pkt.timestamp_clock_id if pkt.HasField("timestamp_clock_id") else seq.clock
    st = seq.incr.get(clock) if clock is not None else None
    if st is None:
        return ts
    last, boot, ref, mult, incremental = st
    value = last + ts if incremental else ts
    st[0] = value
    return int(boot + (value - ref) * mult)


def _track(td: Any, tracks: dict[int, dict[str, Any]]) -> None:
    t: dict[str, Any] = {"name": _text(td.name or td.static_name),
                         "parent": td.parent_uuid or None}
    if td.HasField("thread"):
        t["pid"], t["tid"] = td.thread.pid, td.thread.tid
        t["name"] = t["name"] or _text(td.thread.thread_name)
    elif td.HasField("process"):
        t["pid"], t["pname"] = td.process.pid, _text(td.process.process_name)
    tracks[td.uuid] = t


def _where(uuid: int, tracks: dict[int, dict[str, Any]], lanes: dict[int, int]) -> tuple[int, int]:
    """(pid, tid) of a track: threads are themselves; children inherit their parent's."""
    t = tracks.get(uuid)
    seen = 0
    while t is not None and seen < 32:
        if "tid" in t:
            return int(t["pid"]), int(t["tid"])
        if "pid" in t:  # a process-level or named track: its own tid, stable per track
            return int(t["pid"]), lanes.setdefault(uuid, -2 - len(lanes))
        parent = t.get("parent")
        if parent is None or parent not in tracks:
            break
        child_of_thread = "tid" in tracks[parent]
        if child_of_thread:  # our writer's overflow lanes: same thread
            return int(tracks[parent]["pid"]), int(tracks[parent]["tid"])
        t, uuid = tracks[parent], parent
        seen += 1
    return 0, lanes.setdefault(uuid, -2 - len(lanes))


def _pick_id(args: dict[str, Any], keys: tuple[str, ...]) -> int:
    for k in keys:
        v = args.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, str) and v.lstrip("-").isdigit():
            return int(v)
    return -1


def _build(p: Path, rows: list[dict[str, Any]], tracks: dict[int, dict[str, Any]],
           counters: list[tuple[int, int, float]], unclosed: int) -> Trace:
    lanes: dict[int, int] = {}
    where = {u: _where(u, tracks, lanes) for u in {r["track"] for r in rows} | set(tracks)}
    rows.sort(key=lambda r: r["ts"])
    n = len(rows)
    ts = np.array([r["ts"] for r in rows], dtype=np.int64)
    t0 = int(ts.min()) if n else (min(c[1] for c in counters) if counters else 0)
    pid = np.array([where[r["track"]][0] for r in rows], dtype=np.int64)
    tid = np.array([where[r["track"]][1] for r in rows], dtype=np.int64)
    kind = np.array([_KIND_OF_CAT.get(r["cat"].split(",")[0].lower(), "other") for r in rows],
                    dtype=object)
    ids = {c: np.array([_pick_id(r["args"], keys) for r in rows], dtype=np.int64)
           for c, keys in _ID_ARGS.items()}
    is_gpu = np.isin(kind, (*GPU_KINDS, "gpu_annotation", "sync"))
    device = np.where(is_gpu, np.where(ids["device"] >= 0, ids["device"], pid), -1)
    stream = np.where(is_gpu, np.where(ids["stream"] >= 0, ids["stream"], tid), -1)
    df = pd.DataFrame({
        "name": [r["name"] for r in rows], "kind": kind, "cat": [r["cat"] for r in rows],
        "ts": ts - t0, "dur": np.array([r["dur"] for r in rows], dtype=np.int64),
        "pid": pid, "tid": tid, "device": device, "stream": stream,
        "corr": ids["corr"], "ext": ids["ext"], "graph": ids["graph"],
    })
    procs = {int(t["pid"]): t["pname"] for t in tracks.values() if t.get("pname")}
    threads = {where[u]: t["name"] for u, t in tracks.items() if t.get("name") and
               ("tid" in t or u in lanes)}
    extra: dict[str, Any] = {}
    if counters:
        names = {u: t.get("name", str(u)) for u, t in tracks.items()}
        extra["counters"] = pd.DataFrame({
            "track": [names.get(c[0], str(c[0])) for c in counters],
            "ts": np.array([c[1] - t0 for c in counters], dtype=np.int64),
            "value": [c[2] for c in counters]})
    notes = (f"{unclosed} slices never ended and were left out",) if unclosed else ()
    meta = TraceMeta(path=str(p), format=NAME, base_ns=t0, process_names=procs,
                     thread_names=threads, notes=notes, extra=extra)
    stored = [r["args"] for r in rows]

    def provider(sel: np.ndarray) -> list[dict[str, Any]]:
        return [dict(stored[int(i)]) for i in sel]

    return demangle_names(Trace(normalize_events(df), meta, _flows(rows, pid, tid, t0), provider))


def _flows(rows: list[dict[str, Any]], pid: np.ndarray, tid: np.ndarray, t0: int) -> pd.DataFrame:
    pts: list[tuple[int, int, int, int, bool]] = []
    for i, r in enumerate(rows):
        pts += [(f, r["ts"], int(pid[i]), int(tid[i]), False) for f in r["flows"]]
        pts += [(f, r["ts"], int(pid[i]), int(tid[i]), True) for f in r["ends"]]
    if not pts:
        empty: pd.DataFrame = pd.DataFrame(
            {c: pd.Series([], dtype=t) for c, t in FLOW_COLUMNS.items()})
        return empty
    pts.sort(key=lambda x: (x[0], x[1], x[4]))
    ph = []
    for k, pt in enumerate(pts):
        first = k == 0 or pts[k - 1][0] != pt[0]
        last = k == len(pts) - 1 or pts[k + 1][0] != pt[0]
        ph.append("s" if first and not pt[4] else ("f" if last or pt[4] else "t"))
    out: pd.DataFrame = pd.DataFrame({
        # Flow ids are uint64 (the SDK hashes them); wrap into int64 like a C cast.
        "id": np.array([x[0] - (1 << 64) if x[0] >= 1 << 63 else x[0] for x in pts],
                       dtype=np.int64),
        "cat": pd.Categorical(["flow"] * len(pts)),
        "ph": pd.Categorical(ph),
        "ts": np.array([x[1] - t0 for x in pts], dtype=np.int64),
        "pid": np.array([x[2] for x in pts], dtype=np.int64),
        "tid": np.array([x[3] for x in pts], dtype=np.int64),
    })
    return out
