"""The memory table of a trace (``Trace.memory()``): the allocator's events, read lazily.

Sources, one row per event in :data:`traceforge.model.MEMORY_COLUMNS`:

* Kineto ``[memory]`` instant events (``profile_memory=True``), args ``Device Type`` (c10:
  0 CPU, 1 CUDA, 6 HIP), ``Device Id``, ``Addr``, ``Bytes`` (+alloc/-free), ``Total
  Allocated``, ``Total Reserved``; ``[OutOfMemory]`` events (``Bytes``: the request). They
  are rows of ``events`` already (kind ``other``); only their args are decoded here, when
  the table is first asked for. 2021 traces carry ``Bytes`` alone: totals stay -1 and
  analyses label their peaks as growth since the window began.
* nsys ``CUDA_GPU_MEMORY_USAGE_EVENTS`` (``--cuda-memory-usage=true``): ``cudaMalloc`` /
  ``cudaFree`` level, i.e. what a caching allocator reserves; no totals.
* rocprofv3 ``*memory_allocation_trace.csv`` beside the kernel trace
  (``--memory-allocation-trace``).

Loading a trace costs nothing for it: :class:`MemorySource` is the trace's
``memory_provider``, called on first use. With the cache on, the table it builds is kept as
an Arrow file beside the trace's cache entry (``<entry>.memory.arrow``, with the entry's
key), so a later ``memory`` maps it instead of decoding args again.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import msgspec
import numpy as np
import pandas as pd

from traceforge.model import MEMORY_COLUMNS, Trace, distinct, empty_frame

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("traceforge")

#: Suffix of the memory table kept beside a cache entry.
SUFFIX = ".memory.arrow"
#: c10::DeviceType codes Kineto writes in ``Device Type``.
DEVICE_TYPES = {0: "CPU", 1: "CUDA", 2: "MKLDNN", 3: "OPENGL", 4: "OPENCL", 5: "IDEEP",
                6: "HIP", 7: "FPGA", 8: "MAIA", 9: "XLA", 10: "Vulkan", 11: "Metal",
                12: "XPU", 13: "MPS", 15: "HPU", 19: "MTIA", 20: "PrivateUse1"}
MEMORY_NAMES = ("[memory]", "[OutOfMemory]")
_KEY = b"traceforge.memory"


def frame(cols: dict[str, Any], notes: list[str], source: str) -> pd.DataFrame:
    """A memory table from columns (missing int columns -1), sorted by time, with attrs."""
    n = len(next(iter(cols.values()))) if cols else 0
    out: dict[str, Any] = {}
    for c, dt in MEMORY_COLUMNS.items():
        if dt == "category":
            out[c] = pd.Categorical(np.asarray(cols.get(c, [""] * n), dtype=object))
        else:
            out[c] = np.asarray(cols[c], dtype=np.int64) if c in cols else np.full(n, -1, np.int64)
    df = pd.DataFrame(out)
    df = df.iloc[np.argsort(df["ts"].to_numpy(), kind="stable")].reset_index(drop=True)
    df.attrs["notes"] = list(notes)
    df.attrs["source"] = source
    return cast(pd.DataFrame, df)


def _int(v: Any) -> int | None:
    """An int from a JSON number (bool and non-integral floats are not)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -(2**63) <= v < 2**63 else None
    if isinstance(v, float) and v == v and v.is_integer() and abs(v) < 2**63:
        return int(v)
    return None


