"""A batch of a trace's packets in emit order (slice begins, slice ends and the other
events' packets) encoded together: each packet is laid out as a row of byte pieces
(a slice begin's frame with the timestamp's key, timestamp, track-event head, its args,
name/track/category, flows, interning and flags; an end's frame, timestamp and the rest,
as few pieces as its bytes allow) and the batch is joined once, so the per-packet Python of
:meth:`~traceforge.render.pftrace_packets.PacketEncoder.event` runs only for what is new
(a name, a category, an arg value not met before). Byte for byte what ``event`` writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from traceforge.render.pftrace_packets import (
    EVENT_HEAD,
    FLOW,
    NEEDS_INCREMENTAL_STATE,
    SLICE_BEGIN,
    TERMINATING_FLOW,
    PacketEncoder,
    event_type,
)
from traceforge.render.pftrace_varints import (
    lengths,
    prefix_table,
    prefixed,
    varint,
    varint_lengths,
)
from traceforge.render.slice_table import objects

#: A packet's frame and the field key of its timestamp, which comes first.
_FRAME = prefix_table(b"\x0a", b"\x40")
_HEAD = prefix_table(EVENT_HEAD)
_FLAGS = b"\x68" + varint(NEEDS_INCREMENTAL_STATE)


class SliceBatch:
    """Encodes batches of packets for one :class:`PacketEncoder` (whose interning and
    encoded args it shares). ``flows_at``: the slices' flow fields (:func:`flow_fields`)."""

    def __init__(self, w: PacketEncoder, flows_at: FlowFields) -> None:
        self.w, self.flows_at = w, flows_at
        self.tails: dict[tuple[Any, ...], bytes] = {}
        self.mids: dict[int, bytes] = {}

    def packets(self, code: np.ndarray, slice_no: np.ndarray, track: np.ndarray,
                ts: list[bytes], ts_len: np.ndarray,
                begins: tuple[list[str], list[str], list[Any]],
                rest: Sequence[Callable[[], bytes]]) -> bytes:
        """The framed packets of one batch, in order. Per packet: ``code`` 0 a slice
        begin (its name, cat and args the next of ``begins``), 1 a slice end, 2 the next
        of ``rest`` (made when its turn comes, so names are interned in packet order);
        the slice's number (for its flows) and track; ``ts`` its timestamp's varint
        (``ts_len`` the lengths)."""
        w = self.w
        # The sequence's first packet is marked cleared (never a slice's in practice:
        # track descriptors come first); one of ``rest`` marks itself.
        first = w.first and len(code) > 0 and code[0] != 2
        if first:
            w.first = False
        b = np.flatnonzero(code == 0)
        e = np.flatnonzero(code == 1)
        r = np.flatnonzero(code == 2)
        names, cats, given = begins
        # Interning in packet order: the names not interned yet, and the other packets.
        iids: list[int | None] = list(map(w.names.get, names))
        interned = [b""] * len(names)
        interned_len = np.zeros(len(names), dtype=np.int64)
        rest_bytes: list[bytes] = []
        new = _nones(iids)
        todo = sorted([*zip(b[new].tolist(), new.tolist(), strict=True),
                       *((p, -1) for p in r.tolist())])
        for _, j in todo:
            if j < 0:
                rest_bytes.append(rest[len(rest_bytes)]())
            else:
                iids[j], interned[j] = w.interned(names[j])
                interned_len[j] = len(interned[j])
        trk_b = track[b].tolist()
        tails: list[Any] = list(map(self.tails.get, zip(iids, trk_b, cats, strict=True)))
        for j in _nones(tails).tolist():
            tails[j] = self._tail(int(iids[j] or 0), trk_b[j], cats[j])
        flows, flow_len = self.flows_at.of(slice_no[b])
        encs, counts = _encoded_args(w, given)
        # Per slice begin: the args' bytes, then the rest of the track event.
        upto = np.concatenate([[0], np.cumsum(lengths(encs))]).astype(np.int64)
        cut = np.cumsum(counts)
        te_len = upto[cut] - upto[cut - counts] + lengths(tails) + flow_len
        heads = prefixed(_HEAD, EVENT_HEAD, te_len)
        flags = [_FLAGS] * len(b)
        flag_len = np.full(len(b), len(_FLAGS), dtype=np.int64)
        mids: list[Any] = list(map(self.mids.get, track[e].tolist()))
        for j in _nones(mids).tolist():
            u = int(track[e[j]])
            mids[j] = self.mids[u] = w.end_tail(u) + _FLAGS
        if first:
            if code[0] == 0:
                flags[0] = b"\x68" + varint(NEEDS_INCREMENTAL_STATE | 1)
                flag_len[0] = len(flags[0])
            elif code[0] == 1:
                mids[0] = w.end_tail(int(track[0])) + b"\x68" + varint(
                    NEEDS_INCREMENTAL_STATE | 1)
        pkt_b = (1 + ts_len[b] + len(EVENT_HEAD) + varint_lengths(te_len) + te_len
                 + interned_len + flag_len)
        pkt_e = 1 + ts_len[e] + lengths(mids)
        # The interning and the flags after the track event are one piece.
        for j in np.flatnonzero(interned_len).tolist():
            flags[j] = interned[j] + flags[j]

        # Lay the pieces out, packet after packet: a slice begin is its frame (with the
        # timestamp's key), timestamp, head, args, tail, flows and flags; an end its
        # frame, timestamp and the rest; another event one piece.
        slots = np.ones(len(code), dtype=np.int64)
        slots[b] = 6 + counts
        slots[e] = 3
        start = np.cumsum(slots) - slots
        pieces = np.empty(int(slots.sum()), dtype=object)
        sb, se = start[b], start[e]
        pieces[sb] = objects(prefixed(_FRAME, b"\x0a", pkt_b, b"\x40"))
        pieces[se] = objects(prefixed(_FRAME, b"\x0a", pkt_e, b"\x40"))
        tsv = np.fromiter(ts, dtype=object, count=len(ts))
        pieces[sb + 1] = tsv[b]
        pieces[se + 1] = tsv[e]
        pieces[sb + 2] = objects(heads)
        pieces[se + 2] = objects(mids)
        if len(encs):
            first_arg = np.repeat(sb + 3 - np.concatenate([[0], cut[:-1]]), counts)
            pieces[first_arg + np.arange(len(encs))] = objects(encs)
        after = sb + counts
        pieces[after + 3] = objects(tails)
        pieces[after + 4] = objects(flows)
        pieces[after + 5] = objects(flags)
        pieces[start[r]] = objects(rest_bytes)
        return b"".join(pieces.tolist())

    def _tail(self, iid: int, track: int, cat: str) -> bytes:
        """What follows a slice begin's args in its track event: type, name, track, cat."""
        tail = event_type(SLICE_BEGIN) + b"\x50" + varint(iid) + b"\x58" + varint(track)
        if cat:
            tail += self.w.category(cat)
        self.tails[(iid, track, cat)] = tail
        return tail


