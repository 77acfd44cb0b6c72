"""Write a Trace as a Kineto-compatible Chrome trace document (``.json`` / ``.json.gz``).

The document opens in Perfetto UI / chrome://tracing and reads back through traceforge's
Kineto reader with the same kinds, names, times and ids: ``ts``/``dur`` are microseconds
with three decimals (whole ns, which the reader recovers exactly), GPU rows keep Kineto's
``pid = device, tid = stream`` layout, and launches are tied to their GPU work by ``ac2g``
flow pairs the way Kineto writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from traceforge.model import GPU_KINDS, Trace, distinct
from traceforge.render.document import document_bytes
from traceforge.render.flow_table import flow_events
from traceforge.render.row_columns import row_columns
from traceforge.render.slice_table import objects

if TYPE_CHECKING:
    from traceforge.model import ArgShapes
    from traceforge.render.slice_table import ArgColumn, SliceTable


class ArgsEncoder(Protocol):
    """A writer that encodes args itself (the Perfetto encoder): a table's slices' args,
    and the trace's own args given as shapes, one ``bytes`` per slice instead of dicts."""

    def table_annotations(self, table: SliceTable, rows: np.ndarray) -> list[bytes]: ...

    def column_annotations(self, columns: Sequence[ArgColumn], rows: np.ndarray
                           ) -> list[bytes]: ...

    def shape_annotations(self, shapes: ArgShapes,
                          ids: Sequence[tuple[str, np.ndarray]] = ()) -> list[bytes]: ...

    def annotations(self, keys: list[Any], vals: list[Any]) -> list[bytes]: ...


#: What a writer's caller adds to the trace rows' args, in place (``annotate``'s analysis):
#: ``tags(rows, names, cats, args)``. Where it also has ``columns(rows, names, cats)``,
#: the same tags as arg columns over the rows (in the order the dicts get their keys),
#: a writer that encodes args itself takes those.
Tags = Callable[[np.ndarray, list[str], list[str], list[dict[str, Any]]], None]

#: Kineto's ``cat`` for each of our kinds; the Kineto reader maps these back to the kind.
KINETO_CAT: dict[str, str] = {
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "runtime": "cuda_runtime",
    "driver": "cuda_driver",
    "cpu_op": "cpu_op",
    "user_annotation": "user_annotation",
    "gpu_annotation": "gpu_user_annotation",
    "python": "python_function",
    "sync": "cuda_sync",
}

def _labels(col: Any) -> tuple[np.ndarray, list[str]]:
    """(codes, strings) of a categorical column: ``strings[codes[i]]`` is row i's value as
    ``astype(str)`` writes it (a missing value, code -1, is the last string: ``nan``)."""
    cat = col.astype("category")
    return (cat.cat.codes.to_numpy(np.int64),
            [str(c) for c in cat.cat.categories.tolist()] + ["nan"])


