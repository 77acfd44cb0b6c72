"""rocpd reader: the SQLite database rocprofv3 writes by default (``%hostname%/%pid%_results.db``).

Built from the documented schema, not from a real file: the table and view definitions in
ROCm/rocprofiler-sdk ``source/share/rocprofiler-sdk-rocpd/`` (``rocpd_tables.sql`` @50c89cbd,
``rocpd_views.sql`` @ad31aebb, ``data_views.sql`` @fbb1b80d; schema 3.0.x, the layout whose
dispatch/copy/region rows carry their own ``start``/``end``) and tested on a synthetic sample
written to that schema (tests/support/rocpd_schema.py). No rocpd file from a real run was available;
treat numbers from real files as unverified until one has been checked against ``rocpd query``.

What is read, preferring rocprofv3's own data views (they resolve ids to strings and OS
pids) and falling back to the base tables when a database lacks them:

* ``kernels`` (``rocpd_kernel_dispatch``): display name, start/end ns, GPU agent, queue and
  stream, correlation id, grid and workgroup sizes, LDS/scratch, registers.
* ``regions`` (``rocpd_region``): host API ranges by category: ``HIP_RUNTIME_API*`` become
  ``runtime`` (linked to kernels by correlation id), ``MARKER_*`` (roctx) ``user_annotation``
  (zero-length marks ``other``), everything else (HSA, HIP compiler, RCCL API) ``other``;
  an RCCL API call keeps its ``rocpd_arg`` arguments, where there are any, in args
  ``call_args`` (what sizes its collective in ``comm``).
* ``memory_copies`` (``rocpd_memory_copy``): ``memcpy`` rows with bytes and direction in args.
* ``rocpd_info_agent`` (GPU agents -> devices), ``processes`` / ``threads`` (names),
  ``rocpd_metadata`` (schema version).

Base tables carry a ``_<uuid>`` suffix and unsuffixed views over them; both spellings are
accepted. GPU rows use Kineto's layout (pid = device, tid = stream or queue); ``host_pid``
in args keeps the OS pid. A database holding several processes (``rocpd`` merges, or
torchrun ranks) numbers the processes with GPU work in ``rank`` by pid order, as the nsys
reader does; correlation ids are per process.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from traceforge.errors import TraceFormatError
from traceforge.formats import columns, sqlite_db
from traceforge.formats.frame_args import ColumnArgs
from traceforge.formats.sqlite_db import pick
from traceforge.formats.symbols import demangle_names
from traceforge.model import Device, Trace, TraceMeta, normalize_events

NAME = "rocpd"

#: Base tables whose presence (with or without the uuid suffix) marks a rocpd database.
SIGNATURE = ("rocpd_metadata", "rocpd_kernel_dispatch", "rocpd_info_agent")

_DIRECTION = {"HOST_TO_DEVICE": "HtoD", "DEVICE_TO_HOST": "DtoH", "DEVICE_TO_DEVICE": "DtoD",
              "HOST_TO_HOST": "HtoH", "PEER_TO_PEER": "PtoP"}

_KERNEL_ARGS = ("dispatch_id", "queue_id", "stream_id", "grid_x", "grid_y", "grid_z",
                "workgroup_x", "workgroup_y", "workgroup_z", "lds_size", "scratch_size",
                "vgpr_count", "sgpr_count", "region")
_ARG_COLUMNS = (*_KERNEL_ARGS, "bytes", "direction", "host_pid", "call_args")


def _resolve(have: frozenset[str], name: str) -> str | None:
    """``name`` itself, or the one uuid-suffixed base table of that name."""
    if name in have:
        return name
    pat = re.compile(rf"^{re.escape(name)}_[0-9A-Fa-f_\-]+$")
    hits = sorted(t for t in have if pat.match(t))
    return hits[0] if len(hits) == 1 else None


def sniff(path: Path, head: bytes) -> bool:
    """A SQLite database with rocpd's tables (``rocpd_metadata``, ``rocpd_kernel_dispatch``)."""
    if not sqlite_db.is_sqlite(head):
        return False
    have = sqlite_db.tables(path)
    return any(_resolve(have, t) for t in SIGNATURE)


