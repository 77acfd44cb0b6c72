"""``pftrace_layout.last_reaching`` (where a flow point binds: the walk back from the last
slice starting before it to one that still contains it) against that walk, a step at a
time, at block sizes that make every level of it run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceforge.render import pftrace_layout
from traceforge.render.pftrace_layout import last_reaching


def _walk(ends: np.ndarray, q: np.ndarray, t: np.ndarray, lo: np.ndarray) -> list[int]:
    out = []
    for qi, ti, li in zip(q.tolist(), t.tolist(), lo.tolist(), strict=True):
        p = qi
        while p >= li and ends[p] < ti:
            p -= 1
        out.append(p if p >= li else -1)
    return out


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from([2, 3, 4, 32]))
def test_last_reaching_is_the_walk(data: st.DataObject, block: int) -> None:
    n = data.draw(st.integers(1, 120))
    ends = np.asarray(data.draw(st.lists(st.integers(0, 50), min_size=n, max_size=n)),
                      dtype=np.int64)
    k = data.draw(st.integers(0, 40))
    lo = np.asarray(data.draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k)),
                    dtype=np.int64)
    q = np.asarray([data.draw(st.integers(-1, n - 1)) for _ in range(k)], dtype=np.int64)
    t = np.asarray(data.draw(st.lists(st.integers(-5, 60), min_size=k, max_size=k)),
                   dtype=np.int64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pftrace_layout, "BLOCK", block)
        got = last_reaching(ends, q, t, lo)
    assert got.tolist() == _walk(ends, q, t, lo)


def test_a_long_walk_is_short() -> None:
    # One long slice, then 200k short ones that end before the points: each point walks
    # back to the long slice (a step at a time, 200k steps for all of them together).
    n = 200_001
    ends = np.concatenate([[10**9], np.arange(1, n)]).astype(np.int64)
    q = np.full(1000, n - 1, dtype=np.int64)
    t = np.full(1000, 10**7, dtype=np.int64)
    got = last_reaching(ends, q, t, np.zeros(1000, dtype=np.int64))
    assert (got == 0).all()
