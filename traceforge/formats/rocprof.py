"""ROCm profiler outputs: rocprofv3 CSV files and directories, legacy rocprof (v1/v2).

rocprofv3 CSV (``<pid>_kernel_trace.csv``, ``_hip_api_trace.csv``, ``_memory_copy_trace.csv``,
``_marker_api_trace.csv``, ...) is recognised by its header, in both the older layout
(no Stream_Id) and the newer one ("Agent N" agent ids, VGPR/LDS columns). A rocprofv3
output directory (see :func:`output_files`: its trace CSVs at the top level, or its default
``%hostname%/%pid%/%pid%_*.csv`` tree) loads as one trace; with several processes ``rank``
numbers them in pid order. Any other folder is not merged. Legacy rocprof writes
``results.csv`` (per dispatch, BeginNs/EndNs), ``results.db`` (tables KERN / HIP / OPS /
COPY / rocTX) and a Chrome JSON whose ts/dur are strings in us, rounded, with exact ns in
``args.BeginNs/EndNs``, and whose pids are lanes named "CPU HIP API", "COPY", "GPU0", ...
Summaries (``kernel_stats.csv``, ``*.stats.csv``) are not traces and say so.
Timestamps are absolute ns; ``ts`` is made relative to the first event.
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from traceforge.errors import TraceFormatError
from traceforge.formats import columns, sqlite_db
from traceforge.formats.symbols import demangle_names
from traceforge.model import Trace, TraceMeta, normalize_events

NAME = "rocprof"
READS_DIRECTORIES = True

#: Header columns that identify each CSV flavour (all must be present).
LAYOUTS: dict[str, tuple[str, ...]] = {
    "kernel": ("Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp"),
    "api": ("Domain", "Function", "Correlation_Id", "Start_Timestamp", "End_Timestamp"),
    "copy": ("Direction", "Correlation_Id", "Start_Timestamp", "End_Timestamp"),
    "legacy": ("KernelName", "BeginNs", "EndNs"),
}
_SUMMARY = ("Name", "Calls", "TotalDurationNs")
_COUNTERS = ("Counter_Name", "Counter_Value")
_DIRECTION = {"HOST_TO_DEVICE": "HtoD", "DEVICE_TO_HOST": "DtoH", "DEVICE_TO_DEVICE": "DtoD",
              "HOST_TO_HOST": "HtoH", "PEER_TO_PEER": "PtoP"}
_LEGACY_DB = ("KERN", "OPS", "HIP")
_MARKERS = frozenset(c for need in LAYOUTS.values() for c in need) | frozenset(_COUNTERS)


def _df(data: Any) -> pd.DataFrame:
    out: pd.DataFrame = pd.DataFrame(data)
    return out


def _header(head: bytes) -> list[str]:
    line = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    try:
        return next(csv.reader([line]))
    except (csv.Error, StopIteration):
        return []


def _layout(cols: list[str]) -> str | None:
    for name, need in LAYOUTS.items():
        if all(c in cols for c in need):
            return name
    return None


def _is_legacy_json(head: bytes) -> bool:
    # rocprof v1/v2 Chrome JSON: lanes named by rocprof, exact ns kept as strings in args.
    return b'"traceEvents"' in head and (
        b'"CPU HIP API"' in head or (b'"BeginNs"' in head and b'"EndNs"' in head))


def sniff(path: Path, head: bytes) -> bool:
    """rocprof CSV (trace or summary), legacy rocprof JSON/DB, or a rocprofv3 output folder."""
    if path.is_dir():
        return bool(output_files(path))
    if sqlite_db.is_sqlite(head):
        return any(t in sqlite_db.tables(path) for t in _LEGACY_DB) and \
            "StringIds" not in sqlite_db.tables(path)
    if _is_legacy_json(head):
        return True
    cols = _header(head)
    # Any header with rocprof's own column names is ours, so that a file with a missing
    # column gets an error naming it instead of "not a supported trace".
    return any(c in _MARKERS for c in cols) or all(c in cols for c in _SUMMARY)


#: Per-event layouts rocprofv3 writes (legacy results.csv is one run's whole trace).
_V3_LAYOUTS = ("kernel", "api", "copy")
#: rocprofv3 names every file ``<prefix>_<domain>_...``: the prefix is %pid% by default,
#: the -o stem otherwise.
_V3_NAME = re.compile(r"^(.*?)_?(?:kernel|hip|hsa|memory|marker|rccl|scratch|roc[a-z]+|"
                      r"counter|agent|ompt|pc)_\w*\.csv$")
_PID_PREFIX = re.compile(r"^\d+_")
#: Depth of rocprofv3's default tree below the -d folder: %hostname%/%pid%/file.
_TREE_DEPTH = 3


def _csv_kind(p: Path) -> str | None:
    try:
        with p.open("rb") as f:
            return _layout(_header(f.read(4096)))
    except OSError:
        return None


def is_trace_csv(p: Path) -> bool:
    """A CSV whose header is one of rocprof's per-event layouts (not a summary)."""
    return _csv_kind(p) is not None


