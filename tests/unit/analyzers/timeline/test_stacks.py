"""The innermost-range lookup, the pair codes and the distinct values the timeline uses,
each against a brute-force oracle or numpy on random inputs (hypothesis)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as hs

from traceforge.analyzers.timeline.stacks import innermost
from traceforge.model import distinct, first_rows, pair_codes, pair_rows


def _laminar(cands: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The candidates that nest with every one kept before them (disjoint or inside)."""
    kept: list[tuple[int, int]] = []
    for s, e in cands:
        if all(e <= a or s >= b or (a <= s and e <= b) or (s <= a and b <= e)
               for a, b in kept):
            kept.append((s, e))
    return kept


def _oracle(tid: np.ndarray, s: np.ndarray, e: np.ndarray, q_tid: np.ndarray,
            q_t: np.ndarray) -> np.ndarray:
    """The deepest covering range: latest start, then shortest, then the later row."""
    out = np.full(len(q_t), -1, dtype=np.int64)
    for i, (qt, t) in enumerate(zip(q_tid.tolist(), q_t.tolist(), strict=True)):
        cover = [j for j in range(len(s)) if tid[j] == qt and s[j] <= t < e[j]]
        if cover:
            out[i] = max(cover, key=lambda j: (s[j], -e[j], j))
    return out


interval = hs.tuples(hs.integers(0, 30), hs.integers(0, 30)).map(lambda p: (p[0], p[0] + p[1]))


@settings(max_examples=200, deadline=None)
@given(threads=hs.lists(hs.lists(interval, max_size=14), min_size=1, max_size=3),
       tids=hs.sampled_from([(0, 1, 2), (7, -3, 2**40), (5, 5_000_000, 9)]),
       shuffle=hs.randoms(use_true_random=False),
       queries=hs.lists(hs.tuples(hs.integers(0, 3), hs.integers(-2, 95)), max_size=25),
       offset=hs.sampled_from([0, 10**12, 2**61]), by_start=hs.booleans(),
       queries_in_order=hs.booleans())
