"""Args providers of the readers that build a frame (the SQLite readers): a row's args are
the cells of its args columns that hold a value.

:class:`ColumnArgs` holds one array per args column over all rows. :class:`PartArgs` holds
each source table's columns over that table's rows only (an nsys export's 2.9M API calls
carry no kernel grid, and a column per arg over every row cost ~1 GB and the wide frame's
concat and sort). Both give the same dicts: keys in the order of the reader's columns,
values by one rule (:func:`arg_columns`). The columnar cache stores :class:`ColumnArgs`' arrays
as they are and :class:`PartArgs`' tables' columns run-end encoded; :func:`args_from_cache`
rebuilds either.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from traceforge.args_provider import ArgColumn

#: Args columns a reader keeps as JSON text (nested lists, NVTX payloads, RCCL call args),
#: decoded when args are read.
JSON_COLUMNS = frozenset({"Input Dims", "payload", "call_args"})


def args_from_cache(path: Path, columns: dict[str, Any],
                    header: Mapping[str, Any] | None = None) -> ColumnArgs | PartArgs:
    """The provider over the columns the cache stored (``path`` is not read): a
    :class:`PartArgs` where ``header`` describes its parts (:meth:`PartArgs.cache_header`;
    its run-end encoded columns come as Arrow arrays, decoded a part at a time, so a
    part's ints stay ints), else a :class:`ColumnArgs`."""
    if header and header.get("layout") == PARTS_LAYOUT:
        sizes = [int(n) for n in header["sizes"]]
        starts = [int(s) for s in np.cumsum([0, *sizes])]
        parts = [{str(k): _rows(columns[str(k)], starts[j], starts[j + 1]) for k in keys}
                 for j, keys in enumerate(header["keys"])]
        whole = {str(k): columns[str(k)] for k in header["whole"]}
        order = columns[ORDER].astype(np.int64)
        return PartArgs(parts, sizes, order, whole, [str(c) for c in header["columns"]])
    provider = ColumnArgs.__new__(ColumnArgs)
    provider.cols = dict(columns)
    return provider


def _rows(col: Any, start: int, end: int) -> np.ndarray:
    """Rows ``start:end`` of a stored column (numpy, or a run-end encoded Arrow array)."""
    if isinstance(col, np.ndarray):
        return col[start:end]
    import pyarrow.compute as pc

    out: np.ndarray = pc.run_end_decode(col.slice(start, end - start)).to_numpy()
    return out


#: :meth:`PartArgs.cache_header`'s layout name, and the column holding its row order.
PARTS_LAYOUT = "parts"
ORDER = "(order)"


class ColumnArgs:
    """Args provider over per-row arrays: ``columns`` lists the frame columns that are
    args (grid, bytes, NVTX domain, ...); missing values are left out, and a negative
    ``host_pid`` (unknown) too.
    """

    def __init__(self, df: pd.DataFrame, columns: Sequence[str]) -> None:
        self.cols = {c: df[c].to_numpy() for c in columns if c in df.columns}

    def cache_columns(self) -> dict[str, np.ndarray]:
        """The per-row arrays the columnar cache stores to rebuild this provider."""
        return self.cols

    def __call__(self, rows: np.ndarray) -> list[dict[str, Any]]:
        # Column by column, over the cells that hold a value: a table's args are empty for
        # the other tables' rows (a kernel's grid on an API call), and a row at a time
        # over every column cost a Python step per cell (~40 s for 4.2M nsys rows).
        rows = np.asarray(rows, dtype=np.int64)
        out: list[dict[str, Any]] = [{} for _ in range(len(rows))]
        for k, arr in self.cols.items():
            _fill(out, k, arr[rows], None)
        return out

    def arg_columns(self, rows: np.ndarray) -> list[ArgColumn]:
        """The args of ``rows`` as columns over their positions: what :meth:`__call__`
        gives, a column at a time (:func:`arg_columns`)."""
        rows = np.asarray(rows, dtype=np.int64)
        return [c for k, arr in self.cols.items()
                for c in arg_columns(k, arr[rows], None, len(rows))]


class PartArgs:
    """Args provider of a frame concatenated from parts (one per source table) and then
    reordered, each part keeping its own args columns.

    ``parts[j]`` maps part j's args columns to arrays over its ``sizes[j]`` rows (in the
    part's order; a part may have no args columns);
    ``order[i]`` is the row of the concatenation (parts in order) that became row i;
    ``whole`` maps columns that cover every row to arrays in the final order (``host_pid``);
    ``columns`` orders the keys.
    """

    def __init__(self, parts: Sequence[Mapping[str, np.ndarray]], sizes: Sequence[int],
                 order: np.ndarray, whole: Mapping[str, np.ndarray],
                 columns: Sequence[str]) -> None:
        if len(sizes) != len(parts) or any(
                len(a) != n for p, n in zip(parts, sizes, strict=False) for a in p.values()):
            raise ValueError("a part's args columns and its size disagree")
        self.parts = [dict(p) for p in parts]
        self.starts = np.cumsum([0, *sizes])
        self.order = np.asarray(order, dtype=np.int64)
        if int(self.starts[-1]) != len(self.order) or any(
                len(a) != len(self.order) for a in whole.values()):
            raise ValueError("parts, order and whole disagree on the number of rows")
        self.whole = dict(whole)
        self._where: np.ndarray | None = None
        self._stored_whole: list[str] = list(self.whole)
        have = set(self.whole).union(*self.parts)
        self.columns = [c for c in columns if c in have]

    def cache_columns(self) -> dict[str, Any]:
        """Arrays of one value per row for the columnar cache (:meth:`cache_header` says
        how to read them back).

        Each table's columns as they are held: in the concatenated order, a run-end
        encoded Arrow array whose runs are the rows of the tables that have the column
        (one run of nulls over the others), beside the row order and the whole-trace
        columns. (A column per row over every row cost the 226 MB nsys export's cache
        entry ~800 MB and its cold command ~2.5 s.) A column whose tables' values do not
        make one Arrow type is stored as :class:`ColumnArgs` holds it, one value per row in
        the final order (:meth:`dense_columns`), and read back as a whole-trace column.
        """
        import pyarrow as pa

        out: dict[str, Any] = {ORDER: self.order}
        self._stored_whole = list(self.whole)
        for c in self.columns:
            if c in self.whole:
                out[c] = self.whole[c]
                continue
            try:
                out[c] = self._run_encoded(c)
            except (TypeError, ValueError, OverflowError, pa.ArrowException):
                out[c] = self._dense(c)
                self._stored_whole.append(c)
        return out

    def cache_header(self) -> dict[str, Any]:
        """How :func:`args_from_cache` rebuilds this provider from the last
        :meth:`cache_columns`."""
        return {"layout": PARTS_LAYOUT, "sizes": [int(n) for n in np.diff(self.starts)],
                "keys": [[k for k in p if k not in self._stored_whole] for p in self.parts],
                "whole": list(self._stored_whole), "columns": list(self.columns)}

    def _run_encoded(self, col: str) -> Any:
        """``col`` over the concatenated rows, run-end encoded: a run per row of each
        table that has it, one run of nulls over the rows between."""
        import pyarrow as pa

        n = len(self.order)
        ends: list[np.ndarray] = []
        values: list[Any] = []
        at = 0
        for j, p in enumerate(self.parts):
            if col not in p:
                continue
            start, end = int(self.starts[j]), int(self.starts[j + 1])
            if start > at:  # (the rows before, of tables without the column)
                ends.append(np.asarray([start]))
                values.append(None)
            ends.append(np.arange(start + 1, end + 1))
            values.append(pa.array(p[col], from_pandas=True))
            at = end
        if at < n:
            ends.append(np.asarray([n]))
            values.append(None)
        types = {v.type for v in values if v is not None} - {pa.null()}
        if len(types) > 1:
            raise TypeError(f"{col}: the tables' values are of {len(types)} Arrow types")
        typ = types.pop() if types else pa.null()
        joined = pa.concat_arrays([pa.nulls(1, typ) if v is None else v.cast(typ)
                                   for v in values])
        return pa.RunEndEncodedArray.from_arrays(
            pa.array(np.concatenate(ends), type=pa.int32() if n < 2**31 else pa.int64()),
            joined)

    def dense_columns(self) -> dict[str, np.ndarray]:
        """Per-row arrays (final order) that give the same args through a
        :class:`ColumnArgs`: a column of one dtype in every row as it is; one some parts
        lack, of numbers, float64 (NaN where missing; as a concatenation of the parts'
        frames gives it); anything else objects (each cell as its part holds it)."""
        return {c: self.whole[c] if c in self.whole else self._dense(c) for c in self.columns}

    def _dense(self, col: str) -> np.ndarray:
        n = len(self.order)
        got = [(j, p[col]) for j, p in enumerate(self.parts) if col in p]
        if sum(len(a) for _, a in got) == n and len({a.dtype for _, a in got}) == 1:
            flat: np.ndarray = np.concatenate([a for _, a in got])[self.order]
            return flat
        # (floats hold ints exactly up to 2**53; past that a cell stays an object)
        numeric = all(a.dtype == np.float64 or a.dtype.kind in "iu" and not (
            (a > 2**53) | (a < -(2**53))).any() for _, a in got)
        dense = np.full(n, np.nan, dtype=np.float64 if numeric else object)
        if self._where is None:  # (each concatenated row's place in the final order)
            self._where = np.empty(n, dtype=np.int64)
            self._where[self.order] = np.arange(n)
        for j, a in got:
            dense[self._where[self.starts[j]:self.starts[j + 1]]] = a
        return dense

    def _cells(self, rows: np.ndarray
               ) -> Iterator[tuple[str, np.ndarray, np.ndarray | None]]:
        """(key, values, at) of each column's cells among ``rows``, keys in order: the
        values of ``rows[at]`` (``at`` None: of every row)."""
        src = self.order[rows]
        part = np.searchsorted(self.starts, src, side="right") - 1
        # Each part's rows among those asked for, and where they sit in that part.
        where: list[tuple[np.ndarray, np.ndarray]] = []
        for j in range(len(self.parts)):
            at = np.flatnonzero(part == j)
            where.append((at, src[at] - self.starts[j]))
        for k in self.columns:
            if k in self.whole:
                yield k, self.whole[k][rows], None
                continue
            for j, p in enumerate(self.parts):
                if k in p and len(where[j][0]):
                    at, local = where[j]
                    yield k, p[k][local], at

    def __call__(self, rows: np.ndarray) -> list[dict[str, Any]]:
        rows = np.asarray(rows, dtype=np.int64)
        out: list[dict[str, Any]] = [{} for _ in range(len(rows))]
        for k, vals, at in self._cells(rows):
            _fill(out, k, vals, at)
        return out

    def arg_columns(self, rows: np.ndarray) -> list[ArgColumn]:
        """The args of ``rows`` as columns over their positions: what :meth:`__call__`
        gives, a column at a time (:func:`arg_columns`; a key whose tables hold it
        heads a column per table)."""
        rows = np.asarray(rows, dtype=np.int64)
        return [c for k, vals, at in self._cells(rows)
                for c in arg_columns(k, vals, at, len(rows))]


def _fill(out: list[dict[str, Any]], key: str, vals: np.ndarray,
          at: np.ndarray | None) -> None:
    """Set ``out[at[i]][key]`` (``out[i][key]`` where ``at`` is None) to ``vals[i]``'s
    args value for each cell that holds one, by the one rule of both providers
    (:func:`arg_columns`)."""
    for col in arg_columns(key, vals, at, len(out)):
        has = np.arange(len(out)) if col.present is None else np.flatnonzero(col.present)
        for i, v in zip(has.tolist(), col.values[has].tolist(), strict=True):
            out[i][key] = v


def arg_columns(key: str, vals: np.ndarray, at: np.ndarray | None, n: int
                ) -> list[ArgColumn]:
    """The args values of a column's cells (the one rule of both providers), as columns
    over ``n`` rows: the value of ``vals[i]`` at row ``at[i]`` (row ``i`` where ``at`` is
    None) for each cell that holds one. Missing values (None, NaN, pandas' NA and NaT)
    and a negative ``host_pid`` hold none. Whole numbers as int64, reals as float64 (a
    float cell that is a whole number is an int; past int64, a Python int), anything else
    as objects through :func:`_arg_value` (JSON columns decoded); the columns' rows do
    not overlap."""
    places = np.arange(len(vals)) if at is None else at

    def col(values: np.ndarray, keep: np.ndarray, dtype: Any) -> ArgColumn:
        full = np.zeros(n, dtype=dtype)
        full[places[keep]] = values[keep]
        present = np.zeros(n, dtype=bool)
        present[places[keep]] = True
        return ArgColumn(key, full, present)

    pid = key == "host_pid"
    if vals.dtype.kind in "iu" and (vals.dtype.kind == "i" or not len(vals)
                                    or int(vals.max()) < 2**63):
        return [col(vals.astype(np.int64), vals >= 0 if pid else
                    np.ones(len(vals), dtype=bool), np.int64)]
    if vals.dtype == np.float64:
        keep = ~np.isnan(vals) & ((vals >= 0) if pid else True)
        whole = np.isfinite(vals) & (np.trunc(vals) == vals)
        fits = whole & (np.abs(vals) < 2.0**63)
        out = [col(np.where(fits, vals, 0).astype(np.int64), keep & fits, np.int64),
               col(vals, keep & ~whole, np.float64)]
        if (keep & whole & ~fits).any():  # (whole numbers past int64: Python ints)
            big = keep & whole & ~fits
            out.append(col(_objects_at([int(v) for v in vals[big].tolist()], big), big, object))
        return out
    # Text and anything else, cell by cell (a str cell is its own value).
    if vals.dtype == object:
        cand = np.flatnonzero(~pd.isna(vals))
        cells: list[Any] = vals[cand].tolist()
    else:  # (cells as numpy scalars)
        cand, cells = np.arange(len(vals)), list(vals)
    if key in JSON_COLUMNS or pid or not all(type(v) is str for v in cells):
        cells = [_arg_value(key, v) for v in cells]
        held = np.fromiter((v is not _MISSING for v in cells), dtype=bool, count=len(cells))
        cand = cand[held]
        cells = [v for v in cells if v is not _MISSING]
    keep = np.zeros(len(vals), dtype=bool)
    keep[cand] = True
    return [col(_objects_at(cells, keep), keep, object)]


def _objects_at(items: list[Any], keep: np.ndarray) -> np.ndarray:
    """An object array as long as ``keep`` holding ``items`` where it is True, in order,
    each item one cell (a list stays one value)."""
    out = np.empty(len(keep), dtype=object)
    out[keep] = np.fromiter(items, dtype=object, count=len(items))
    return out


#: What :func:`_arg_value` gives for a cell that holds no value.
_MISSING = object()


def _arg_value(key: str, v: Any) -> Any:
    """One cell of an args column of objects as its args value, or :data:`_MISSING`."""
    if v is None or (isinstance(v, (float, np.floating)) and v != v):
        return _MISSING
    v = v.item() if hasattr(v, "item") else v
    if key == "host_pid" and v < 0:
        return _MISSING
    if key in JSON_COLUMNS and isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return _MISSING
    # Columns with gaps come back as floats from pandas; ids stay integers.
    return int(v) if isinstance(v, float) and v.is_integer() else v
