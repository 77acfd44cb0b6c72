"""One frame per Nsight Systems export table (kernels, copies and memsets, syncs, runtime and
driver calls, NVTX ranges, OS runtime calls), which :mod:`traceforge.formats.nsys`
assembles into a trace. Columns are looked up, never assumed (export schemas 2.x and 3.x
differ); strings are ids into ``StringIds``; names, kinds and categories of the large
tables come as categoricals.
"""

from __future__ import annotations

import sqlite3
from typing import Any, cast

import numpy as np
import pandas as pd

from traceforge.formats import columns, nvtx_ops, nvtx_payloads, sqlite_db
from traceforge.formats.sqlite_db import pick

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
NVTX = "NVTX_EVENTS"
OSRT = "OSRT_API"
#: What the readers' scalar subqueries look strings up in (:func:`_strings`).
STRING_IDS = (("StringIds", "id"),)
# NVTX_EVENTS.eventType values (nsys exporter docs): ranges, marks, domain names.
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN = 34, 59, 60, 75

# ENUM_CUDA_MEMCPY_OPER ids -> Kineto-style short direction (the enum table, when present,
# gives nsys's own labels for the event name).
COPY_DIR = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
            7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}

#: The kernel's name columns, the first one there taken (demangled, as nsys's reports).
KERNEL_NAMES = ("demangledName", "shortName", "mangledName")

GPU_ARGS = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
            "staticSharedMemory", "dynamicSharedMemory", "graphNodeId", "contextId")


def same(n: int, value: str) -> pd.Categorical:
    """A column of ``n`` equal strings, as a categorical (no string per row)."""
    return coded(np.zeros(n, dtype=np.int8), [value])


def coded(codes: np.ndarray, categories: Any) -> pd.Categorical:
    """A categorical of ``codes`` (-1: missing) into ``categories`` (distinct values)."""
    out: Any = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(pd.Index(categories)))
    return cast(pd.Categorical, out)


def _strings(conn: sqlite3.Connection, col: str) -> str:
    return f"(SELECT value FROM StringIds WHERE id = {col})"


def _pid_sql(col: str) -> str:
    return f"(({col} >> 24) & 16777215)"


def kernel_query(conn: sqlite3.Connection, by_id: bool = True) -> sqlite_db.Query:
    c = sqlite_db.columns(conn, KERNEL)
    if by_id:  # the names' ids, looked up once each (sqlite_db.string_codes)
        names = ", ".join(pick(c, n, prefix="k.") for n in KERNEL_NAMES)
    else:
        names = "COALESCE({}, {}, {}) AS name, {} AS short_name".format(
            *(_strings(conn, f"k.{n}") if n in c else "NULL"
              for n in (*KERNEL_NAMES, "shortName")))
    extra = ", ".join(pick(c, a, prefix="k.") for a in GPU_ARGS)
    graph = pick(c, "graphId", prefix="k.")
    return sqlite_db.Query(f"""
        SELECT k.start AS ts, k."end" - k.start AS dur, k.deviceId AS device,
               k.streamId AS stream, k.correlationId AS corr, {_pid_sql('k.globalPid')} AS hpid,
               {names}, {graph}, {extra}
        FROM {KERNEL} k""", (KERNEL,), () if by_id else STRING_IDS)


def kernels(conn: sqlite3.Connection, df: pd.DataFrame | None = None,
             by_id: bool = True) -> pd.DataFrame:
    """The kernels (``df``: what :func:`kernel_query` read, else it is read here)."""
    if df is None:
        df = sqlite_db.frames(conn, [kernel_query(conn, by_id)])[0]
    if by_id:
        looked = sqlite_db.string_codes(conn, [df[n] for n in KERNEL_NAMES])
        if looked is None:  # (ids that are no integers, or a StringIds id twice)
            return kernels(conn, by_id=False)
        (demangled, short, mangled), values = looked
        # The first name that is there, as COALESCE takes it.
        code = np.where(demangled >= 0, demangled, np.where(short >= 0, short, mangled))
        df = df.drop(columns=list(KERNEL_NAMES))
        df["name"] = coded(code, values)
        texts = values.to_numpy(dtype=object)
        df["short_name"] = np.where(short >= 0, texts[short.clip(0, None)] if len(texts)
                                    else np.nan, np.nan)
    df["kind"], df["cat"] = same(len(df), "kernel"), same(len(df), "kernel")
    return df