def read(path: str | Path) -> Trace:
    """Read a rocpd SQLite database into a Trace (see the module docstring)."""
    p = Path(path)
    have = sqlite_db.tables(p)
    t = {n: _resolve(have, n) for n in (
        "rocpd_string", "rocpd_info_agent", "rocpd_info_process", "rocpd_info_thread",
        "rocpd_info_queue", "rocpd_info_stream", "rocpd_info_kernel_symbol", "rocpd_event",
        "rocpd_kernel_dispatch", "rocpd_memory_copy", "rocpd_region", "rocpd_metadata",
        "rocpd_arg")}
    with sqlite_db.connect(p) as conn:
        notes: list[str] = []
        parts = [_kernels(conn, have, t, notes), _copies(conn, have, t),
                 _regions(conn, have, t)]
        parts = [d for d in parts if d is not None and not d.empty]
        if not parts:
            raise TraceFormatError(p, "rocpd database without kernels, memory copies or "
                                   "regions (nothing was traced?)")
        df = pd.concat(parts, ignore_index=True, sort=False)
        devices = _devices(conn, t["rocpd_info_agent"])
        procs, threads = _names(conn, have)
        version = _schema_version(conn, t["rocpd_metadata"])
    return _trace(p, df, devices, procs, threads, version, notes)


# -- sources: the documented view, else an equivalent query on the base tables ----------

def _string(t: dict[str, str | None], id_col: str, guid_col: str) -> str:
    s = t["rocpd_string"]
    if s is None:
        return "NULL"
    return f'(SELECT RS.string FROM "{s}" RS WHERE RS.id = {id_col} AND RS.guid = {guid_col})'


def _kernel_source(have: frozenset[str], t: dict[str, str | None],
                   view: bool = True) -> str | None:
    if view and "kernels" in have:
        return "kernels"
    k, a, s = t["rocpd_kernel_dispatch"], t["rocpd_info_agent"], t["rocpd_info_kernel_symbol"]
    if k is None or a is None or s is None:
        return None
    # The same joins as data_views.sql's `kernels`, with LEFT joins so that a database with
    # a missing side table still yields its dispatches.
    return f"""(SELECT S.display_name AS name, K.start, K."end", P.pid, T.tid,
            A.type_index AS agent_type_index, A.logical_index AS agent_log_index,
            A.type AS agent_type, K.dispatch_id, K.queue_id, K.stream_id,
            K.grid_size_x AS grid_x, K.grid_size_y AS grid_y, K.grid_size_z AS grid_z,
            K.workgroup_size_x AS workgroup_x, K.workgroup_size_y AS workgroup_y,
            K.workgroup_size_z AS workgroup_z, K.group_segment_size AS lds_size,
            K.private_segment_size AS scratch_size, S.arch_vgpr_count AS vgpr_count,
            S.sgpr_count, {_string(t, 'K.region_name_id', 'K.guid')} AS region,
            {_string(t, 'E.category_id', 'E.guid')} AS category, E.correlation_id AS corr_id
        FROM "{k}" K
        JOIN "{s}" S ON S.id = K.kernel_id AND S.guid = K.guid
        LEFT JOIN "{a}" A ON A.id = K.agent_id AND A.guid = K.guid
        {_left(t, 'rocpd_event', 'E', 'E.id = K.event_id AND E.guid = K.guid')}
        {_left(t, 'rocpd_info_process', 'P', 'P.id = K.pid AND P.guid = K.guid')}
        {_left(t, 'rocpd_info_thread', 'T', 'T.id = K.tid AND T.guid = K.guid')})"""


def _left(t: dict[str, str | None], table: str, alias: str, on: str) -> str:
    real = t[table]
    if real is not None:
        return f'LEFT JOIN "{real}" {alias} ON {on}'
    # A missing side table joins nothing: its columns read as NULL.
    return f"LEFT JOIN (SELECT NULL AS id, NULL AS guid, NULL AS pid, NULL AS tid, " \
           f"NULL AS category_id, NULL AS correlation_id) {alias} ON 0"


