"""The Kineto reader's per-event columns, against plain-Python oracles."""

from __future__ import annotations

from itertools import chain
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceforge.formats.chrome import _Ids
from traceforge.formats.kineto_columns import pair_ids, split_ids

#: Ids as msgspec and the lenient decode hand them over: ints (``True`` is one, and equal
#: to 1 as a dict key), numeric and other strings, ints near and past 64 bits.
IDS = st.one_of(
    st.integers(-3, 3), st.sampled_from([True, 2**40, -(2**63), 2**63 - 1]),
    st.sampled_from(["Spans", "Traces", "7", " 5", "1_000", "-3", "", "123456789012345678901"]),
)


def numbered(ids: np.ndarray, at: np.ndarray, odd: Any) -> tuple[np.ndarray, dict[str, int]]:
    """The ids as the reader gives them: values that are not ints numbered in order."""
    names = _Ids()
    out = ids.copy()
    out[at % 2, at // 2] = names.numbers(odd)
    return out, names.names


@settings(max_examples=300, deadline=None)
@given(pairs=st.lists(st.tuples(IDS, IDS), max_size=40))
def test_pair_ids_number_ids_as_split_ids_of_every_pid_and_tid(
        pairs: list[tuple[Any, Any]]) -> None:
    """Worked out per distinct (pid, tid) pair, the ids and the names of string ids are
    those of :func:`split_ids` over every event's pid then tid (the code before)."""
    events = [SimpleNamespace(pid=p, tid=t) for p, t in pairs]
    n = len(events)
    ids, at, odd = pair_ids(events, n)
    assert ids.shape == (2, n) and ids.dtype == np.int64 and ids.flags.c_contiguous
    assert list(at) == sorted(at)
    flat, oracle_at, oracle_odd = split_ids(list(chain.from_iterable(pairs)))
    got, got_names = numbered(ids, at, odd)
    want, want_names = numbered(flat.reshape(n, 2).T, oracle_at, oracle_odd)
    assert got.tolist() == want.tolist()
    assert got_names == want_names
    if not any(v is True for pair in pairs for v in pair):
        assert (at.tolist(), odd.values) == (oracle_at.tolist(), oracle_odd.values)


def test_pair_ids_past_64_bits_overflow() -> None:
    with pytest.raises(OverflowError):
        pair_ids([SimpleNamespace(pid=1, tid=2**64)], 1)
