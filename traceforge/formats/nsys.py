"""Nsight Systems reader: the SQLite export (``nsys export --type sqlite``) and ``.nsys-rep``.

Tables read (each only when present; columns are looked up, never assumed, because they
change between export schema versions 2.x (nsys 2022) and 3.x (2024-2025)):
``CUPTI_ACTIVITY_KIND_KERNEL`` / ``_MEMCPY`` / ``_MEMSET`` / ``_RUNTIME`` / ``_SYNCHRONIZATION``,
``NVTX_EVENTS``, ``OSRT_API``, ``TARGET_INFO_GPU``, ``PROCESSES``, ``ThreadNames``, the export
metadata table (``META_DATA_EXPORT``, ``EXPORT_META_DATA`` before 2023) and
``TARGET_INFO_SESSION_START_TIME``. Strings are ids into ``StringIds``. Times are ns since
the session start. ``globalTid`` packs pid and tid: pid = (gTid >> 24) & 0xFFFFFF,
tid = gTid & 0xFFFFFF (``globalPid`` is the same with tid 0).

A report of several processes (torchrun under nsys) becomes one trace whose ``rank``
column numbers the processes that ran GPU work (kernels, copies, memsets or syncs), in
ascending OS pid order: nsys records no torch rank, and torchrun starts local ranks in
order, so pid order is the usual rank order but not a guarantee. Host rows carry the OS
pid in ``pid``; GPU rows carry the device there (Kineto's layout) and the OS pid of the
launching process in args ``host_pid``; ``meta.extra["rank_pids"]`` maps rank -> pid.
Host rows of processes without GPU work keep rank -1. Correlation ids are per process,
so pair them within one rank. :func:`split_processes` turns such a trace into one trace
per rank (``traceforge.load_run`` does this for a single multi-process file).
"""

from __future__ import annotations

import sqlite3
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from traceforge.errors import TraceFormatError
from traceforge.executables import find_nsys
from traceforge.formats import columns, nvtx_ops, sqlite_db
from traceforge.formats import nsys_tables as tables
from traceforge.formats.frame_args import PartArgs
from traceforge.formats.sqlite_db import pick
from traceforge.formats.symbols import demangle_names
from traceforge.model import EVENT_COLUMNS, KINDS, Device, Trace, TraceMeta, normalize_events

NAME = "nsys-sqlite"
SUFFIXES = (".sqlite", ".sqlite.gz", ".nsys-rep", ".qdrep")

#: ``.nsys-rep`` / ``.qdrep`` files start with this banner (a historical product name).
REP_MAGIC = b"NVIDIA Tegra Profiler Report"

#: Tables whose presence (with StringIds) makes a database an nsys export.
SIGNATURE = (tables.KERNEL, tables.RUNTIME, tables.NVTX, "TARGET_INFO_SESSION_START_TIME")

def sniff(path: Path, head: bytes) -> bool:
    """An ``.nsys-rep`` banner, or any SQLite database not claimed by an earlier reader.

    SQLite readers for rocpd and legacy rocprof come first in READERS; this one claims the
    rest so that a database that is no nsys export gets an error naming the missing tables.
    """
    return head.startswith(REP_MAGIC) or sqlite_db.is_sqlite(head)


def read(path: str | Path) -> Trace:
    """Read an nsys SQLite export (or ``.nsys-rep``, exported with nsys) into a Trace."""
    p = Path(path)
    with p.open("rb") as f:
        banner = f.read(len(REP_MAGIC))
    if banner == REP_MAGIC:
        return _read_rep(p)
    have = sqlite_db.tables(p)
    if "StringIds" not in have or not any(t in have for t in SIGNATURE):
        missing = ["StringIds"] if "StringIds" not in have else []
        missing.append(" or ".join(SIGNATURE))
        raise TraceFormatError(
            p, "SQLite database but not an Nsight Systems export, nor rocpd/rocprof "
            f"(missing tables: {', '.join(missing)})"
        )
    with sqlite_db.connect(p) as conn:
        return _read_db(p, conn, have)