def kineto(trace: Trace) -> pd.DataFrame:
    """The memory table from a trace's ``[memory]`` / ``[OutOfMemory]`` rows and their args."""
    ev = trace.events
    names = ev["name"]
    hit = names.isin(list(MEMORY_NAMES)).to_numpy() & (ev["kind"] == "other").to_numpy()
    rows = np.flatnonzero(hit)
    if not len(rows):
        return frame({}, [], "")
    args = trace.args(ev.index.to_numpy()[rows])
    n = len(rows)
    dev, dtype, addr, delta, alloc, resv = (np.full(n, -1, np.int64) for _ in range(6))
    keep = np.ones(n, dtype=bool)
    missing = negative = 0
    for i, a in enumerate(args):
        b = _int(a.get("Bytes"))
        if b is None:
            keep[i] = False
            missing += 1
            continue
        delta[i] = b
        t = _int(a.get("Device Type"))
        dtype[i] = 0 if t is None else t
        d = _int(a.get("Device Id"))
        dev[i] = -1 if d is None or dtype[i] == 0 else d
        ad = _int(a.get("Addr"))
        addr[i] = -1 if ad is None else ad
        for arr, key in ((alloc, "Total Allocated"), (resv, "Total Reserved")):
            v = _int(a.get(key))
            if v is not None and v < 0:
                negative += 1
                v = None
            arr[i] = -1 if v is None else v
    is_oom = (names.to_numpy()[rows] == "[OutOfMemory]")
    notes = []
    if missing:
        notes.append(f"{missing} memory event(s) without a numeric Bytes arg were left out")
    if negative:
        notes.append(f"{negative} negative Total Allocated/Reserved value(s) read as unknown")
    event = np.where(is_oom, "oom", np.where(delta >= 0, "alloc", "free"))
    labels = np.array([DEVICE_TYPES.get(int(t), f"type {int(t)}") for t in dtype], dtype=object)
    sel = np.flatnonzero(keep)
    cols = {"ts": ev["ts"].to_numpy()[rows][sel], "device": dev[sel],
            "device_type": labels[sel], "event": event[sel], "addr": addr[sel],
            "delta_bytes": delta[sel], "allocated_bytes": alloc[sel],
            "reserved_bytes": resv[sel], "pid": ev["pid"].to_numpy()[rows][sel],
            "tid": ev["tid"].to_numpy()[rows][sel], "row": ev.index.to_numpy()[rows][sel]}
    out = frame(cols, notes, "Kineto memory events")
    out.attrs["call_stacks"] = _call_stacks(trace)
    return out


def _call_stacks(trace: Trace) -> bool:
    """Whether the trace's ops carry a ``Call stack`` arg (older Kineto with_stack)."""
    ops = trace.events.index.to_numpy()[(trace.events["kind"] == "cpu_op").to_numpy()]
    if not len(ops):
        return False
    _, uniq = trace.distinct_args(ops, ["Call stack"])
    return any(u.get("Call stack") for u in uniq)


#: ``memKind`` of CUDA_GPU_MEMORY_USAGE_EVENTS (nsys's ENUM_CUDA_MEM_KIND) that is memory
#: on the device obtained by cudaMalloc and friends: the series. The others (pageable and
#: pinned host memory, arrays, managed memory, device-static module globals) are counted
#: in a note.
NSYS_DEVICE_KIND = 2
NSYS_MEM_KINDS = {0: "pageable", 1: "pinned host", 2: "device", 3: "array", 4: "managed",
                  5: "device static (module globals)", 6: "managed static", 7: "unknown"}


def nsys(path: Path, trace: Trace) -> pd.DataFrame:
    """``CUDA_GPU_MEMORY_USAGE_EVENTS`` of an nsys export, on the trace's time base: the
    device allocations (``memKind`` device; every row where an export has no memKind)."""
    from traceforge.formats import sqlite_db

    table = "CUDA_GPU_MEMORY_USAGE_EVENTS"
    if path.suffix == ".nsys-rep" or table not in sqlite_db.tables(path):
        return frame({}, [], "")
    with sqlite_db.connect(path) as conn:
        has_kind = "memKind" in sqlite_db.columns(conn, table)
        df = sqlite_db.frame(conn, f"SELECT start, globalPid, deviceId, address, bytes, "
                                   f"memoryOperationType{', memKind' if has_kind else ''} "
                                   f"FROM {table}")
    notes = []
    if has_kind and not df.empty:
        kind = pd.to_numeric(df["memKind"], errors="coerce").fillna(-1).to_numpy(np.int64)
        other = kind != NSYS_DEVICE_KIND
        alloc = df["memoryOperationType"].to_numpy() != 1
        for k in distinct(kind[other & alloc]).tolist():
            sel = other & alloc & (kind == k)
            b = int(pd.to_numeric(df["bytes"][sel], errors="coerce").fillna(0).abs().sum())
            notes.append(f"{int(sel.sum())} allocation(s) of {NSYS_MEM_KINDS.get(k, f'kind {k}')}"
                         f" memory ({b:,} bytes) are not in the device series")
        df = df[~other]
    if df.empty:
        return frame({}, notes, "")
    session = int(trace.meta.extra.get("nsys_session_start_ns", 0) or 0)
    t0 = trace.meta.base_ns - session
    free = df["memoryOperationType"].to_numpy() == 1
    size = np.abs(pd.to_numeric(df["bytes"], errors="coerce").fillna(0).to_numpy(np.int64))
    gpid = pd.to_numeric(df["globalPid"], errors="coerce").fillna(-1).to_numpy(np.int64)
    cols = {"ts": pd.to_numeric(df["start"], errors="coerce").fillna(t0).to_numpy(np.int64) - t0,
            "device": df["deviceId"].to_numpy(np.int64), "device_type": ["CUDA"] * len(df),
            "event": np.where(free, "free", "alloc"),
            "addr": pd.to_numeric(df["address"], errors="coerce").fillna(-1).to_numpy(np.int64),
            "delta_bytes": np.where(free, -size, size),
            "pid": np.where(gpid >= 0, (gpid >> 24) & 0xFFFFFF, -1)}
    return frame(cols, ["nsys records cudaMalloc/cudaFree: device memory as a caching "
                        "allocator reserves it (plus libraries' own cudaMallocs), without "
                        "tensor-level allocations", *notes],
                 "nsys CUDA memory usage events")


