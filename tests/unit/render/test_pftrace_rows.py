"""Arg columns encoded a batch at a time (``render.pftrace_rows``) are byte for byte each
row's annotations one at a time; and the columns of a row's source args, ids and tags
(``render.row_columns``) give exactly the dict built key by key, or say they do not."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from traceforge.model import ArgColumn
from traceforge.render.pftrace_packets import PacketEncoder
from traceforge.render.pftrace_rows import column_rows
from traceforge.render.row_columns import row_columns

_VALUES = {
    np.int64: st.integers(-(2**63), 2**63 - 1),
    np.float64: st.one_of(st.floats(allow_nan=True),
                          st.sampled_from([0.0, -0.0, np.inf, -np.inf, 5e-324])),
    object: st.one_of(st.text(max_size=5), st.booleans(), st.integers(-(2**70), 2**70),
                      st.floats(), st.lists(st.integers(0, 3), max_size=2)),
}
#: Short keys, and long ones whose annotations need a longer frame.
_KEYS = ["a", "gridX", "registersPerThread", "k" * 116, "x" * 120, "y" * 200]


def _column(data: st.DataObject, key: str, n: int) -> ArgColumn:
    dtype = data.draw(st.sampled_from([np.int64, np.float64, object]))
    cells = data.draw(st.lists(_VALUES[dtype], min_size=n, max_size=n))
    values = np.empty(n, dtype=object)
    for i, v in enumerate(cells):
        values[i] = v
    if dtype is not object:
        values = values.astype(dtype)
    present = (None if data.draw(st.booleans()) else
               np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)),
                          dtype=bool))
    return ArgColumn(key, values, present)


def _dicts(cols: list[ArgColumn], rows: np.ndarray) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in rows.tolist():
        d: dict[str, Any] = {}
        for c in cols:
            if c.present is None or c.present[r]:
                v = c.values[r]
                d[c.key] = v.item() if isinstance(v, np.generic) else v
        out.append(d)
    return out


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_rows_of_columns_are_their_annotations_one_at_a_time(data: st.DataObject) -> None:
    """Every int64 and double, text, bools, big and small Python ints, lists; keys short
    and long enough for a longer frame; rows without any value; one key split over two
    columns whose rows do not overlap (whole numbers beside reals, as a reader gives a
    float column)."""
    n = data.draw(st.integers(0, 12))
    keys = data.draw(st.lists(st.sampled_from(_KEYS), unique=True, max_size=5))
    cols = [_column(data, k, n) for k in keys]
    if n and data.draw(st.booleans()):
        split = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        cols += [ArgColumn("split", np.arange(n, dtype=np.int64) - 3, split),
                 ArgColumn("split", np.linspace(-1.5, 2.5, n), ~split)]
    rows = np.asarray(data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=15))
                      if n else [], dtype=np.int64)
    w = PacketEncoder()
    want = [b"".join(w.annotation(k, v) for k, v in d.items()) for d in _dicts(cols, rows)]
    assert column_rows(PacketEncoder(), cols, rows) == want
    # (the encoder's own entry point, and again once its key and value caches are warm)
    assert w.column_annotations(cols, rows) == want
    assert w.column_annotations(cols, rows) == want


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_columns_with_ids_and_tags_are_the_dict_or_say_not(data: st.DataObject) -> None:
    """A row's source args, then its ids set (where >= 0), then its tags set, as a dict
    gets them: the columns give that dict wherever they claim a row, and claim every row
    where no id or tag sets a key the row already holds."""
    n = data.draw(st.integers(1, 10))
    names = ["grid", "correlation", "stream", "tag", "class"]
    own = [_column(data, k, n) for k in
           data.draw(st.lists(st.sampled_from(names), unique=True, max_size=3))]
    ids = [(k, np.asarray(data.draw(st.lists(st.integers(-2, 5), min_size=n, max_size=n)),
                          dtype=np.int64))
           for k in data.draw(st.lists(st.sampled_from(["correlation", "stream"]),
                                       unique=True, max_size=2))]
    tags = [_column(data, k, n) for k in
            data.draw(st.lists(st.sampled_from(names), unique=True, max_size=3))]
    cols, ok = row_columns(own, ids, tags, n)
    rows = np.arange(n)
    built = _dicts(own, rows)
    clash = np.zeros(n, dtype=bool)
    for r, d in enumerate(built):
        for k, v in ids:
            if v[r] >= 0:
                clash[r] |= k in d
                d[k] = int(v[r])
        for t in tags:
            if t.present is None or t.present[r]:
                clash[r] |= t.key in d
                x = t.values[r]
                d[t.key] = x.item() if isinstance(x, np.generic) else x
    assert ok.tolist() == (~clash).tolist()
    got = _dicts(cols, rows)
    for r in np.flatnonzero(ok).tolist():
        assert repr(got[r]) == repr(built[r])