def _read_rep(p: Path) -> Trace:
    try:
        exe = find_nsys()
    except LookupError as e:
        raise TraceFormatError(
            p, f"an .nsys-rep needs nsys to export it ({e}); or run `nsys export --type "
            f"sqlite {p.name}` elsewhere and pass the .sqlite") from None
    # Export into a private temp dir: nothing is ever written beside the input.
    with tempfile.TemporaryDirectory(prefix="traceforge-nsys-") as tmp:
        out = Path(tmp) / (p.stem + ".sqlite")
        # --include-blobs keeps NVTX payloads (NCCL's message sizes); nsys before 2024
        # lacks the option, so a refusal is retried without it.
        for blobs in (["--include-blobs", "true"], []):
            cmd = [exe, "export", "--type", "sqlite", "--force-overwrite", "true", *blobs,
                   "--output", str(out), str(p)]
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                                     check=False)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise TraceFormatError(p, f"nsys export failed ({e})") from None
            if res.returncode == 0 and out.exists():
                break
        if res.returncode != 0 or not out.exists():
            last = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
            raise TraceFormatError(p, f"nsys export failed: {last[0]}")
        trace = read(out)
    return Trace(trace.events, _with_path(trace.meta, p), trace.flows, trace.args_provider)


def _with_path(m: TraceMeta, p: Path) -> TraceMeta:
    return replace(m, path=str(p), extra={**m.extra, "exported_with": "nsys export"})


def _concat_categorical(cols: list[pd.Series]) -> pd.Categorical:
    """``pd.concat(cols).astype("category")`` without concatenating the values: each
    column is coded on its own (a categorical one is kept) and the codes are moved onto
    the categories of all columns together (the same categories, in the same order)."""
    coded = [c.array if isinstance(c.dtype, pd.CategoricalDtype) else pd.Categorical(c)
             for c in cols]
    # (only the categories a column uses: a reader's own may hold more)
    used = [c.categories[np.bincount(c.codes + 1, minlength=len(c.categories) + 1)[1:] > 0]
            for c in coded]
    distinct = pd.concat([pd.Series(u) for u in used], ignore_index=True)
    categories = distinct.astype("category").cat.categories
    codes = [np.where(c.codes >= 0, categories.get_indexer(c.categories)[c.codes], -1)
             for c in coded]
    return tables.coded(np.concatenate(codes) if codes else np.zeros(0, np.int8), categories)


def _meta_table(conn: sqlite3.Connection, have: frozenset[str]) -> dict[str, str]:
    for t in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if t in have:
            return {str(k): str(v) for k, v in conn.execute(f"SELECT name, value FROM {t}")}
    return {}


def _devices(conn: sqlite3.Connection, have: frozenset[str]) -> tuple[Device, ...]:
    if "TARGET_INFO_GPU" not in have:
        return ()
    c = sqlite_db.columns(conn, "TARGET_INFO_GPU")
    sel = ", ".join(pick(c, *w, alias=a) for a, w in (
        ("id", ("id",)), ("name", ("name",)), ("sms", ("smCount",)),
        ("mem", ("totalMemory",)), ("major", ("computeMajor", "smMajor")),
        ("minor", ("computeMinor", "smMinor"))))
    out: list[Device] = []
    for i, name, sms, mem, major, minor in conn.execute(f"SELECT {sel} FROM TARGET_INFO_GPU"):
        out.append(Device(
            id=columns.as_int(i, len(out)) or 0, name=str(name or ""), vendor="nvidia",
            sms=columns.as_int(sms) or None, memory_bytes=columns.as_int(mem) or None,
            compute_capability=f"{major}.{minor}" if major is not None else None))
    return tuple(sorted(out, key=lambda d: d.id))


