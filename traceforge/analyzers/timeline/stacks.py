"""Host call stacks: which range of a thread (op, annotation) is innermost at a given time.

Ranges of one host thread nest (an ``aten::linear`` holds its ``aten::addmm``, which holds the
``cudaLaunchKernel``), so the innermost range covering time ``t`` is the deepest one. The
lookup is vectorized with no Python loop over ranges or queries: the nesting depth of each
range and of each query time comes from two sorted searches, and among the ranges of that
depth on that thread -- which are disjoint -- the last one starting at or before ``t`` is
the one covering it. Ranges that overlap without nesting (rare: async NVTX start/end
ranges) can make a lookup miss; every answer is checked to cover ``t``, so a miss gives
"no range", never a wrong one.
"""

from __future__ import annotations

import numpy as np

from traceforge.model import distinct, lex_order


def innermost(
    tid: np.ndarray, start: np.ndarray, end: np.ndarray, q_tid: np.ndarray, q_t: np.ndarray
) -> np.ndarray:
    """For each query ``(q_tid[i], q_t[i])``, the index of the innermost range on thread
    ``q_tid[i]`` with ``start <= t < end``, or -1 when none covers it.

    ``tid``, ``start``, ``end`` describe the ranges (any order); indices refer to them.
    """
    out = np.full(len(q_t), -1, dtype=np.int64)
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    # Empty ranges cover nothing, and would unbalance the depth count of their neighbours.
    keep = np.flatnonzero(end > start)
    if len(keep) == 0 or len(q_t) == 0:
        return out
    if len(keep) < len(start):
        sub = innermost(np.asarray(tid)[keep], start[keep], end[keep], q_tid, q_t)
        return np.where(sub >= 0, keep[np.clip(sub, 0, None)], -1)
    n = len(start)
    tid = np.asarray(tid, dtype=np.int64)
    q_tid = np.asarray(q_tid, dtype=np.int64)
    q_t = np.asarray(q_t, dtype=np.int64)
    # Thread codes; queries on a thread with no ranges get no answer.
    threads, code = _codes(tid)
    if len(threads) == 1:
        # One thread (most traces' ops): its times are the axis as they are.
        s, e, t = start, end, q_t
        q_ok = q_tid == threads[0]
    else:
        lo = min(int(start.min()), int(q_t.min()))
        width = max(int(end.max()), int(q_t.max())) - lo + 2
        if width * (len(threads) + 1) >= 2**62:
            # A wild timestamp (-1 beside epoch microseconds, or near 2**63) stretches the
            # axis past int64 once stacked: only order matters, so rank the times instead.
            start, end, q_t = _ranked(start, end, q_t)
            lo, width = 0, max(int(end.max()), int(q_t.max())) + 2
        qpos = np.clip(np.searchsorted(threads, q_tid), 0, len(threads) - 1)
        q_ok = threads[qpos] == q_tid
        # Shift each thread onto its own stretch of one time axis so that one sort serves
        # all: thread k's times live in [k * width, (k + 1) * width).
        base = code.astype(np.int64) * width - lo
        s, e = start + base, end + base
        t = q_t + (qpos.astype(np.int64) * width - lo)
    # Parents first on equal starts (longer first), so depth counts them as enclosing.
    # A trace's ranges mostly come in that order already (one thread, by start): then
    # checking it costs a pass instead of a two-key sort.
    if _ordered(s, e):
        order = None
    else:
        order = lex_order((-e, s))
        s, e = s[order], e[order]
    ends_sorted = np.sort(e)
    # Depth of a range = ranges started before it that have not ended by its start.
    # (In place where possible: a large trace's queries are ~1M, and each fresh array of
    # that size costs page faults as well as its pass.)
    depth = np.searchsorted(ends_sorted, s, side="right")
    np.subtract(np.arange(n), depth, out=depth)
    # Ranges covering t = started at or before t minus ended at or before t.
    started = np.searchsorted(s, t, side="right")
    q_depth = started - np.searchsorted(ends_sorted, t, side="right")
    q_depth -= 1
    dmax = int(depth.max()) + 1
    # Key (depth, position by start): bounded by n**2 whatever the times are, so no
    # timestamp can overflow it. The last range of depth d at a position before
    # ``started`` is the last one of that depth starting at or before t.
    stride = n + 1
    key = depth * stride
    key += np.arange(n)
    # Sorted by (depth, start): s is sorted, so a stable sort on depth alone gives that
    # order, and depths are small ints, which numpy's stable sort orders by radix.
    by_key = np.argsort(depth.astype(np.int16 if dmax < 2**15 else np.int64), kind="stable")
    skey = key[by_key]
    qd = np.clip(q_depth, 0, dmax)
    qkey = qd * stride
    qkey += started
    qkey -= 1
    if len(t) > 1 and bool(np.all(t[1:] >= t[:-1])):
        # Queries in time order (a chain's boundaries): ``started`` rises with them, so
        # a stable sort on depth alone puts the keys in order, and a search of sorted
        # keys walks ``skey`` once instead of jumping about it (3-4x faster at 1M).
        by_q = np.argsort(qd.astype(np.int16 if dmax < 2**15 else np.int64), kind="stable")
        k = np.empty_like(qkey)
        k[by_q] = np.searchsorted(skey, qkey[by_q], side="right")
    else:
        k = np.searchsorted(skey, qkey, side="right")
    k -= 1
    cand = by_key[np.clip(k, 0, n - 1)]
    hit = q_depth >= 0
    hit &= k >= 0
    hit &= depth[cand] == qd
    hit &= s[cand] <= t
    hit &= e[cand] > t
    hit &= q_ok
    out[hit] = cand[hit] if order is None else order[cand[hit]]
    return out


def _codes(tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(tid, return_inverse=True)``; by counting when the ids are small
    non-negative ints (callers pass thread codes), which needs no sort."""
    lo, hi = int(tid.min()), int(tid.max())
    if lo < 0 or hi > 4 * len(tid) + 1024:
        threads, code = np.unique(tid, return_inverse=True)
        return threads, code.reshape(-1)
    threads = np.flatnonzero(np.bincount(tid))
    lookup = np.zeros(hi + 1, dtype=np.int64)
    lookup[threads] = np.arange(len(threads))
    return threads, lookup[tid]


def _ordered(s: np.ndarray, e: np.ndarray) -> bool:
    """Whether ranges are sorted by start, longer first on equal starts."""
    if len(s) < 2:
        return True
    a, b = s[:-1], s[1:]
    return bool(np.all((b > a) | ((b == a) & (e[1:] <= e[:-1]))))


def _ranked(
    start: np.ndarray, end: np.ndarray, q_t: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The times replaced by their ranks among all of them: the same order, a short axis."""
    axis = distinct(np.concatenate((start, end, q_t)))
    return (np.searchsorted(axis, start), np.searchsorted(axis, end),
            np.searchsorted(axis, q_t))
