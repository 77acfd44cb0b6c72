"""The Chrome -> ``.pftrace`` encoder as it was before hand encoding (protobuf message
classes of the ``perfetto`` wheel), kept verbatim as the oracle the streaming writer's
output is compared with (tests/unit/render/test_pftrace_stream.py).

Chrome-trace document -> Perfetto TrackEvent protobuf (``.pftrace``).

Perfetto loads protobuf traces several times faster than JSON and they are smaller. The
classes come from the ``perfetto`` wheel (``perfetto_trace_pb2``); no trace_processor is
involved. Mapping: ``M`` names -> process/thread track descriptors; ``X`` and ``B``/``E``
-> SLICE_BEGIN/SLICE_END on the thread's track; ``i``/``I`` -> INSTANT; ``C`` -> one
counter track per series; ``s``/``t``/``f`` flows -> ``flow_ids`` /
``terminating_flow_ids`` on the slice they bind to. Event names are interned.

Perfetto needs slices on one track to nest strictly. Chrome JSON does not promise that
(async-ish GPU rows can overlap partially; the JSON importer then moves them to an
overflow track, google/perfetto#4280), so a partially overlapping slice goes to a child
"lane" track of its thread instead of corrupting the nesting.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from typing import Any

_SEQ = 1  # trusted_packet_sequence_id of every packet we write
_INT32 = 2**31


def _ns(us: Any) -> int:
    return int(round(float(us) * 1000.0))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


class _Writer:
    """Builds packets and frames them as ``Trace.packet`` (field 1, length-delimited)."""

    def __init__(self) -> None:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

        self.pb = pb
        self.chunks: list[bytes] = []
        self.names: dict[str, int] = {}
        self.first = True

    def emit(self, pkt: Any) -> None:
        pkt.trusted_packet_sequence_id = _SEQ
        if self.first:
            pkt.sequence_flags = self.pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            self.first = False
        data = pkt.SerializeToString()
        self.chunks.append(b"\x0a" + _varint(len(data)) + data)

    def event(self, ts: int, track: int, typ: int, name: str | None = None,
              cat: str = "", args: Mapping[str, Any] | None = None,
              flows: Iterable[int] = (), ends: Iterable[int] = (),
              value: float | None = None) -> None:
        pb = self.pb
        pkt = pb.TracePacket()
        pkt.timestamp = ts
        te = pkt.track_event
        te.type = typ
        te.track_uuid = track
        if name is not None:
            iid = self.names.get(name)
            if iid is None:
                iid = self.names[name] = len(self.names) + 1
                en = pkt.interned_data.event_names.add()
                en.iid, en.name = iid, name
            te.name_iid = iid
        if cat:
            te.categories.append(cat)
        if value is not None:
            te.double_counter_value = value
        te.flow_ids.extend(flows)
        te.terminating_flow_ids.extend(ends)
        for k, v in (args or {}).items():
            _annotate(te.debug_annotations.add(), str(k), v)
        pkt.sequence_flags |= pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        self.emit(pkt)


def _annotate(d: Any, key: str, v: Any) -> None:
    d.name = key
    if isinstance(v, bool):
        d.bool_value = v
    elif isinstance(v, int) and -(2**63) <= v < 2**63:
        d.int_value = v
    elif isinstance(v, float):
        d.double_value = v
    elif isinstance(v, str):
        d.string_value = v
    else:
        d.legacy_json_value = json.dumps(v, default=str)


class _Tracks:
    """Track uuids for processes, threads, their overflow lanes and counters."""

    def __init__(self, w: _Writer, procs: dict[Any, str], threads: dict[tuple[Any, Any], str]):
        self.w, self.procs, self.threads = w, procs, threads
        self.uuids: dict[tuple[Any, ...], int] = {}

    def _new(self, key: tuple[Any, ...], fill: Any) -> int:
        uuid = self.uuids.get(key)
        if uuid is None:
            uuid = self.uuids[key] = len(self.uuids) + 1
            pkt = self.w.pb.TracePacket()
            td = pkt.track_descriptor
            td.uuid = uuid
            fill(td)
            self.w.emit(pkt)
        return uuid

    def process(self, pid: Any) -> int:
        def fill(td: Any) -> None:
            name = self.procs.get(pid)
            if isinstance(pid, int) and 0 <= pid < _INT32:
                td.process.pid = pid
                if name:
                    td.process.process_name = name
            else:  # Perfetto pids are int32; keep others as named tracks
                td.name = name or str(pid)
        return self._new(("p", pid), fill)

    def thread(self, pid: Any, tid: Any, lane: int = 0) -> int:
        if lane:
            parent = self.thread(pid, tid)
            base = self.threads.get((pid, tid), str(tid))

            def lane_fill(td: Any) -> None:
                td.parent_uuid = parent
                td.name = f"{base} [{lane + 1}]"
            return self._new(("t", pid, tid, lane), lane_fill)
        proc = self.process(pid)

        def fill(td: Any) -> None:
            name = self.threads.get((pid, tid))
            if all(isinstance(x, int) and 0 <= x < _INT32 for x in (pid, tid)):
                td.thread.pid, td.thread.tid = pid, tid
                if name:
                    td.thread.thread_name = name
            else:
                td.parent_uuid = proc
                td.name = name or str(tid)
        return self._new(("t", pid, tid, 0), fill)

    def counter(self, pid: Any, name: str) -> int:
        proc = self.process(pid)

        def fill(td: Any) -> None:
            td.parent_uuid = proc
            td.name = name
            td.counter.SetInParent()
        return self._new(("c", pid, name), fill)


def chrome_to_pftrace(doc: Mapping[str, Any] | list[Any]) -> bytes:
    """Encode a Chrome-trace document (dict with ``traceEvents``, or a bare list) as pftrace."""
    events = doc.get("traceEvents", []) if isinstance(doc, Mapping) else doc
    base = 0
    if isinstance(doc, Mapping) and isinstance(doc.get("baseTimeNanoseconds"), int):
        base = int(doc["baseTimeNanoseconds"])
    w = _Writer()
    pb = w.pb.TrackEvent
    procs: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    slices: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    for e in events:
        if not isinstance(e, Mapping):
            continue
        ph = e.get("ph")
        if ph == "M":
            label = (e.get("args") or {}).get("name")
            if e.get("name") == "process_name" and label is not None:
                procs[e.get("pid")] = str(label)
            elif e.get("name") == "thread_name" and label is not None:
                threads[(e.get("pid"), e.get("tid"))] = str(label)
        elif ph == "X" and e.get("ts") is not None:
            slices.append(dict(e))
        elif ph in ("B", "E", "i", "I", "C", "s", "t", "f") and e.get("ts") is not None:
            other.append(dict(e))
    tracks = _Tracks(w, procs, threads)
    for pid in procs:
        tracks.process(pid)
    for pid, tid in threads:
        tracks.thread(pid, tid)

    flows_at = _bind_flows(slices, [e for e in other if e["ph"] in ("s", "t", "f")])
    out: list[tuple[tuple[int, int, int], tuple[Any, ...]]] = []  # (sort key, event args)
    seq = 0
    by_thread: dict[tuple[Any, Any], list[int]] = {}
    for i, e in enumerate(slices):
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(i)
    for (pid, tid), idx in by_thread.items():
        idx.sort(key=lambda i: (_ns(slices[i]["ts"]), -_ns(slices[i].get("dur") or 0)))
        lanes: list[list[int]] = []  # per lane, a stack of end times
        for i in idx:
            e = slices[i]
            t0, t1 = _ns(e["ts"]), _ns(e["ts"]) + max(0, _ns(e.get("dur") or 0))
            lane = _lane(lanes, t0, t1)
            track = tracks.thread(pid, tid, lane)
            fl, ends = flows_at.get(i, ((), ()))
            name = str(e.get("name", ""))
            out.append(((t0, 1, seq), (t0 + base, track, pb.TYPE_SLICE_BEGIN, name,
                                       str(e.get("cat", "")), e.get("args"), fl, ends)))
            # At one timestamp, ends go first (innermost first) so back-to-back slices
            # stay nested; a zero-length slice ends right after it begins.
            end_key = (t1, 0, -seq) if t1 > t0 else (t1, 2, seq)
            out.append((end_key, (t1 + base, track, pb.TYPE_SLICE_END)))
            seq += 1
    for e in other:
        ph, pid, tid = e["ph"], e.get("pid"), e.get("tid")
        ts = _ns(e["ts"])
        seq += 1
        if ph in ("B", "E"):
            typ = pb.TYPE_SLICE_BEGIN if ph == "B" else pb.TYPE_SLICE_END
            bname = str(e.get("name", "")) if ph == "B" else None
            key = (ts, 0 if ph == "E" else 1, seq)
            out.append((key, (ts + base, tracks.thread(pid, tid), typ, bname,
                              str(e.get("cat", "")), e.get("args"))))
        elif ph in ("i", "I"):
            track = tracks.process(pid) if e.get("s") in ("p", "g") else tracks.thread(pid, tid)
            out.append(((ts, 1, seq), (ts + base, track, pb.TYPE_INSTANT, str(e.get("name", "")),
                                  str(e.get("cat", "")), e.get("args"))))
        elif ph == "C":
            for series, v in (e.get("args") or {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    name = str(e.get("name", "")) if series in ("", "value") else \
                        f"{e.get('name', '')} {series}"
                    out.append(((ts, 1, seq), (ts + base, tracks.counter(pid, name),
                                          pb.TYPE_COUNTER, None, "", None, (), (), float(v))))
    out.sort(key=lambda x: x[0])
    for _, a in out:
        w.event(*a)
    return b"".join(w.chunks)


def _lane(lanes: list[list[int]], t0: int, t1: int) -> int:
    """First lane on which [t0, t1] nests (stacks hold the end times of open slices)."""
    for k, stack in enumerate(lanes):
        while stack and stack[-1] <= t0:
            stack.pop()
        if not stack or t1 <= stack[-1]:
            stack.append(t1)
            return k
    lanes.append([t1])
    return len(lanes) - 1


def _bind_flows(
    slices: list[dict[str, Any]], flows: list[dict[str, Any]]
) -> dict[int, tuple[list[int], list[int]]]:
    """Attach each flow point to the slice it binds to (same thread, enclosing ``ts``)."""
    if not flows:
        return {}
    starts: dict[tuple[Any, Any], tuple[list[int], list[int]]] = {}
    for i, e in sorted(enumerate(slices), key=lambda x: _ns(x[1]["ts"])):
        s = starts.setdefault((e.get("pid"), e.get("tid")), ([], []))
        s[0].append(_ns(e["ts"]))
        s[1].append(i)
    ids: dict[tuple[str, Any], int] = {}
    out: dict[int, tuple[list[int], list[int]]] = {}
    for f in flows:
        st = starts.get((f.get("pid"), f.get("tid")))
        if st is None:
            continue
        ts = _ns(f["ts"])
        k = bisect_right(st[0], ts) - 1
        # Walk back to the innermost slice that still contains ts (bp "e": enclosing).
        while k >= 0:
            e = slices[st[1][k]]
            if _ns(e["ts"]) + _ns(e.get("dur") or 0) >= ts:
                break
            k -= 1
        if k < 0:
            continue
        fid = ids.setdefault((str(f.get("cat", "")), f.get("id")), len(ids) + 1)
        slot = out.setdefault(st[1][k], ([], []))
        (slot[1] if f["ph"] == "f" else slot[0]).append(fid)
    return out
