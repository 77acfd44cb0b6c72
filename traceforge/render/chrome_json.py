"""Write a Trace as a Kineto-compatible Chrome trace document (``.json`` / ``.json.gz``).

The document opens in Perfetto UI / chrome://tracing and reads back through traceforge's
Kineto reader with the same kinds, names, times and ids: ``ts``/``dur`` are microseconds
with three decimals (whole ns, which the reader recovers exactly), GPU rows keep Kineto's
``pid = device, tid = stream`` layout, and launches are tied to their GPU work by ``ac2g``
flow pairs the way Kineto writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from traceforge.model import GPU_KINDS, Trace

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

_LAUNCH_KINDS = ("runtime", "driver")


def _us(ns: np.ndarray) -> list[float]:
    # ns / 1000 as a double prints as at most three decimals (shortest round-trip repr),
    # and the Kineto reader's us_to_ns turns it back into the same integer ns.
    out: list[float] = (ns.astype(np.float64) / 1000.0).tolist()
    return out


def _cats(trace: Trace) -> list[str]:
    """The ``cat`` to write per row: the source's own when it reads back as the same kind.

    nsys/rocprof sources carry cats like ``nvtx`` or ``osrt``; writing those would make a
    re-read classify the rows as ``other``, so kinds other than ``other`` get Kineto's cat.
    """
    ev = trace.events
    out = []
    for kind, cat in zip(ev["kind"].astype(str).tolist(), ev["cat"].astype(str).tolist(),
                         strict=True):
        want = KINETO_CAT.get(kind)
        # Kineto's legacy capitalised cats ("Kernel", "Runtime") also read back fine.
        out.append(cat if want is None or cat.lower() == want else want)
    return [c or "other" for c in out]


def _event_args(trace: Trace, with_source_args: bool) -> list[dict[str, Any]]:
    ev = trace.events
    n = len(ev)
    src: list[dict[str, Any]] = (
        trace.args(ev.index.to_numpy()) if with_source_args and n else [{} for _ in range(n)]
    )
    cols = {
        "External id": ev["ext"].to_numpy(),
        "correlation": ev["corr"].to_numpy(),
        "device": ev["device"].to_numpy(),
        "stream": ev["stream"].to_numpy(),
        "graph id": ev["graph"].to_numpy(),
    }
    for key, values in cols.items():
        for i in np.flatnonzero(values >= 0).tolist():
            src[i][key] = int(values[i])
    return src


def _flow_events(trace: Trace) -> list[dict[str, Any]]:
    """The trace's own flows when it has launch flows, else ``ac2g`` pairs from ``corr``."""
    fl = trace.flows
    out: list[dict[str, Any]] = []
    if not fl.empty:
        ts = _us(fl["ts"].to_numpy())
        for i, (fid, cat, ph, pid, tid) in enumerate(
            zip(fl["id"].tolist(), fl["cat"].astype(str).tolist(), fl["ph"].astype(str).tolist(),
                fl["pid"].tolist(), fl["tid"].tolist(), strict=True)
        ):
            e: dict[str, Any] = {"ph": ph, "id": fid, "pid": pid, "tid": tid, "ts": ts[i],
                                 "cat": cat, "name": cat}
            if ph == "f":
                e["bp"] = "e"
            out.append(e)
        if (fl["cat"].astype(str) == "ac2g").any():
            return out
    ev = trace.events
    gpu = ev[ev["kind"].isin(GPU_KINDS) & (ev["corr"] >= 0)]
    launch = ev[ev["kind"].isin(_LAUNCH_KINDS) & (ev["corr"] >= 0)]
    if gpu.empty or launch.empty:
        return out
    # One flow per launch with GPU work; a graph launch fans out to many kernels, so the
    # flow ends at the first of them (as Kineto does).
    first = gpu.sort_values("ts").drop_duplicates("corr")
    lq = launch.drop_duplicates("corr").set_index("corr")
    first = first[first["corr"].isin(lq.index)]
    if first.empty:
        return out
    lrow = lq.loc[first["corr"].to_numpy()]
    s_ts = _us(lrow["ts"].to_numpy())
    f_ts = _us(first["ts"].to_numpy())
    for k, (corr, lpid, ltid, gpid, gtid) in enumerate(
        zip(first["corr"].tolist(), lrow["pid"].tolist(), lrow["tid"].tolist(),
            first["pid"].tolist(), first["tid"].tolist(), strict=True)
    ):
        out.append({"ph": "s", "id": corr, "pid": lpid, "tid": ltid, "ts": s_ts[k],
                    "cat": "ac2g", "name": "ac2g"})
        out.append({"ph": "f", "id": corr, "pid": gpid, "tid": gtid, "ts": f_ts[k],
                    "cat": "ac2g", "name": "ac2g", "bp": "e"})
    return out


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
    ev = trace.events
    ts = _us(ev["ts"].to_numpy())
    dur = _us(ev["dur"].to_numpy())
    args = _event_args(trace, with_source_args)
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": c, "name": n, "pid": p, "tid": t, "ts": s, "dur": d, "args": a}
        for c, n, p, t, s, d, a in zip(
            _cats(trace), ev["name"].astype(str).tolist(), ev["pid"].tolist(),
            ev["tid"].tolist(), ts, dur, args, strict=True
        )
    ]
    events += _flow_events(trace)
    events += _name_events(trace)
    if extra_events is not None:
        events += [dict(e) for e in extra_events]
    m = trace.meta
    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": _device_properties(trace),
    }
    dist = dict(m.distributed)
    if m.rank is not None:
        dist.setdefault("rank", m.rank)
    if m.world_size is not None:
        dist.setdefault("world_size", m.world_size)
    if dist:
        doc["distributedInfo"] = dist
    for key, src in (("cuda_driver_version", "cuda_driver"),
                     ("cuda_runtime_version", "cuda_runtime"), ("cupti_version", "cupti")):
        if src in m.versions:
            doc[key] = m.versions[src]
    doc["traceEvents"] = events
    doc["displayTimeUnit"] = "ms"
    doc["baseTimeNanoseconds"] = int(m.base_ns)
    if m.path:
        doc["traceName"] = m.path
    return doc


