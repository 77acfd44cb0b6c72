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

import contextlib
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, BinaryIO

import numpy as np

from traceforge.forks import beside
from traceforge.model import lex_order, pair_codes
from traceforge.render import pftrace_chunks
from traceforge.render.pftrace_chunks import Packets, Rows
from traceforge.render.pftrace_layout import FlowPoints, bind_flows, lanes_of
from traceforge.render.pftrace_layout import ns as _ns
from traceforge.render.pftrace_packets import (
    COUNTER,
    INSTANT,
    SLICE_BEGIN,
    SLICE_END,
    PacketEncoder,
)
from traceforge.render.pftrace_slices import FlowFields, flow_fields

_INT32 = 2**31


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


def chrome_to_pftrace(doc: Mapping[str, Any] | list[Any] | Rows) -> bytes:
    """Encode a Chrome-trace document (dict with ``traceEvents``, or a bare list) as pftrace."""
    chunks: list[bytes] = []
    write_pftrace(doc, chunks.append)
    return b"".join(chunks)


def write_pftrace(doc: Mapping[str, Any] | list[Any] | Rows,
                  sink: Callable[[bytes], Any], file: BinaryIO | None = None) -> None:
    """Encode ``doc`` as pftrace into ``sink`` (a file's ``write``; ``file``: that file,
    where parts encoded on other cores are added by the kernel), a batch of packets at
    a time, so the encoded trace is never whole in memory (nor, for :class:`Rows`, the
    rows' events: they are built per batch of packets, in the order they are written)."""
    rows: Rows | None = None
    base = 0
    if isinstance(doc, Mapping):
        events = doc.get("traceEvents", [])
        if isinstance(doc.get("baseTimeNanoseconds"), int):
            base = int(doc["baseTimeNanoseconds"])
    elif isinstance(doc, list):
        events = doc
    else:
        rows, events, base = doc, doc.extra, doc.base_ns
    w = PacketEncoder(sink, file)
    procs: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    xs: list[Mapping[str, Any]] = []
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
            xs.append(e)
        elif ph in ("B", "E", "i", "I", "C", "s", "t", "f") and e.get("ts") is not None:
            other.append(e)
    tracks = _Tracks(w, procs, threads)
    for pid in procs:
        tracks.process(pid)
    for pid, tid in threads:
        tracks.thread(pid, tid)

    # Slices: the rows (columns), then the X events among the dicts; each with its
    # thread's code, numbered in order of first appearance.
    nr = rows.n if rows is not None else 0
    keys: dict[tuple[Any, Any], int] = {}
    th_rows = np.zeros(0, dtype=np.int64)
    t0 = [np.zeros(0, dtype=np.int64)]
    dns = [np.zeros(0, dtype=np.int64)]
    if rows is not None and nr:
        th_rows = pair_codes(rows.pid, rows.tid)[0]
        first = np.unique(th_rows, return_index=True)[1]  # (codes: by first appearance)
        for pid, tid in zip(rows.pid[first].tolist(), rows.tid[first].tolist(), strict=True):
            keys[(pid, tid)] = len(keys)
        t0.append(np.rint(rows.ts_us * 1000.0).astype(np.int64))
        dns.append(np.rint(rows.dur_us * 1000.0).astype(np.int64))
    th_x = [keys.setdefault((e.get("pid"), e.get("tid")), len(keys)) for e in xs]
    th = np.concatenate([th_rows, np.asarray(th_x, dtype=np.int64)])
    t0.append(np.asarray([_ns(e["ts"]) for e in xs], dtype=np.int64))
    dns.append(np.asarray([_ns(e.get("dur") or 0) for e in xs], dtype=np.int64))
    start, dur = np.concatenate(t0), np.concatenate(dns)
    end = start + np.maximum(dur, 0)
    n = len(start)
    thread_of = list(keys)
    # The slices' flows, worked out on another core while this one lays the packets out.
    dict_points = FlowPoints.of([e for e in other if e["ph"] in ("s", "t", "f")])
    with _beside(partial(_flow_fields, rows, dict_points, th, start, start + dur, keys),
                 n) as flows_of:
        order, track, code_all, ref_all, ts_all, rest = _laid_out(
            th, start, end, dur, thread_of, tracks, other, base)
        flows_at = flows_of()
    del start, dur, end, th  # only what is written
    Packets(code_all, ref_all, ts_all, order, track, rows, nr, xs, rest, base,
            flows_at).write(w)