def _rocprof_files(path: Path) -> list[Path]:
    d = path if path.is_dir() else path.parent
    stem = "" if path.is_dir() else path.name.split("kernel_trace")[0]
    found = sorted(d.rglob("*memory_allocation_trace.csv")) if path.is_dir() else sorted(
        d.glob(f"{stem}*memory_allocation_trace.csv"))
    return found[:64]


def rocprof(path: Path, trace: Trace) -> pd.DataFrame:
    """rocprofv3 ``memory_allocation_trace.csv`` (columns Operation, Agent_Id,
    Allocation_Size, Address, Start_Timestamp); a free's size comes from its allocation."""
    rows: list[dict[str, str]] = []
    for f in _rocprof_files(path):
        with contextlib.suppress(OSError, csv.Error, UnicodeError), f.open(newline="") as fh:
            rows += list(csv.DictReader(fh))
    if not rows:
        return frame({}, [], "")
    t0 = trace.meta.base_ns
    ts, dev, addr, delta, event = [], [], [], [], []
    live: dict[tuple[int, int], int] = {}
    bad = 0
    for r in sorted(rows, key=lambda r: _num(r.get("Start_Timestamp"))):
        op = str(r.get("Operation", "")).upper()
        a, size = _num(r.get("Address"), base=0), _num(r.get("Allocation_Size"))
        d, t = _num(r.get("Agent_Id")), _num(r.get("Start_Timestamp"))
        if t < 0 or a < 0 or "FREE" not in op and "ALLOC" not in op:
            bad += 1
            continue
        if "FREE" in op:
            size = live.pop((d, a), size if size > 0 else 0)
            sign, kind = -1, "free"
        else:
            live[(d, a)] = size
            sign, kind = 1, "alloc"
        ts.append(t - t0)
        dev.append(d)
        addr.append(a)
        delta.append(sign * size)
        event.append(kind)
    notes = [f"{bad} memory allocation row(s) without a time, address or operation were "
             "left out"] if bad else []
    cols = {"ts": ts, "device": dev, "device_type": ["HIP"] * len(ts), "event": event,
            "addr": addr, "delta_bytes": delta}
    return frame(cols, notes, "rocprofv3 memory allocation trace")


def _num(v: Any, base: int = 10) -> int:
    s = str(v or "").strip()
    with contextlib.suppress(ValueError):
        return int(s, 16) if s.lower().startswith("0x") else int(s.split()[-1], base or 10)
    return -1


def build(path: Path | None, trace: Trace) -> pd.DataFrame:
    """The memory table of ``trace`` (read from ``path``) for its format."""
    fmt = trace.meta.format
    if fmt.startswith("nsys") and path is not None:
        return nsys(path, trace)
    if fmt.startswith("rocprofv3") and path is not None:
        return rocprof(path, trace)
    return kineto(trace)