def _v3_csvs(files: list[Path]) -> list[Path]:
    return sorted(f for f in files if f.suffix == ".csv" and _csv_kind(f) in _V3_LAYOUTS)


def _tree_files(d: Path) -> list[Path]:
    """Every file of rocprofv3's default tree below ``d``; [] at the first file that does
    not belong there (a name without the %pid%_ prefix, or deeper than the layout)."""
    files: list[Path] = []
    for root, dirs, names in os.walk(d):
        depth = len(Path(root).relative_to(d).parts) + 1
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        if depth > _TREE_DEPTH and (dirs or names):
            return []
        for n in names:
            if n.startswith("."):
                continue
            if not _PID_PREFIX.match(n):
                return []
            files.append(Path(root) / n)
    return files


def output_files(d: Path) -> list[Path]:
    """The trace CSVs of rocprofv3 output folder ``d``, or [] when ``d`` is not one.

    rocprofv3 ``-d DIR -o STEM`` writes ``DIR/STEM_kernel_trace.csv``, ...; without ``-o``
    it writes its default tree ``DIR/%hostname%/%pid%/%pid%_kernel_trace.csv``. So: the
    rocprofv3 trace CSVs at the top level when there are any (subfolders never read);
    else the whole tree when every file in it is a rocprofv3 output named ``<pid>_...``
    at most three levels down. Anything else is a folder of other things, never merged.
    Top-level CSVs of several runs (different non-numeric prefixes) are an error.
    """
    try:
        top = [f for f in d.iterdir() if f.is_file() and not f.name.startswith(".")]
    except OSError:
        return []
    found = _v3_csvs(top)
    if found:
        prefixes = sorted({m.group(1) if (m := _V3_NAME.match(f.name)) else f.stem
                           for f in found})
        if len(prefixes) > 1 and not all(x.isdigit() for x in prefixes):
            raise TraceFormatError(
                d, f"holds the rocprofv3 CSVs of {len(prefixes)} runs "
                f"({', '.join(x + '_*' for x in prefixes[:4])}): pass one run's files")
        return found
    if top:  # files at the top but none of them a rocprofv3 trace: not its tree either
        return []
    return _v3_csvs(_tree_files(d))


def read(path: str | Path) -> Trace:
    """Read a rocprof CSV / legacy JSON / legacy DB, or a directory of rocprofv3 CSVs."""
    p = Path(path)
    if p.is_dir():
        files = output_files(p)
        if not files:
            raise TraceFormatError(p, "not a rocprofv3 output folder (no trace CSVs at its "
                                   "top level nor in its %hostname%/%pid%/ tree)")
        parts = [_read_csv(f) for f in files]
        return _trace(p, parts, "rocprofv3-csv")
    with p.open("rb") as f:
        head = f.read(4096)
    if sqlite_db.is_sqlite(head):
        return _trace(p, _read_db(p), "rocprof-db")
    if _is_legacy_json(head):
        return _trace(p, [_read_legacy_json(p)], "rocprof-json")
    part = _read_csv(p)
    fmt = "rocprof-csv" if "legacy" in part.attrs.get("layout", "") else "rocprofv3-csv"
    return _trace(p, [part], fmt)


