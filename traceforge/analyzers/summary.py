"""Trace overview: what ``traceforge info`` shows and the report's header uses."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceforge.model import GPU_KINDS, Trace


@dataclass(frozen=True)
class Summary:
    """Overview of one trace. ``facts`` is a two-column (field, value) table."""

    facts: pd.DataFrame
    kinds: pd.DataFrame  # kind, events
    devices: pd.DataFrame  # device, name, sms, memory_gib, compute_capability, busy_pct


def busy_ns(ts: np.ndarray, dur: np.ndarray) -> int:
    """Length of the union of intervals [ts, ts + dur)."""
    if len(ts) == 0:
        return 0
    order = np.argsort(ts, kind="stable")
    s = ts[order]
    e = s + dur[order]
    run_end = np.maximum.accumulate(e)
    # A new merged block starts where an interval begins after everything before it ended.
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    starts = s[new]
    idx = np.flatnonzero(new)
    ends = run_end[np.append(idx[1:] - 1, len(s) - 1)]
    return int((ends - starts).sum())


def summary(trace: Trace) -> Summary:
    """Format, devices, ranks, span, steps, events by kind and GPU busy % per device."""
    m = trace.meta
    ev = trace.events
    span = trace.span_ns
    gpu = ev[ev["kind"].isin(GPU_KINDS)]
    steps = trace.steps()
    rows = [
        ("path", m.path),
        ("format", m.format),
        ("rank", "" if m.rank is None else m.rank),
        ("world size", "" if m.world_size is None else m.world_size),
        ("span (ms)", round(span / 1e6, 3)),
        ("steps", ", ".join(str(s) for s in steps["step"]) if len(steps) else "none"),
        ("events", len(ev)),
        ("kernels", int((ev["kind"] == "kernel").sum())),
    ]
    for k, v in sorted(m.versions.items()):
        rows.append((f"version {k}", v))
    if len(gpu) and span:
        rows.append(("GPU busy % (all devices)", round(100.0 * _busy_all(gpu) / span, 2)))
    for n in m.notes:
        rows.append(("note", n))
    if gpu.empty and not any("no GPU" in n for n in m.notes):
        rows.append(("note", "no GPU activity in this trace"))
    facts = pd.DataFrame(rows, columns=["field", "value"])
    facts["value"] = facts["value"].astype(str)
    vc = ev["kind"].value_counts()
    kinds = pd.DataFrame({"kind": vc.index.astype(str), "events": vc.to_numpy()})
    kinds = kinds[kinds["events"] > 0].reset_index(drop=True)
    dev_rows = []
    names = {d.id: d for d in m.devices}
    for dev in sorted(set(gpu["device"].tolist()) | set(names)):
        sel = gpu[gpu["device"] == dev]
        d = names.get(int(dev))
        dev_rows.append(
            {
                "device": int(dev),
                "name": d.name if d else "",
                "sms": d.sms if d else None,
                "memory_gib": round(d.memory_bytes / 2**30, 1) if d and d.memory_bytes else None,
                "compute_capability": d.compute_capability if d else None,
                "kernels": int((sel["kind"] == "kernel").sum()),
                "busy_pct": round(100.0 * busy_ns(sel["ts"].to_numpy(), sel["dur"].to_numpy())
                                  / span, 2) if span and len(sel) else 0.0,
            }
        )
    devices = pd.DataFrame(dev_rows, columns=["device", "name", "sms", "memory_gib",
                                              "compute_capability", "kernels", "busy_pct"])
    return Summary(facts, kinds, devices)


def _busy_all(gpu: pd.DataFrame) -> int:
    """Busy time summed over devices (each device's union), for a single percentage."""
    return sum(
        busy_ns(g["ts"].to_numpy(), g["dur"].to_numpy()) for _, g in gpu.groupby("device")
    ) // max(1, gpu["device"].nunique())
