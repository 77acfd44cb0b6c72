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
from traceforge.formats.kineto_columns import (
    EVENT_CODES,
    ON_DEVICE,
    Codes,
    Columns,
    codes_of,
    columns,
    kind_codes,
    pair_ids,
    split_ids,
)
from traceforge.formats.kineto_schema import FLOW_PHASES, PH_CODE
from traceforge.model import KINDS

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
    n = len(pairs)
    distinct = codes_of(pairs, n)
    ids, at, odd = pair_ids(distinct, distinct.codes)
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
        pair_ids(codes_of([(1, 2**64)], 1), np.zeros(1, np.int64))


def per_field(events: list[Any], kinds: list[str] | None) -> Columns:
    """The columns as the reader built them before it keyed events (b6b45fc): one pass
    per field, names and ids over the kept rows."""
    n = len(events)
    ph = np.array([PH_CODE.get(e.ph, -1) for e in events], dtype=np.int8)
    cat = codes_of([e.cat for e in events], n)
    kind = kind_codes(cat.values)[cat.codes]
    keep = np.isin(ph, EVENT_CODES)
    if kinds is not None:
        keep &= np.isin(kind, [KINDS.index(k) for k in kinds])
    local = np.flatnonzero(keep)
    evs = [events[i] for i in local]
    m = len(evs)
    flat, at, odd = split_ids([v for e in evs for v in (e.pid, e.tid)])
    ints = np.full((5, m), -1, dtype=np.int64)
    for r, e in enumerate(evs):
        ints[[0, 1, 4], r] = e.args.ext, e.args.correlation, e.args.graph
        if kind[local[r]] in ON_DEVICE:
            ints[[2, 3], r] = e.args.stream, e.args.device
    flow_at = [i for i, e in enumerate(events) if e.ph in FLOW_PHASES and e.cat != "ac2g"]
    return Columns(
        n=n, has_phase=any(e.ph for e in events), ph=ph,
        ts_us=np.array([e.ts for e in events], dtype=float),
        dur_us=np.array([e.dur for e in events], dtype=float),
        cat=cat, kept=local, name=codes_of([e.name for e in evs], m),
        pidtid=flat.reshape(m, 2).T, odd_row=at // 2, odd_col=at % 2, odd=odd, ints=ints,
        meta=[e for e in events if e.ph == "M"], flows=[events[i] for i in flow_at],
        flow_at=np.array(flow_at, dtype=np.int64))


def same_columns(a: Columns, b: Columns) -> None:
    for field in a.__dataclass_fields__:
        x, y = getattr(a, field), getattr(b, field)
        if isinstance(x, Codes):
            assert (x.codes.tolist(), x.values) == (y.codes.tolist(), y.values), field
        elif isinstance(x, np.ndarray):
            assert x.shape == y.shape and np.array_equal(x, y, equal_nan=True), field
        else:
            assert x == y, field


EVENTS = st.builds(
    SimpleNamespace,
    ph=st.sampled_from(["X", "i", "B", "E", "M", "s", "f", "t", "C", "", "Q"]),
    cat=st.sampled_from(["kernel", "cpu_op", "ac2g", "gpu_memcpy", "cuda_runtime",
                         "gpu_user_annotation", "", "Odd"]),
    name=st.sampled_from(["a", "b", "aten::mm", ""]),
    pid=st.one_of(st.integers(0, 3), st.just("Spans")),
    tid=st.one_of(st.integers(0, 3), st.just("7")),
    ts=st.floats(0, 1e6), dur=st.one_of(st.floats(0, 1e3), st.just(float("nan"))),
    args=st.builds(SimpleNamespace, ext=st.integers(-1, 9), correlation=st.integers(-1, 9),
                   graph=st.integers(-1, 2), stream=st.integers(-1, 9),
                   device=st.integers(-1, 1)),
)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(EVENTS, max_size=60),
       kinds=st.one_of(st.none(), st.just(["kernel", "memcpy"]), st.just(["cpu_op"])))
def test_keyed_columns_equal_a_pass_per_field(events: list[Any], kinds: list[str] | None
                                              ) -> None:
    """Columns worked out per distinct (ph, cat, name, pid, tid) are those of a pass per
    field: codes in the same first-appearance order, the same kept rows, ids and flows."""
    same_columns(columns(events, kinds), per_field(events, kinds))
