"""Where the packets of a Chrome trace go on Perfetto's tracks (for
:mod:`traceforge.render.perfetto`): times in ns, the lane of a thread on which a slice
nests, and the slice each flow point binds to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def ns(us: Any) -> int:
    """Chrome microseconds -> whole ns."""
    return int(round(float(us) * 1000.0))


def lane(lanes: list[list[int]], t0: int, t1: int) -> int:
    """First lane on which [t0, t1] nests (stacks hold the end times of open slices)."""
    for k, stack in enumerate(lanes):
        while stack and stack[-1] <= t0:
            stack.pop()
        if not stack or t1 <= stack[-1]:
            stack.append(t1)
            return k
    lanes.append([t1])
    return len(lanes) - 1


def bind_flows(th: np.ndarray, start: np.ndarray, stop: np.ndarray,
                keys: dict[tuple[Any, Any], int], flows: list[Mapping[str, Any]]
                ) -> dict[int, tuple[list[int], list[int]]]:
    """Attach each flow point to the slice it binds to (same thread, enclosing ``ts``):
    slice number -> (flow ids it starts, flow ids it ends)."""
    if not flows:
        return {}
    by = np.lexsort((np.arange(len(th)), start, th))
    th_s, t_s, e_s = th[by], start[by], stop[by]
    lo = np.searchsorted(th_s, np.arange(len(keys)), side="left")
    hi = np.searchsorted(th_s, np.arange(len(keys)), side="right")
    fth = np.asarray([keys.get((f.get("pid"), f.get("tid")), -1) for f in flows], np.int64)
    fts = np.asarray([ns(f["ts"]) for f in flows], dtype=np.int64)
    at = np.full(len(flows), -1, dtype=np.int64)
    for h in np.unique(fth[fth >= 0]).tolist():
        m = fth == h
        at[m] = lo[h] + np.searchsorted(t_s[lo[h]:hi[h]], fts[m], side="right") - 1
    ids: dict[tuple[str, Any], int] = {}
    out: dict[int, tuple[list[int], list[int]]] = {}
    for f, h, k, ts in zip(flows, fth.tolist(), at.tolist(), fts.tolist(), strict=True):
        if h < 0:
            continue
        first = int(lo[h])
        # Walk back to the innermost slice that still contains ts (bp "e": enclosing).
        while k >= first and e_s[k] < ts:
            k -= 1
        if k < first:
            continue
        fid = ids.setdefault((str(f.get("cat", "")), f.get("id")), len(ids) + 1)
        slot = out.setdefault(int(by[k]), ([], []))
        (slot[1] if f["ph"] == "f" else slot[0]).append(fid)
    return out
