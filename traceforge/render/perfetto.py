"""Chrome-trace document -> Perfetto TrackEvent protobuf (``.pftrace``).

Perfetto loads protobuf traces several times faster than JSON and they are smaller. The
packets are encoded by hand (varints, fields in field-number order, byte for byte what the
``perfetto`` wheel's ``perfetto_trace_pb2`` classes would serialize); no trace_processor is
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
import struct
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

_SEQ = 1  # trusted_packet_sequence_id of every packet we write
_INT32 = 2**31


def _ns(us: Any) -> int:
    return int(round(float(us) * 1000.0))


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


_SMALL = [bytes((i,)) for i in range(0x80)]


class PacketEncoder:
    """Encodes TracePackets by hand (varints, no message objects) into one growing buffer,
    each framed as ``Trace.packet`` (field 1, length-delimited); fields in field-number
    order, as protobuf serializes them. Event names are interned per sequence."""

    def __init__(self, sink: Callable[[bytes], Any] | None = None) -> None:
        self.sink = sink
        self.buf = bytearray()
        self.names: dict[str, int] = {}
        self.keys: dict[Any, bytes] = {}
        self.cats: dict[str, bytes] = {}
        self.seen: dict[tuple[Any, Any], bytes] = {}
        self.first = True

    def _packet(self, body: bytes, flags: int = 0, tail: bytes = b"") -> None:
        if self.first:
            flags |= _CLEARED
            self.first = False
        pkt = body + (b"\x68" + _varint(flags) if flags else b"") + tail
        self.buf += b"\x0a" + _varint(len(pkt)) + pkt
        if self.sink is not None and len(self.buf) >= _FLUSH:
            self.flush()

    def flush(self) -> None:
        """Hand the packets so far to the sink (packets are written in batches)."""
        if self.sink is not None and self.buf:
            self.sink(bytes(self.buf))
            self.buf.clear()

    def track(self, uuid: int, *, parent: int | None = None, name: str | None = None,
              process: tuple[int, str | None] | None = None,
              thread: tuple[int, int, str | None] | None = None,
              counter: bool = False) -> None:
        """A TrackDescriptor packet."""
        td = _key(1, 0) + _varint(uuid)
        if name is not None:
            td += _bytes(2, name.encode())
        if process is not None:
            pd = _key(1, 0) + _varint(process[0])
            if process[1]:
                pd += _bytes(6, process[1].encode())
            td += _bytes(3, pd)
        if thread is not None:
            th = _key(1, 0) + _varint(thread[0]) + _key(2, 0) + _varint(thread[1])
            if thread[2]:
                th += _bytes(5, thread[2].encode())
            td += _bytes(4, th)
        if parent is not None:
            td += _key(5, 0) + _varint(parent)
        if counter:
            td += _bytes(8, b"")
        self._packet(_SEQ_FIELD, 0, _bytes(60, td))

    def event(self, ts: int, track: int, typ: int, name: str | None = None,
              cat: str = "", args: Mapping[str, Any] | None = None,
              flows: Iterable[int] = (), ends: Iterable[int] = (),
              value: float | None = None) -> None:
        """A TrackEvent packet (its name interned, with the interning in the same packet)."""
        te = bytearray()
        if args:
            keys, seen = self.keys, self.seen
            for k, v in args.items():
                t = type(v)
                # Repeated args (a stream, a device, a kind) are encoded once.
                pair = (k, v) if t is str or t is int else None
                if pair is not None:
                    enc = seen.get(pair)
                    if enc is not None:
                        te += enc
                        continue
                kb = keys.get(k)
                if kb is None:
                    kb = keys[k] = _bytes(10, str(k).encode())
                a = _annotation(v) + kb
                enc = _ANN + _varint(len(a)) + a
                te += enc
                if pair is not None and len(seen) < _SEEN:
                    seen[pair] = enc
        te += _TYPE[typ]
        interned = b""
        if name is not None:
            iid = self.names.get(name)
            if iid is None:
                iid = self.names[name] = len(self.names) + 1
                interned = _bytes(12, _bytes(2, _key(1, 0) + _varint(iid)
                                             + _bytes(2, name.encode())))
            te += b"\x50" + _varint(iid)
        te += b"\x58" + _varint(track)
        if cat:
            cb = self.cats.get(cat)
            if cb is None:
                cb = self.cats[cat] = _bytes(22, cat.encode())
            te += cb
        if value is not None:
            te += _VALUE + _DOUBLE(value)
        for f in flows:
            te += _FLOW + _FIXED(f & _U64)
        for f in ends:
            te += _END + _FIXED(f & _U64)
        body = (b"\x40" + _varint(ts & _U64) + _SEQ_FIELD + _TRACK_EVENT + _varint(len(te))
                + te + interned)
        self._packet(body, _NEEDS)


_U64 = 2**64 - 1
_FLUSH = 8 << 20  # bytes of packets per write to the sink
_SEEN = 1 << 18  # encoded (key, value) args kept for reuse
_CLEARED, _NEEDS = 1, 2  # TracePacket.SequenceFlags


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes(field: int, data: bytes) -> bytes:
    return _key(field, 2) + _varint(len(data)) + data


_SEQ_FIELD = _key(10, 0) + _varint(_SEQ)
_FLOW, _END = _key(47, 1), _key(48, 1)
_ANN, _TRACK_EVENT, _VALUE = _key(4, 2), _key(11, 2), _key(44, 1)
_TYPE = {t: _key(9, 0) + _varint(t) for t in range(1, 5)}
_DOUBLE = struct.Struct("<d").pack
_FIXED = struct.Struct("<Q").pack


def _annotation(v: Any) -> bytes:
    """A DebugAnnotation's value field (its ``name``, field 10, follows it)."""
    if v is True or v is False:
        return b"\x10\x01" if v else b"\x10\x00"
    t = type(v)
    if t is int and -(2**63) <= v < 2**63:
        return b"\x20" + _varint(v & _U64)
    if t is float:
        return b"\x29" + _DOUBLE(v)
    if t is str:
        return _bytes(6, v.encode())
    if isinstance(v, int) and -(2**63) <= v < 2**63:
        return b"\x20" + _varint(v & _U64)
    if isinstance(v, float):
        return b"\x29" + _DOUBLE(v)
    if isinstance(v, str):
        return _bytes(6, v.encode())
    return _bytes(9, _JSON(v).encode())