def _nones(items: list[Any]) -> np.ndarray:
    """The positions of the Nones among ``items`` (what a batch's lookups missed)."""
    return np.flatnonzero(objects(items) == None)  # noqa: E711 (elementwise)


def _encoded_args(w: PacketEncoder, given: list[Any]) -> tuple[list[bytes], np.ndarray]:
    """Each slice's args as annotation pieces (all slices' in order) and how many pieces
    each has: a dict's args encoded here, a ``bytes`` (a table's args, already encoded by
    :meth:`PacketEncoder.table_annotations`) one piece as it is."""
    kind = np.fromiter(map(type, given), dtype=object, count=len(given))
    ready = kind == bytes  # noqa: E721 (elementwise)
    own = np.flatnonzero(~ready)
    if not len(own):  # (every slice's args already encoded: each one piece)
        return given, np.ones(len(given), dtype=np.int64)
    dicts: list[dict[str, Any]] = [a if type(a) is dict else dict(a) if isinstance(a, Mapping)
                                   else {} for a in (given[i] for i in own.tolist())]
    n = np.fromiter(map(len, dicts), dtype=np.int64, count=len(dicts))
    mine = w.annotations(list(chain.from_iterable(dicts)),
                         list(chain.from_iterable(map(dict.values, dicts))))
    if not ready.any():
        return mine, n
    # The tables' bytes (one piece each) and the dicts' pieces, in the slices' order.
    counts = np.ones(len(given), dtype=np.int64)
    counts[own] = n
    first = np.cumsum(counts) - counts
    encs = np.empty(int(counts.sum()), dtype=object)
    encs[first[ready]] = objects(given)[ready]
    if mine:
        encs[np.repeat(first[own] - (np.cumsum(n) - n), n) + np.arange(len(mine))] = \
            objects(mine)
    out: list[bytes] = encs.tolist()
    return out, counts


@dataclass(frozen=True)
class FlowFields:
    """Each slice's TrackEvent ``flow_ids`` and ``terminating_flow_ids`` fields, by slice
    number: the numbers of the slices that have any (ascending), and their fields one
    after another in ``data``, the k-th slice's from ``at[k]`` to ``at[k + 1]`` (arrays
    and one bytes: cheap to send from the core that worked them out)."""

    slices: np.ndarray
    data: bytes
    at: np.ndarray

    @classmethod
    def none(cls) -> FlowFields:
        return cls(np.zeros(0, dtype=np.int64), b"", np.zeros(1, dtype=np.int64))

    def of(self, slice_no: np.ndarray) -> tuple[list[bytes], np.ndarray]:
        """The fields of slices ``slice_no`` (b"" for one without any) and their
        lengths."""
        flows = np.full(len(slice_no), b"", dtype=object)
        length = np.zeros(len(slice_no), dtype=np.int64)
        if len(self.slices) and len(slice_no):
            k = np.minimum(np.searchsorted(self.slices, slice_no), len(self.slices) - 1)
            hit = np.flatnonzero(self.slices[k] == slice_no)
            lo, hi = self.at[k[hit]], self.at[k[hit] + 1]
            data = self.data
            flows[hit] = objects([data[a:b] for a, b in zip(lo.tolist(), hi.tolist(),
                                                            strict=True)])
            length[hit] = hi - lo
        out: list[bytes] = flows.tolist()
        return out, length


def flow_fields(slice_no: np.ndarray, fid: np.ndarray, end: np.ndarray) -> FlowFields:
    """The flow fields of the slices, from the flow points bound to them
    (``pftrace_layout.bind_flows``: by slice, the starts first)."""
    if not len(slice_no):
        return FlowFields.none()
    # Each point is its field's key (two bytes, both fields) and its fixed64 id.
    keys = np.frombuffer(FLOW + TERMINATING_FLOW, dtype=np.uint8).reshape(2, -1)
    point = np.zeros(len(fid), dtype=[("key", "u1", (keys.shape[1],)), ("id", "<u8")])
    point["key"] = keys[end.astype(np.int64)]
    point["id"] = fid.astype(np.uint64)
    first = np.concatenate([[0], np.flatnonzero(np.diff(slice_no)) + 1]).astype(np.int64)
    return FlowFields(slice_no[first].astype(np.int64), point.tobytes(),
                      np.append(first, len(slice_no)) * point.dtype.itemsize)
