"""lex_order against np.lexsort, its oracle: the same permutation for any int keys, where
the two major keys pack into one int64, where they do not, and where ties abound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceforge.ordering import lex_order

SPREADS = [1, 3, 10, 10**6, 2**30, 2**31, 2**40, 2**62, 2**63 - 1]


@st.composite
def key_sets(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    n = draw(st.integers(0, 300))
    keys = []
    for _ in range(draw(st.integers(1, 5))):
        spread = draw(st.sampled_from(SPREADS))
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        if spread >= 2**62:  # wild values: no packing fits, extremes of int64
            k = rng.choice(np.array([-(2**63), -1, 0, 1, 2**63 - 1], dtype=np.int64), n)
        else:
            k = rng.integers(-spread, spread + 1, n)
        kind = draw(st.sampled_from(["int64", "int32", "bool", "uint64"]))
        if kind == "bool":
            k = k > 0
        elif kind == "uint64":
            k = (k - k.min() if n else k).astype(np.uint64)
        else:
            k = k.astype(kind)
        keys.append(k)
    return tuple(keys)


@settings(max_examples=300, deadline=None)
@given(key_sets())
def test_the_order_lexsort_gives(keys: tuple[np.ndarray, ...]) -> None:
    assert (lex_order(keys) == np.lexsort(keys)).all()


@pytest.mark.parametrize("ties", ["few", "some", "many"])
def test_large_keys_with_few_and_many_ties(ties: str) -> None:
    """A trace's shape (thread, time in ns, a tie rule; whole ties kept in input order),
    its times from a wide range (few ties: one packed sort), a narrower one (thousands of
    runs sorted by the rest) or a narrow one (ties everywhere: lexsort)."""
    rng = np.random.default_rng(7)
    n = 200_000
    th = rng.integers(0, 8, n)
    t = rng.integers(0, {"few": 10**10, "some": 10**6, "many": 50}[ties], n)
    tie = rng.integers(-3, 3, n)
    keys = (tie, t, th)
    assert (lex_order(keys) == np.lexsort(keys)).all()


def test_uint64_beyond_int64_and_floats_go_to_lexsort() -> None:
    big = np.array([2**64 - 1, 0, 2**63, 5], dtype=np.uint64)
    assert (lex_order((np.arange(4), big)) == np.lexsort((np.arange(4), big))).all()
    f = np.array([0.5, -1.0, 0.5, 2.0])
    assert (lex_order((np.arange(4), f)) == np.lexsort((np.arange(4), f))).all()
    assert len(lex_order((np.zeros(0, dtype=np.int64),))) == 0