def _cats(trace: Trace) -> tuple[np.ndarray, list[str]]:
    """(codes, strings): the ``cat`` to write per row, the source's own when it reads back
    as the same kind.

    nsys/rocprof sources carry cats like ``nvtx`` or ``osrt``; writing those would make a
    re-read classify the rows as ``other``, so kinds other than ``other`` get Kineto's cat.
    """
    import pandas as pd

    ev = trace.events
    kc, kinds = _labels(ev["kind"])
    cc, cats = _labels(ev["cat"])
    # A missing value's code -1 is the last string (nan), as Python indexes it.
    pair, uniq = pd.factorize((kc % len(kinds)) * len(cats) + cc % len(cats))
    out = []
    for p in uniq.tolist():
        kind, cat = kinds[p // len(cats)], cats[p % len(cats)]
        want = KINETO_CAT.get(kind)
        # Kineto's legacy capitalised cats ("Kernel", "Runtime") also read back fine.
        got = cat if want is None or cat.lower() == want else want
        out.append(got or "other")
    return np.asarray(pair, dtype=np.int64), out


#: Row columns written as args (when >= 0), after the source's own args.
_ID_ARGS = {"External id": "ext", "correlation": "corr", "device": "device",
            "stream": "stream", "graph id": "graph"}


class ChromeSource:
    """A Chrome trace document of a Trace whose rows' events are built when asked for
    (:meth:`events`), a batch at a time, so the document is never whole in memory.

    :meth:`document` is the whole dict (what :func:`trace_to_chrome` returns). The rows'
    columns (``pid``, ``tid``, ``ts_us``, ``dur_us``, name and cat codes) are what the
    Perfetto writer reads directly; ``tables`` (:class:`~traceforge.render.slice_table.
    SliceTable`, the caller's slices as columns) add rows after the trace's ``nt``, written
    as the dicts they stand for; ``flows`` holds the flow events as columns
    (:class:`FlowTable`), ``extra`` the other events (names, the caller's
    ``extra_events``, its flows among them) as dicts; ``tags(rows, names, cats, args)`` adds to the
    trace rows' args in place (``render.annotate``'s analysis).
    """

    def __init__(self, trace: Trace, extra_events: Iterable[Mapping[str, Any]] | None = None,
                 *, with_source_args: bool = True,
                 tags: Tags | None = None,
                 tables: Sequence[SliceTable] = ()
                 ) -> None:
        ev = trace.events
        self.trace, self.with_source_args, self.tags = trace, with_source_args, tags
        #: The trace's own rows (the first ``nt``), then the slices of ``tables``.
        self.nt = self.n = len(ev)
        self.pid = ev["pid"].to_numpy(np.int64)
        self.tid = ev["tid"].to_numpy(np.int64)
        # ns / 1000 as a double prints as at most three decimals (see _us).
        self.ts_us = ev["ts"].to_numpy().astype(np.float64) / 1000.0
        self.dur_us = ev["dur"].to_numpy().astype(np.float64) / 1000.0
        self.name_codes, self.names = _labels(ev["name"])
        self.cat_codes, self.cats = _cats(trace)
        self.tables = list(tables)
        if self.tables:
            self._append(self.tables)
        self.labels = ev.index.to_numpy()
        self.ids = {k: ev[c].to_numpy(np.int64) for k, c in _ID_ARGS.items()}
        #: The flows (as columns), then the other events (``extra``, as dicts).
        self.flows = flow_events(trace)
        self.extra: list[dict[str, Any]] = _name_events(trace)
        if extra_events is not None:
            self.extra += [dict(e) for e in extra_events]
        m = trace.meta
        self.base_ns = int(m.base_ns)
        self.head: dict[str, Any] = {"schemaVersion": 1,
                                     "deviceProperties": _device_properties(trace)}
        dist = dict(m.distributed)
        if m.rank is not None:
            dist.setdefault("rank", m.rank)
        if m.world_size is not None:
            dist.setdefault("world_size", m.world_size)
        if dist:
            self.head["distributedInfo"] = dist
        for key, src in (("cuda_driver_version", "cuda_driver"),
                         ("cuda_runtime_version", "cuda_runtime"), ("cupti_version", "cupti")):
            if src in m.versions:
                self.head[key] = m.versions[src]
        self.tail: dict[str, Any] = {"displayTimeUnit": "ms", "baseTimeNanoseconds": self.base_ns}
        if m.path:
            self.tail["traceName"] = m.path

    def _append(self, tables: list[SliceTable]) -> None:
        """The slices of ``tables`` as rows after those so far (the trace's own first)."""
        # A missing name's code -1 names the trace's last string (nan) explicitly, as
        # other strings follow it now.
        self.name_codes = np.where(self.name_codes < 0, len(self.names) - 1, self.name_codes)
        codes, cats = [self.name_codes], [self.cat_codes]
        for tb in tables:
            codes.append(tb.name_codes.astype(np.int64) + len(self.names))
            self.names = self.names + tb.names
            cats.append(np.full(tb.n, len(self.cats), dtype=np.int64))
            self.cats = self.cats + [tb.cat]
        self.name_codes, self.cat_codes = np.concatenate(codes), np.concatenate(cats)
        self.pid = np.concatenate([self.pid, *(tb.pid.astype(np.int64) for tb in tables)])
        self.tid = np.concatenate([self.tid, *(tb.tid.astype(np.int64) for tb in tables)])
        self.ts_us = np.concatenate(
            [self.ts_us, *(tb.ts_ns.astype(np.float64) / 1000.0 for tb in tables)])
        self.dur_us = np.concatenate(
            [self.dur_us, *(tb.dur_ns.astype(np.float64) / 1000.0 for tb in tables)])
        self.n = len(self.pid)
        #: Where each table's rows begin.
        self._starts = np.cumsum([self.nt] + [tb.n for tb in self.tables])

    def add(self, tables: Sequence[SliceTable], events: Iterable[Mapping[str, Any]] = ()
            ) -> None:
        """More slices (rows after those so far) and other events (after ``extra``): the
        document is then the one made with them given at first, after the others."""
        self.extra += [dict(e) for e in events]
        if tables:
            self.tables += tables
            self._append(list(tables))

    def row_args(self, rows: np.ndarray, json_values: bool = False) -> list[dict[str, Any]]:
        """The ``args`` of the events of rows ``rows`` (positions): the source's own, then
        the ids, then the tags. ``json_values``: the source's values may be left as their
        JSON text (``msgspec.Raw``), where the trace can give them so."""
        src: list[dict[str, Any]] | None = None
        if self.with_source_args and len(rows):
            if json_values:
                src = self.trace.raw_args(self.labels[rows])
            if src is None:
                src = self.trace.args(self.labels[rows])
        else:
            src = [{} for _ in range(len(rows))]
        for key, values in self.ids.items():
            v = values[rows]
            at = np.flatnonzero(v >= 0)
            for i, x in zip(at.tolist(), v[at].astype(np.int64).tolist(), strict=True):
                src[i][key] = x
        return src

    def slices(self, rows: np.ndarray, json_values: bool = False,
               encoder: ArgsEncoder | None = None
               ) -> tuple[list[str], list[str], list[Any]]:
        """(names, cats, args) of the ``X`` events of rows ``rows`` (positions), tags
        added (``json_values``: see :meth:`row_args`). ``encoder``: a writer that encodes
        args itself; a slice's args may then be its encoding (one ``bytes``), not a dict."""
        names = list(map(self.names.__getitem__, self.name_codes[rows].tolist()))
        cats = list(map(self.cats.__getitem__, self.cat_codes[rows].tolist()))
        if not len(rows) or int(rows.max()) < self.nt:
            return names, cats, self._own_args(rows, names, cats, json_values, encoder)
        # Rows of the trace and of the tables: each part's args, put back in order.
        args = np.empty(len(rows), dtype=object)
        own = np.flatnonzero(rows < self.nt)
        if len(own):
            args[own] = objects(self._own_args(
                rows[own], [names[i] for i in own.tolist()], [cats[i] for i in own.tolist()],
                json_values, encoder))
        table = np.searchsorted(self._starts, rows, side="right") - 1
        for k in distinct(table[table >= 0]).tolist():
            at = np.flatnonzero(table == k)
            local = rows[at] - self._starts[k]
            args[at] = objects(self.tables[k].args_of(local) if encoder is None
                                else encoder.table_annotations(self.tables[k], local))
        out: list[Any] = args.tolist()
        return names, cats, out

    def _own_args(self, rows: np.ndarray, names: list[str], cats: list[str],
                  json_values: bool, encoder: ArgsEncoder | None = None) -> list[Any]:
        """The args of trace rows ``rows``, tagged: dicts, or with an ``encoder``, the
        encodings of the rows whose source args come as shapes or columns (their tags
        after them)."""
        if encoder is None or not self.with_source_args or not len(rows):
            return self._tagged(rows, names, cats, json_values)
        shapes = self.trace.arg_shapes(self.labels[rows])
        if shapes is None:
            as_columns = self._column_args(rows, names, cats, json_values, encoder)
            if as_columns is not None:
                return as_columns
            return self._tagged(rows, names, cats, json_values)
        out = np.empty(len(rows), dtype=object)
        shaped = shapes.code >= 0
        out[shaped] = objects(encoder.shape_annotations(
            shapes, [(k, v[rows]) for k, v in self.ids.items()]))
        # A tag goes after the row's args (a dict's new key), unless it would replace
        # one of them or an id: such a row is made as a dict.
        columns = getattr(self.tags, "columns", None)
        if columns is not None:
            cols: list[ArgColumn] = columns(rows, names, cats)
            code = np.maximum(shapes.code, 0)
            for col in cols:
                has = np.ones(len(rows), dtype=bool) if col.present is None else col.present
                if col.key in self.ids:
                    shaped &= ~has
                elif len(shapes.args):
                    theirs = np.asarray([col.key in a for a in shapes.args], dtype=bool)
                    shaped &= ~(has & theirs[code])
            tagged = np.flatnonzero(shaped)
            enc = encoder.column_annotations(cols, tagged)
            out[tagged] = objects(list(map(bytes.__add__, out[tagged].tolist(), enc)))
        elif self.tags is not None:
            tags: list[dict[str, Any]] = [{} for _ in range(len(rows))]
            self.tags(rows, names, cats, tags)
            tagged_rows = [i for i in np.flatnonzero(shaped).tolist() if tags[i]]
            own = [shapes.args[c] for c in shapes.code[tagged_rows].tolist()]
            clash = [i for i, a in zip(tagged_rows, own, strict=True)
                     if any(k in a or k in self.ids for k in tags[i])]
            shaped[clash] = False
            tagged_rows = [i for i in tagged_rows if shaped[i]]
            mine = [tags[i] for i in tagged_rows]
            pieces = encoder.annotations(list(chain.from_iterable(mine)),
                                         list(chain.from_iterable(map(dict.values, mine))))
            ends = np.cumsum([len(t) for t in mine], dtype=np.int64).tolist()
            out[tagged_rows] = objects([out[i] + b"".join(pieces[lo:hi]) for i, lo, hi in
                                        zip(tagged_rows, [0, *ends][:-1], ends, strict=True)])
        return self._with_dicts(out, shaped, rows, names, cats, json_values)

    def _column_args(self, rows: np.ndarray, names: list[str], cats: list[str],
                     json_values: bool, encoder: ArgsEncoder) -> list[Any] | None:
        """:meth:`_own_args` where the source gives its args as columns (the SQLite
        readers): each row's whole args encoded a column at a time, a dict only for the
        rows an id or a tag would change in place; None where the source or the tags
        cannot be given so."""
        columns = getattr(self.tags, "columns", None)
        if self.tags is not None and columns is None:
            return None
        own = self.trace.arg_columns(self.labels[rows])
        if own is None:
            return None
        cols, ok = row_columns(own, [(k, v[rows]) for k, v in self.ids.items()],
                               columns(rows, names, cats) if columns is not None else (),
                               len(rows))
        out = np.empty(len(rows), dtype=object)
        done = np.flatnonzero(ok)
        out[done] = objects(encoder.column_annotations(cols, done))
        return self._with_dicts(out, ok, rows, names, cats, json_values)

    def _with_dicts(self, out: np.ndarray, made: np.ndarray, rows: np.ndarray,
                    names: list[str], cats: list[str], json_values: bool) -> list[Any]:
        """``out`` (the rows' encodings where ``made``) with the other rows' args made as
        dicts."""
        rest = np.flatnonzero(~made)
        if len(rest):
            out[rest] = objects(self._tagged(rows[rest], [names[i] for i in rest.tolist()],
                                             [cats[i] for i in rest.tolist()], json_values))
        got: list[Any] = out.tolist()
        return got

    def _tagged(self, rows: np.ndarray, names: list[str], cats: list[str],
                json_values: bool) -> list[dict[str, Any]]:
        """The args dicts of trace rows ``rows``, tagged."""
        args = self.row_args(rows, json_values)
        if self.tags is not None:
            self.tags(rows, names, cats, args)
        return args

    def events(self, rows: np.ndarray, json_values: bool = False) -> list[dict[str, Any]]:
        """The ``X`` events of rows ``rows`` (positions), as :func:`trace_to_chrome` writes
        them (``json_values``: see :meth:`row_args`)."""
        names, cats, args = self.slices(rows, json_values)
        return [{"ph": "X", "cat": c, "name": n, "pid": p, "tid": t, "ts": s, "dur": d,
                 "args": a}
                for c, n, p, t, s, d, a in zip(
                    cats, names, self.pid[rows].tolist(), self.tid[rows].tolist(),
                    self.ts_us[rows].tolist(), self.dur_us[rows].tolist(), args,
                    strict=True)]

    def document(self) -> dict[str, Any]:
        """The whole document as one dict."""
        events = self.events(np.arange(self.n))
        events += self.flows.dicts() + self.extra
        return {**self.head, "traceEvents": events, **self.tail}


def _name_events(trace: Trace) -> list[dict[str, Any]]:
    m = trace.meta
    procs = dict(m.process_names)
    ev = trace.events
    gpu = ev[ev["kind"].isin(GPU_KINDS)]
    for pid, dev in gpu[["pid", "device"]].drop_duplicates("pid").itertuples(index=False):
        procs.setdefault(int(pid), f"GPU {int(dev) if dev >= 0 else int(pid)}")
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
        for pid, name in sorted(procs.items())
    ]
    out += [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
        for (pid, tid), name in sorted(m.thread_names.items())
    ]
    return out


