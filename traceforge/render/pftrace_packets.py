"""TracePackets encoded by hand (varints, fields in field-number order: byte for byte what
the ``perfetto`` wheel's ``perfetto_trace_pb2`` classes would serialize): track
descriptors and track events with interned names, their args as debug annotations (a
repeated value encoded once), batched into a sink. :mod:`traceforge.render.perfetto`
lays a Chrome-trace document out as these packets.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec
import numpy as np

from traceforge.render.pftrace_fields import (
    ANN,
    ANN_TABLE,
    DOUBLE,
    DOUBLE_FIELD,
    annotation_value,
    field_key,
    int_heads,
    length_field,
)
from traceforge.render.pftrace_varints import (
    U64_MASK,
    VARINT_TABLE,
    int_texts,
    lengths,
    prefixed,
    varint,
    varint_pieces,
)
from traceforge.render.slice_table import objects

if TYPE_CHECKING:
    from traceforge.model import ArgShapes
    from traceforge.render.slice_table import ArgColumn, SliceTable

_SEQ = 1  # trusted_packet_sequence_id of every packet we write
#: TrackEvent.Type values.
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4


class PacketEncoder:
    """Encodes TracePackets by hand (varints, no message objects) into one growing buffer,
    each framed as ``Trace.packet`` (field 1, length-delimited); fields in field-number
    order, as protobuf serializes them. Event names are interned per sequence."""

    def __init__(self, sink: Callable[[bytes], Any] | None = None,
                 file: BinaryIO | None = None) -> None:
        self.sink = sink
        #: The file ``sink`` writes into, where there is one: parts encoded elsewhere
        #: are then added to it by the kernel (:meth:`append`).
        self.file = file
        self.buf = bytearray()
        self.names: dict[str, int] = {}
        self.keys: dict[Any, bytes] = {}
        self.cats: dict[str, bytes] = {}
        self.seen: dict[tuple[Any, ...], bytes] = {}
        #: Arg keys numbered, and the cells of the args shapes met so far
        #: (:mod:`traceforge.render.pftrace_shapes`).
        self.shape_keys: dict[str, int] = {}
        self.shape_cells: dict[int, tuple[Any, ...]] = {}
        self.first = True
        #: Bytes of packets gathered before they go to the sink.
        self.flush_bytes = FLUSH_BYTES

    def _framed(self, body: bytes, flags: int = 0, tail: bytes = b"") -> bytes:
        """A packet framed as ``Trace.packet`` (the first of the sequence marked cleared)."""
        if self.first:
            flags |= _CLEARED
            self.first = False
        pkt = body + (b"\x68" + varint(flags) if flags else b"") + tail
        n = len(pkt)
        return b"\x0a" + (VARINT_TABLE[n] if n < 0x4000 else varint(n)) + pkt

    def _packet(self, body: bytes, flags: int = 0, tail: bytes = b"") -> None:
        self.write(self._framed(body, flags, tail))

    def write(self, packets: bytes) -> None:
        """Add framed packets (flushed to the sink in batches; a batch's worth at once
        goes to it as it is)."""
        if self.sink is not None and len(packets) >= self.flush_bytes:
            self.flush()
            self.sink(packets)
            return
        self.buf += packets
        if self.sink is not None and len(self.buf) >= self.flush_bytes:
            self.flush()

    def flush(self) -> None:
        """Hand the packets so far to the sink (packets are written in batches)."""
        if self.sink is not None and self.buf:
            self.sink(bytes(self.buf))
            self.buf.clear()

    def append(self, src: BinaryIO, at: int = 0, size: int | None = None) -> None:
        """Packets encoded into the file ``src`` (by a forked child: ``size`` bytes from
        ``at``, all from there when None), after those so far, added to :attr:`file` by
        the kernel where it can."""
        from traceforge.render.shared_output import append_file

        if self.file is None:
            raise ValueError("no file to add packets to")
        self.flush()
        append_file(src, self.file, self.write, self.flush_bytes, at, size)

    def track(self, uuid: int, *, parent: int | None = None, name: str | None = None,
              process: tuple[int, str | None] | None = None,
              thread: tuple[int, int, str | None] | None = None,
              counter: bool = False) -> None:
        """A TrackDescriptor packet."""
        td = field_key(1, 0) + varint(uuid)
        if name is not None:
            td += length_field(2, name.encode())
        if process is not None:
            pd = field_key(1, 0) + varint(process[0])
            if process[1]:
                pd += length_field(6, process[1].encode())
            td += length_field(3, pd)
        if thread is not None:
            th = field_key(1, 0) + varint(thread[0]) + field_key(2, 0) + varint(thread[1])
            if thread[2]:
                th += length_field(5, thread[2].encode())
            td += length_field(4, th)
        if parent is not None:
            td += field_key(5, 0) + varint(parent)
        if counter:
            td += length_field(8, b"")
        self._packet(_SEQ_FIELD, 0, length_field(60, td))

    def annotation(self, k: Any, v: Any) -> bytes:
        """The DebugAnnotation (TrackEvent field 4, framed) of arg ``k`` = ``v``; ``v`` may be
        its JSON text (``msgspec.Raw``). Repeated args (a stream, a device, a kind, op
        shapes) are encoded once."""
        seen = self.seen
        pair: tuple[Any, ...] | None
        t = type(v)
        if t is _RawJSON:
            # A value still as its JSON text: equal texts, equal values. Decoded (and
            # encoded) once per text where it is kept (as below).
            text = bytes(v)
            pair = (k, _RAW, text)
            enc = seen.get(pair)
            if enc is not None:
                return enc
            v = _DECODE(text)
            t = type(v)
            # Kept by its text: a float's too (occupancies, rates repeat per kernel).
            if not (t is str or t is list or t is float or (t is int and -256 <= v < 65536)):
                pair = None
        else:
            # A list by its repr (equal reprs of decoded JSON: equal values and types).
            # Large ints (ids, unique per event) are not kept.
            pair = (k, v) if t is str or (t is int and -256 <= v < 65536) else \
                (k, _LIST, repr(v)) if t is list else None
            if pair is not None:
                enc = seen.get(pair)
                if enc is not None:
                    return enc
        a = annotation_value(v) + self.key(k)
        enc = ANN + varint(len(a)) + a
        if pair is not None and len(seen) < _SEEN:
            seen[pair] = enc
        return enc

    def annotations(self, keys: list[Any], vals: list[Any]) -> list[bytes]:
        """:meth:`annotation` of each (key, value), a batch at a time: values seen before
        are looked up in one pass, ints (as JSON text or not) encoded as columns, the
        rest one at a time."""
        n = len(vals)
        if not n:
            return []
        out = np.empty(n, dtype=object)
        types = np.fromiter(map(type, vals), dtype=object, count=n)
        vs = np.fromiter(vals, dtype=object, count=n)
        ks = np.fromiter(keys, dtype=object, count=n)
        slow = np.ones(n, dtype=bool)
        raw = np.flatnonzero(types == _RawJSON)
        if len(raw):
            texts = np.fromiter(map(bytes, vs[raw]), dtype=object, count=len(raw))
            got = np.fromiter(map(self.seen.get, zip(ks[raw], repeat(_RAW), texts)),
                              dtype=object, count=len(raw))
            hit = got != None  # noqa: E711 (elementwise)
            out[raw[hit]] = got[hit]
            slow[raw[hit]] = False
            miss, ints = raw[~hit], int_texts(texts[~hit])
            if ints is not None:
                at, v = ints
                # (Not kept: ints are ids as often as not, and cheap to encode again.)
                out[miss[at]] = self._ints(ks[miss[at]], v)
                slow[miss[at]] = False
        text = np.flatnonzero(types == str)  # noqa: E721 (elementwise)
        if len(text):
            got = np.fromiter(map(self.seen.get, zip(ks[text], vs[text], strict=True)),
                              dtype=object,
                              count=len(text))
            hit = got != None  # noqa: E711 (elementwise)
            out[text[hit]] = got[hit]
            slow[text[hit]] = False
        real = np.flatnonzero(types == float)  # noqa: E721 (elementwise)
        if len(real):
            out[real] = self._floats(ks[real], np.fromiter(vs[real], dtype=np.float64,
                                                           count=len(real)))
            slow[real] = False
        whole = np.flatnonzero(types == int)  # noqa: E721 (elementwise)
        if len(whole):
            try:
                v = np.fromiter(vs[whole], dtype=np.int64, count=len(whole))
            except OverflowError:  # beyond int64: one at a time
                pass
            else:
                out[whole] = self._ints(ks[whole], v)
                slow[whole] = False
        for i in np.flatnonzero(slow).tolist():
            out[i] = self.annotation(keys[i], vals[i])
        encoded: list[bytes] = out.tolist()
        return encoded

    def table_annotations(self, table: SliceTable, rows: np.ndarray) -> list[bytes]:
        """The args of slices ``rows`` of ``table``, each slice's annotations joined (what
        :meth:`annotations` gives for its args dict), encoded a column at a time."""
        return self.column_annotations(table.args, rows)

    def column_annotations(self, columns: Sequence[ArgColumn], rows: np.ndarray
                           ) -> list[bytes]:
        """Rows ``rows`` of arg ``columns``, each row's annotations joined (what
        :meth:`annotations` gives for the dict of its present values, keys in column
        order): :func:`traceforge.render.pftrace_rows.column_rows`."""
        from traceforge.render.pftrace_rows import column_rows

        return column_rows(self, columns, rows)

    def cell_annotations(self, key: Any, vals: np.ndarray) -> np.ndarray:
        """The annotation of each of one key's values (an object array of ``bytes``):
        ints and reals a column at a time, anything else as :meth:`annotations` encodes
        it."""
        if vals.dtype.kind == "i":
            return self._int_column(key, vals.astype(np.int64))
        if vals.dtype.kind == "f":
            return self._float_column(key, vals.astype(np.float64))
        keys = np.full(len(vals), key, dtype=object)
        return objects(self.annotations(keys.tolist(), vals.tolist()))

    def shape_annotations(self, shapes: ArgShapes,
                          ids: Sequence[tuple[str, np.ndarray]] = ()) -> list[bytes]:
        """The args of the rows of ``shapes`` that have a shape, each row's annotations
        joined (what :meth:`annotations` gives for its args dict):
        :func:`traceforge.render.pftrace_shapes.shape_annotations`."""
        from traceforge.render.pftrace_shapes import shape_annotations

        return shape_annotations(self, shapes, ids)

    def _int_column(self, key: Any, v: np.ndarray) -> np.ndarray:
        """:meth:`_ints` of one key's values: the head and value of each at once
        (:func:`_int_heads`), the key's bytes after them."""
        kb = self.key(key)
        heads, _ = int_heads(v, np.full(len(v), len(kb), dtype=np.int64))
        return objects(list(map(bytes.__add__, heads.tolist(), repeat(kb, len(v)))))

    def _float_column(self, key: Any, v: np.ndarray) -> np.ndarray:
        """:meth:`_floats` of one key's values: every annotation is as long, so all are
        laid out as one array of records (head, value field, double, key) and cut."""
        kb = self.key(key)
        head = prefixed(ANN_TABLE, ANN, np.asarray([9 + len(kb)]))[0]
        rec = np.zeros(len(v), dtype=[("head", "u1", (len(head),)), ("field", "u1"),
                                      ("value", "<f8"), ("key", "u1", (len(kb),))])
        rec["head"] = np.frombuffer(head, dtype=np.uint8)
        rec["field"] = DOUBLE_FIELD[0]
        rec["value"] = v
        rec["key"] = np.frombuffer(kb, dtype=np.uint8)
        blob, w = rec.tobytes(), rec.dtype.itemsize
        return objects([blob[i:i + w] for i in range(0, len(blob), w)])

    def _ints(self, keys: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The annotations of int args (``keys`` an object array, ``v`` int64)."""
        vb, vl = varint_pieces(v)
        value = list(map(b"\x20".__add__, vb))
        return self._joined(keys, value, 1 + vl)

    def _floats(self, keys: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The annotations of float args (``keys`` an object array, ``v`` float64)."""
        point = np.zeros(len(v), dtype=[("field", "u1"), ("value", "<f8")])
        point["field"], point["value"] = DOUBLE_FIELD[0], v
        blob, w = point.tobytes(), point.dtype.itemsize
        return self._joined(keys, [blob[i:i + w] for i in range(0, len(blob), w)],
                            np.full(len(v), w, dtype=np.int64))

    def _joined(self, keys: np.ndarray, value: list[bytes], value_len: np.ndarray
                ) -> np.ndarray:
        """Framed annotations of encoded value fields and their keys."""
        kb: list[Any] = list(map(self.keys.get, keys.tolist()))
        for j in [j for j, x in enumerate(kb) if x is None]:
            kb[j] = self.key(keys[j])
        head = prefixed(ANN_TABLE, ANN, value_len + lengths(kb))
        return np.fromiter(map(b"".join, zip(head, value, kb, strict=True)),
                           dtype=object, count=len(kb))

    def category(self, cat: str) -> bytes:
        """A TrackEvent's ``categories`` field (22) for ``cat``."""
        cb = self.cats.get(cat)
        if cb is None:
            cb = self.cats[cat] = length_field(22, cat.encode())
        return cb

    def key(self, k: Any) -> bytes:
        """A DebugAnnotation's ``name`` field (10) for arg key ``k``."""
        kb = self.keys.get(k)
        if kb is None:
            kb = self.keys[k] = length_field(10, str(k).encode())
        return kb

    def interned(self, name: str) -> tuple[int, bytes]:
        """(iid, the InternedData to send with it: empty once sent) of an event name."""
        iid = self.names.get(name)
        if iid is not None:
            return iid, b""
        iid = self.names[name] = len(self.names) + 1
        entry = field_key(1, 0) + varint(iid) + length_field(2, name.encode())
        return iid, length_field(12, length_field(2, entry))

    def event(self, ts: int | bytes, track: int, typ: int, name: str | None = None,
              cat: str = "", args: Mapping[str, Any] | None = None,
              flows: Iterable[int] = (), ends: Iterable[int] = (),
              value: float | None = None) -> None:
        """A TrackEvent packet (:meth:`event_packet`)."""
        self.write(self.event_packet(ts, track, typ, name, cat, args, flows, ends, value))

    def event_packet(self, ts: int | bytes, track: int, typ: int, name: str | None = None,
                     cat: str = "", args: Mapping[str, Any] | None = None,
                     flows: Iterable[int] = (), ends: Iterable[int] = (),
                     value: float | None = None) -> bytes:
        """A TrackEvent packet, framed (its name interned, with the interning in the same
        packet); ``ts`` in ns, or already its varint (:func:`varint_pieces`)."""
        te = bytearray()
        if args:
            for k, v in args.items():
                te += self.annotation(k, v)
        te += _TYPE[typ]
        interned = b""
        if name is not None:
            iid, interned = self.interned(name)
            te += b"\x50" + (VARINT_TABLE[iid] if iid < 0x4000 else varint(iid))
        te += b"\x58" + (VARINT_TABLE[track] if track < 0x4000 else varint(track))
        if cat:
            te += self.category(cat)
        if value is not None:
            te += _VALUE + DOUBLE(value)
        for f in flows:
            te += FLOW + _FIXED(f & U64_MASK)
        for f in ends:
            te += TERMINATING_FLOW + _FIXED(f & U64_MASK)
        tsb = ts if type(ts) is bytes else varint(int(ts) & U64_MASK)
        n = len(te)
        body = (b"\x40" + tsb + _SEQ_FIELD + _TRACK_EVENT
                + (VARINT_TABLE[n] if n < 0x4000 else varint(n)) + te + interned)
        return self._framed(body, NEEDS_INCREMENTAL_STATE)

    def end_tail(self, track: int) -> bytes:
        """What follows the timestamp in a SLICE_END packet on ``track``, flags aside."""
        te = _TYPE[SLICE_END] + b"\x58" + varint(track)
        return _SEQ_FIELD + _TRACK_EVENT + varint(len(te)) + te


_LIST = object()  # marks a list arg's (key, _LIST, repr) among the encoded args
_RAW = object()  # marks an arg given as JSON text: (key, _RAW, text)
_RawJSON = msgspec.Raw
_DECODE = msgspec.json.decode


FLUSH_BYTES = 8 << 20  # bytes of packets per write to the sink
_SEEN = 1 << 18  # encoded (key, value) args kept for reuse
_CLEARED, NEEDS_INCREMENTAL_STATE = 1, 2  # TracePacket.SequenceFlags


_SEQ_FIELD = field_key(10, 0) + varint(_SEQ)
#: TrackEvent.flow_ids and terminating_flow_ids (fixed64) field keys.
FLOW, TERMINATING_FLOW = field_key(47, 1), field_key(48, 1)
_TRACK_EVENT, _VALUE = field_key(11, 2), field_key(44, 1)
_TYPE = {t: field_key(9, 0) + varint(t) for t in range(1, 5)}
#: What precedes a TrackEvent's bytes after a packet's timestamp: the sequence id and the
#: track_event field's key (its length follows).
EVENT_HEAD = _SEQ_FIELD + _TRACK_EVENT
_FIXED = struct.Struct("<Q").pack


def event_type(typ: int) -> bytes:
    """A TrackEvent's ``type`` field."""
    return _TYPE[typ]
