"""DataFrames and Arrow, both ways, as the columnar cache stores them.

Categorical columns become Arrow dictionaries (string categories only), numbers stay
numpy-typed, anything else goes through Python objects. Reading back builds only the rows
asked for, and can order categories by first appearance among them, as a reader building
the column from those rows alone would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    import pyarrow as pa


def column_array(s: pd.Series) -> pa.Array:
    import pyarrow as pa

    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = s.cat.categories
        if not all(isinstance(c, str) for c in cats):
            raise TypeError(f"categories of {s.name!r} are not strings")
        codes = np.asarray(s.cat.codes, dtype=np.int32)
        idx = pa.array(codes, mask=codes < 0) if (codes < 0).any() else pa.array(codes)
        return pa.DictionaryArray.from_arrays(idx, pa.array(list(cats), type=pa.string()))
    arr = s.to_numpy()
    if arr.dtype.kind in "iufb":
        return pa.array(arr)
    return pa.array(arr.tolist())


def frame_table(df: pd.DataFrame) -> pa.Table:
    import pyarrow as pa

    return pa.table({str(c): column_array(df[c]) for c in df.columns})


def categorical(arr: pa.Array | pa.ChunkedArray, rows: np.ndarray | None = None,
                 first_seen: bool = False) -> pd.Categorical:
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    idx = arr.indices
    codes = (idx.fill_null(-1) if idx.null_count else idx).to_numpy(zero_copy_only=False)
    cats = pd.Index(np.array(arr.dictionary.to_pylist(), dtype=object))
    if rows is not None:
        codes = codes[rows]
    if first_seen:
        return first_seen_categorical(codes, cats)
    result: pd.Categorical = pd.Categorical.from_codes(codes, categories=cats)
    return result


def first_seen_categorical(codes: np.ndarray, cats: pd.Index) -> pd.Categorical:
    """Categories in order of first appearance among ``codes`` (unused ones dropped).

    That is how a reader building a column from the kept rows alone orders them, and
    category order decides the order of groupby and sort results.
    """
    new, uniq = pd.factorize(codes)
    if (uniq < 0).any():  # missing values (code -1) stay missing
        j = int(np.flatnonzero(uniq < 0)[0])
        new = np.where(new == j, -1, np.where(new > j, new - 1, new))
        uniq = uniq[uniq >= 0]
    result: pd.Categorical = pd.Categorical.from_codes(new, categories=cats[uniq])
    return result


def column(arr: pa.ChunkedArray, rows: np.ndarray | None) -> Any:
    import pyarrow as pa

    if pa.types.is_dictionary(arr.type):
        return categorical(arr, rows)
    chunk = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    values = chunk.to_numpy(zero_copy_only=False)
    return values if rows is None else values[rows]


def table_frame(t: pa.Table) -> pd.DataFrame:
    df: pd.DataFrame = pd.DataFrame({c: column(t.column(c), None) for c in t.column_names})
    return df


def ipc_bytes(t: pa.Table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return bytes(sink.getvalue().to_pybytes())


def read_ipc(b: bytes) -> pa.Table:
    import pyarrow as pa

    with pa.ipc.open_stream(pa.py_buffer(b)) as r:
        return r.read_all()