def _device_properties(trace: Trace) -> list[dict[str, Any]]:
    out = []
    for d in trace.meta.devices:
        p: dict[str, Any] = {"id": d.id, "name": d.name}
        if d.sms is not None:
            p["numSms"] = d.sms
        if d.memory_bytes is not None:
            p["totalGlobalMem"] = d.memory_bytes
        cc = d.compute_capability
        if cc and d.vendor == "amd":
            p["gcnArchName"] = cc
        elif cc and "." in cc:
            major, minor = cc.split(".", 1)
            p["computeMajor"], p["computeMinor"] = int(major), int(minor)
        out.append(p)
    return out


def trace_to_chrome(
    trace: Trace,
    extra_events: Iterable[Mapping[str, Any]] | None = None,
    *,
    with_source_args: bool = True,
) -> dict[str, Any]:
    """A Kineto-compatible Chrome trace document (a dict ready for JSON) of ``trace``.

    Every event becomes an ``X`` event with ``ts``/``dur`` in us (relative to the trace
    start; ``baseTimeNanoseconds`` holds the absolute start), its source ``args`` plus
    correlation / External id / stream / device / graph id. Launch -> GPU ``ac2g`` flows,
    process/thread name ``M`` events and ``deviceProperties`` follow. ``extra_events``
    (already in Chrome form, times in us) are appended as given.
    """
    return ChromeSource(trace, extra_events, with_source_args=with_source_args).document()


def write_chrome(
    trace: Trace,
    path: str | Path,
    extra_events: Iterable[Mapping[str, Any]] | None = None,
) -> Path:
    """Write ``trace`` as Chrome JSON to ``path`` (gzip when it ends in ``.gz``)."""
    from traceforge.outputs import write

    p = Path(path)
    return write(p, document_bytes(trace_to_chrome(trace, extra_events), p))