def _read_db(p: Path, conn: sqlite3.Connection, have: frozenset[str]) -> Trace:
    parts: list[pd.DataFrame] = []
    # The two large tables read at once (sqlite_db.frames: a thread each).
    queries = {t: q(conn) for t, q in ((tables.KERNEL, tables.kernel_query),
                                       (tables.RUNTIME, tables.api_query)) if t in have}
    got = dict(zip(queries, sqlite_db.frames(conn, list(queries.values())), strict=True))
    if tables.KERNEL in have:
        parts.append(tables.kernels(conn, got.pop(tables.KERNEL)))
    labels = (tables.enum_labels(conn, "ENUM_CUDA_MEMCPY_OPER")
              if "ENUM_CUDA_MEMCPY_OPER" in have else {})
    for t in (tables.MEMCPY, tables.MEMSET):
        if t in have:
            parts.append(tables.copies(conn, t, labels))
    if tables.SYNC in have:
        parts.append(tables.sync(conn))
    if tables.RUNTIME in have:
        parts.append(tables.api(conn, got.pop(tables.RUNTIME)))
    unfinished = 0
    if tables.NVTX in have:
        nv, unfinished = tables.nvtx(conn)
        parts.append(nv)
    if tables.OSRT in have:
        parts.append(tables.osrt(conn))
    parts = [d for d in parts if not d.empty]
    # Each table's args stay with its own rows (PartArgs): concatenated, a kernel's grid
    # and every other table's columns were filled in for all rows (35 columns, ~1 GB at
    # 4.2M rows) and moved by the concat and the sort. (_ids also reads graphNodeId.)
    args = [{c: d[c].to_numpy() for c in _ARG_COLUMNS if c in d.columns} for d in parts]
    sizes = [len(d) for d in parts]
    # The columns normalize_events makes categorical, made so part by part: the concat
    # and the sort then move codes, not millions of strings.
    coded = {c: _concat_categorical([d[c] for d in parts]) for c in ("name", "cat", "kind")
             } if parts else {}
    parts = [_ids(d.drop(columns=[c for c in (*_ARG_COLUMNS, *coded) if c in d.columns
                                  and c != "graphNodeId"])) for d in parts]
    df = pd.concat(parts, ignore_index=True, sort=False) if parts else pd.DataFrame(
        {c: pd.Series([], dtype=object) for c in ("name", "kind", "cat", "ts", "dur")})
    del parts
    for c, values in coded.items():
        df[c] = values
    df = _layout(p, df)
    meta = _meta(p, conn, have, df, unfinished)
    for col in ("name", "cat"):
        df[col] = df[col].astype("category")  # (no-ops but for a file without events)
    df["kind"] = pd.Categorical(df["kind"], categories=pd.Index(list(KINDS)))
    order = np.argsort(df["ts"].to_numpy(), kind="stable")
    provider = PartArgs(args, sizes, order, {"host_pid": df["host_pid"].to_numpy()[order]},
                        _ARG_COLUMNS)
    events = _events(df, order)
    del df
    return demangle_names(Trace(events, meta, args_provider=provider))


def _events(df: pd.DataFrame, order: np.ndarray) -> pd.DataFrame:
    """The events in the order ``order``: the int columns taken straight into one block
    (a sorted frame and then normalize_events' frame of it wrote each column twice, 0.6 s
    of fresh memory at 4.2M rows), the categorical ones by their codes."""
    ints = [c for c, t in EVENT_COLUMNS.items() if t == "int64"]
    block = np.empty((len(ints), len(order)), dtype=np.int64)
    for i, c in enumerate(ints):
        if c in df.columns:
            np.take(df[c].to_numpy(dtype=np.int64), order, out=block[i])
        else:
            block[i] = -1
    out = pd.DataFrame(block.T, columns=ints, copy=False)
    for i, c in enumerate(c for c, t in EVENT_COLUMNS.items() if t == "category"):
        out.insert(i, c, df[c].array.take(order))
    events: pd.DataFrame = normalize_events(out)
    return events


