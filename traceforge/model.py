"""The normalized trace model that every reader produces and every analyzer consumes.

A :class:`Trace` is one profiler output of one process (one rank): an ``events`` table in
:data:`EVENT_COLUMNS`, a ``flows`` table, and :class:`TraceMeta`. Only readers in
``traceforge.formats`` know file formats; everything downstream reads these columns.

Times are int64 nanoseconds relative to the trace start; ``meta.base_ns`` is the absolute
time (epoch ns where the source gives one) of ``ts == 0``.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, cast

import numpy as np
import pandas as pd

from traceforge.args_provider import ArgColumn as ArgColumn  # (Trace.arg_columns' type)
from traceforge.args_provider import ArgShapes as ArgShapes  # (Trace.arg_shapes' type)
from traceforge.args_provider import ArgsProvider, distinct_args, no_args
from traceforge.kinds import GPU_KINDS as GPU_KINDS
from traceforge.kinds import KINDS as KINDS
from traceforge.ordering import lex_order as lex_order
from traceforge.pairs import first_rows as first_rows
from traceforge.pairs import pair_codes as pair_codes
from traceforge.pairs import pair_rows as pair_rows

#: Columns of ``Trace.events`` and their dtypes. -1 means "not known / not applicable".
EVENT_COLUMNS: dict[str, str] = {
    "name": "category",  # full event name as the source wrote it (kernels: demangled)
    "kind": "category",  # one of KINDS
    "cat": "category",  # the source's own category string (Kineto ``cat``, nsys table, ...)
    "ts": "int64",  # start, ns since trace start
    "dur": "int64",  # duration, ns (>= 0)
    "pid": "int64",  # host process id; for GPU events the source's device row id
    "tid": "int64",  # host thread id; for GPU events the stream
    "device": "int64",  # GPU index, -1 for host events
    "stream": "int64",  # GPU stream / HIP queue, -1 for host events
    "corr": "int64",  # correlation id linking a launch API call to its GPU activity
    "ext": "int64",  # external id linking a cpu_op to the runtime calls it made
    "graph": "int64",  # CUDA/HIP graph id of a kernel replayed from a graph, else -1
    "rank": "int64",  # distributed rank, -1 when unknown
}

_INT_COLUMNS = [c for c, t in EVENT_COLUMNS.items() if t == "int64"]

#: Columns of ``Trace.memory()``, one row per allocator event: ``event`` alloc/free/oom,
#: ``delta_bytes`` +alloc/-free (oom: the request), totals after it (-1: not recorded), device
#: -1 for host memory, ``row`` in ``events`` or -1. See :mod:`traceforge.formats.memory`.
MEMORY_COLUMNS: dict[str, str] = dict(  # noqa: C408 - names, not string keys: shorter
    ts="int64", device="int64", device_type="category", event="category", addr="int64",
    delta_bytes="int64", allocated_bytes="int64", reserved_bytes="int64", pid="int64",
    tid="int64", row="int64")

#: Columns of ``Trace.flows`` (Chrome-trace ``s``/``t``/``f`` flow events).
FLOW_COLUMNS: dict[str, str] = {
    "id": "int64",
    "cat": "category",
    "ph": "category",
    "ts": "int64",
    "pid": "int64",
    "tid": "int64",
}


@dataclass(frozen=True)
class Device:
    """One accelerator as described by the trace."""

    id: int
    name: str
    vendor: str = ""  # "nvidia", "amd", or "" when unknown
    sms: int | None = None  # streaming multiprocessors / compute units
    memory_bytes: int | None = None
    compute_capability: str | None = None  # "9.0" on NVIDIA, gfx arch on AMD


@dataclass(frozen=True)
class TraceMeta:
    """What the trace says about where and how it was recorded."""

    path: str = ""
    format: str = ""  # "kineto", "nsys-sqlite", "rocprofv3-csv", ...
    base_ns: int = 0  # absolute time of ts == 0 (epoch ns when the source gives one)
    rank: int | None = None
    world_size: int | None = None
    devices: tuple[Device, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)  # torch, cuda_runtime, driver, ...
    distributed: dict[str, Any] = field(default_factory=dict)  # Kineto ``distributedInfo``
    process_names: dict[int, str] = field(default_factory=dict)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # plain-language remarks, e.g. "CPU-only trace: no kernels"
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. the ``traceforge`` capture block


T = TypeVar("T")


class Store(Protocol):
    """Where a trace's derived tables outlive the process (the columnar cache gives a
    trace it loaded one: :mod:`traceforge.formats.derived`). ``key`` names the table and
    everything it depends on besides the trace's rows and the code; ``get`` answers None
    for anything it does not hold, and neither raises."""

    def get(self, key: str) -> Any | None: ...

    def put(self, key: str, value: Any) -> None: ...


def empty_frame(columns: dict[str, str]) -> pd.DataFrame:
    """An empty frame with the given column dtypes (e.g. FLOW_COLUMNS)."""
    return cast(pd.DataFrame, pd.DataFrame({c: pd.Series([], dtype=t) for c, t in columns.items()}))


def name_mask(names: pd.Series, pattern: str) -> np.ndarray:
    """Which rows of a name column match the regex ``pattern`` (``re.search``).

    The pattern runs once per distinct name, not once per row: event names are
    categorical, and a large trace has a million rows but a few thousand names.
    """
    rx = re.compile(pattern)
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = names.cat.categories
        hit = np.fromiter((bool(rx.search(str(c))) for c in cats), dtype=bool, count=len(cats))
        codes = names.cat.codes.to_numpy()
        return np.where(codes >= 0, hit[np.clip(codes, 0, None)], False)
    # Plain columns (a timeline's names) are numbered first, for the same reason.
    codes, labels = str_codes(names)
    hit = np.fromiter((bool(rx.search(v)) for v in labels), dtype=bool, count=len(labels))
    return hit[codes] if len(labels) else np.zeros(len(codes), dtype=bool)


def str_codes(col: pd.Series) -> tuple[np.ndarray, list[str]]:
    """First-appearance codes of a plain column's values and each code's ``str``; a
    missing value is coded by its ``str`` ("nan", "None"), as ``astype(str)`` writes it:
    string work on the few distinct values instead of every row."""
    vals = col.to_numpy()
    codes, uniq = pd.factorize(vals)
    codes = np.asarray(codes, dtype=np.int64)
    labels = [str(u) for u in uniq]
    miss = np.flatnonzero(codes < 0)
    if len(miss):
        more, names = pd.factorize(np.array([str(vals[i]) for i in miss.tolist()], dtype=object))
        codes[miss] = np.asarray(more, dtype=np.int64) + len(labels)
        labels += [str(n) for n in names]
    return codes, labels


def strings(col: pd.Series) -> np.ndarray:
    """A name-like column as a numpy object array of str, taken through its categories.

    ``astype(str)`` on a million-row categorical builds a million Python strings (and on
    pandas 3 with pyarrow, an Arrow string array); this takes the few distinct ones.
    """
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes, labels = coded(col)
        return np.asarray(labels[codes])
    return np.asarray(col.astype(object).to_numpy(), dtype=object)


def coded(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, labels)`` of a name-like column, ``labels[codes]`` being its values as
    str (a missing value -> ""): select rows on the small codes, map to strings last."""
    cat = col.cat if isinstance(col.dtype, pd.CategoricalDtype) else pd.Series(
        pd.Categorical(col.astype(object))).cat
    labels = np.array([str(c) for c in cat.categories] + [""], dtype=object)
    return np.asarray(cat.codes.to_numpy(), dtype=np.int64), labels  # -1 indexes the ""