def copies(conn: sqlite3.Connection, table: str, enum_labels: dict[int, str]) -> pd.DataFrame:
    c = sqlite_db.columns(conn, table)
    is_copy = table == MEMCPY
    fields = ["bytes", "copyKind", "srcKind", "dstKind", "srcDeviceId", "dstDeviceId",
              "graphNodeId"] if is_copy else ["bytes", "value", "memKind", "graphNodeId"]
    extra = ", ".join(pick(c, f, prefix="m.") for f in fields)
    df = sqlite_db.frame(conn, f"""
        SELECT m.start AS ts, m."end" - m.start AS dur, m.deviceId AS device,
               m.streamId AS stream, m.correlationId AS corr,
               {_pid_sql('m.globalPid')} AS hpid, {extra}
        FROM {table} m""", scans=(table,))
    if is_copy:
        kinds = pd.Series(columns.ids(df["copyKind"], 0), index=df.index)
        df["direction"] = kinds.map(COPY_DIR).fillna("Unknown")
        # nsys names copies by its enum label: "[CUDA memcpy Host-to-Device]".
        df["name"] = [f"[CUDA memcpy {enum_labels.get(int(k), COPY_DIR.get(int(k), k))}]"
                      for k in kinds]
        df["kind"], df["cat"] = "memcpy", "gpu_memcpy"
    else:
        df["name"] = "[CUDA memset]"
        df["kind"], df["cat"] = "memset", "gpu_memset"
    return df


def api_query(conn: sqlite3.Connection, by_id: bool = True) -> sqlite_db.Query:
    c = sqlite_db.columns(conn, RUNTIME)
    # 2022 exports carry both nameId and an (empty) name column; nameId is the one filled.
    # (by id: the names' ids, looked up once each by sqlite_db.string_codes)
    name = ("r.nameId" if by_id else _strings(conn, "r.nameId")) if "nameId" in c \
        else 'r."name"'
    return sqlite_db.Query(f"""
        SELECT r.start AS ts, r."end" - r.start AS dur, r.correlationId AS corr,
               r.globalTid AS gtid, {name} AS name, {pick(c, 'returnValue', prefix='r.')}
        FROM {RUNTIME} r""", (RUNTIME,), () if by_id and "nameId" in c else STRING_IDS)


def api(conn: sqlite3.Connection, df: pd.DataFrame | None = None,
         by_id: bool = True) -> pd.DataFrame:
    """The API calls (``df``: what :func:`api_query` read, else it is read here)."""
    by_id = by_id and "nameId" in sqlite_db.columns(conn, RUNTIME)
    if df is None:
        df = sqlite_db.frames(conn, [api_query(conn, by_id)])[0]
    # Each distinct name worked on once (a run's millions of calls have a few hundred),
    # and the column made categorical from those codes (no string per call).
    if by_id:
        looked = sqlite_db.string_codes(conn, [df["name"]])
        if looked is None:  # (ids that are no integers, or a StringIds id twice)
            return api(conn, by_id=False)
        (codes,), values = looked
        distinct: Any = values.to_numpy(dtype=object)
    else:
        codes, distinct = pd.factorize(df["name"])
    # (a missing name is ""; the cells as text, as astype(str) makes them)
    raw = pd.Series(["", *distinct.tolist()], dtype=object).astype(str)
    # CUPTI names carry the API version ("cudaLaunchKernel_v7000"); nsys's own reports and
    # Kineto drop it, so equal calls compare equal across formats.
    short_codes, short = pd.factorize(raw.str.replace(r"_v\d+$", "", regex=True))
    at = short_codes[codes + 1]
    df["name"] = coded(at, short)
    names = pd.Series(short, dtype=object)
    driver = (names.str.match(r"^cu[A-Z]") & ~names.str.startswith("cuda")).to_numpy(np.int8)
    df["kind"] = coded(driver[at], ["runtime", "driver"])
    df["cat"] = coded(driver[at], ["cuda_runtime", "cuda_driver"])
    return df


