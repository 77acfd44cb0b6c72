"""``columns.ids`` of float columns (an int column with NULLs, as pandas reads it) against
the general path it skips: ``pd.to_numeric``, then finite, below 2**63 and whole."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from traceforge.formats import columns

EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -1.5, 2.0**53, 2.0**53 + 2, -(2.0**53),
         2.0**62, 2.0**63, -(2.0**63), 2.0**63 - 1024, -(2.0**63) + 1024, 2.0**64, 1e300,
         -1e300, 5e-324, 123456789.0, -7.0]


def _oracle(s: pd.Series, fill: int) -> np.ndarray:
    num = pd.to_numeric(s, errors="coerce")
    arr = num.to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(arr) & (np.abs(arr) < 2**63) & (arr == np.floor(arr))
    out: np.ndarray = np.where(ok, arr, fill).astype(np.int64)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(EDGES), st.floats(allow_nan=True),
                          st.integers(-(2**63), 2**63 - 1).map(float)), max_size=60),
       st.sampled_from([-1, 0, 7]))
def test_float_ids_are_the_general_paths(values: list[float], fill: int) -> None:
    s = pd.Series(np.asarray(values, dtype=np.float64))
    got = columns.ids(s, fill)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, _oracle(s, fill))


def test_float_ids_edges() -> None:
    s = pd.Series(np.asarray(EDGES, dtype=np.float64))
    got = columns.ids(s, -1).tolist()
    assert got == _oracle(s, -1).tolist()
    assert got[EDGES.index(2.0**63 - 1024)] == 2**63 - 1024
    assert got[EDGES.index(-(2.0**63))] == -1 and got[EDGES.index(2.0**63)] == -1