def _int_col(s: pd.Series) -> np.ndarray:
    """Integers from ints or strings like "Agent 2" (newer rocprofv3 agent ids); -1 where a
    cell holds none (at most 18 digits are read, so a damaged cell cannot overflow)."""
    if s.dtype.kind == "i":
        return columns.ids(s)
    return columns.ids(s.map(str).str.extract(r"(-?\d{1,18})")[0])


def _ints(df: pd.DataFrame, *names: str) -> np.ndarray:
    """The first of ``names`` that the CSV has, as integers; -1 for every row when none."""
    for n in names:
        if n in df:
            return _int_col(df[n])
    return np.full(len(df), -1, dtype=np.int64)


def _read_csv(p: Path) -> pd.DataFrame:
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise TraceFormatError(p, f"cannot read ({e.strerror})") from None
    cols = _header(text[:4096].encode())
    kind = _layout(cols)
    if kind is None:
        if all(c in cols for c in _SUMMARY):
            raise TraceFormatError(p, "a rocprof summary (Name/Calls/TotalDurationNs), not a "
                                   "trace: pass the per-dispatch *_kernel_trace.csv / results.csv")
        if all(c in cols for c in _COUNTERS):
            raise TraceFormatError(p, "rocprofv3 counter collection, not a trace")
        best = max(LAYOUTS.values(), key=lambda need: sum(c in cols for c in need))
        missing = [c for c in best if c not in cols]
        raise TraceFormatError(p, f"unexpected CSV columns: missing {', '.join(missing)} "
                               f"(have {', '.join(cols[:12])})")
    try:
        df = pd.read_csv(io.StringIO(text), dtype={"Kernel_Name": str, "KernelName": str,
                                                   "Function": str})
    except (pd.errors.ParserError, ValueError) as e:
        raise TraceFormatError(p, f"malformed CSV ({e})") from None
    pid_m = re.match(r"(\d+)_", p.name)
    file_pid = int(pid_m.group(1)) if pid_m else -1
    out = {"kernel": _v3_kernels, "api": _v3_api, "copy": _v3_copies,
           "legacy": _legacy_kernels}[kind](df, file_pid)
    out.attrs["layout"] = kind
    return out


def _v3_kernels(df: pd.DataFrame, file_pid: int) -> pd.DataFrame:
    agent = _ints(df, "Agent_Id")
    stream = _ints(df, "Stream_Id", "Queue_Id")
    return _df({
        "name": df["Kernel_Name"].fillna(""), "kind": "kernel", "cat": "KERNEL_DISPATCH",
        "ts": df["Start_Timestamp"], "end": df["End_Timestamp"],
        "pid": agent, "tid": stream, "device": agent, "stream": stream,
        "corr": _int_col(df["Correlation_Id"]), "host_pid": file_pid,
        "queue": _ints(df, "Queue_Id"), "dispatch": _ints(df, "Dispatch_Id"),
    })


def _v3_api(df: pd.DataFrame, file_pid: int) -> pd.DataFrame:
    dom = df["Domain"].astype(str)
    kind = np.where(dom.str.startswith("HIP_RUNTIME"), "runtime",
                    np.where(dom.str.startswith("MARKER"), "user_annotation", "other"))
    pid = _int_col(df["Process_Id"]) if "Process_Id" in df else np.full(len(df), file_pid)
    return _df({
        "name": df["Function"].fillna(""), "kind": kind, "cat": dom,
        "ts": df["Start_Timestamp"], "end": df["End_Timestamp"], "pid": pid,
        "tid": _int_col(df["Thread_Id"]) if "Thread_Id" in df else pid,
        "corr": _int_col(df["Correlation_Id"]), "host_pid": pid,
    })


def _v3_copies(df: pd.DataFrame, file_pid: int) -> pd.DataFrame:
    d = df["Direction"].astype(str).str.replace("MEMORY_COPY_", "", regex=False)
    short = d.map(_DIRECTION).fillna(d)
    src, dst = _ints(df, "Source_Agent_Id"), _ints(df, "Destination_Agent_Id")
    # The copy occupies the GPU side: the destination, unless it is the host.
    device = np.where(short.to_numpy() == "DtoH", src, dst)
    stream = _ints(df, "Stream_Id")
    return _df({
        "name": "Memcpy " + short, "kind": "memcpy", "cat": "MEMORY_COPY",
        "ts": df["Start_Timestamp"], "end": df["End_Timestamp"], "pid": device,
        "tid": stream, "device": device, "stream": stream,
        "corr": _int_col(df["Correlation_Id"]), "host_pid": file_pid, "direction": short,
    })


