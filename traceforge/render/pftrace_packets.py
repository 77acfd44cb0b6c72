"""TracePackets encoded by hand (varints, fields in field-number order: byte for byte what
the ``perfetto`` wheel's ``perfetto_trace_pb2`` classes would serialize): track
descriptors and track events with interned names, their args as debug annotations (a
repeated value encoded once), batched into a sink. :mod:`traceforge.render.perfetto`
lays a Chrome-trace document out as these packets.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec
import numpy as np

_SEQ = 1  # trusted_packet_sequence_id of every packet we write
#: TrackEvent.Type values.
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    if n < 0x200000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14))
    if n < 0x10000000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14 & 0x7F | 0x80, n >> 21))
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
VARINT_TABLE = [_varint(i) for i in range(0x4000)]


def varint(n: int) -> bytes:
    """:func:`_varint` of a non-negative ``n``, from a table below 16384."""
    return VARINT_TABLE[n] if n < 0x4000 else _varint(n)


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
        self.seen: dict[tuple[Any, ...], bytes] = {}
        self.first = True
        #: Bytes of packets gathered before they go to the sink.
        self.flush_bytes = FLUSH_BYTES

    def _packet(self, body: bytes, flags: int = 0, tail: bytes = b"") -> None:
        if self.first:
            flags |= _CLEARED
            self.first = False
        pkt = body + (b"\x68" + _varint(flags) if flags else b"") + tail
        n = len(pkt)
        self.buf += b"\x0a" + (VARINT_TABLE[n] if n < 0x4000 else _varint(n)) + pkt
        if self.sink is not None and len(self.buf) >= self.flush_bytes:
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

    def event(self, ts: int | bytes, track: int, typ: int, name: str | None = None,
              cat: str = "", args: Mapping[str, Any] | None = None,
              flows: Iterable[int] = (), ends: Iterable[int] = (),
              value: float | None = None) -> None:
        """A TrackEvent packet (its name interned, with the interning in the same packet);
        ``ts`` in ns, or already its varint (:func:`varints`)."""
        te = bytearray()
        if args:
            keys, seen = self.keys, self.seen
            pair: tuple[Any, ...] | None
            for k, v in args.items():
                t = type(v)
                if t is _RawJSON:
                    # A value still as its JSON text: equal texts, equal values. Decoded
                    # (and encoded) once per text where it is kept (as below).
                    text = bytes(v)
                    pair = (k, _RAW, text)
                    enc = seen.get(pair)
                    if enc is not None:
                        te += enc
                        continue
                    v = _DECODE(text)
                    t = type(v)
                    if not (t is str or t is list or (t is int and -256 <= v < 65536)):
                        pair = None
                else:
                    # Repeated args (a stream, a device, a kind, op shapes) are encoded once;
                    # a list by its repr (equal reprs of decoded JSON: equal values and
                    # types). Large ints (ids, unique per event) are not kept.
                    pair = (k, v) if t is str or (t is int and -256 <= v < 65536) else \
                        (k, _LIST, repr(v)) if t is list else None
                    if pair is not None:
                        enc = seen.get(pair)
                        if enc is not None:
                            te += enc
                            continue
                kb = keys.get(k)
                if kb is None:
                    kb = keys[k] = _bytes(10, str(k).encode())
                a = _annotation(v) + kb
                enc = _ANN + varint(len(a)) + a
                te += enc
                if pair is not None and len(seen) < _SEEN:
                    seen[pair] = enc
        te += _TYPE[typ]
        interned = b""
        if name is not None:
            iid = self.names.get(name)
            if iid is None:
                iid = self.names[name] = len(self.names) + 1
                interned = _bytes(12, _bytes(2, _key(1, 0) + varint(iid)
                                             + _bytes(2, name.encode())))
            te += b"\x50" + (VARINT_TABLE[iid] if iid < 0x4000 else _varint(iid))
        te += b"\x58" + (VARINT_TABLE[track] if track < 0x4000 else _varint(track))
        if cat:
            cb = self.cats.get(cat)
            if cb is None:
                cb = self.cats[cat] = _bytes(22, cat.encode())
            te += cb
        if value is not None:
            te += _VALUE + _DOUBLE(value)
        for f in flows:
            te += _FLOW + _FIXED(f & U64_MASK)
        for f in ends:
            te += _END + _FIXED(f & U64_MASK)
        tsb = ts if type(ts) is bytes else _varint(int(ts) & U64_MASK)
        n = len(te)
        body = (b"\x40" + tsb + _SEQ_FIELD + _TRACK_EVENT
                + (VARINT_TABLE[n] if n < 0x4000 else _varint(n)) + te + interned)
        self._packet(body, NEEDS_INCREMENTAL_STATE)

    def end_tail(self, track: int) -> bytes:
        """What follows the timestamp in a SLICE_END packet on ``track``, flags aside."""
        te = _TYPE[SLICE_END] + b"\x58" + varint(track)
        return _SEQ_FIELD + _TRACK_EVENT + varint(len(te)) + te

    def end(self, ts: bytes, track: int) -> None:
        """A SLICE_END packet at ``ts`` (its varint) (what :meth:`event` writes, faster)."""
        self._packet(b"\x40" + ts + self.end_tail(track), NEEDS_INCREMENTAL_STATE)


U64_MASK = 2**64 - 1
_LIST = object()  # marks a list arg's (key, _LIST, repr) among the encoded args
_RAW = object()  # marks an arg given as JSON text: (key, _RAW, text)
_RawJSON = msgspec.Raw
_DECODE = msgspec.json.decode


def varints(ns: np.ndarray) -> list[bytes]:
    """The varints of int64 values taken mod 2**64 (``_varint(v & U64_MASK)`` of each)."""
    rest = ns.astype(np.uint64)
    m = np.empty((len(rest), 10), dtype=np.uint8)
    length = np.ones(len(rest), dtype=np.int64)
    for j in range(10):
        m[:, j] = (rest & np.uint64(0x7F)).astype(np.uint8)
        rest = rest >> np.uint64(7)
        more = rest != 0
        m[more, j] |= 0x80
        length += more
    buf = m.tobytes()
    return [buf[i:i + n] for i, n in zip(range(0, 10 * len(length), 10), length.tolist(),
                                         strict=True)]


FLUSH_BYTES = 8 << 20  # bytes of packets per write to the sink
_SEEN = 1 << 18  # encoded (key, value) args kept for reuse
_CLEARED, NEEDS_INCREMENTAL_STATE = 1, 2  # TracePacket.SequenceFlags


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
        return b"\x20" + _varint(v & U64_MASK)
    if t is float:
        return b"\x29" + _DOUBLE(v)
    if t is str:
        return _bytes(6, v.encode())
    if isinstance(v, int) and -(2**63) <= v < 2**63:
        return b"\x20" + _varint(v & U64_MASK)
    if isinstance(v, float):
        return b"\x29" + _DOUBLE(v)
    if isinstance(v, str):
        return _bytes(6, v.encode())
    return _bytes(9, _JSON(v).encode())


#: ``json.dumps(v, default=str)``, its encoder made once.
_JSON = json.JSONEncoder(default=str).encode
