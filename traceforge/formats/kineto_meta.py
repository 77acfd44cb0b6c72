"""Trace-level facts of a Kineto document: devices, versions, ranks, names and notes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from traceforge.formats.kineto_schema import Doc, int_or
from traceforge.model import KINDS, Device, TraceMeta, distinct

FORMAT = "kineto"


def metadata_event(
    e: Any, one: Callable[[Any], int], procs: dict[int, str], threads: dict[tuple[int, int], str]
) -> None:
    """Record a ``process_name`` / ``thread_name`` metadata event (``one`` maps pid/tid)."""
    label = e.args.label
    if not isinstance(label, str):
        return
    pid = one(e.pid)
    if e.name == "process_name":
        procs[pid] = label
    elif e.name == "thread_name":
        threads[(pid, one(e.tid))] = label


def content_notes(cats: pd.Categorical, kind_codes: np.ndarray) -> tuple[str, ...]:
    """Plain-language remarks on what the trace does not contain, for `info` and tables."""
    notes: list[str] = []
    gpu = [KINDS.index(k) for k in ("kernel", "memcpy", "memset")]
    if not np.isin(kind_codes, gpu).any():
        notes.append("CPU-only trace: no GPU kernels, copies or memsets recorded")
    used = {str(c) for c in cats.categories[distinct(cats.codes[cats.codes >= 0])]}
    # MTIA (Meta's accelerator) activity has its own Kineto categories; traceforge has no
    # kernel model for it yet, so it stays visible as kind "other" rather than vanishing.
    mtia = sorted(c for c in used if c.startswith("mtia"))
    if mtia:
        notes.append(f"MTIA activity ({', '.join(mtia)}) is kept as kind 'other', not as kernels")
    return tuple(notes)


def devices_of(props: list[dict[str, Any]] | None) -> tuple[Device, ...]:
    out: list[Device] = []
    for d in props or []:
        name = str(d.get("name", ""))
        major, minor = d.get("computeMajor"), d.get("computeMinor")
        amd = "gfx" in str(d.get("gcnArchName", "")) or any(
            s in name for s in ("AMD", "Radeon", "Instinct")
        )
        cc = f"{major}.{minor}" if major is not None and not amd else d.get("gcnArchName")
        out.append(
            Device(
                id=int_or(d.get("id"), len(out)),
                name=name,
                vendor="amd" if amd else ("nvidia" if name else ""),
                sms=int_or(d.get("numSms"), 0) or None,
                memory_bytes=int_or(d.get("totalGlobalMem"), 0) or None,
                compute_capability=None if cc is None else str(cc),
            )
        )
    return tuple(out)


def build_meta(
    p: Path,
    doc: Doc,
    procs: dict[int, str],
    threads: dict[tuple[int, int], str],
    base_ns: int,
    typed: bool,
    content_notes: tuple[str, ...] = (),
) -> TraceMeta:
    dist = dict(doc.distributedInfo or {})
    rank = dist.get("rank")
    world = dist.get("world_size")
    versions = {
        k: str(v)
        for k, v in (
            ("schema", doc.schemaVersion),
            ("cuda_driver", doc.cuda_driver_version),
            ("cuda_runtime", doc.cuda_runtime_version),
            ("cupti", doc.cupti_version),
            ("roctracer", doc.roctracer_version),
            ("rocprofiler_sdk", doc.rocprofiler_sdk_version),
            ("hip_runtime", doc.hip_runtime_version),
            ("nccl", dist.get("nccl_version")),
        )
        if v is not None
    }
    extra: dict[str, Any] = {}
    if doc.traceforge is not None:
        extra["traceforge"] = doc.traceforge
    if doc.trace_id is not None:
        extra["trace_id"] = doc.trace_id
    notes = content_notes
    if not typed:
        notes += ("read with the lenient decoder (fields off the usual schema)",)
    return TraceMeta(
        path=str(p),
        format=FORMAT,
        base_ns=int(base_ns),
        # A rank past 2**31 is damage, not a rank (and would not fit the int64 column).
        rank=int_or(rank) if rank is not None and 0 <= int_or(rank) < 2**31 else None,
        world_size=int_or(world) if world is not None and int_or(world) > 0 else None,
        devices=devices_of(doc.deviceProperties),
        versions=versions,
        distributed=dist,
        process_names=procs,
        thread_names=threads,
        notes=notes,
        extra=extra,
    )