def _legacy_kernels(df: pd.DataFrame, file_pid: int) -> pd.DataFrame:
    gpu, queue = _ints(df, "gpu-id"), _ints(df, "queue-id")
    return _df({
        # results.db keeps the CSV's quotes around names.
        "name": df["KernelName"].fillna("").astype(str).str.strip('"'), "kind": "kernel",
        "cat": "KernelExecution",
        "ts": df["BeginNs"], "end": df["EndNs"], "pid": gpu, "tid": queue,
        "device": gpu, "stream": queue,
        "host_pid": _ints(df, "pid") if "pid" in df else file_pid,
    })


def _lane_kind(lane: str) -> str:
    if lane.startswith("GPU"):
        return "kernel"
    return {"COPY": "memcpy", "CPU HIP API": "runtime",
            "Markers and Ranges": "user_annotation"}.get(lane, "other")


def _read_legacy_json(p: Path) -> pd.DataFrame:
    import msgspec

    try:
        doc = msgspec.json.decode(p.read_bytes())
    except (msgspec.DecodeError, UnicodeDecodeError) as err:
        raise TraceFormatError(p, f"not valid JSON ({err})") from None
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else []
    if not isinstance(events, list):
        raise TraceFormatError(p, "traceEvents is not a list")
    lanes = {str(e.get("pid")): str(_args(e).get("name", ""))
             for e in events if isinstance(e, dict) and e.get("ph") == "M"}
    rows: list[dict[str, Any]] = []
    for k, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            rows.append(_legacy_row(e, lanes))
        except (TypeError, ValueError, OverflowError):
            raise TraceFormatError(p, f"event {k} ({str(e.get('name'))[:60]!r}) has a "
                                   "non-numeric time or id") from None
    return _df(rows)


def _args(e: dict[str, Any]) -> dict[str, Any]:
    a = e.get("args")
    return a if isinstance(a, dict) else {}


def _legacy_row(e: dict[str, Any], lanes: dict[str, str]) -> dict[str, Any]:
    a = _args(e)
    lane = lanes.get(str(e.get("pid")), "")
    kind = _lane_kind(lane)
    name = str(e.get("name", ""))
    if kind == "kernel" and name == "Unknown command type":
        kind = "other"
    if kind == "memcpy" and "Fill" in name:
        kind = "memset"
    dev = int(str(a.get("dev-id", lane[3:] if lane[3:].isdigit() else -1)))
    gpu = kind in ("kernel", "memcpy", "memset")
    # ts/dur are rounded us strings; BeginNs/EndNs keep the exact ns.
    return {
        "name": name, "kind": kind, "cat": lane or "rocprof",
        "ts": int(a.get("BeginNs", float(e.get("ts", 0)) * 1000)),
        "end": int(a.get("EndNs", (float(e.get("ts", 0)) + float(e.get("dur", 0))) * 1000)),
        "pid": dev if gpu else int(str(a.get("proc-id", e.get("tid", -1)))),
        "tid": int(a.get("queue-id", -1)) if gpu else int(e.get("tid", -1)),
        "device": dev if gpu else -1, "stream": int(a.get("queue-id", -1)) if gpu else -1,
        "host_pid": int(a.get("proc-id", -1)),
    }


def _need(p: Path, table: str, df: pd.DataFrame, *cols: str) -> pd.DataFrame:
    missing = [c for c in cols if c not in df]
    if missing:
        raise TraceFormatError(p, f"rocprof table {table} lacks column {', '.join(missing)}")
    return df