def _ids(df: pd.DataFrame) -> pd.DataFrame:
    """One table's pid/tid/device/stream/corr/graph/host_pid from the nsys ids (see the
    module docstring), as int64 (-1: none), before the tables are concatenated: a column
    one table lacks then needs no NaN for its rows and no float64 for the others'."""
    n = len(df)

    def ids(col: str) -> np.ndarray:
        return columns.ids(df[col], -1) if col in df.columns else np.full(n, -1, np.int64)

    gtid = ids("gtid")
    host = gtid >= 0
    hpid = np.where(host, (gtid >> 24) & 0xFFFFFF, ids("hpid"))
    device, stream, corr = ids("device"), ids("stream"), ids("corr")
    graph = ids("graphId")
    if "graphNodeId" in df.columns:
        # Exports without a graphId column still mark graph-node kernels: the replaying
        # cudaGraphLaunch's correlation id then stands in for the graph.
        graph = np.where((graph < 0) & df["graphNodeId"].notna().to_numpy(), corr, graph)
    out: pd.DataFrame = df.drop(columns=[
        c for c in ("gtid", "hpid", "graphId", "graphNodeId", "device", "stream", "corr")
        if c in df.columns])
    # GPU rows follow Kineto's layout: pid = device, tid = stream.
    out["host_pid"], out["pid"] = hpid, np.where(host, hpid, device)
    out["tid"] = np.where(host, gtid & 0xFFFFFF, stream)
    out["device"], out["stream"], out["corr"], out["graph"] = device, stream, corr, graph
    return out


def _layout(p: Path, df: pd.DataFrame) -> pd.DataFrame:
    """The rank of each row (see the module docstring) and the times checked."""
    n = len(df)
    for col in ("ts", "dur"):
        if col not in df.columns:
            df[col] = np.nan
    for col in ("host_pid", "pid", "tid", "device", "stream", "corr", "graph"):
        if col not in df.columns:  # (a file without events)
            df[col] = np.full(n, -1, dtype=np.int64)
    hpid = df["host_pid"].to_numpy(dtype=np.int64)
    device = df["device"].to_numpy(dtype=np.int64)
    gpu_pids = np.unique(hpid[(device >= 0) & (hpid >= 0)])
    rank = np.full(n, -1, dtype=np.int64)
    if len(gpu_pids) > 1:
        at = np.searchsorted(gpu_pids, hpid).clip(0, len(gpu_pids) - 1)
        rank = np.where(gpu_pids[at] == hpid, at, -1)
    df["rank"] = rank
    df["ts"] = columns.times(p, df["ts"], "start time")
    # GPU activity and API calls have an end: NULL, before the start or a negative start
    # is refused (columns.check_intervals); NVTX marks and open ranges have none.
    timed = df["kind"].isin(("kernel", "memcpy", "memset", "runtime", "driver")).to_numpy()
    if (timed & df["dur"].isna().to_numpy()).any():
        i = int(np.flatnonzero(timed & df["dur"].isna().to_numpy())[0])
        raise TraceFormatError(p, f"event {i} ({str(df['name'].iloc[i])[:80]!r}) has no end "
                               "time (NULL end); traceforge refuses rather than guess it")
    dur = columns.times(p, df["dur"].fillna(0), "duration")
    columns.check_intervals(p, df["ts"].to_numpy(), df["ts"].to_numpy() + dur, df["name"],
                            check=timed)
    df["dur"] = np.clip(dur, 0, None)
    return df