#: Events serialized per orjson call by :func:`dumps_chrome`.
BATCH = 50_000


def dumps_chrome(doc: Mapping[str, Any]) -> bytes:
    """Serialize a Chrome trace document to JSON bytes (what ``orjson.dumps(doc)`` writes)."""
    chunks: list[bytes] = []
    stream_chrome(doc, chunks.append)
    return b"".join(chunks)


def stream_chrome(doc: Mapping[str, Any], sink: Callable[[bytes], Any]) -> None:
    """Write ``doc`` as JSON into ``sink`` (a file's ``write``): the bytes ``orjson.dumps``
    writes for the whole document, with ``traceEvents`` encoded :data:`BATCH` events at a
    time, so the JSON is never whole in memory."""
    import orjson

    opt = orjson.OPT_SERIALIZE_NUMPY
    events = doc.get("traceEvents")
    if not isinstance(events, list) or len(events) <= BATCH:
        sink(orjson.dumps(doc, option=opt))
        return
    head = b"{"
    for n, (key, value) in enumerate(doc.items()):
        head += (b"," if n else b"") + orjson.dumps(key) + b":"
        if key != "traceEvents":
            head += orjson.dumps(value, option=opt)
            continue
        sink(head + b"[")
        for i in range(0, len(events), BATCH):
            sink((b"," if i else b"") + orjson.dumps(events[i:i + BATCH], option=opt)[1:-1])
        head = b"]"
    sink(head + b"}")


def write_chrome(
    trace: Trace,
    path: str | Path,
    extra_events: Iterable[Mapping[str, Any]] | None = None,
) -> Path:
    """Write ``trace`` as Chrome JSON to ``path`` (gzip when it ends in ``.gz``)."""
    from traceforge.outputs import write
    from traceforge.render.document import document_bytes

    p = Path(path)
    return write(p, document_bytes(trace_to_chrome(trace, extra_events), p))
