"""The machine formats' schema: what a column holds in JSON and CSV, by its name.

Analyzers may keep a time in whatever unit suits them (``total_us``, ``step_ms``); JSON
and CSV always carry times as exact integer nanoseconds, so one rule serves every verb
and every column added later:

- ``NAME_ns`` (and the model's ``ts``, ``dur``, ``end``): integer nanoseconds, as is;
- ``NAME_us`` / ``NAME_ms``: written as ``NAME_ns``, integer nanoseconds (the value times
  1,000 or 1,000,000, rounded to the nanosecond, the traces' resolution); ``-1``
  (unknown) stays ``-1``, a missing value is null (JSON) or empty (CSV);
- a float column holding only whole numbers (a count kept as float, e.g. ``calls`` after
  a sum): integers;
- percentages (``pct``, ``NAME_pct``), ratios, rates (``NAME_per_s``, ``tflops``, ``tb_s``)
  and everything else: as computed, full precision.

Terminal tables, Markdown and HTML show the same columns in humane units (see
:mod:`traceforge.render.frame`).
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd

#: Suffixes of derived time columns and their factor to nanoseconds.
TIME_SUFFIXES = {"_us": 1_000, "_ms": 1_000_000}

_FRACTIONS = ("pct", "ratio", "share", "speedup")
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")


def is_fraction_column(name: str) -> bool:
    """Whether a column holds percentages or ratios (always shown with their decimals)."""
    return name in _FRACTIONS or name.endswith(tuple(f"_{f}" for f in _FRACTIONS))


@functools.lru_cache(maxsize=8192)  # the same column names, once per row of a document
def ns_name(name: str) -> str | None:
    """``total_us`` -> ``total_ns``; None for a column that is not a derived time (or a
    name that is no lower-case identifier: a kernel's name used as a key stays as is)."""
    if not _IDENTIFIER.fullmatch(name):
        return None
    for suffix in TIME_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)] + "_ns"
    return None


def _as_ns(s: pd.Series, factor: int) -> pd.Series | None:
    vals = pd.to_numeric(s, errors="coerce")
    if vals.isna().sum() > s.isna().sum():  # not numbers after all
        return None
    f = vals.to_numpy(dtype=float, na_value=np.nan)
    ns = np.where(f == -1, -1.0, np.round(f * factor))
    if np.nanmax(np.abs(ns), initial=0.0) >= 2.0**63:
        return None
    out = pd.Series(ns, index=s.index).astype("Int64")
    return out


def machine_frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as JSON and CSV carry it: derived times as integer ``*_ns``, whole-number
    float counts as integers, everything else unchanged."""
    cols: dict[str, pd.Series] = {}
    names = {str(c) for c in df.columns}
    for c in df.columns:
        name, s = str(c), df[c]
        target = ns_name(name)
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if target is not None and numeric and target not in names and target not in cols:
            conv = _as_ns(s, TIME_SUFFIXES[name[-3:]])
            if conv is not None:
                cols[target] = conv
                continue
        if pd.api.types.is_float_dtype(s) and not is_fraction_column(name):
            f = s.to_numpy(dtype=float, na_value=np.nan)
            finite = f[np.isfinite(f)]
            if (len(finite) and np.all(finite == np.round(finite))
                    and float(np.abs(finite).max()) < 2.0**53):
                cols[name] = s.astype("Int64")
                continue
        cols[name] = s
    out = pd.DataFrame(cols, index=df.index)
    out.attrs = dict(df.attrs)
    frame: pd.DataFrame = out
    return frame
