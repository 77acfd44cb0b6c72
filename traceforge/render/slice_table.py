"""Chrome ``X`` events held as columns: the slices ``annotate`` draws (idle gaps, step
windows, top-kernel repeats, critical-path pieces).

A trace of a million tiny kernels has a million idle gaps and two million path pieces;
as one dict per event (and one per args) they took gigabytes before a byte was written.
A :class:`SliceTable` keeps them as arrays, and :class:`~traceforge.render.chrome_json.
ChromeSource` writes them after the trace's own rows, a batch at a time, exactly as the
dicts were written: :meth:`SliceTable.events` gives those dicts for any rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceforge.model import ArgColumn as ArgColumn  # (defined with the args providers)


@dataclass(eq=False)
class SliceTable:
    """``X`` events of one category as columns: ``pid``, ``tid``, ``ts_ns``/``dur_ns``
    (whole ns, as the trace's times), ``names[name_codes[i]]`` is slice i's name, and
    ``args`` its args in this order (a slice without a column's value skips that key)."""

    cat: str
    pid: np.ndarray
    tid: np.ndarray
    ts_ns: np.ndarray
    dur_ns: np.ndarray
    name_codes: np.ndarray
    names: list[str]
    args: Sequence[ArgColumn] = ()

    def __post_init__(self) -> None:
        n = len(self.ts_ns)
        for col in (self.pid, self.tid, self.dur_ns, self.name_codes,
                    *(a.values for a in self.args)):
            if len(col) != n:
                raise ValueError(f"a column of {len(col)} rows in a table of {n} slices")

    @property
    def n(self) -> int:
        return len(self.ts_ns)

    def args_of(self, rows: np.ndarray) -> list[dict[str, Any]]:
        """The args dicts of slices ``rows`` (positions), keys in column order."""
        out: list[dict[str, Any]] = [{} for _ in range(len(rows))]
        for col in self.args:
            at = np.arange(len(rows)) if col.present is None else \
                np.flatnonzero(col.present[rows])
            key = col.key
            for i, v in zip(at.tolist(), col.values[rows[at]].tolist(), strict=True):
                out[i][key] = v
        return out

    def events(self, rows: np.ndarray | None = None) -> list[dict[str, Any]]:
        """Slices ``rows`` (all by default) as the Chrome events they stand for."""
        r = np.arange(self.n) if rows is None else np.asarray(rows, dtype=np.int64)
        names = self.names
        return [{"ph": "X", "cat": self.cat, "name": names[c], "pid": p, "tid": t,
                 "ts": ts / 1000.0, "dur": d / 1000.0, "args": a}
                for c, p, t, ts, d, a in zip(
                    self.name_codes[r].tolist(), self.pid[r].tolist(), self.tid[r].tolist(),
                    self.ts_ns[r].tolist(), self.dur_ns[r].tolist(), self.args_of(r),
                    strict=True)]


def objects(items: list[Any]) -> np.ndarray:
    """``items`` as an object array (bytes never made a fixed-width array of bytes, dicts
    stay dicts)."""
    return np.fromiter(items, dtype=object, count=len(items))


def texts(values: Sequence[Any]) -> np.ndarray:
    """``str`` of each value, as an object array (``None`` and NaN as ``astype(str)``
    writes them)."""
    return np.fromiter(map(str, values), dtype=object, count=len(values))


def labelled(values: Sequence[Any] | np.ndarray) -> tuple[np.ndarray, list[str]]:
    """(codes, names) of the strings ``values``, names in order of first use."""
    import pandas as pd

    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    codes, uniq = pd.factorize(arr, sort=False)
    return np.asarray(codes, dtype=np.int64), [str(u) for u in uniq.tolist()]


def column(key: str, values: Any, present: Any = None) -> ArgColumn:
    """An :class:`ArgColumn` from array-likes (``present``: a bool mask, or None)."""
    return ArgColumn(key, np.asarray(values),
                     None if present is None else np.asarray(present, dtype=bool))
