"""Where the packets of a Chrome trace go on Perfetto's tracks (for
:mod:`traceforge.render.perfetto`): times in ns, the lane of a thread on which a slice
nests, and the slice each flow point binds to."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import pandas as pd

from traceforge.model import distinct, lex_order, pair_codes, pair_rows


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


def lanes_of(th: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """:func:`lane` of each slice, given sorted by thread ``th``, then start, longest
    first. A thread whose slices never overlap the one before is all on lane 0 (each
    starts once every earlier one has ended); the others are walked a slice at a time."""
    out = np.zeros(len(th), dtype=np.int64)
    over = (th[1:] == th[:-1]) & (t0[1:] < t1[:-1])
    for h in distinct(th[1:][over]).tolist():
        lo, hi = np.searchsorted(th, h, side="left"), np.searchsorted(th, h, side="right")
        if not nested(t0[lo:hi], t1[lo:hi]):
            out[lo:hi] = _walk(t0[lo:hi].tolist(), t1[lo:hi].tolist())
    return out


def nested(t0: np.ndarray, t1: np.ndarray) -> bool:
    """Whether one thread's slices (sorted by start, longest first; ``t1 >= t0``) nest:
    each ends by the end of every slice still open when it starts (one ending when the
    next starts is closed), so :func:`lane` puts them all on lane 0. As brackets, in time
    order (at one time: ends, then each start and, for a slice of no length, its end;
    ends at one time innermost first), every end closes the last slice opened: at each
    depth, the brackets alternate open/close, each pair one slice."""
    n = len(t0)
    idx = np.arange(n, dtype=np.int64)
    zero = t1 == t0
    time = np.concatenate([t0, t1])
    late = np.concatenate([np.ones(n, dtype=np.int64), zero.astype(np.int64)])
    tie = np.concatenate([2 * idx, np.where(zero, 2 * idx + 1, -idx)])
    order = lex_order((tie, late, time))
    opens = order < n
    depth = np.cumsum(np.where(opens, 1, -1))
    level = np.where(opens, depth, depth + 1)
    if len(level) and int(level.min()) >= -2**15 and int(level.max()) < 2**15:
        level = level.astype(np.int16)  # (a stable sort of 16-bit keys is a radix sort)
    pairs = order[np.argsort(level, kind="stable")]
    first, second = pairs[0::2], pairs[1::2]
    return bool((first < n).all() and (second >= n).all() and (second - n == first).all())


def _walk(t0: list[int], t1: list[int]) -> list[int]:
    """:func:`lane` of each of one thread's slices, lane 0's stack handled inline (most
    slices nest there)."""
    top: list[int] = []
    lanes = [top]
    out: list[int] = []
    for a, b in zip(t0, t1, strict=True):
        while top and top[-1] <= a:
            top.pop()
        if not top or b <= top[-1]:
            top.append(b)
            out.append(0)
        else:
            out.append(lane(lanes, a, b))
    return out


@dataclass(frozen=True)
class FlowPoints:
    """Flow points as columns, in document order: each one's thread (``pid``, ``tid``),
    time in ns, ``cat`` and ``id`` (the flow is the pair) and whether it ends its flow
    (``ph`` ``f``)."""

    pid: list[Any]
    tid: list[Any]
    ts: np.ndarray
    cat: list[str]
    id: list[Any]
    end: np.ndarray

    def __len__(self) -> int:
        return len(self.pid)

    @classmethod
    def of(cls, events: Sequence[Mapping[str, Any]]) -> FlowPoints:
        """The points of flow events given as dicts (``ph`` ``s``/``t``/``f``)."""
        return cls([e.get("pid") for e in events], [e.get("tid") for e in events],
                   np.asarray([ns(e["ts"]) for e in events], dtype=np.int64),
                   [str(e.get("cat", "")) for e in events], [e.get("id") for e in events],
                   np.asarray([e["ph"] == "f" for e in events], dtype=bool))

    @classmethod
    def joined(cls, parts: Sequence[FlowPoints]) -> FlowPoints:
        """``parts`` one after the other."""
        return cls([x for p in parts for x in p.pid], [x for p in parts for x in p.tid],
                   np.concatenate([np.zeros(0, np.int64), *(p.ts for p in parts)]),
                   [x for p in parts for x in p.cat], [x for p in parts for x in p.id],
                   np.concatenate([np.zeros(0, bool), *(p.end for p in parts)]))


def bind_flows(th: np.ndarray, start: np.ndarray, stop: np.ndarray,
               keys: dict[tuple[Any, Any], int], flows: FlowPoints
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Attach each flow point to the slice it binds to (same thread, enclosing ``ts``):
    (slice numbers, flow ids, whether the point ends its flow), one per bound point,
    ordered by slice, the points that start a flow first, then the flows' order. Flow
    ids number (cat, id) pairs from 1 in the order they are first bound."""
    none = np.zeros(0, dtype=np.int64)
    if not len(flows):
        return none, none, none.astype(bool)
    by = lex_order((np.arange(len(th)), start, th))
    th_s, t_s, e_s = th[by], start[by], stop[by]
    lo = np.searchsorted(th_s, np.arange(len(keys)), side="left")
    hi = np.searchsorted(th_s, np.arange(len(keys)), side="right")
    fth = _thread_of(keys, flows)
    fts = flows.ts
    at = np.full(len(flows), -1, dtype=np.int64)
    for h in distinct(fth[fth >= 0]).tolist():
        m = fth == h
        at[m] = lo[h] + np.searchsorted(t_s[lo[h]:hi[h]], fts[m], side="right") - 1
    # Back from there to the nearest slice that still contains ts (bp "e": enclosing).
    first = np.where(fth >= 0, lo[np.maximum(fth, 0)] if len(lo) else 0, 0)
    on = np.flatnonzero(fth >= 0)
    at[on] = last_reaching(e_s, at[on], fts[on], first[on])
    bound = np.flatnonzero((fth >= 0) & (at >= first))
    if not len(bound):
        return none, none, none.astype(bool)
    fid = _flow_numbers(flows, bound)
    end = flows.end[bound]
    slice_no = by[at[bound]]
    o = lex_order((np.arange(len(bound)), end, slice_no))
    return slice_no[o], fid[o], end[o]