def test_innermost_matches_the_brute_force_answer(threads: list[list[tuple[int, int]]],
                                                  tids: tuple[int, int, int], shuffle: object,
                                                  queries: list[tuple[int, int]],
                                                  offset: int, by_start: bool,
                                                  queries_in_order: bool) -> None:
    """Nested ranges on up to three threads (ids small, negative or huge), shuffled or
    sorted by start only (equal starts in any order), empty ones and exact duplicates
    included, times near 0 or near 2**61 (where one time axis per thread no longer fits
    in int64), queries in any order or by (thread, time) (a chain's boundaries, searched
    by depth): every query gets the oracle's range."""
    rows = [(tids[k], s + offset, e + offset)
            for k, cands in enumerate(threads) for s, e in _laminar(cands)]
    rows += rows[: len(rows) // 3]  # duplicates
    shuffle.shuffle(rows)  # type: ignore[attr-defined]
    if by_start:
        rows.sort(key=lambda r: r[1])
    tid = np.array([r[0] for r in rows], dtype=np.int64)
    s = np.array([r[1] for r in rows], dtype=np.int64)
    e = np.array([r[2] for r in rows], dtype=np.int64)
    q_tid = np.array([tids[k] if k < 3 else 12345 for k, _ in queries], dtype=np.int64)
    q_t = np.array([t + offset for _, t in queries], dtype=np.int64)
    if queries_in_order:
        by = np.lexsort((q_t, q_tid))
        q_tid, q_t = q_tid[by], q_t[by]
    got = innermost(tid, s, e, q_tid, q_t)
    np.testing.assert_array_equal(got, _oracle(tid, s, e, q_tid, q_t))


def test_innermost_on_equal_starts_in_either_order() -> None:
    """A parent and a child starting together, listed child first (sorted by start, so
    the in-order shortcut must not take them as ordered) or parent first."""
    for order in ([1, 0], [0, 1]):
        s = np.array([0, 0])[order]
        e = np.array([10, 5])[order]  # range 0 is the parent
        got = innermost(np.zeros(2, np.int64), s, e, np.zeros(3, np.int64),
                        np.array([2, 7, 10]))
        child, parent = order.index(1), order.index(0)
        np.testing.assert_array_equal(got, [child, parent, -1])


@settings(max_examples=150, deadline=None)
@given(pairs=hs.lists(hs.tuples(hs.integers(-3, 3), hs.integers(0, 5)), max_size=30),
       queries=hs.lists(hs.tuples(hs.integers(-5, 5), hs.integers(-1, 7)), max_size=20),
       wide=hs.booleans())
def test_pair_codes_number_pairs_as_they_first_appear(pairs: list[tuple[int, int]],
                                                      queries: list[tuple[int, int]],
                                                      wide: bool) -> None:
    """Codes by first appearance, -1 for a query pair not among them; the same with ids
    too far apart to fold into one int64 (the MultiIndex path)."""
    big = 2**60 if wide else 1
    a = np.array([p[0] * big for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    qa = np.array([q[0] * big for q in queries], dtype=np.int64)
    qb = np.array([q[1] for q in queries], dtype=np.int64)
    codes, qcodes = pair_codes(a, b, qa, qb)
    first: dict[tuple[int, int], int] = {}
    want = [first.setdefault((int(x), int(y)), len(first)) for x, y in zip(a, b, strict=True)]
    np.testing.assert_array_equal(codes, np.array(want, dtype=np.int64))
    np.testing.assert_array_equal(
        qcodes, np.array([first.get((int(x), int(y)), -1) for x, y in zip(qa, qb, strict=True)],
                         dtype=np.int64))
    assert pd.api.types.is_integer_dtype(codes.dtype)


@settings(max_examples=150, deadline=None)
@given(pairs=hs.lists(hs.tuples(hs.integers(-3, 3), hs.integers(0, 5)), max_size=30),
       queries=hs.lists(hs.tuples(hs.integers(-5, 5), hs.integers(-1, 7)), max_size=20),
       wide=hs.booleans())
def test_first_rows_and_pair_rows_are_pair_codes_by_sorting(
        pairs: list[tuple[int, int]], queries: list[tuple[int, int]], wide: bool) -> None:
    """first_rows: where each pair first appears, as np.unique of pair_codes gives it;
    pair_rows: pair_codes' query codes over distinct pairs (their rows); both with ids too
    far apart to pack (the fallback)."""
    big = 2**60 if wide else 1
    a = np.array([p[0] * big for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    qa = np.array([q[0] * big for q in queries], dtype=np.int64)
    qb = np.array([q[1] for q in queries], dtype=np.int64)
    codes, _ = pair_codes(a, b)
    want = np.unique(codes, return_index=True)[1] if len(codes) else np.zeros(0, np.int64)
    np.testing.assert_array_equal(first_rows(a, b), want)
    da, db = a[want], b[want]  # distinct pairs, in order of appearance
    np.testing.assert_array_equal(pair_rows(da, db, qa, qb), pair_codes(da, db, qa, qb)[1])
    assert first_rows(a, b).dtype == pair_rows(da, db, qa, qb).dtype == np.int64


@settings(max_examples=150, deadline=None)
@given(threads=hs.lists(hs.lists(interval, max_size=10), min_size=1, max_size=3),
       offsets=hs.lists(hs.sampled_from([-(2**62), -1, 0, 1_700_000_000_000_000, 2**62]),
                        min_size=3, max_size=3),
       queries=hs.lists(hs.tuples(hs.integers(0, 2), hs.integers(-2, 40),
                                  hs.sampled_from([-(2**62), -1, 0, 1_700_000_000_000_000,
                                                   2**62])), max_size=20))
def test_innermost_with_wild_timestamps(threads: list[list[tuple[int, int]]],
                                        offsets: list[int],
                                        queries: list[tuple[int, int, int]]) -> None:
    """Threads whose times lie anywhere in int64 (-2**62, -1 beside epoch microseconds,
    2**62) and a stray range at ts=-1 on the first thread: the oracle's answer, with no
    recursion and no overflow (a span x depth past 2**62 once overflowed and recursed)."""
    rows = [(k, s + offsets[k], e + offsets[k])
            for k, cands in enumerate(threads) for s, e in _laminar(cands)]
    if offsets[0] >= 0:
        rows.append((0, -1, 0))
    tid = np.array([r[0] for r in rows], dtype=np.int64)
    s = np.array([r[1] for r in rows], dtype=np.int64)
    e = np.array([r[2] for r in rows], dtype=np.int64)
    q_tid = np.array([k for k, _, _ in queries], dtype=np.int64)
    q_t = np.array([t + off for _, t, off in queries], dtype=np.int64)
    np.testing.assert_array_equal(innermost(tid, s, e, q_tid, q_t),
                                  _oracle(tid, s, e, q_tid, q_t))


@settings(max_examples=150, deadline=None)
@given(values=hs.lists(hs.integers(-(2**63), 2**63 - 1), max_size=40),
       narrow=hs.booleans())
def test_distinct_is_np_unique(values: list[int], narrow: bool) -> None:
    """``distinct`` (a sort, for numpy 2.3+'s slow hash table) = ``np.unique``: ints of
    every size, int8, empty, one value, repeats; the same dtype back."""
    a = np.array(values, dtype=np.int64)
    if narrow:
        a = (a % 100).astype(np.int8)
    got = distinct(a)
    np.testing.assert_array_equal(got, np.unique(a))
    assert got.dtype == a.dtype


def test_distinct_other_kinds() -> None:
    """Strings (object), 2-D input (flattened), bools, and floats (NaNs one value, as
    ``np.unique`` has them) give ``np.unique``'s answer; the input is not changed."""
    names = np.array(["b", "a", "b", "c", "a"], dtype=object)
    np.testing.assert_array_equal(distinct(names), np.unique(names))
    grid = np.array([[3, 1], [1, 2]])
    np.testing.assert_array_equal(distinct(grid), [1, 2, 3])
    assert grid.tolist() == [[3, 1], [1, 2]]
    np.testing.assert_array_equal(distinct(np.array([True, False, True])), [False, True])
    f = np.array([2.0, np.nan, 1.0, np.nan])
    np.testing.assert_array_equal(distinct(f), np.unique(f))
    assert len(distinct(f)) == 3
    assert distinct(np.zeros(0, dtype=np.int64)).tolist() == []
