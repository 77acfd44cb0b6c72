"""Pairs of int ids as one key: (pid, tid) threads, (rank, corr) launches.

:func:`pair_codes` numbers distinct pairs by first appearance (hashing them);
:func:`first_rows` and :func:`pair_rows` answer the two questions a launch pairing asks
(where each pair first appears, which row holds a query pair) by sorting the packed
pairs, which arrive nearly in order. Each packs both ids into one int64 where their ranges
allow (:func:`_pair_keys`) and falls back to pandas' MultiIndex where they do not.

A leaf (numpy and pandas): :mod:`traceforge.model` re-exports it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def pair_codes(a: np.ndarray, b: np.ndarray, qa: np.ndarray | None = None,
               qb: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One int per distinct ``(a, b)`` pair, numbered by first appearance, and the code of
    each query pair ``(qa, qb)`` (-1: not among them; none when not given): (pid, tid)
    threads, (rank, corr) launches. ``groupby(sort=False).ngroup()`` numbers the same, at a
    fraction of the cost."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    qa = np.asarray(a[:0] if qa is None else qa, dtype=np.int64)
    qb = np.asarray(b[:0] if qb is None else qb, dtype=np.int64)
    if not len(a):
        return np.zeros(0, dtype=np.int64), np.full(len(qa), -1, dtype=np.int64)
    # Each pair as one int64 (both offset from their minima), hashed once: a tenth
    # of the cost of a MultiIndex on the ~500k op ranges of a large trace.
    packed = _pair_keys(a, b, qa, qb)
    if packed is not None:
        codes, uniq = pd.factorize(packed[0])
        q = pd.Index(uniq).get_indexer(pd.Index(packed[1]))
        return np.asarray(codes, dtype=np.int64), np.asarray(q, dtype=np.int64)
    idx = pd.MultiIndex.from_arrays([a, b])
    uniq = idx.unique()
    codes = uniq.get_indexer(idx)
    qcodes = uniq.get_indexer(pd.MultiIndex.from_arrays([qa, qb]))
    return np.asarray(codes, dtype=np.int64), np.asarray(qcodes, dtype=np.int64)


def _pair_keys(a: np.ndarray, b: np.ndarray, qa: np.ndarray, qb: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray] | None:
    """The pairs ``(a, b)`` (non-empty) and the query pairs as one int64 each, both offset
    from the pairs' minima (a query outside their ranges: -1), or None where the ranges
    do not fit in one int64."""
    a0, b0 = int(a.min()), int(b.min())
    na, nb = int(a.max()) - a0 + 1, int(b.max()) - b0 + 1
    if na * nb >= 2**62:
        return None
    inside = (qa >= a0) & (qa < a0 + na) & (qb >= b0) & (qb < b0 + nb)
    return (a - a0) * nb + (b - b0), np.where(inside, (qa - a0) * nb + (qb - b0), -1)


def first_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The row of each distinct ``(a, b)`` pair's first appearance, ascending: what
    ``np.unique(pair_codes(a, b)[0], return_index=True)[1]`` gives, by one stable sort of
    the packed pairs instead of hashing them (pairs that arrive nearly in order, as
    (rank, corr) launches do, sort in a fraction of the hash's time)."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    packed = _pair_keys(a, b, a[:0], b[:0])
    if packed is None:
        got: np.ndarray = np.unique(pair_codes(a, b)[0], return_index=True)[1]
        return got.astype(np.int64)
    by_key = np.argsort(packed[0], kind="stable")
    keys = packed[0][by_key]
    heads = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    return np.sort(by_key[heads])


def pair_rows(a: np.ndarray, b: np.ndarray, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
    """For pairs ``(a, b)`` that are distinct, the row holding each query pair ``(qa, qb)``
    (-1: none): ``pair_codes(a, b, qa, qb)[1]`` of distinct pairs, by a sort and a search."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    qa, qb = np.asarray(qa, dtype=np.int64), np.asarray(qb, dtype=np.int64)
    if not len(a):
        return np.full(len(qa), -1, dtype=np.int64)
    packed = _pair_keys(a, b, qa, qb)
    if packed is None:
        return pair_codes(a, b, qa, qb)[1]
    key, q = packed
    by_key = np.argsort(key, kind="stable")
    keys = key[by_key]
    at = np.searchsorted(keys, q).clip(0, len(keys) - 1)
    found: np.ndarray = np.where((q >= 0) & (keys[at] == q), by_key[at], -1)
    return found.astype(np.int64)