def _meta(p: Path, conn: sqlite3.Connection, have: frozenset[str], df: pd.DataFrame,
          unfinished: int) -> TraceMeta:
    info = _meta_table(conn, have)
    session = 0
    if "TARGET_INFO_SESSION_START_TIME" in have:
        row = conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        session = (columns.as_int(row[0], 0) or 0) if row else 0
    t0 = int(df["ts"].min()) if len(df) else 0
    df["ts"] -= t0
    pids = [x for x in np.unique(df["host_pid"].to_numpy()).tolist() if x != -1]
    procs: dict[int, str] = {}
    threads: dict[tuple[int, int], str] = {}
    if "PROCESSES" in have and pids:
        q = f"SELECT pid, name FROM PROCESSES WHERE pid IN ({','.join(map(str, pids))})"
        procs = {k: str(b) for a, b in conn.execute(q)
                 if b and (k := columns.as_int(a)) is not None}
    if "ThreadNames" in have and pids:
        q = "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"
        for g, name in conn.execute(q):
            gtid = columns.as_int(g)
            if gtid is None:
                continue
            pid, tid = (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF
            if pid in procs or pid in pids:
                threads[(pid, tid)] = str(name)
    versions = {k: info[src] for k, src in (("nsys", "EXPORT_PRODUCT_VERSION"),
                                             ("nsys_export_schema", "EXPORT_SCHEMA_VERSION"))
                if src in info}
    notes: list[str] = []
    if unfinished:
        notes.append(f"{unfinished} NVTX ranges never ended and were left out")
    ranks = [r for r in np.unique(df["rank"].to_numpy()).tolist() if r != -1]
    extra: dict[str, Any] = {"nsys_session_start_ns": session} if session else {}
    if ranks:
        notes.append(f"{len(ranks)} processes ran GPU work: rank numbers them in pid order")
        gpu = df[(df["rank"] >= 0) & (df["host_pid"] >= 0)]
        extra["rank_pids"] = {int(r): int(h) for r, h in
                              gpu.groupby("rank")["host_pid"].first().items()}
    return TraceMeta(
        path=str(p), format=NAME, base_ns=session + t0 if session else t0,
        world_size=len(ranks) or None, devices=_devices(conn, have), versions=versions,
        process_names=procs, thread_names=threads, notes=tuple(notes),
        extra=extra,
    )


_ARG_COLUMNS = ("short_name", "bytes", "direction", "copyKind", "srcKind", "dstKind",
                "srcDeviceId", "dstDeviceId", "value", "memKind", "returnValue", "syncType",
                "style", "domain", "host_pid", "payload") + tables.GPU_ARGS + nvtx_ops.ARG_COLUMNS


def split_processes(trace: Trace) -> list[Trace]:
    """One trace per process that ran GPU work, ordered by rank, each with its rank set.

    Works on any trace whose ``rank`` column numbers processes (this reader's multi-process
    reports; rocpd and rocprofv3 outputs number them the same way). A process's trace holds
    its host rows and the GPU rows it launched, keeps the original time base (ranks stay
    comparable) and decodes ``args`` through the parent. A trace with at most one GPU
    process comes back whole, as rank 0.
    """
    ev = trace.events
    ranks = sorted(int(r) for r in set(ev["rank"].unique().tolist()) - {-1})
    m = trace.meta
    if len(ranks) <= 1:
        whole = ev.assign(rank=np.int64(0))
        return [replace(trace, events=whole, meta=replace(m, rank=0, world_size=1))]
    pids: dict[int, int] = dict(m.extra.get("rank_pids") or {})
    out: list[Trace] = []
    for r in ranks:
        sel = ev[ev["rank"] == r]
        host = sel.loc[sel["device"] < 0, "pid"]
        pid = pids.get(r, int(host.mode().iloc[0]) if len(host) else -1)
        rows = sel.index.to_numpy()
        parent = trace.args_provider

        def provider(idx: np.ndarray, rows: np.ndarray = rows,
                     parent: Any = parent) -> list[dict[str, Any]]:
            result: list[dict[str, Any]] = parent(rows[idx])
            return result

        flows = trace.flows[trace.flows["pid"] == pid].reset_index(drop=True)
        meta = replace(
            m, rank=r, world_size=len(ranks),
            process_names={k: v for k, v in m.process_names.items() if k == pid},
            thread_names={k: v for k, v in m.thread_names.items() if k[0] == pid},
            notes=(*m.notes, f"rank {r} of {len(ranks)}: process {pid}, split from one "
                   "multi-process trace"),
            extra={**m.extra, "pid": pid})
        out.append(Trace(sel.reset_index(drop=True), meta, flows, provider))
    return out
