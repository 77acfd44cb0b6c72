"""The typed schema the Kineto / Chrome-trace reader decodes with (msgspec structs).

Only the fields analyses need are typed; everything else in ``args`` is skipped here and
decoded lazily per row. ``loose`` turns a plain dict into the same struct for files that
do not fit the typed schema.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec
import numpy as np


class Args(msgspec.Struct, frozen=True, gc=False):
    ext: int = msgspec.field(default=-1, name="External id")
    correlation: int = -1
    stream: int = -1
    device: int = -1
    graph: int = msgspec.field(default=-1, name="graph id")
    label: Any = msgspec.field(default=None, name="name")  # process_name / thread_name


NO_ARGS = Args()


# Every category Kineto writes (libkineto ActivityType.h), the flow categories and the
# 2021 legacy names. Decoding ``cat`` as a Literal hands back one shared string object per
# category instead of allocating one per event, which makes large traces load faster. A
# file with any other category is decoded again with ``cat: str`` (EventAnyCat).
KnownCat = Literal[
    "", "cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset",
    "kernel", "external_correlation", "cuda_runtime", "cuda_driver", "cpu_instant_event",
    "python_function", "overhead", "cuda_sync", "cuda_event", "glow_runtime", "mtia_runtime",
    "mtia_ccp_events", "mtia_insight", "cuda_profiler_range", "hpu_op", "xpu_runtime",
    "xpu_driver", "collective_comm", "privateuse1_runtime", "privateuse1_driver",
    "ac2g", "fwdbwd", "Trace", "async_cpu_to_gpu", "async_gpu", "Operator", "Kernel",
    "Runtime", "Memcpy", "Memset", "Python", "DataFlow",
]


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: KnownCat = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    # NaN marks "absent" (instant events have no dur) so that both stay plain floats.
    ts: float | str = math.nan
    dur: float | str = math.nan
    id: int | str | None = None
    args: Args = NO_ARGS


class EventAnyCat(Event, gc=False):
    cat: str = ""  # type: ignore[assignment]


class Doc(msgspec.Struct, gc=False):
    traceEvents: list[Event] | None = None
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    baseTimeNanoseconds: int | None = None
    displayTimeUnit: str | None = None
    schemaVersion: Any = None
    traceName: str | None = None
    cuda_driver_version: Any = None
    cuda_runtime_version: Any = None
    cupti_version: Any = None
    roctracer_version: Any = msgspec.field(default=None, name="roctracer_version")
    rocprofiler_sdk_version: Any = msgspec.field(default=None, name="rocprofiler-sdk_version")
    hip_runtime_version: Any = None
    trace_id: Any = None
    traceforge: dict[str, Any] | None = None
    computeProperties: Any = None


class DocAnyCat(Doc, gc=False):
    traceEvents: list[EventAnyCat] | None = None  # type: ignore[assignment]


#: (bare-list type, document type) pairs tried in order before the lenient path.
SCHEMAS: tuple[tuple[Any, type[Doc]], ...] = (
    (list[Event], Doc),
    (list[EventAnyCat], DocAnyCat),
)


class ArgsOnly(msgspec.Struct, gc=False):
    args: msgspec.Raw = msgspec.Raw()


class ArgsDoc(msgspec.Struct, gc=False):
    traceEvents: list[ArgsOnly] = []


def sniff(head: bytes) -> bool:
    """Whether a file's first bytes are a Kineto/Chrome trace's: a JSON object with
    ``traceEvents``, or a bare JSON list of events."""
    h = head.lstrip()
    if h[:1] == b"[":
        return True
    if h[:1] == b"{":
        # rocprofv3 JSON is also an object; its own reader claims it first.
        return b"rocprofiler-sdk-tool" not in h[:200]
    return False


# Kineto's ``cat`` (and the capitalised 2021 legacy names) -> our ``kind``.
KIND_OF_CAT = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "driver",
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python",
    "cuda_sync": "sync",
}

EVENT_PHASES = ("X", "i", "I", "B", "E")
FLOW_PHASES = ("s", "t", "f")
PH_LETTERS = np.array(["X", "i", "I", "B", "E", "s", "t", "f", "M", "C", "?"], dtype="<U1")
PH_CODE = {c: i for i, c in enumerate(PH_LETTERS[:-1].tolist())}  # -1 indexes "?"



def int_or(v: Any, default: int = -1) -> int:
    if isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            return default
    if isinstance(v, float) and v == v:
        return int(v)
    return default


def loose(e: dict[str, Any]) -> Event:
    a = e.get("args")
    args = NO_ARGS
    if isinstance(a, dict):
        args = Args(
            ext=int_or(a.get("External id", a.get("external id"))),
            correlation=int_or(a.get("correlation")),
            stream=int_or(a.get("stream")),
            device=int_or(a.get("device", a.get("Device"))),
            graph=int_or(a.get("graph id")),
            label=a.get("name"),
        )
    name = e.get("name")
    ts = e.get("ts")
    dur = e.get("dur")
    pid = e.get("pid")
    tid = e.get("tid")
    return EventAnyCat(
        ph=str(e.get("ph") or ""),
        cat=str(e.get("cat") or ""),
        name="" if name is None else str(name),
        pid=pid if isinstance(pid, (int, str)) else 0,
        tid=tid if isinstance(tid, (int, str)) else 0,
        ts=ts if isinstance(ts, (int, float, str)) else math.nan,
        dur=dur if isinstance(dur, (int, float, str)) else math.nan,
        id=e.get("id") if isinstance(e.get("id"), (int, str)) else None,
        args=args,
    )