#: ``json.dumps(v, default=str)``, its encoder made once.
_JSON = json.JSONEncoder(default=str).encode


class _Tracks:
    """Track uuids for processes, threads, their overflow lanes and counters; each track's
    descriptor is written once, when it is first used."""

    def __init__(self, w: PacketEncoder, procs: dict[Any, str],
                 threads: dict[tuple[Any, Any], str]):
        self.w, self.procs, self.threads = w, procs, threads
        self.uuids: dict[tuple[Any, ...], int] = {}

    def _new(self, key: tuple[Any, ...], **fields: Any) -> int:
        uuid = self.uuids.get(key)
        if uuid is None:
            uuid = self.uuids[key] = len(self.uuids) + 1
            self.w.track(uuid, **fields)
        return uuid

    def process(self, pid: Any) -> int:
        key = ("p", pid)
        if key in self.uuids:
            return self.uuids[key]
        name = self.procs.get(pid)
        if isinstance(pid, int) and 0 <= pid < _INT32:
            return self._new(key, process=(pid, name))
        return self._new(key, name=name or str(pid))  # Perfetto pids are int32

    def thread(self, pid: Any, tid: Any, lane: int = 0) -> int:
        key = ("t", pid, tid, lane)
        if key in self.uuids:
            return self.uuids[key]
        if lane:
            parent = self.thread(pid, tid)
            base = self.threads.get((pid, tid), str(tid))
            return self._new(key, parent=parent, name=f"{base} [{lane + 1}]")
        proc = self.process(pid)
        name = self.threads.get((pid, tid))
        if all(isinstance(x, int) and 0 <= x < _INT32 for x in (pid, tid)):
            return self._new(key, thread=(pid, tid, name))
        return self._new(key, parent=proc, name=name or str(tid))

    def counter(self, pid: Any, name: str) -> int:
        key = ("c", pid, name)
        if key in self.uuids:
            return self.uuids[key]
        return self._new(key, parent=self.process(pid), name=name, counter=True)


#: TrackEvent.Type values.
_SLICE_BEGIN, _SLICE_END, _INSTANT, _COUNTER = 1, 2, 3, 4


def chrome_to_pftrace(doc: Mapping[str, Any] | list[Any]) -> bytes:
    """Encode a Chrome-trace document (dict with ``traceEvents``, or a bare list) as pftrace."""
    chunks: list[bytes] = []
    write_pftrace(doc, chunks.append)
    return b"".join(chunks)