def distinct(a: Any) -> np.ndarray:
    """The sorted distinct values of an array, as ``np.unique(a)``. numpy 2.3+ finds them
    with a hash table, ~15x slower than a sort on 10M int64 (numpy#31969: 10.9 s against
    0.7 s here); floats keep ``np.unique`` (its NaNs are one value)."""
    v = np.asarray(a).ravel()
    if v.dtype.kind in "fc" or len(v) < 2:
        return np.unique(v)
    v = np.sort(v)
    keep = np.empty(len(v), dtype=bool)
    keep[0] = True
    np.not_equal(v[1:], v[:-1], out=keep[1:])
    return v[keep]


def normalize_events(df: pd.DataFrame) -> pd.DataFrame:
    """Return ``df`` with every column of EVENT_COLUMNS, in order and with its dtype.

    Readers and test builders call this once; missing int columns become -1.
    """
    n = len(df)
    if list(df.columns) == list(EVENT_COLUMNS) and all(
        str(df[c].dtype) == t for c, t in EVENT_COLUMNS.items()
    ) and isinstance(df.index, pd.RangeIndex) and list(df["kind"].cat.categories) == list(KINDS):
        return df  # already normalized (readers build columns in their final dtypes)
    out: dict[str, Any] = {}
    for col, dtype in EVENT_COLUMNS.items():
        if col in df.columns:
            s = df[col]
        elif dtype == "int64":
            s = pd.Series(np.full(n, -1, dtype=np.int64), index=df.index)
        elif col == "cat":
            s = pd.Series([""] * n, index=df.index)
        else:
            raise ValueError(f"events need a {col!r} column")
        if col == "kind":
            if isinstance(s.dtype, pd.CategoricalDtype) and list(s.cat.categories) == list(KINDS):
                kinds = s.array  # (a reader's own, made before its sort)
            else:
                kinds = pd.Categorical(s.astype(str), categories=pd.Index(list(KINDS)))
            if pd.isna(kinds).any():
                raise ValueError("kind holds values outside KINDS")
            out[col] = kinds
            continue
        if dtype == "category" and s.dtype != "category":
            s = s.astype("category")
        elif dtype == "int64" and s.dtype != np.int64:
            s = s.fillna(-1).astype(np.int64)  # rows built from dicts may lack a column
        out[col] = s
    return cast(pd.DataFrame, pd.DataFrame(out, index=pd.RangeIndex(n)))