def _copy_source(have: frozenset[str], t: dict[str, str | None]) -> str | None:
    if "memory_copies" in have:
        return "memory_copies"
    m, a = t["rocpd_memory_copy"], t["rocpd_info_agent"]
    if m is None or a is None:
        return None
    return f"""(SELECT {_string(t, 'M.name_id', 'M.guid')} AS name, M.start, M."end",
            P.pid, T.tid, M.size, M.queue_id, M.stream_id,
            D.type_index AS dst_agent_type_index, D.type AS dst_agent_type,
            SA.type_index AS src_agent_type_index, SA.type AS src_agent_type,
            {_string(t, 'E.category_id', 'E.guid')} AS category, E.correlation_id AS corr_id
        FROM "{m}" M
        LEFT JOIN "{a}" D ON D.id = M.dst_agent_id AND D.guid = M.guid
        LEFT JOIN "{a}" SA ON SA.id = M.src_agent_id AND SA.guid = M.guid
        {_left(t, 'rocpd_event', 'E', 'E.id = M.event_id AND E.guid = M.guid')}
        {_left(t, 'rocpd_info_process', 'P', 'P.id = M.pid AND P.guid = M.guid')}
        {_left(t, 'rocpd_info_thread', 'T', 'T.id = M.tid AND T.guid = M.guid')})"""


def _region_source(have: frozenset[str], t: dict[str, str | None]) -> str | None:
    if "regions" in have:
        return "regions"
    r = t["rocpd_region"]
    if r is None:
        return None
    return f"""(SELECT {_string(t, 'R.name_id', 'R.guid')} AS name, R.start, R."end",
            P.pid, T.tid, {_string(t, 'E.category_id', 'E.guid')} AS category,
            E.correlation_id AS corr_id, R.event_id, R.guid
        FROM "{r}" R
        {_left(t, 'rocpd_event', 'E', 'E.id = R.event_id AND E.guid = R.guid')}
        {_left(t, 'rocpd_info_process', 'P', 'P.id = R.pid AND P.guid = R.guid')}
        {_left(t, 'rocpd_info_thread', 'T', 'T.id = R.tid AND T.guid = R.guid')})"""


def _columns(conn: sqlite3.Connection, src: str) -> list[str]:
    if src.startswith("("):
        cur = conn.execute(f"SELECT * FROM {src} LIMIT 0")
        return [str(d[0]) for d in cur.description]
    return sqlite_db.columns(conn, src)


# -- event tables -----------------------------------------------------------------------

def _gpu_index(df: pd.DataFrame, prefix: str = "agent") -> np.ndarray:
    """The GPU ordinal of an agent: its index among GPUs (``type_index``), as HIP numbers."""
    idx = df[f"{prefix}_type_index"]
    if f"{prefix}_log_index" in df.columns:
        idx = idx.fillna(df[f"{prefix}_log_index"])
    out: np.ndarray = columns.ids(idx, -1)
    return out


