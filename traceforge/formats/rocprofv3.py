"""rocprofv3 JSON reader (``rocprofv3 -f json``: ``{"rocprofiler-sdk-tool": [...]}``).

Each list entry is one process: ``agents`` (CPU and GPU agents by handle),
``kernel_symbols`` (kernel_id -> names), ``strings.buffer_records`` (kind -> operation
names) and ``buffer_records`` with ``kernel_dispatch``, ``hip_api``, ``memory_copy``,
``marker_api``, ... Timestamps are absolute ns. GPU agents are numbered 0.. in the order
the file lists them, as HIP does; several processes get ``rank`` in list order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from traceforge.errors import TraceFormatError
from traceforge.formats import columns
from traceforge.formats.source import read_bytes
from traceforge.formats.symbols import demangle_names
from traceforge.model import Device, Trace, TraceMeta, normalize_events

NAME = "rocprofv3-json"
_KEY = b"rocprofiler-sdk-tool"


def sniff(path: Path, head: bytes) -> bool:
    """A JSON object whose first key is ``rocprofiler-sdk-tool``."""
    h = head.lstrip()
    return h[:1] == b"{" and _KEY in h[:200]


def _load(p: Path) -> Any:
    import msgspec

    raw = read_bytes(p)
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as e:
        raise TraceFormatError(p, f"not valid JSON ({e})") from None


def _ops(proc: dict[str, Any]) -> dict[int, tuple[str, list[str]]]:
    recs = (proc.get("strings") or {}).get("buffer_records") or []
    return {i: (str(r.get("kind", "")), list(r.get("operations") or []))
            for i, r in enumerate(recs) if isinstance(r, dict)}


def read(path: str | Path) -> Trace:
    """Read a rocprofv3 JSON file into a Trace."""
    p = Path(path)
    doc = _load(p)
    procs = doc.get("rocprofiler-sdk-tool") if isinstance(doc, dict) else None
    if not isinstance(procs, list):
        raise TraceFormatError(p, "JSON without a rocprofiler-sdk-tool list")
    rows: list[dict[str, Any]] = []
    devices: list[Device] = []
    for rank, proc in enumerate(procs):
        try:
            gpu_of, devs = _agents(proc)
            rows += _records(proc, gpu_of, rank if len(procs) > 1 else -1)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            # A record without a timestamp, a list where an object belongs, ...
            raise TraceFormatError(p, f"process {rank}: malformed rocprofv3 record "
                                   f"({type(e).__name__}: {e})") from None
        if rank == 0:
            devices = devs
    if not rows:
        raise TraceFormatError(p, "rocprofv3 JSON without any buffer records")
    df = pd.DataFrame(rows)
    for col in ("ts", "end"):
        num = pd.to_numeric(df[col], errors="coerce")
        if num.dtype.kind not in "iu" or not (num.abs() <= 2**62).all():
            raise TraceFormatError(p, f"a record has a missing or invalid {col} timestamp")
        df[col] = num.astype(np.int64)
    for col in ("pid", "tid", "device", "stream", "corr", "ext", "rank", "queue", "dispatch",
                "bytes"):
        if col in df:
            df[col] = columns.ids(df[col])
    columns.check_intervals(p, df["ts"].to_numpy(), df["end"].to_numpy(), df["name"])
    t0 = int(df["ts"].min())
    df["ts"] = df["ts"] - t0
    df["dur"] = df["end"] - df["ts"] - t0
    df = df.sort_values("ts", kind="stable").reset_index(drop=True)
    meta0 = procs[0].get("metadata") if isinstance(procs[0], dict) else None
    meta0 = meta0 if isinstance(meta0, dict) else {}
    try:
        pid0 = int(meta0.get("pid", -1))
    except (TypeError, ValueError, OverflowError):
        pid0 = -1
    meta = TraceMeta(path=str(p), format=NAME, base_ns=t0, devices=tuple(devices),
                     world_size=len(procs) if len(procs) > 1 else None,
                     process_names={pid0: " ".join(map(str, meta0.get("command") or []))[:200]}
                     if pid0 >= 0 and isinstance(meta0.get("command") or [], list) else {})
    extras = df[["queue", "dispatch", "bytes"]]

    def provider(sel: np.ndarray) -> list[dict[str, Any]]:
        recs = extras.iloc[sel].to_dict("records")
        return [{k: int(v) for k, v in r.items() if pd.notna(v) and v >= 0} for r in recs]

    events = normalize_events(df.drop(columns=["end"]))
    return demangle_names(Trace(events, meta, args_provider=provider))


def _agents(proc: dict[str, Any]) -> tuple[dict[int, int], list[Device]]:
    gpu_of: dict[int, int] = {}
    devs: list[Device] = []
    for a in proc.get("agents") or []:
        if a.get("type") != 2:  # 1 = CPU, 2 = GPU
            continue
        idx = len(devs)
        gpu_of[int((a.get("id") or {}).get("handle", -1))] = idx
        devs.append(Device(id=idx, name=str(a.get("product_name") or a.get("name") or ""),
                           vendor="amd", sms=a.get("cu_count") or None,
                           compute_capability=str(a.get("name") or "") or None))
    return gpu_of, devs


def _records(proc: dict[str, Any], gpu_of: dict[int, int], rank: int) -> list[dict[str, Any]]:
    ops = _ops(proc)
    names = {int(k.get("kernel_id", -1)): str(k.get("demangled_kernel_name")
                                                or k.get("formatted_kernel_name")
                                                or k.get("kernel_name") or "")
             for k in proc.get("kernel_symbols") or [] if isinstance(k, dict)}
    pid = int((proc.get("metadata") or {}).get("pid", -1))
    br = proc.get("buffer_records") or {}
    out: list[dict[str, Any]] = []
    for r in br.get("kernel_dispatch") or []:
        di = r.get("dispatch_info") or {}
        dev = gpu_of.get(int((di.get("agent_id") or {}).get("handle", -1)), -1)
        stream = int((r.get("stream_id") or {}).get("handle", 0)) or \
            int((di.get("queue_id") or {}).get("handle", -1))
        corr = r.get("correlation_id") or {}
        out.append({"name": names.get(int(di.get("kernel_id", -1)), ""), "kind": "kernel",
                    "cat": "KERNEL_DISPATCH", "ts": r["start_timestamp"],
                    "end": r["end_timestamp"], "pid": dev, "tid": stream, "device": dev,
                    "stream": stream, "corr": corr.get("internal", -1),
                    "ext": corr.get("external", -1) or -1, "rank": rank,
                    "queue": (di.get("queue_id") or {}).get("handle", -1),
                    "dispatch": di.get("dispatch_id", -1), "bytes": -1})
    for key, kind in (("hip_api", "runtime"), ("marker_api", "user_annotation"),
                      ("hsa_api", "other"), ("rccl_api", "other")):
        for r in br.get(key) or []:
            k, opnames = ops.get(int(r.get("kind", -1)), ("", []))
            op = int(r.get("operation", -1))
            corr = r.get("correlation_id") or {}
            out.append({"name": opnames[op] if 0 <= op < len(opnames) else f"{key}#{op}",
                        "kind": kind, "cat": k or key, "ts": r["start_timestamp"],
                        "end": r["end_timestamp"], "pid": pid, "tid": r.get("thread_id", pid),
                        "corr": corr.get("internal", -1), "ext": corr.get("external", -1) or -1,
                        "rank": rank, "queue": -1, "dispatch": -1, "bytes": -1})
    for r in br.get("memory_copy") or []:
        k, opnames = ops.get(int(r.get("kind", -1)), ("", []))
        op = int(r.get("operation", -1))
        d = opnames[op] if 0 <= op < len(opnames) else "MEMORY_COPY"
        dst = gpu_of.get(int((r.get("dst_agent_id") or {}).get("handle", -1)), -1)
        src = gpu_of.get(int((r.get("src_agent_id") or {}).get("handle", -1)), -1)
        dev = dst if dst >= 0 else src
        out.append({"name": d.replace("MEMORY_COPY_", "Memcpy "), "kind": "memcpy",
                    "cat": "MEMORY_COPY", "ts": r["start_timestamp"], "end": r["end_timestamp"],
                    "pid": dev, "tid": -1, "device": dev, "stream": -1,
                    "corr": (r.get("correlation_id") or {}).get("internal", -1), "rank": rank,
                    "queue": -1, "dispatch": -1, "bytes": r.get("bytes", -1)})
    return out
