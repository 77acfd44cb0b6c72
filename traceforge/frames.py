"""DataFrames whose columns stay as they are given: object arrays of str stay object
(pandas 3 with pyarrow turns them into Arrow strings, seconds each way at 10M rows and
new Python strings at every groupby after), and arrays handed over are not copied
(pandas 3 copies every numpy array assigned to a frame).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def object_frame(columns: dict[str, Any]) -> pd.DataFrame:
    """A DataFrame whose string columns stay numpy object arrays.

    pandas 3 with pyarrow installed turns object arrays of str into Arrow-backed string
    columns; boolean selections of those cost 10-100x a numpy take, and the timeline's
    tables are sliced per step and per device many times.
    """
    out: pd.DataFrame = pd.DataFrame({k: pd.Series(v, dtype=object) if isinstance(v, np.ndarray)
                                      and v.dtype == object else v for k, v in columns.items()})
    return out


def object_series(values: np.ndarray, index: pd.Index | None = None) -> pd.Series:
    """An object array of str as a column that stays one (:func:`object_frame`): at 10M
    activities pandas 3 spends seconds turning it into Arrow strings, and every groupby
    and ``to_numpy`` after that makes new Python strings again."""
    out: pd.Series = pd.Series(values, index=index, dtype=object)
    return out


#: ``pd.concat``'s ``copy=False`` where pandas still copies without it (pandas 3 copies
#: nothing on concat, and deprecates the keyword).
_NO_COPY: dict[str, Any] = ({} if int(pd.__version__.split(".")[0]) >= 3
                            else {"copy": False})


def with_columns(df: pd.DataFrame, columns: dict[str, Any]) -> pd.DataFrame:
    """``df.assign(**columns)`` (a column of the same name replaced in its place, new ones
    appended in order) without copying the arrays given: pandas 3 copies every numpy
    array assigned to a frame (at 10M activities the roofline's 16 columns were 4 s and
    1.2 GB of copies) and turns object arrays of str into Arrow strings. Arrays are
    taken as they are (the caller hands them over), object arrays stay object, Series
    are aligned on ``df``'s index, scalars broadcast."""
    new: dict[str, Any] = {}
    for name, v in columns.items():
        if isinstance(v, pd.Series):
            new[name] = v if v.index.equals(df.index) else v.reindex(df.index)
        elif isinstance(v, np.ndarray):
            new[name] = pd.Series(v, index=df.index, dtype=v.dtype, copy=False)
        else:
            new[name] = v
    added = pd.DataFrame(new, index=df.index, copy=False)
    kept = [c for c in df.columns if c not in new]
    out: pd.DataFrame = pd.concat([df if len(kept) == df.shape[1] else df[kept], added],
                                  axis=1, **_NO_COPY)
    order = [*df.columns, *(c for c in new if c not in df.columns)]
    if list(out.columns) != order:
        out = out[order]
    return out