def _kernels(conn: sqlite3.Connection, have: frozenset[str], t: dict[str, str | None],
             notes: list[str]) -> pd.DataFrame | None:
    src = _kernel_source(have, t)
    if src is None:
        return None
    base = t["rocpd_kernel_dispatch"]
    if src == "kernels" and base is not None:
        # The view INNER-joins the region-name string and the event row; a dispatch whose
        # region_name_id is NULL would vanish from it. Never report fewer dispatches than
        # the table holds: read the table (with LEFT joins) instead.
        (n_view,) = conn.execute("SELECT COUNT(*) FROM kernels").fetchone()
        (n_base,) = conn.execute(f'SELECT COUNT(*) FROM "{base}"').fetchone()
        fallback = _kernel_source(have, t, view=False)
        if n_view < n_base and fallback is not None:
            notes.append(f"the kernels view shows {n_view} of {n_base} dispatches: "
                         "read rocpd_kernel_dispatch directly")
            src = fallback
    c = _columns(conn, src)
    # Column names moved between schema versions (corr_id / correlation_id,
    # agent_log_index / agent_logical_index); select what the view has.
    sel = ", ".join([
        pick(c, "name"), pick(c, "start"), pick(c, "end"), pick(c, "pid"), pick(c, "tid"),
        pick(c, "agent_type_index"), pick(c, "agent_log_index", "agent_logical_index",
                                          "agent_abs_index", "agent_absolute_index"),
        pick(c, "category"), pick(c, "corr_id", "correlation_id"),
        *(pick(c, a) for a in _KERNEL_ARGS)])
    df = sqlite_db.frame(conn, f"SELECT {sel} FROM {src}")
    dev = _gpu_index(df)
    queue = columns.ids(df["queue_id"], -1)
    stream = columns.ids(df["stream_id"], 0)
    # HIP stream when the dispatch records one (rocprofv3 >= 7.0), else the HSA queue.
    lane = np.where(stream > 0, stream, queue)
    out: pd.DataFrame = pd.DataFrame({
        "name": df["name"].fillna("").astype(str), "kind": "kernel",
        "cat": df["category"].fillna("KERNEL_DISPATCH").astype(str),
        "ts": df["start"], "end": df["end"], "pid": dev, "tid": lane, "device": dev,
        "stream": lane, "corr": columns.ids(df["corr_id"], -1),
        "host_pid": columns.ids(df["pid"], -1),
        **{a: df[a] for a in _KERNEL_ARGS}})
    return out


def _copies(conn: sqlite3.Connection, have: frozenset[str],
            t: dict[str, str | None]) -> pd.DataFrame | None:
    src = _copy_source(have, t)
    if src is None:
        return None
    c = _columns(conn, src)
    sel = ", ".join([
        pick(c, "name"), pick(c, "start"), pick(c, "end"), pick(c, "pid"), pick(c, "size"),
        pick(c, "queue_id"), pick(c, "stream_id"), pick(c, "category"),
        pick(c, "corr_id", "correlation_id"),
        *(pick(c, f"{s}_agent_{k}", alias=f"{s}_agent_{k}")
          for s in ("dst", "src") for k in ("type_index", "type")),
        pick(c, "dst_agent_log_index", "dst_agent_logical_index"),
        pick(c, "src_agent_log_index", "src_agent_logical_index")])
    df = sqlite_db.frame(conn, f"SELECT {sel} FROM {src}")
    op = df["name"].fillna("").astype(str).str.replace("MEMORY_COPY_", "", regex=False)
    short = op.map(_DIRECTION).fillna(op)
    dst, src_dev = _gpu_index(df, "dst_agent"), _gpu_index(df, "src_agent")
    dst_gpu = (df["dst_agent_type"].astype(str) == "GPU").to_numpy()
    # The copy occupies the GPU side: the destination unless it is the host.
    dev = np.where(dst_gpu, dst, src_dev)
    stream = columns.ids(df["stream_id"], 0)
    lane = np.where(stream > 0, stream, columns.ids(df["queue_id"], -1))
    out: pd.DataFrame = pd.DataFrame({
        "name": "Memcpy " + short, "kind": "memcpy",
        "cat": df["category"].fillna("MEMORY_COPY").astype(str),
        "ts": df["start"], "end": df["end"], "pid": dev, "tid": lane, "device": dev,
        "stream": lane, "corr": columns.ids(df["corr_id"], -1),
        "host_pid": columns.ids(df["pid"], -1), "bytes": df["size"],
        "direction": short})
    return out