def write_pftrace(doc: Mapping[str, Any] | list[Any], sink: Callable[[bytes], Any]) -> None:
    """Encode ``doc`` as pftrace into ``sink`` (a file's ``write``), a batch of packets at
    a time, so the encoded trace is never whole in memory."""
    events = doc.get("traceEvents", []) if isinstance(doc, Mapping) else doc
    base = 0
    if isinstance(doc, Mapping) and isinstance(doc.get("baseTimeNanoseconds"), int):
        base = int(doc["baseTimeNanoseconds"])
    w = PacketEncoder(sink)
    procs: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    slices: list[Mapping[str, Any]] = []
    other: list[Mapping[str, Any]] = []
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
            slices.append(e)
        elif ph in ("B", "E", "i", "I", "C", "s", "t", "f") and e.get("ts") is not None:
            other.append(e)
    tracks = _Tracks(w, procs, threads)
    for pid in procs:
        tracks.process(pid)
    for pid, tid in threads:
        tracks.thread(pid, tid)

    flows_at = _bind_flows(slices, [e for e in other if e["ph"] in ("s", "t", "f")])
    # Sort keys of every packet in compact arrays, not a tuple per packet: (time, rank at
    # that time, seq) and what to emit (code 0/1: begin/end of slice ``ref``; 2: ``rest[ref]``).
    k0, k1, k2, code, ref = (array("q") for _ in range(5))
    t0s, t1s, track_of = (array("q", bytes(8 * len(slices))) for _ in range(3))
    rest: list[tuple[Any, ...]] = []

    def key(t: int, rank: int, s: int, c: int, r: int) -> None:
        k0.append(t)
        k1.append(rank)
        k2.append(s)
        code.append(c)
        ref.append(r)

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
            t0s[i], t1s[i], track_of[i] = t0, t1, tracks.thread(pid, tid, lane)
            key(t0, 1, seq, 0, i)
            # At one timestamp, ends go first (innermost first) so back-to-back slices
            # stay nested; a zero-length slice ends right after it begins.
            if t1 > t0:
                key(t1, 0, -seq, 1, i)
            else:
                key(t1, 2, seq, 1, i)
            seq += 1
    for e in other:
        ph, pid, tid = e["ph"], e.get("pid"), e.get("tid")
        ts = _ns(e["ts"])
        seq += 1
        if ph in ("B", "E"):
            typ = _SLICE_BEGIN if ph == "B" else _SLICE_END
            bname = str(e.get("name", "")) if ph == "B" else None
            key(ts, 0 if ph == "E" else 1, seq, 2, len(rest))
            rest.append((ts + base, tracks.thread(pid, tid), typ, bname,
                         str(e.get("cat", "")), e.get("args")))
        elif ph in ("i", "I"):
            track = tracks.process(pid) if e.get("s") in ("p", "g") else tracks.thread(pid, tid)
            key(ts, 1, seq, 2, len(rest))
            rest.append((ts + base, track, _INSTANT, str(e.get("name", "")),
                         str(e.get("cat", "")), e.get("args")))
        elif ph == "C":
            for series, v in (e.get("args") or {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    name = str(e.get("name", "")) if series in ("", "value") else \
                        f"{e.get('name', '')} {series}"
                    key(ts, 1, seq, 2, len(rest))
                    rest.append((ts + base, tracks.counter(pid, name), _COUNTER, None, "",
                                 None, (), (), float(v)))
    order = np.lexsort((np.frombuffer(k2, np.int64), np.frombuffer(k1, np.int64),
                        np.frombuffer(k0, np.int64)))
    for c, r in zip(np.frombuffer(code, np.int64)[order].tolist(),
                    np.frombuffer(ref, np.int64)[order].tolist(), strict=True):
        if c == 0:
            e = slices[r]
            fl, ends = flows_at.get(r, ((), ()))
            w.event(t0s[r] + base, track_of[r], _SLICE_BEGIN, str(e.get("name", "")),
                    str(e.get("cat", "")), e.get("args"), fl, ends)
        elif c == 1:
            w.event(t1s[r] + base, track_of[r], _SLICE_END)
        else:
            w.event(*rest[r])
    w.flush()


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
    slices: list[Mapping[str, Any]], flows: list[Mapping[str, Any]]
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
