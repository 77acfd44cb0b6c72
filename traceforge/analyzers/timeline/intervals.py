"""Interval algebra on sorted, disjoint sets of half-open ``[start, end)`` int64 intervals.

A set is an ``(n, 2)`` int64 array, rows sorted by start, no two rows overlapping or
touching, no empty rows: what :func:`merge` returns. Every timeline analyzer (idle,
overlap, breakdown, launch) builds its busy/comm/compute sets here, so "overlap",
"exposed" and "idle" mean one thing across the package. All operations are vectorized
(binary searches, cumulative sums); none loops over intervals in Python.
"""

from __future__ import annotations

from typing import cast

import numpy as np

EMPTY = np.zeros((0, 2), dtype=np.int64)


def merge(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The union of arbitrary intervals as a sorted disjoint set (empty ones dropped)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return cast("np.ndarray", EMPTY.copy())
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    # A new run starts where an interval begins after everything before it has ended;
    # touching intervals ([0,5) and [5,8)) join, so the set has no zero-length holes.
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return np.column_stack([s[first], reach[last]])


def _bounds(a: np.ndarray) -> np.ndarray:
    """A set's starts and ends interleaved, ``[s0, e0, s1, e1, ...]``: strictly increasing
    for a set as :func:`merge` makes it (one that is not, e.g. with touching rows, is
    merged first)."""
    flat = np.ascontiguousarray(a, dtype=np.int64).reshape(-1)
    if len(flat) > 1 and not (flat[1:] > flat[:-1]).all():
        flat = merge(a[:, 0], a[:, 1]).reshape(-1)
    return flat


def _combine(a: np.ndarray, b: np.ndarray, op: str) -> np.ndarray:
    """Sweep both sets at once and keep the pieces where ``op`` holds of (in a, in b)."""
    if len(a) == 0 and len(b) == 0:
        return cast("np.ndarray", EMPTY.copy())
    # Both sets' boundaries are sorted already: merged by binary search (not sorted
    # again: at 10M intervals the argsort, +-1 float columns and their cumulative sums
    # were seconds and ~1.3 GB), each set's state (0/1) a running sum of int8 steps.
    ba, bb = _bounds(a), _bounds(b)
    at_a = np.arange(len(ba)) + np.searchsorted(bb, ba, side="left")
    at_b = np.arange(len(bb)) + np.searchsorted(ba, bb, side="right")
    n = len(ba) + len(bb)
    pos = np.empty(n, dtype=np.int64)
    pos[at_a], pos[at_b] = ba, bb
    steps = np.zeros((2, n), dtype=np.int8)
    steps[0, at_a[0::2]], steps[0, at_a[1::2]] = 1, -1
    steps[1, at_b[0::2]], steps[1, at_b[1::2]] = 1, -1
    state = np.cumsum(steps, axis=1, dtype=np.int8)
    # The state after the last boundary at each distinct position holds until the next.
    last = np.append(pos[1:] != pos[:-1], True)
    pos, ca, cb = pos[last], state[0, last] > 0, state[1, last] > 0
    if op == "and":
        on = ca & cb
    elif op == "or":
        on = ca | cb
    else:  # "minus"
        on = ca & ~cb
    # The pieces between consecutive positions where ``op`` holds, runs of them joined
    # (pieces are sorted and disjoint already: no merge's sort): a run of pieces k..l is
    # [pos[k], pos[l + 1]).
    edge = np.diff(on[:-1].astype(np.int8), prepend=np.int8(0), append=np.int8(0))
    return np.column_stack([pos[edge == 1], pos[edge == -1]])


def union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Time covered by ``a`` or ``b``."""
    return _combine(a, b, "or")


def intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Time covered by both ``a`` and ``b``."""
    if len(a) == 0 or len(b) == 0:
        return cast("np.ndarray", EMPTY.copy())
    return _combine(a, b, "and")


def difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Time covered by ``a`` but not by ``b``."""
    if len(a) == 0:
        return cast("np.ndarray", EMPTY.copy())
    if len(b) == 0:
        return cast("np.ndarray", a.copy())
    return _combine(a, b, "minus")


def clip(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The part of ``a`` inside ``[lo, hi)``."""
    if hi <= lo or len(a) == 0:
        return cast("np.ndarray", EMPTY.copy())
    c = np.column_stack([np.maximum(a[:, 0], lo), np.minimum(a[:, 1], hi)])
    return c[c[:, 1] > c[:, 0]]


def gaps(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The holes of ``a`` inside ``[lo, hi)`` (its complement there)."""
    if hi <= lo:
        return cast("np.ndarray", EMPTY.copy())
    return difference(np.array([[lo, hi]], dtype=np.int64), a)


def total(a: np.ndarray) -> int:
    """Covered time in ns."""
    return int((a[:, 1] - a[:, 0]).sum()) if len(a) else 0


def total_within(a: np.ndarray, lo: int, hi: int) -> int:
    """Covered time inside ``[lo, hi)``."""
    return total(clip(a, lo, hi))


def split_at(s: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """The intervals of set ``s``, cut at every time in ``cuts`` strictly inside one."""
    if len(s) == 0 or len(cuts) == 0:
        return s
    i = np.clip(np.searchsorted(s[:, 0], cuts, side="right") - 1, 0, None)
    c = cuts[(cuts > s[i, 0]) & (cuts < s[i, 1])]
    # Disjoint sorted intervals and cuts inside them: sorted starts and ends pair up.
    return np.column_stack([np.sort(np.concatenate([s[:, 0], c])),
                            np.sort(np.concatenate([c, s[:, 1]]))])


def covered(s: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Time of set ``s`` inside each ``[lo, hi)``, vectorized by prefix sums."""
    if len(s) == 0:
        return np.zeros(len(lo), dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(s[:, 1] - s[:, 0])])

    def upto(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(s[:, 0], x, side="right")  # intervals starting at or before x
        inside = np.where(
            i > 0, np.minimum(x, s[np.clip(i - 1, 0, None), 1]) - s[np.clip(i - 1, 0, None), 0], 0
        )
        return np.asarray(cum[np.clip(i - 1, 0, None)] * (i > 0) + np.maximum(inside, 0))

    return cast("np.ndarray", np.maximum(upto(hi) - upto(lo), 0))