def _regions(conn: sqlite3.Connection, have: frozenset[str],
             t: dict[str, str | None]) -> pd.DataFrame | None:
    src = _region_source(have, t)
    if src is None:
        return None
    c = _columns(conn, src)
    sel = ", ".join([pick(c, "name"), pick(c, "start"), pick(c, "end"), pick(c, "pid"),
                     pick(c, "tid"), pick(c, "category"), pick(c, "corr_id", "correlation_id"),
                     pick(c, "event_id"), pick(c, "guid")])
    df = sqlite_db.frame(conn, f"SELECT {sel} FROM {src}")
    cat = df["category"].fillna("").astype(str)
    call_args = _rccl_args(conn, t, df, cat.str.startswith("RCCL").to_numpy())
    mark = df["start"] == df["end"]
    kind = np.where(cat.str.startswith("HIP_RUNTIME"), "runtime",
                    np.where(cat.str.startswith("MARKER") & ~cat.str.contains("CONTROL|NAME"),
                             np.where(mark, "other", "user_annotation"), "other"))
    pid = columns.ids(df["pid"], -1)
    out: pd.DataFrame = pd.DataFrame({
        "name": df["name"].fillna("").astype(str), "kind": kind, "cat": cat.replace("", "rocpd"),
        "ts": df["start"], "end": df["end"], "pid": pid,
        "tid": columns.ids(df["tid"], -1), "device": -1, "stream": -1,
        # Correlation ids start at 1; markers and HSA calls carry 0 (no GPU work).
        "corr": np.where(columns.ids(df["corr_id"], 0) > 0, columns.ids(df["corr_id"], 0), -1),
        "host_pid": pid, "call_args": call_args})
    return out


#: Longest argument value kept (rocpd_arg.value is free text).
_MAX_ARG = 200


def _rccl_args(conn: sqlite3.Connection, t: dict[str, str | None], df: pd.DataFrame,
               rccl: np.ndarray) -> np.ndarray:
    """Per region row: its RCCL API call's arguments (``rocpd_arg``: ``count``,
    ``sendcount``/``recvcount``, ``datatype``, ...) as a JSON object string, or None.
    Only RCCL calls are read: they are few, and what sizes a collective. (rocprofv3 up to
    rocprofiler-sdk 1.0 writes none for RCCL: its buffered RCCL API record carries no
    arguments; the schema has room for them, and a writer that fills it is read.)"""
    out = np.full(len(df), None, dtype=object)
    a = t["rocpd_arg"]
    if a is None or not rccl.any():
        return out
    ids = columns.ids(df["event_id"], -1)
    want = {(int(e), str(g)) for e, g in zip(ids[rccl].tolist(),
                                            df.loc[rccl, "guid"].tolist(), strict=True)
            if e >= 0}
    if not want:
        return out
    got: dict[tuple[int, str], dict[str, object]] = {}
    events = sorted({e for e, _ in want})
    rows: list[tuple[object, ...]] = []
    for i in range(0, len(events), 500):
        part = events[i:i + 500]
        rows += conn.execute(f'SELECT event_id, guid, name, value FROM "{a}" WHERE event_id '
                             f"IN ({','.join('?' * len(part))}) ORDER BY event_id, position",
                             part).fetchall()
    for e, g, name, value in rows:
        key = (columns.as_int(e, -1) or -1, str(g))
        if key not in want or not isinstance(name, str) or len(name) > _MAX_ARG:
            continue
        v: object = value if not isinstance(value, str) or len(value) <= _MAX_ARG else None
        if isinstance(v, str) and v.strip().lstrip("-").isdigit():
            v = columns.as_int(v.strip(), None)
        got.setdefault(key, {})[name] = v
    for i in np.flatnonzero(rccl).tolist():
        d = got.get((int(ids[i]), str(df["guid"].iloc[i])))
        if d:
            out[i] = json.dumps(d, separators=(",", ":"))
    return out


# -- metadata ---------------------------------------------------------------------------