# -- the lazy provider and its cache file --------------------------------------------------
class MemorySource:
    """A trace's ``memory_provider``: builds the table from the trace (loading the whole
    trace again when only some kinds were kept) and keeps it beside the cache entry.

    Analyses add per-event columns computed on the whole trace (each event's op) with
    :meth:`extend`; they are kept in the same file, so a warm run reads them instead of
    the rows they came from. Picklable (traces cross processes): the trace it holds is
    dropped and re-read there.
    """

    def __init__(self, path: Path, trace: Trace | None, reload: Callable[[], Trace],
                 entry: Path | None = None, key: str | None = None) -> None:
        self.path, self.trace, self.entry, self.key = path, trace, entry, key
        self.reload = reload  # the whole trace again (picklable: a partial of load)
        self._whole: Trace | None = None
        self._table: pd.DataFrame | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "trace": None, "_whole": None, "_table": None}

    def _file(self) -> Path | None:
        return None if self.entry is None else self.entry.with_name(self.entry.stem + SUFFIX)

    def whole(self) -> Trace:
        """The trace with every row its reader made (read again once when not held)."""
        if self.trace is not None:
            return self.trace
        if self._whole is None:
            self._whole = self.reload()
        return self._whole

    def __call__(self) -> pd.DataFrame:
        if self._table is not None:
            return self._table
        f = self._file()
        if f is not None and self.key is not None:
            got = read_file(f, self.key)
            if got is not None:
                self._table = got
                return got
        trace = self.whole()
        try:
            table = build(self.path, trace)
        except (OSError, ValueError, KeyError, TypeError, msgspec.DecodeError) as e:
            table = frame({}, [f"memory events unreadable ({type(e).__name__}: {e})"], "")
        if f is not None and self.key is not None:
            write_file(f, self.key, table)
        self._table = table
        return table

    def extend(self, make: Callable[[Trace, pd.DataFrame], dict[str, Any]]) -> pd.DataFrame:
        """The table with the columns ``make(whole trace, table)`` returns (row numbers in
        the whole trace's numbering), kept in the file beside the cache entry."""
        table = self()
        cols = make(self.whole(), table)
        out = table.assign(**cols)
        out.attrs = dict(table.attrs)
        f = self._file()
        if f is not None and self.key is not None:
            write_file(f, self.key, out)
        self._table = out
        return cast(pd.DataFrame, out)


def attach(trace: Trace, path: Path, full: bool, reload: Callable[[], Trace],
           entry: Path | None = None, key: str | None = None) -> Trace:
    """``trace`` with a :class:`MemorySource`; ``full``: it holds every row its reader made;
    ``reload`` reads the whole trace when it does not."""
    from dataclasses import replace

    src = MemorySource(path, trace if full else None, reload, entry, key)
    out = replace(trace, memory_provider=src)
    object.__setattr__(out, "store", trace.store)
    if full:
        src.trace = replace(trace)  # the rows and args, without a reference cycle
    return out


def read_file(f: Path, key: str) -> pd.DataFrame | None:
    """The memory table kept in ``f`` for cache key ``key``, or None (missing, stale, damaged)."""
    import pyarrow as pa

    try:
        t = pa.ipc.open_file(pa.memory_map(str(f), "r")).read_all()
        head = msgspec.json.decode((t.schema.metadata or {})[_KEY])
        if not isinstance(head, dict) or head.get("key") != key:
            return None
        if not set(MEMORY_COLUMNS) <= set(t.column_names):
            return None
        # The table's columns, then any an analysis added (:meth:`MemorySource.extend`).
        extra = [c for c in t.column_names if c not in MEMORY_COLUMNS]
        df = pd.DataFrame({c: _column(t.column(c)) for c in [*MEMORY_COLUMNS, *extra]})
    except (OSError, KeyError, ValueError, TypeError, msgspec.DecodeError, pa.ArrowException):
        return None
    df.attrs["notes"] = list(head.get("notes", []))
    df.attrs["source"] = str(head.get("source", ""))
    df.attrs["call_stacks"] = bool(head.get("call_stacks", False))
    with contextlib.suppress(OSError):
        os.utime(f)
    return cast(pd.DataFrame, df)


def _column(arr: pa.ChunkedArray) -> Any:
    from traceforge.formats import arrow_frames

    return arrow_frames.column(arr, None)


def write_file(f: Path, key: str, table: pd.DataFrame) -> None:
    """Keep ``table`` in ``f`` (temporary file + rename); never raises."""
    import pyarrow as pa

    from traceforge.formats import arrow_frames

    tmp = ""
    try:
        t = arrow_frames.frame_table(table if len(table) else empty_frame(MEMORY_COLUMNS))
        head = {"key": key, "notes": table.attrs.get("notes", []),
                "source": table.attrs.get("source", ""),
                "call_stacks": bool(table.attrs.get("call_stacks", False))}
        t = t.replace_schema_metadata({_KEY: msgspec.json.encode(head)})
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".arrow", dir=f.parent)
        with os.fdopen(fd, "wb") as fh, pa.ipc.new_file(fh, t.schema) as w:
            w.write_table(t)
        os.replace(tmp, f)
    except (OSError, TypeError, ValueError, pa.ArrowException) as e:
        log.debug("memory table %s not kept: %s", f, e)
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
