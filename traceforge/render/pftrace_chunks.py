"""The packets of a trace, laid out in emit order (:mod:`traceforge.render.perfetto`),
encoded a batch at a time, on the available cores.

Batches are independent but for the interning of event names: a name's id is its rank
among the names in the order they are first used, and the packet that first uses it
carries it. That order is worked out for the whole trace first (names are codes of the
rows, or strings of the few other events), so any range of batches can be encoded with
the ids of the names met before it. The batches are shared out among the cores: this
process encodes them from the front and writes them as it goes, while forked children
that read the trace this process holds take them from the back, each the next as it
finishes one (:func:`traceforge.render.shared_output.write_shared`: into temporary files, copied in
order; a batch whose child cannot start, fails or dies is encoded here, so the bytes
never depend on where a batch ran).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import msgspec
import numpy as np

from traceforge.formats.source import paused_gc
from traceforge.render.pftrace_packets import PacketEncoder
from traceforge.render.pftrace_slices import FlowFields, SliceBatch
from traceforge.render.pftrace_varints import U64_MASK, varint_pieces
from traceforge.render.shared_output import helpers_for, write_shared
from traceforge.render.slice_table import objects

if TYPE_CHECKING:
    from traceforge.render.chrome_json import ArgsEncoder
    from traceforge.render.pftrace_layout import FlowPoints

#: Packets encoded per batch (the rows' names, cats and args are built per batch).
CHUNK = 1 << 14
#: Below this many packets per core the trace is encoded here (a fork costs more).
PARALLEL_PACKETS = 1 << 17


class FlowSource(Protocol):
    """Flow events kept as columns (``flow_table.FlowTable``)."""

    def points(self) -> FlowPoints: ...


class Rows(Protocol):
    """A document whose trace rows are columns (``chrome_json.ChromeSource``): the names,
    cats and args of the rows' ``X`` events are built by :meth:`slices` only for the
    packets being written (args already encoded where an ``encoder`` is given);
    ``names[name_codes[i]]`` is row i's name; ``flows`` the flow events before those
    among ``extra``."""

    n: int
    pid: np.ndarray
    tid: np.ndarray
    ts_us: np.ndarray
    dur_us: np.ndarray
    extra: list[dict[str, Any]]
    base_ns: int
    names: list[str]
    name_codes: np.ndarray

    @property
    def flows(self) -> FlowSource: ...

    def slices(self, rows: np.ndarray, json_values: bool = False,
               encoder: ArgsEncoder | None = None
               ) -> tuple[list[str], list[str], list[Any]]: ...


@dataclass(eq=False)
class Packets:
    """Every packet after the track descriptors, in emit order: ``code`` 0/1 the begin/end
    of slice ``ref`` (slice ``order[ref]`` in document order: a row below ``nr``, else
    ``xs[i - nr]``), 2 the event ``rest[ref]`` (:meth:`PacketEncoder.event_packet`'s
    arguments); ``ts`` in ns before ``base``; ``track`` per slice (by ``ref``)."""

    code: np.ndarray
    ref: np.ndarray
    ts: np.ndarray
    order: np.ndarray
    track: np.ndarray
    rows: Rows | None
    nr: int
    xs: list[Mapping[str, Any]]
    rest: list[tuple[Any, ...]]
    base: int
    flows_at: FlowFields
    _names: list[str] = field(default_factory=list)
    _first: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def write(self, w: PacketEncoder) -> None:
        """Encode every packet into ``w`` (whose sink gets them in order), a batch of
        :data:`CHUNK` at a time, shared with forked children where the trace is large
        enough (:func:`~traceforge.render.shared_output.write_shared`)."""
        n = len(self.code)
        count = -(-n // CHUNK)
        helpers = helpers_for(n, PARALLEL_PACKETS)
        if helpers:
            self._interning()
        batch = SliceBatch(w, self.flows_at)
        after = [0]  # the batch ``w`` encoded last ends here: its names are those before

        def here(k: int) -> None:
            lo = k * CHUNK
            if after[0] != lo:
                w.names = self._names_before(lo)
            self.encode(w, batch, lo, min(lo + CHUNK, n))
            after[0] = min(lo + CHUNK, n)

        cw = PacketEncoder()  # a helper's (each forked helper has its own copy)
        cw.first = False
        cb = SliceBatch(cw, self.flows_at)

        def child(k: int, f: BinaryIO) -> None:
            with open(f.fileno(), "wb", closefd=False) as out:
                cw.sink = out.write
                cw.names = self._names_before(k * CHUNK)
                self.encode(cw, cb, k * CHUNK, min(k * CHUNK + CHUNK, n))
                cw.flush()

        write_shared(count, helpers, here, child, w.write, w.flush_bytes,
                     w.append if w.file is not None else None)
        w.flush()

    def _interning(self) -> None:
        """The names in the order packets first use them, and those packets."""
        code, nr = self.code, self.nr
        ids: dict[str, int] = {}
        name = np.full(len(code), -1, dtype=np.int64)
        b = np.flatnonzero(code == 0)
        i = self.order[self.ref[b]]
        row = i < nr
        if self.rows is not None and row.any():
            row_ids = np.asarray([ids.setdefault(s, len(ids)) for s in self.rows.names],
                                 dtype=np.int64)
            name[b[row]] = row_ids[self.rows.name_codes[i[row]]]
        name[b[~row]] = [ids.setdefault(str(self.xs[j - nr].get("name", "")), len(ids))
                         for j in i[~row].tolist()]
        r = np.flatnonzero(code == 2)
        for p, j in zip(r.tolist(), self.ref[r].tolist(), strict=True):
            s = self.rest[j][3]
            if s is not None:
                name[p] = ids.setdefault(s, len(ids))
        used = np.flatnonzero(name >= 0)
        uniq, first = np.unique(name[used], return_index=True)
        by = np.argsort(used[first], kind="stable")
        strings = list(ids)
        self._names = [strings[u] for u in uniq[by].tolist()]
        self._first = used[first][by]

    def _names_before(self, at: int) -> dict[str, int]:
        """The interned names (with their ids) of the packets before packet ``at``."""
        k = int(np.searchsorted(self._first, at, side="left"))
        return {s: j + 1 for j, s in enumerate(self._names[:k])}

    def encode(self, w: PacketEncoder, batch: SliceBatch, lo: int, hi: int) -> None:
        """Encode packets ``lo:hi`` into ``w``, a batch of :data:`CHUNK` at a time."""
        rows, nr = self.rows, self.nr
        for a in range(lo, hi, CHUNK):
            z = min(a + CHUNK, hi)
            cs, rs = self.code[a:z], self.ref[a:z]
            is_slice = cs < 2
            sl = np.where(is_slice, rs, 0)
            idx = np.where(is_slice, self.order[sl], -1)
            trk = np.where(is_slice, self.track[sl], 0)
            ib = idx[cs == 0]
            try:
                with paused_gc():  # (a batch's objects are gone before it is back)
                    names, cats, args = self._begins(w, ib)
                    tsv, tsl = varint_pieces(self.ts[a:z].astype(np.uint64)
                                             + np.uint64(self.base & U64_MASK))
                    made: Sequence[Callable[[], bytes]] = [
                        partial(w.event_packet, *self.rest[i])
                        for i in rs[cs == 2].tolist()]
                    data = batch.packets(cs, idx, trk, tsv, tsl, (names, cats, args), made)
                    del names, cats, args, made
                w.write(data)
            except (msgspec.MsgspecError, UnicodeDecodeError):
                # An args value as JSON text that does not decode (a number out of
                # range, a string not UTF-8): the source's decoded args name the file
                # and the problem.
                begins = ib[ib < nr]
                if rows is not None and len(begins):
                    rows.slices(begins)
                raise

    def _begins(self, w: PacketEncoder, ib: np.ndarray
                ) -> tuple[list[str], list[str], list[Any]]:
        """The names, cats and args of the slices ``ib`` (document order) that begin in a
        batch: the rows' from :attr:`rows` (args encoded by ``w`` where it can), the
        others' from their dicts."""
        rows, xs, nr = self.rows, self.xs, self.nr
        from_rows = ib < nr
        begins = ib[from_rows]
        names, cats, args = (np.empty(len(ib), dtype=object) for _ in range(3))
        if rows is not None and len(begins):
            got_names, got_cats, got_args = rows.slices(begins, json_values=True, encoder=w)
            names[from_rows] = objects(got_names)
            cats[from_rows] = objects(got_cats)
            args[from_rows] = objects(got_args)
        if not from_rows.all():
            own = [xs[i - nr] for i in ib[~from_rows].tolist()]
            names[~from_rows] = objects([str(e.get("name", "")) for e in own])
            cats[~from_rows] = objects([str(e.get("cat", "")) for e in own])
            args[~from_rows] = objects([e.get("args") for e in own])
        return names.tolist(), cats.tolist(), args.tolist()