def _read_db(p: Path) -> list[pd.DataFrame]:
    have = sqlite_db.tables(p)
    parts: list[pd.DataFrame] = []
    with sqlite_db.connect(p) as conn:
        if "KERN" in have:
            k = _need(p, "KERN", sqlite_db.frame(conn, "SELECT * FROM KERN"),
                      "KernelName", "BeginNs", "EndNs")
            parts.append(_legacy_kernels(k, -1))
        elif "OPS" in have:
            ops = _need(p, "OPS", sqlite_db.frame(
                conn, 'SELECT * FROM OPS WHERE Name != "Unknown command type"'),
                "Name", "BeginNs", "EndNs")
            dev, q = _ints(ops, "dev-id"), _ints(ops, "queue-id")
            parts.append(pd.DataFrame({
                "name": ops["Name"], "kind": "kernel", "cat": "OPS", "ts": ops["BeginNs"],
                "end": ops["EndNs"], "pid": dev, "tid": q, "device": dev, "stream": q,
                "host_pid": _ints(ops, "proc-id")}))
        if "COPY" in have:
            c = _need(p, "COPY", sqlite_db.frame(conn, "SELECT * FROM COPY"),
                      "Name", "BeginNs", "EndNs")
            dev, q = _ints(c, "dev-id"), _ints(c, "queue-id")
            parts.append(pd.DataFrame({
                "name": c["Name"],
                "kind": np.where(c["Name"].astype(str).str.contains("Fill"), "memset", "memcpy"),
                "cat": "COPY", "ts": c["BeginNs"], "end": c["EndNs"], "pid": dev, "tid": q,
                "device": dev, "stream": q, "host_pid": _ints(c, "proc-id")}))
        if "HIP" in have:
            h = _need(p, "HIP", sqlite_db.frame(conn, "SELECT * FROM HIP"),
                      "Name", "BeginNs", "EndNs")
            parts.append(pd.DataFrame({
                "name": h["Name"], "kind": "runtime", "cat": "HIP", "ts": h["BeginNs"],
                "end": h["EndNs"], "pid": _ints(h, "tid"), "tid": _ints(h, "tid"),
                "host_pid": _ints(h, "tid")}))
        if "rocTX" in have:
            r = _need(p, "rocTX", sqlite_db.frame(conn, "SELECT * FROM rocTX"),
                      "Name", "BeginNs", "EndNs")
            parts.append(pd.DataFrame({
                "name": r["Name"].astype(str).str.strip('"'), "kind": "user_annotation",
                "cat": "rocTX", "ts": r["BeginNs"], "end": r["EndNs"],
                "pid": _ints(r, "tid"), "tid": _ints(r, "tid"),
                "host_pid": _ints(r, "tid")}))
    if not parts:
        raise TraceFormatError(p, f"rocprof database without any of the tables {_LEGACY_DB}")
    return parts


def _trace(p: Path, parts: list[pd.DataFrame], fmt: str) -> Trace:
    parts = [d for d in parts if not d.empty]
    if not parts:
        raise TraceFormatError(p, "rocprof output without any events")
    df = pd.concat(parts, ignore_index=True, sort=False)
    df["ts"] = columns.times(p, df["ts"], "start time")
    end = columns.times(p, df["end"], "end time")
    columns.check_intervals(p, df["ts"].to_numpy(), end, df["name"])
    df["dur"] = end - df["ts"]
    t0 = int(df["ts"].min())
    df["ts"] -= t0
    for c in ("pid", "tid", "device", "stream", "corr", "host_pid"):
        df[c] = columns.ids(df[c]) if c in df else -1
    hosts = sorted(set(df["host_pid"].tolist()) - {-1})
    notes: tuple[str, ...] = ()
    if len(hosts) > 1 and len(parts) > 1:
        rank_of = {h: r for r, h in enumerate(hosts)}
        df["rank"] = [rank_of.get(h, -1) for h in df["host_pid"].tolist()]
        notes = (f"{len(hosts)} processes: rank numbers them in pid order",)
    df = df.sort_values("ts", kind="stable").reset_index(drop=True)
    extra_cols = [c for c in ("queue", "dispatch", "direction", "host_pid") if c in df]
    extras = df[extra_cols]
    meta = TraceMeta(path=str(p), format=fmt, base_ns=t0, notes=notes,
                     world_size=len(hosts) if notes else None)

    def provider(rows: np.ndarray) -> list[dict[str, Any]]:
        recs = extras.iloc[rows].to_dict("records")
        return [{k: v for k, v in r.items() if pd.notna(v) and v != -1} for r in recs]

    events = normalize_events(df.drop(columns=["end"]))
    return demangle_names(Trace(events, meta, args_provider=provider))
