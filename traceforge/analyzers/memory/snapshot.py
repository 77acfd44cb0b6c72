"""A PyTorch memory snapshot (``torch.cuda.memory._snapshot()`` as plain data) analysed:
the allocator's segments and blocks at the snapshot, the largest free block, and the
active-memory timeline of the recorded history (``device_traces``), as pytorch.org/memory_viz
draws it.

*active* is memory in blocks allocated to tensors (``active_allocated``) or waiting for
another stream to release them (``active_awaiting_free``); *reserved* is the segments'
size (what the allocator got from ``cudaMalloc``); a segment's free blocks are
``inactive``. The timeline counts ``alloc`` up and ``free_completed`` down (the moment the
memory can be reused), ``segment_alloc``/``segment_free`` for reserved; it starts at the
snapshot's totals minus what the history added, so its values are absolute, not growth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from traceforge.model import Tables


@dataclass(frozen=True)
class SnapshotReport(Tables):
    """Tables of :func:`snapshot`."""

    devices: pd.DataFrame  # per device: reserved, allocated, active, free, largest free
    segments: pd.DataFrame  # one row per segment, largest first
    blocks: pd.DataFrame  # the largest allocated blocks with where they were allocated
    timeline: pd.DataFrame  # device, time_us, action, size, active/reserved after it
    peaks: pd.DataFrame  # per device: peak active in the history, when, and its stack
    notes: tuple[str, ...]


def _int(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _where(frames: Any, n: int = 3) -> str:
    """The innermost ``n`` frames as ``name (file:line)``, innermost first."""
    if not isinstance(frames, list):
        return ""
    out = []
    for f in frames:
        if not isinstance(f, dict):
            continue
        name = str(f.get("name", ""))
        fname = str(f.get("filename", ""))
        if not fname.endswith(".py") or fname.endswith("torch/nn/modules/module.py"):
            continue  # C++ frames (the allocator, the dispatcher), nn.Module plumbing
        out.append(f"{name} ({fname.rsplit('/', 1)[-1]}:{_int(f.get('line'))})")
        if len(out) >= n:
            break
    return " < ".join(out)


def snapshot(snap: dict[str, Any], top: int = 20) -> SnapshotReport:
    """Segments, blocks, largest free block and the active-memory timeline of ``snap``."""
    seg_rows, block_rows = [], []
    for s in snap.get("segments", []):
        if not isinstance(s, dict):
            continue
        blocks = [b for b in s.get("blocks", []) if isinstance(b, dict)]
        free = [_int(b.get("size")) for b in blocks if b.get("state") == "inactive"]
        dev = _int(s.get("device"))
        seg_rows.append({
            "device": dev, "address": hex(_int(s.get("address"))),
            "total_size_bytes": _int(s.get("total_size")),
            "allocated_bytes": _int(s.get("allocated_size")),
            "active_bytes": _int(s.get("active_size")),
            "requested_bytes": _int(s.get("requested_size")),
            "free_bytes": sum(free), "largest_free_bytes": max(free, default=0),
            "blocks": len(blocks), "segment_type": str(s.get("segment_type", "")),
            "stream": _int(s.get("stream")), "where": _where(s.get("frames"))})
        for b in blocks:
            if b.get("state") != "inactive":
                block_rows.append({"device": dev, "size_bytes": _int(b.get("size")),
                                   "requested_bytes": _int(b.get("requested_size")),
                                   "state": str(b.get("state", "")),
                                   "where": _where(b.get("frames"))})
    segs = pd.DataFrame(seg_rows)
    notes: list[str] = []
    if segs.empty:
        notes.append("the snapshot holds no segments (nothing was allocated on the GPU)")
        devices = pd.DataFrame()
    else:
        segs = segs.sort_values(["total_size_bytes", "address"], ascending=[False, True],
                                kind="stable").reset_index(drop=True)
        g = segs.groupby("device", sort=True)
        devices = pd.DataFrame({
            "segments": g.size(), "reserved_bytes": g["total_size_bytes"].sum(),
            "allocated_bytes": g["allocated_bytes"].sum(), "active_bytes": g["active_bytes"].sum(),
            "requested_bytes": g["requested_bytes"].sum(), "free_bytes": g["free_bytes"].sum(),
            "largest_free_bytes": g["largest_free_bytes"].max()}).reset_index()
        # How much of the cached free memory a single large request could not use.
        free = devices["free_bytes"].to_numpy(dtype=np.float64)
        frag = np.where(free > 0, 100.0 * (1 - devices["largest_free_bytes"] / np.maximum(free, 1)),
                        0.0)
        devices["fragmentation_pct"] = np.round(frag, 1)
    blocks = pd.DataFrame(block_rows)
    if not blocks.empty:
        blocks = blocks.sort_values("size_bytes", ascending=False, kind="stable").head(
            top).reset_index(drop=True)
    timeline, peaks = _timeline(snap, devices)
    if timeline.empty:
        notes.append("no allocation history in the snapshot: record it with "
                     "torch.cuda.memory._record_memory_history() (traceforge capture "
                     "--memory-snapshot)")
    return SnapshotReport(devices, segs.head(top) if not segs.empty else segs, blocks,
                          timeline, peaks, tuple(notes))


_ACTIVE = {"alloc": 1, "free_completed": -1}
_RESERVED = {"segment_alloc": 1, "segment_free": -1, "segment_map": 1, "segment_unmap": -1}


def _timeline(snap: dict[str, Any], devices: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = []
    traces = snap.get("device_traces") or []
    for dev, entries in enumerate(traces if isinstance(traces, list) else []):
        for e in entries if isinstance(entries, list) else []:
            if not isinstance(e, dict):
                continue
            action = str(e.get("action", ""))
            size = _int(e.get("size"))
            rows.append({"device": dev, "time_us": _int(e.get("time_us")), "action": action,
                         "size_bytes": size,
                         "active_delta": _ACTIVE.get(action, 0) * size,
                         "reserved_delta": _RESERVED.get(action, 0) * size,
                         "where": _where(e.get("frames"))})
    tl = pd.DataFrame(rows)
    if tl.empty:
        return tl, pd.DataFrame()
    end = devices.set_index("device") if not devices.empty else pd.DataFrame()
    parts, peaks = [], []
    for dev, g in tl.groupby("device", sort=True):
        g = g.copy()
        act = np.cumsum(g["active_delta"].to_numpy())
        res = np.cumsum(g["reserved_delta"].to_numpy())
        a_end = int(end.loc[dev, "active_bytes"]) if dev in end.index else int(act[-1])
        r_end = int(end.loc[dev, "reserved_bytes"]) if dev in end.index else int(res[-1])
        g["active_bytes"] = act + (a_end - int(act[-1]))
        g["reserved_bytes"] = res + (r_end - int(res[-1]))
        parts.append(g.drop(columns=["active_delta", "reserved_delta"]))
        i = int(np.argmax(g["active_bytes"].to_numpy()))
        peaks.append({"device": int(dev), "entries": len(g),
                      "peak_active_bytes": int(g["active_bytes"].iloc[i]),
                      "peak_time_us": int(g["time_us"].iloc[i]),
                      "reserved_at_peak_bytes": int(g["reserved_bytes"].iloc[i]),
                      "ooms": int((g["action"] == "oom").sum()),
                      "where": g["where"].iloc[i]})
    return pd.concat(parts, ignore_index=True), pd.DataFrame(peaks)