@dataclass(frozen=True, eq=False)
class Trace:
    """One process's profile: events, flows and metadata.

    Build one with a reader (``traceforge.load``) or :meth:`from_events`; the constructor
    does no I/O. ``events`` rows keep their position for :meth:`args`.
    """

    events: pd.DataFrame
    meta: TraceMeta = field(default_factory=TraceMeta)
    flows: pd.DataFrame = field(default_factory=lambda: empty_frame(FLOW_COLUMNS))
    args_provider: ArgsProvider = field(default=no_args, repr=False)
    #: Where the analysis takes its steps from: None = the trace's own markers
    #: (``ProfilerStep#N``, then traceforge capture's ``step N`` ranges), ``"none"`` = no
    #: steps (the whole GPU span), anything else = a regex over range names.
    #: See :mod:`traceforge.analyzers.timeline.steps`.
    steps_from: str | None = None
    #: Derived tables computed once per trace (the analysis timeline); never copied by
    #: ``dataclasses.replace``, so a changed trace starts with an empty memo.
    memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    #: Where :meth:`derived` keeps its tables across processes (None: in memory only). Not
    #: copied by ``dataclasses.replace`` either: a trace with other rows must not read the
    #: tables of these.
    store: Store | None = field(default=None, init=False, repr=False)
    #: Reads the memory table (:meth:`memory`) when first asked for; None: no source.
    memory_provider: Callable[[], pd.DataFrame] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        missing = [c for c in EVENT_COLUMNS if c not in self.events.columns]
        if missing:
            raise ValueError(f"events lack columns {missing}; use Trace.from_events")
        if (self.events["dur"] < 0).any():
            raise ValueError("events have negative durations")

    @classmethod
    def from_events(
        cls,
        events: pd.DataFrame | Sequence[dict[str, Any]],
        meta: TraceMeta | None = None,
        *,
        flows: pd.DataFrame | None = None,
        args: Sequence[dict[str, Any]] | None = None,
    ) -> Trace:
        """Build a trace from rows or a frame, normalizing dtypes (tests and readers)."""
        df = events if isinstance(events, pd.DataFrame) else pd.DataFrame(list(events))
        if "cat" not in df.columns and "kind" in df.columns:
            df = df.assign(cat=df["kind"].astype(str))
        ev = normalize_events(df.reset_index(drop=True))
        provider: ArgsProvider = no_args
        if args is not None:
            stored = list(args)

            def provider(rows: np.ndarray) -> list[dict[str, Any]]:
                return [dict(stored[int(i)] or {}) for i in rows]

        fl = empty_frame(FLOW_COLUMNS) if flows is None else flows
        return cls(ev, meta or TraceMeta(), fl, provider)

    # -- selections ---------------------------------------------------------------------
    def of_kind(self, *kinds: str) -> pd.DataFrame:
        """Rows whose ``kind`` is one of ``kinds`` (original row labels kept)."""
        return cast(pd.DataFrame, self.events[self.events["kind"].isin(kinds)])

    def kernels(self) -> pd.DataFrame:
        """GPU kernel rows."""
        return self.of_kind("kernel")

    def gpu(self) -> pd.DataFrame:
        """Kernel, memcpy and memset rows: everything that occupies a device."""
        return self.of_kind(*GPU_KINDS)

    def args(self, rows: Iterable[int] | int) -> list[dict[str, Any]]:
        """Decode the source's ``args`` of the given row labels (lazily, on demand)."""
        arr = np.atleast_1d(np.asarray(rows if not isinstance(rows, int) else [rows]))
        return self.args_provider(arr.astype(np.int64))

    def raw_args(self, rows: Iterable[int]) -> list[dict[str, Any]] | None:
        """:meth:`args` with each value left as its JSON text (``msgspec.Raw``: decode it
        with ``msgspec.json.decode``), where the source can give them so (Kineto JSON);
        None where it cannot. For writers that meet the same values many times."""
        fn = getattr(self.args_provider, "raw", None)
        if fn is None:
            return None
        got: list[dict[str, Any]] | None = fn(np.asarray(rows, dtype=np.int64).reshape(-1))
        return got

    def arg_shapes(self, rows: Iterable[int]) -> ArgShapes | None:
        """The args of the given row labels as shapes (:class:`~traceforge.args_provider.
        ArgShapes`: each distinct args text once, the int values that differ per row as
        a column), where the source can give them so (Kineto JSON); None where it cannot.
        For writers that encode many rows' args."""
        fn = getattr(self.args_provider, "shapes", None)
        if fn is None:
            return None
        got: ArgShapes | None = fn(np.asarray(rows, dtype=np.int64).reshape(-1))
        return got

    def arg_columns(self, rows: Iterable[int]) -> list[ArgColumn] | None:
        """The args of the given row labels as columns over their positions
        (:class:`~traceforge.args_provider.ArgColumn`: each row's args are the present
        values, keys in column order), where the source holds them so (the SQLite
        readers); None where it does not. For writers that encode many rows' args."""
        fn = getattr(self.args_provider, "arg_columns", None)
        if fn is None:
            return None
        got: list[ArgColumn] | None = fn(np.asarray(rows, dtype=np.int64).reshape(-1))
        return got

    def distinct_args(self, rows: Iterable[int], keys: Sequence[str]
                      ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """``(codes, uniques)``: the distinct values of ``keys`` in the rows' args, as
        :func:`pandas.factorize` gives them (see :func:`distinct_args`). Much cheaper than
        :meth:`args` when many rows repeat a few values (op shapes)."""
        arr = np.asarray(rows, dtype=np.int64).reshape(-1)
        return distinct_args(self.args_provider, arr, tuple(keys))

    def memory(self) -> pd.DataFrame:
        """Allocator events (:data:`MEMORY_COLUMNS`; attrs notes, source), read on first use."""
        if "memory" not in self.memo:
            got = self.memory_provider() if self.memory_provider is not None else None
            self.memo["memory"] = empty_frame(MEMORY_COLUMNS) if got is None else got
        return cast(pd.DataFrame, self.memo["memory"])

    # -- derived facts ------------------------------------------------------------------
    @property
    def span_ns(self) -> int:
        """Time from the first event's start to the last event's end."""
        ev = self.events
        if ev.empty:
            return 0
        return int((ev["ts"] + ev["dur"]).max() - ev["ts"].min())

    def with_steps(self, steps_from: str | None) -> Trace:
        """This trace with its steps taken from ``steps_from`` (see the field's comment)."""
        return self._same_rows(steps_from=steps_from)

    def with_meta(self, meta: TraceMeta) -> Trace:
        """This trace with other meta (a rank, a note): the same rows."""
        return self._same_rows(meta=meta)

    def with_store(self, store: Store | None) -> Trace:
        """A copy of this trace that keeps its derived tables in ``store`` (the cache reader
        gives one to the traces it reads and writes)."""
        out = replace(self)
        object.__setattr__(out, "store", store)
        return out

    def _same_rows(self, **changes: Any) -> Trace:
        """``replace`` for changes that keep the rows, so the store stays (the derived
        tables' keys name the step rule and the meta)."""
        out = replace(self, **changes)
        object.__setattr__(out, "store", self.store)
        return out

    def derived(self, key: str, make: Callable[[], T]) -> T:
        """A table derived from this trace (the timeline, a rank's graph, ...): made once,
        kept in :attr:`memo`, and in :attr:`store` when the trace has one, so that a later
        process analysing the same cached trace with the same code reads it back."""
        if key in self.memo:
            got: T = self.memo[key]
            return got
        # The rows are the store's; what else a table may read is the step rule and meta.
        meta = hashlib.sha1(repr(self.meta).encode()).hexdigest()
        full = f"{key}|steps_from={self.steps_from!r}|meta={meta}"
        value = self.store.get(full) if self.store is not None else None
        if value is None:
            value = make()
            if self.store is not None:
                self.store.put(full, value)
        self.memo[key] = value
        return cast(T, value)

    def forget_derived(self) -> None:
        """Let go of the tables :meth:`derived` (and :meth:`memory`) keep in memory, for a
        caller done analysing a large trace that still reads its rows: the store's copies
        stay, and a later call makes or reads a table again."""
        self.memo.clear()

    def window(self, start_ns: int, end_ns: int) -> Trace:
        """Events that overlap ``[start_ns, end_ns)``, with row labels kept for ``args``."""
        ev = self.events
        sel = ev[(ev["ts"] < end_ns) & (ev["ts"] + ev["dur"] > start_ns)]
        return replace(self, events=sel)

    def counts(self) -> dict[str, int]:
        """Number of events of each kind (kinds with none are left out)."""
        vc = self.events["kind"].value_counts()
        return {str(k): int(v) for k, v in vc.items() if v}

    # -- display ------------------------------------------------------------------------
    def __repr__(self) -> str:
        m = self.meta
        dev = ", ".join(sorted({d.name for d in m.devices})) or "no device info"
        kinds = ", ".join(f"{k}={v}" for k, v in self.counts().items())
        rank = "" if m.rank is None else f" rank={m.rank}"
        return (
            f"<Trace {m.format or 'unknown'} {m.path or '(in memory)'}{rank}: "
            f"{len(self.events)} events ({kinds}), span {self.span_ns / 1e6:.3f} ms, {dev}>"
        )

    def _repr_html_(self) -> str:
        m = self.meta
        rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>"
                       for k, v in self.counts().items())
        dev = html.escape(", ".join(d.name for d in m.devices) or "no device info")
        return (
            f"<div><b>Trace</b> {html.escape(m.format)} <code>{html.escape(m.path)}</code><br>"
            f"span {self.span_ns / 1e6:.3f} ms · {dev} · rank {m.rank}"
            f"<table><tr><th>kind</th><th>events</th></tr>{rows}</table></div>"
        )


class Tables:
    """Mixin for the dataclasses analyses return: in Jupyter, each DataFrame field shows as
    an HTML table (first 50 rows, pandas' own HTML), text fields (notes, ...) as lines."""

    def _repr_html_(self) -> str:
        import dataclasses

        if not dataclasses.is_dataclass(self):
            return html.escape(repr(self))
        head, body = [f"<b>{html.escape(type(self).__name__)}</b>"], []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, pd.DataFrame):
                more = f" (first 50 of {len(v):,})" if len(v) > 50 else ""
                body.append(f"<h4>{html.escape(f.name)}{more}</h4>"
                            + v.head(50).to_html(index=False, border=0))
            elif isinstance(v, str) and v:
                head.append(f"{html.escape(f.name)}: {html.escape(v)}")
            elif isinstance(v, tuple) and v and all(isinstance(x, str) for x in v):
                head += [f"{html.escape(f.name)}: {html.escape(x)}" for x in v]
        return "<div>" + "<br>".join(head) + "".join(body) + "</div>"

