"""Source columns as int64: ids and times, for the readers that build frames (SQLite, CSV).

A damaged or hand-edited file puts anything in a column: NULL, text, a float, a number
past 64 bits. ``astype(np.int64)`` then raises pandas' or numpy's own errors from deep
inside a reader. Ids fall back to a default (an unknown stream is still an event);
times cannot (an event without a start is no event), so they are a one-line error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from traceforge.errors import TraceFormatError

#: Largest |time| in ns: the difference of two times must fit in int64.
MAX_NS = 2**62
_I64 = 2**63


def ids(s: pd.Series, fill: int = -1) -> np.ndarray:
    """An id column as int64; a cell that holds no 64-bit integer becomes ``fill``."""
    if s.dtype.kind == "i":
        exact: np.ndarray = s.to_numpy(dtype=np.int64)
        return exact
    if s.dtype == np.float64:  # (an int column with NULLs, as pandas reads it)
        return _float_ids(s.to_numpy(), fill)
    num = pd.to_numeric(s, errors="coerce")
    if num.dtype.kind == "u":
        raw = num.to_numpy(dtype=np.uint64)
        small: np.ndarray = np.where(raw < _I64, raw, fill).astype(np.int64)
        return small
    if num.dtype.kind == "i":
        ints: np.ndarray = num.to_numpy(dtype=np.int64)
        return ints
    arr = num.to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(arr) & (np.abs(arr) < _I64) & (arr == np.floor(arr))
    out: np.ndarray = np.where(ok, arr, fill).astype(np.int64)
    return out


def _float_ids(arr: np.ndarray, fill: int) -> np.ndarray:
    """:func:`ids` of float64 values in two passes: a value is an id where it converts
    to int64 and back unchanged (NaN, infinities, fractions and values of 2**63 or more
    do not; the cast's result for those, whatever the platform makes it, is discarded)."""
    with np.errstate(invalid="ignore"):
        out = arr.astype(np.int64)
    back = out.astype(np.float64)
    ok = (back == arr) & (out != np.iinfo(np.int64).min) & (out != np.iinfo(np.int64).max)
    out[~ok] = fill
    return out


def times(path: Path, s: pd.Series, what: str) -> np.ndarray:
    """A time column (ns) as int64; a missing, non-numeric or absurd cell is an error."""
    num = pd.to_numeric(s, errors="coerce")
    if num.dtype.kind == "i" and (num.abs() <= MAX_NS).all():
        exact: np.ndarray = num.to_numpy(dtype=np.int64)
        return exact
    arr = num.to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(arr) <= MAX_NS)  # NaN, inf and out of range alike
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(path, f"an event has a missing or invalid {what} "
                               f"({str(s.iloc[i])[:40]!r})")
    out: np.ndarray = np.rint(arr).astype(np.int64)
    return out


def check_intervals(path: Path, start: np.ndarray, end: np.ndarray, names: pd.Series,
                    check: np.ndarray | None = None) -> None:
    """The one policy of every reader for invalid intervals: refuse the file, one line.

    An event that ends before it starts, or starts before 0 on a clock that starts at 0
    (nsys, rocprof, rocpd and Perfetto times are counters; Kineto's ``ts`` may lie
    anywhere), cannot be given a duration without guessing: clipping it to 0 µs or
    dropping it would change every total silently. So the read fails naming the first such
    event and counting them (a missing end is already an error of :func:`times`; the
    Kineto reader refuses a negative ``dur`` the same way). ``check`` limits the rows
    checked (e.g. not NVTX marks).
    """
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    reverse = end < start
    negative = start < 0
    if check is not None:
        reverse &= check
        negative &= check
    bad = reverse | negative
    n = int(bad.sum())
    if n == 0:
        return
    i = int(np.flatnonzero(bad)[0])
    what = "ends before it starts" if reverse[i] else "starts before 0"
    name = str(names.iloc[i])[:80] if i < len(names) else ""
    raise TraceFormatError(
        path, f"event {i} ({name!r}) {what}: {n} of {len(start)} events have an invalid "
        "interval (end before start, or a negative start); traceforge refuses rather than "
        "guess their times")


def as_int(v: object, default: int | None = None) -> int | None:
    """One SQL cell as a Python int in the 64-bit range, or ``default`` when it holds none
    (NULL, text, a blob, a fraction, a number too large)."""
    if isinstance(v, int) and not isinstance(v, bool):
        # Exact: nsys's utcEpochNs (~1.8e18) is past float's 2**53 and failed f == i.
        return v if -_I64 <= v < _I64 else default
    if isinstance(v, (float, str, bytes)):
        try:
            f = float(v)
            i = int(v) if not isinstance(v, float) else int(f)
        except (ValueError, OverflowError):
            return default
        if f == i and -_I64 <= i < _I64:
            return i
    return default