def _laid_out(th: np.ndarray, start: np.ndarray, end: np.ndarray, dur: np.ndarray,
              thread_of: list[tuple[Any, Any]], tracks: _Tracks,
              other: list[Mapping[str, Any]], base: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                         list[tuple[Any, ...]]]:
    """Where every packet after the track descriptors goes and in what order (the
    threads' lane tracks made on ``tracks`` as they are first used): each slice's place
    in its thread's order and its track, and per packet its code, ref and time
    (:class:`~traceforge.render.pftrace_chunks.Packets`), and the other events' packets."""
    n = len(start)
    # Each thread's slices by (start, longest first); the k-th of them all is seq k.
    order = lex_order((np.arange(n), -dur, start, th))
    s0, s1 = start[order], end[order]
    th_o = th[order]
    at = lanes_of(th_o, s0, s1)
    # Each (thread, lane) track made in order of its first slice: threads in order, and a
    # thread's lane k+1 is first used after its lane k, so in (thread, lane) order.
    pair = th_o * (int(at.max()) + 1 if n else 1) + at
    uniq, first, inv = np.unique(pair, return_index=True, return_inverse=True)
    made = np.empty(len(uniq), dtype=np.int64)
    for j in range(len(uniq)):
        pid, tid = thread_of[int(th_o[first[j]])]
        made[j] = tracks.thread(pid, tid, int(at[first[j]]))
    track = made[np.asarray(inv).reshape(-1)]
    # Sort keys (time, rank at that time, seq) of every packet, and what to emit: code 0/1
    # begin/end of the k-th slice ``ref``; 2: ``rest[ref]``. At one timestamp, ends go
    # first (innermost first) so back-to-back slices stay nested; a zero-length slice ends
    # right after it begins.
    seq = np.arange(n, dtype=np.int64)
    pos = s1 > s0
    k0, k1 = [s0, s1], [np.ones(n, np.int64), np.where(pos, 0, 2)]
    k2 = [seq, np.where(pos, -seq, seq)]
    code, ref = [np.zeros(n, np.int64), np.ones(n, np.int64)], [seq, seq]
    rest, o0, o1, o2 = _other(other, tracks, base, n)
    k0.append(np.asarray(o0, dtype=np.int64))
    k1.append(np.asarray(o1, dtype=np.int64))
    k2.append(np.asarray(o2, dtype=np.int64))
    code.append(np.full(len(o0), 2, dtype=np.int64))
    ref.append(np.arange(len(o0), dtype=np.int64))
    ts_all = np.concatenate(k0)
    emit = lex_order((np.concatenate(k2), np.concatenate(k1), ts_all))
    ts_all = ts_all[emit]
    code_all, ref_all = np.concatenate(code)[emit], np.concatenate(ref)[emit]
    return order, track, code_all, ref_all, ts_all, rest


def _beside(work: Callable[[], FlowFields], n: int
            ) -> contextlib.AbstractContextManager[Callable[[], FlowFields]]:
    """``work`` done on another core (:func:`traceforge.forks.beside`) where the trace has
    enough slices to pay for a fork (as many as the packets' batches need to be shared
    out), else here when its result is asked for."""
    if n >= pftrace_chunks.PARALLEL_PACKETS:
        return beside(work)
    return contextlib.nullcontext(work)


def _flow_fields(rows: Rows | None, points: FlowPoints, th: np.ndarray, start: np.ndarray,
                 stop: np.ndarray, keys: dict[tuple[Any, Any], int]) -> FlowFields:
    """The slices' flow fields: the source's flows (columns) first, then ``points`` (those
    among the dicts), as written."""
    if rows is not None:
        points = FlowPoints.joined([rows.flows.points(), points])
    return flow_fields(*bind_flows(th, start, stop, keys, points))


def _other(other: list[Mapping[str, Any]], tracks: _Tracks, base: int, n: int
           ) -> tuple[list[tuple[Any, ...]], list[int], list[int], list[int]]:
    """The packets of ``B``/``E``/instant/counter events and their sort keys (seq from n+1)."""
    rest: list[tuple[Any, ...]] = []
    k0: list[int] = []
    k1: list[int] = []
    k2: list[int] = []
    seq = n
    for e in other:
        ph, pid, tid = e["ph"], e.get("pid"), e.get("tid")
        ts = _ns(e["ts"])
        seq += 1
        if ph in ("B", "E"):
            typ = SLICE_BEGIN if ph == "B" else SLICE_END
            bname = str(e.get("name", "")) if ph == "B" else None
            k0.append(ts)
            k1.append(0 if ph == "E" else 1)
            k2.append(seq)
            rest.append((ts + base, tracks.thread(pid, tid), typ, bname,
                         str(e.get("cat", "")), e.get("args")))
        elif ph in ("i", "I"):
            track = tracks.process(pid) if e.get("s") in ("p", "g") else tracks.thread(pid, tid)
            k0.append(ts)
            k1.append(1)
            k2.append(seq)
            rest.append((ts + base, track, INSTANT, str(e.get("name", "")),
                         str(e.get("cat", "")), e.get("args")))
        elif ph == "C":
            for series, v in (e.get("args") or {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    name = str(e.get("name", "")) if series in ("", "value") else \
                        f"{e.get('name', '')} {series}"
                    k0.append(ts)
                    k1.append(1)
                    k2.append(seq)
                    rest.append((ts + base, tracks.counter(pid, name), COUNTER, None, "",
                                 None, (), (), float(v)))
    return rest, k0, k1, k2