def _ints(items: Sequence[Any]) -> np.ndarray | None:
    """``items`` as int64 where every one is a whole number that fits (a list of ints, as
    the trace's columns give them), else None."""
    arr = np.asarray(items)
    if arr.dtype.kind not in "iub" or arr.ndim != 1 or (
            arr.dtype.kind == "u" and len(arr) and int(arr.max()) >= 2**63):
        return None
    return arr.astype(np.int64)


def _thread_of(keys: dict[tuple[Any, Any], int], flows: FlowPoints) -> np.ndarray:
    """``keys.get((pid, tid), -1)`` of each flow point: as int pairs where the points'
    and the keys' ids are ints (an nsys export's 2.4M points), else a lookup each."""
    pid, tid = _ints(flows.pid), _ints(flows.tid)
    kp, kt = _ints([k[0] for k in keys]), _ints([k[1] for k in keys])
    if pid is None or tid is None or kp is None or kt is None or not len(keys):
        return np.fromiter(map(keys.get, zip(flows.pid, flows.tid, strict=True),
                               repeat(-1)), dtype=np.int64, count=len(flows))
    rows = pair_rows(kp, kt, pid, tid)
    values = np.fromiter(keys.values(), dtype=np.int64, count=len(keys))
    return np.where(rows >= 0, values[np.maximum(rows, 0)], -1)


def _flow_numbers(flows: FlowPoints, bound: np.ndarray) -> np.ndarray:
    """The flow id of each bound point: its (cat, id) pair numbered from 1 in the order
    pairs are first met (as a dict of them numbers them): codes of the cats and int ids
    where the cats are text and the ids ints, else a dict."""
    cats = np.empty(len(flows.cat), dtype=object)
    cats[:] = flows.cat
    cats = cats[bound]
    ids = _ints(flows.id)
    if ids is not None and pd.api.types.infer_dtype(cats, skipna=False) == "string":
        cat_codes = pd.factorize(cats)[0].astype(np.int64)
        return pair_codes(cat_codes, ids[bound])[0] + 1
    got = bound.tolist()
    pairs = list(zip(map(flows.cat.__getitem__, got), map(flows.id.__getitem__, got),
                     strict=True))
    number = {k: j + 1 for j, k in enumerate(dict.fromkeys(pairs))}
    return np.fromiter(map(number.__getitem__, pairs), dtype=np.int64, count=len(pairs))


#: Positions per block of :func:`last_reaching`'s levels.
BLOCK = 32


def last_reaching(ends: np.ndarray, q: np.ndarray, t: np.ndarray, lo: np.ndarray
                  ) -> np.ndarray:
    """For each query i, the largest position p in ``[lo[i], q[i]]`` with
    ``ends[p] >= t[i]``, or -1: where a walk back from ``q[i]`` a position at a time
    stops. Walked a step at a time for all queries together, a point after a long run of
    slices that end before it took as many steps as the run is long (22 s for 2.5M flow
    points on an annotated nsys trace); here a walk is at most :data:`BLOCK` steps within
    a block, then the same question on the blocks' maxima, then a walk in the block found."""
    out = np.full(len(q), -1, dtype=np.int64)
    live = np.flatnonzero(q >= lo)
    if not len(live):
        return out
    qq, tt, ll = q[live], t[live], lo[live]
    block = qq - qq % BLOCK
    got = _scan_down(ends, qq, np.maximum(ll, block), tt)
    out[live] = got
    miss = (got < 0) & (block > ll)  # earlier blocks lie in range
    if miss.any():
        bmax = np.maximum.reduceat(ends, np.arange(0, len(ends), BLOCK))
        b = last_reaching(bmax, qq[miss] // BLOCK - 1, tt[miss], ll[miss] // BLOCK)
        has = b >= 0
        at, bb = live[miss][has], b[has]
        # The largest block before q's whose maximum reaches t: its last position that
        # does (none where that is before lo, in lo's own block).
        out[at] = _scan_down(ends, np.minimum(bb * BLOCK + BLOCK - 1, len(ends) - 1),
                             np.maximum(lo[at], bb * BLOCK), t[at])
    return out


def _scan_down(ends: np.ndarray, hi: np.ndarray, lo: np.ndarray, t: np.ndarray
               ) -> np.ndarray:
    """The largest p in ``[lo[i], hi[i]]`` (fewer than :data:`BLOCK` apart) with
    ``ends[p] >= t[i]``, or -1, for all queries a step at a time."""
    out = np.full(len(hi), -1, dtype=np.int64)
    pos = hi.copy()
    live = np.flatnonzero(pos >= lo)
    while len(live):
        hit = ends[pos[live]] >= t[live]
        out[live[hit]] = pos[live[hit]]
        live = live[~hit]
        pos[live] -= 1
        live = live[pos[live] >= lo[live]]
    return out
