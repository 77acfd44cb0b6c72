"""Interval algebra against a brute-force oracle: a boolean array over a small time grid."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from traceforge.analyzers.timeline import intervals as iv

GRID = 60
spans = st.lists(st.tuples(st.integers(0, GRID), st.integers(0, 20)), max_size=12)


def _set(xs: list[tuple[int, int]]) -> np.ndarray:
    return iv.merge(np.array([a for a, _ in xs], dtype=np.int64),
                    np.array([a + d for a, d in xs], dtype=np.int64))


def _mask(xs: list[tuple[int, int]]) -> np.ndarray:
    m = np.zeros(GRID + 21, dtype=bool)
    for a, d in xs:
        m[a:a + d] = True
    return m


@settings(max_examples=200, deadline=None)
@given(spans, spans)
def test_ops_match_brute_force(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    sa, sb = _set(a), _set(b)
    ma, mb = _mask(a), _mask(b)
    assert iv.total(sa) == ma.sum()
    assert iv.total(iv.union(sa, sb)) == (ma | mb).sum()
    assert iv.total(iv.intersect(sa, sb)) == (ma & mb).sum()
    assert iv.total(iv.difference(sa, sb)) == (ma & ~mb).sum()
    assert iv.total_within(sa, 10, 30) == ma[10:30].sum()


@settings(max_examples=200, deadline=None)
@given(spans, spans)
def test_properties(comm: list[tuple[int, int]], comp: list[tuple[int, int]]) -> None:
    c, p = _set(comm), _set(comp)
    over = iv.total(iv.intersect(c, p))
    assert over <= min(iv.total(c), iv.total(p))
    busy = iv.union(c, p)
    lo, hi = 0, GRID + 21
    assert iv.total_within(busy, lo, hi) + iv.total(iv.gaps(busy, lo, hi)) == hi - lo
    for s in (busy, iv.intersect(c, p), iv.difference(c, p)):  # sorted, disjoint, non-empty
        assert (s[:, 1] > s[:, 0]).all()
        assert (s[1:, 0] > s[:-1, 1]).all()


@given(spans, st.randoms())
def test_union_is_order_independent(xs: list[tuple[int, int]], rnd: object) -> None:
    ys = list(xs)
    rnd.shuffle(ys)  # type: ignore[attr-defined]
    assert np.array_equal(_set(xs), _set(ys))
    half = len(xs) // 2
    assert np.array_equal(iv.union(_set(xs[:half]), _set(xs[half:])), _set(xs))


def test_touching_intervals_join() -> None:
    assert iv.merge(np.array([0, 5]), np.array([5, 8])).tolist() == [[0, 8]]


@settings(max_examples=200, deadline=None)
@given(spans, spans, st.lists(st.integers(0, GRID + 20), max_size=8))
def test_ops_on_sets_with_touching_rows(a: list[tuple[int, int]], b: list[tuple[int, int]],
                                        cuts: list[int]) -> None:
    """The sweep merges both sets' sorted boundaries (no sort); a set cut into touching
    rows (``split_at``: not what ``merge`` makes) is merged first and gives the same."""
    sa, sb = _set(a), _set(b)
    cut = iv.split_at(sa, np.array(sorted(set(cuts)), dtype=np.int64))
    def norm(s: np.ndarray) -> np.ndarray:  # (an empty side returns the other as it is)
        return iv.merge(s[:, 0], s[:, 1])

    for op in (iv.union, iv.intersect, iv.difference):
        assert np.array_equal(norm(op(cut, sb)), op(sa, sb)), op
        assert np.array_equal(norm(op(sb, cut)), op(sb, sa)), op
    ma, mb = _mask(a), _mask(b)
    assert iv.total(iv.intersect(cut, sb)) == (ma & mb).sum()