def _devices(conn: sqlite3.Connection, agents: str | None) -> tuple[Device, ...]:
    if agents is None:
        return ()
    c = sqlite_db.columns(conn, agents)
    sel = ", ".join([pick(c, "type_index"), pick(c, "logical_index"), pick(c, "product_name"),
                     pick(c, "name"), pick(c, "model_name"), pick(c, "vendor_name")])
    rows = conn.execute(f"SELECT {sel} FROM \"{agents}\" WHERE type = 'GPU'").fetchall()
    cus: dict[int, int] = {}
    if "extdata" in c:
        try:
            q = (f"SELECT COALESCE(type_index, logical_index), json_extract(extdata, "
                 f"'$.cu_count') FROM \"{agents}\" WHERE type = 'GPU'")
            cus = {k: n for i, cu in conn.execute(q)
                   if (k := columns.as_int(i)) is not None and (n := columns.as_int(cu))}
        except sqlite3.Error:
            cus = {}  # extdata in a JSONB encoding this sqlite cannot read: no CU counts
    seen: dict[int, Device] = {}
    for type_index, logical, product, name, model, vendor in rows:
        i = columns.as_int(type_index if type_index is not None else logical, len(seen))
        i = len(seen) if i is None else i
        # A merged database lists each GPU once per process: keep one entry per ordinal.
        seen.setdefault(i, Device(
            id=i, name=str(product or model or name or ""),
            vendor="amd" if "AMD" in str(vendor or "AMD").upper() else str(vendor).lower(),
            sms=cus.get(i), compute_capability=str(name) if name else None))
    return tuple(seen[i] for i in sorted(seen))


def _names(conn: sqlite3.Connection, have: frozenset[str]
           ) -> tuple[dict[int, str], dict[tuple[int, int], str]]:
    procs: dict[int, str] = {}
    threads: dict[tuple[int, int], str] = {}
    try:
        if "processes" in have:
            procs = {k: str(cmd)[:200] for p, cmd in
                     conn.execute("SELECT pid, command FROM processes")
                     if cmd and (k := columns.as_int(p)) is not None}
        if "threads" in have:
            threads = {(k, j): str(n) for p, t, n in
                       conn.execute("SELECT pid, tid, name FROM threads")
                       if n and (k := columns.as_int(p)) is not None
                       and (j := columns.as_int(t)) is not None}
    except sqlite3.Error:
        pass  # names are decoration: a view that fails to resolve must not fail the read
    return procs, threads


def _schema_version(conn: sqlite3.Connection, table: str | None) -> str | None:
    if table is None:
        return None
    row = conn.execute(f"SELECT value FROM \"{table}\" WHERE tag = 'schema_version'").fetchone()
    return str(row[0]) if row and row[0] is not None else None


def _trace(p: Path, df: pd.DataFrame, devices: tuple[Device, ...], procs: dict[int, str],
           threads: dict[tuple[int, int], str], version: str | None,
           notes: list[str]) -> Trace:
    df = df.reset_index(drop=True)
    df["ts"] = columns.times(p, df["ts"], "start time")
    end = columns.times(p, df["end"], "end time")
    columns.check_intervals(p, df["ts"].to_numpy(), end, df["name"])
    df["dur"] = end - df["ts"]
    t0 = int(df["ts"].min()) if len(df) else 0
    df["ts"] -= t0
    for col in ("pid", "tid", "device", "stream", "corr", "host_pid"):
        df[col] = columns.ids(df[col])
    hpid = df["host_pid"].to_numpy()
    gpu_pids = sorted(set(hpid[df["device"].to_numpy() >= 0].tolist()) - {-1})
    if len(gpu_pids) > 1:
        rank_of = {pid: r for r, pid in enumerate(gpu_pids)}
        df["rank"] = [rank_of.get(int(x), -1) for x in hpid]
        notes.append(f"{len(gpu_pids)} processes ran GPU work: rank numbers them in pid order")
    else:
        df["rank"] = -1
    df = df.sort_values("ts", kind="stable").reset_index(drop=True)
    meta = TraceMeta(
        path=str(p), format=NAME, base_ns=t0, devices=devices,
        world_size=len(gpu_pids) if len(gpu_pids) > 1 else None,
        versions={"rocpd_schema": version} if version else {}, process_names=procs,
        thread_names=threads, notes=tuple(notes))
    events = normalize_events(df.drop(columns=["end"]))
    return demangle_names(Trace(events, meta, args_provider=ColumnArgs(df, _ARG_COLUMNS)))