def sync(conn: sqlite3.Connection) -> pd.DataFrame:
    c = sqlite_db.columns(conn, SYNC)
    labels = enum_labels(conn, "ENUM_CUPTI_SYNC_TYPE")
    df = sqlite_db.frame(conn, f"""
        SELECT s.start AS ts, s."end" - s.start AS dur, s.deviceId AS device,
               s.streamId AS stream, s.correlationId AS corr,
               {_pid_sql('s.globalPid')} AS hpid, {pick(c, 'syncType', prefix='s.')}
        FROM {SYNC} s""", scans=(SYNC,))
    df["name"] = [labels.get(columns.as_int(t, -1) or 0, "Synchronization")
                  for t in df["syncType"]]
    df["kind"], df["cat"] = "sync", "cuda_sync"
    return df


def nvtx(conn: sqlite3.Connection) -> tuple[pd.DataFrame, int]:
    c = sqlite_db.columns(conn, NVTX)
    text = "COALESCE(n.text, {})".format(_strings(conn, "n.textId") if "textId" in c else "NULL")
    dom = pick(c, "domainId", prefix="n.")
    df = sqlite_db.frame(conn, f"""
        SELECT n.start AS ts, n."end" AS te, n.eventType AS etype, n.globalTid AS gtid,
               {text} AS text, {dom}{nvtx_payloads.select_columns(c)}
        FROM {NVTX} n WHERE n.eventType IN
            ({NVTX_MARK}, {NVTX_PUSHPOP}, {NVTX_STARTEND}, {NVTX_DOMAIN})""",
        scans=(NVTX,), lookups=STRING_IDS)
    domains = {columns.as_int(d): str(t) for d, t in
               df.loc[df["etype"] == NVTX_DOMAIN, ["domainId", "text"]].itertuples(index=False)
               if columns.as_int(d) is not None}
    df = df[df["etype"] != NVTX_DOMAIN]
    is_range = df["etype"].isin((NVTX_PUSHPOP, NVTX_STARTEND))
    unfinished = int((is_range & df["te"].isna()).sum())
    # A range that never ended (the process exited inside it) has no duration to report.
    df = df[~(is_range & df["te"].isna())].copy()
    dom_ids = columns.ids(df["domainId"], 0)
    txt = df["text"].fillna("").astype(str)
    # Named domains are shown "domain:text", the way nsys's nvtx_sum report names them.
    df["name"] = [f"{domains[d]}:{t}" if d in domains else t
                  for d, t in zip(dom_ids.tolist(), txt.tolist(), strict=True)]
    df["dur"] = np.where(df["etype"] == NVTX_MARK, 0, df["te"].fillna(df["ts"]) - df["ts"])
    df["style"] = np.where(df["etype"] == NVTX_STARTEND, "StartEnd",
                           np.where(df["etype"] == NVTX_MARK, "Mark", "PushPop"))
    df["domain"] = [domains.get(d, "") for d in dom_ids.tolist()]
    df["kind"] = np.where(df["etype"] == NVTX_MARK, "other", "user_annotation")
    df["cat"] = "nvtx"
    # PyTorch's emit_nvtx op ranges (nsys --pytorch=autograd-shapes-nvtx) are op calls.
    nvtx_ops.mark_ops(df)
    # Typed payloads (NCCL's message sizes), where the export carries them.
    df["payload"] = nvtx_payloads.payloads(conn, df)
    raw = nvtx_payloads.raw_columns(df)
    return df.drop(columns=["te", "etype", "text", "domainId", *raw]), unfinished


def osrt(conn: sqlite3.Connection) -> pd.DataFrame:
    df = sqlite_db.frame(conn, f"""
        SELECT o.start AS ts, o."end" - o.start AS dur, o.globalTid AS gtid,
               {_strings(conn, 'o.nameId')} AS name FROM {OSRT} o""",
        scans=(OSRT,), lookups=STRING_IDS)
    df["kind"], df["cat"] = "other", "osrt"
    return df


def enum_labels(conn: sqlite3.Connection, table: str) -> dict[int, str]:
    c = sqlite_db.columns(conn, table)
    if "id" not in c:
        return {}
    col = "label" if "label" in c else "name"
    return {k: str(v) for i, v in conn.execute(f'SELECT id, "{col}" FROM {table}')
            if (k := columns.as_int(i)) is not None}
