"""The ``args`` of a trace's rows: how a reader hands them over (an :data:`ArgsProvider`,
called with row positions and decoding only those rows), and their distinct values for
a few keys (op shapes: many rows, few values), asked of the provider when it can answer
itself. A leaf: :class:`traceforge.model.Trace` holds a provider; readers make them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

ArgsProvider = Callable[[np.ndarray], list[dict[str, Any]]]


def no_args(rows: np.ndarray) -> list[dict[str, Any]]:
    """The args provider of a trace whose source records none: an empty dict per row."""
    return [{} for _ in range(len(rows))]


def distinct_args(provider: ArgsProvider, rows: np.ndarray, keys: Sequence[str]
                  ) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """The args of ``rows`` reduced to ``keys``, factorized: ``(codes, uniques)`` with
    ``uniques[codes[i]]`` the present ``keys`` of row ``rows[i]`` (shared dicts: read them,
    do not change them).

    A provider with a ``distinct(rows, keys)`` method answers itself (the Kineto reader
    compares the raw JSON of the keys and decodes each distinct value once: a model's
    500k op calls hold a few hundred distinct shapes); any other is asked for whole dicts.
    """
    own = getattr(provider, "distinct", None)
    if own is not None:
        return cast(tuple[np.ndarray, list[dict[str, Any]]], own(rows, keys))
    return factorize_args(provider, rows, keys)


def factorize_args(provider: ArgsProvider, rows: np.ndarray, keys: Sequence[str]
                   ) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """:func:`distinct_args` from whole dicts (any provider)."""
    import msgspec

    first: dict[bytes | str, int] = {}
    uniques: list[dict[str, Any]] = []
    codes = np.empty(len(rows), dtype=np.int64)
    for i, a in enumerate(provider(rows)):
        sub = {k: a[k] for k in keys if k in a}
        try:
            key: bytes | str = msgspec.json.encode(sub)
        except (TypeError, msgspec.EncodeError):
            key = repr(sub)
        c = first.get(key)
        if c is None:
            c = first[key] = len(uniques)
            uniques.append(sub)
        codes[i] = c
    return codes, uniques


@dataclass(frozen=True)
class ArgColumn:
    """One arg of some rows (a table's slices, a batch of a trace's rows): its key, each
    row's value (ints as int64, reals as float64, text or other values as objects) and
    which rows have it (None: all). A row's args are the present values of a list of
    columns, keys in list order; a key may head several columns whose rows do not
    overlap (a column of whole numbers beside one of reals). What a provider's
    ``arg_columns(rows)`` returns (the SQLite readers')."""

    key: str
    values: np.ndarray
    present: np.ndarray | None = None


@dataclass(frozen=True)
class ArgShapes:
    """The args of some rows as a few shapes: a row's args are its shape's, but for the
    int values at the shape's slots, which are the row's own (ids, counters: the values
    that differ from row to row). A writer encodes each shape once and each slot as an
    int column. What a provider's ``shapes(rows)`` returns (the Kineto reader's).

    ``code``: per row, its shape (an index into ``args``), or -1 where the row's args
    are not given so (ask the provider for them). ``args``: per shape, its args with each
    value as its JSON text (``msgspec.Raw``), at a slot a stand-in (shared dicts: read
    them, do not change them).
    ``slots``: per shape, the positions (ascending) of its slots among its args.
    ``values``: int64, the slot values of the rows with a shape, row after row, each
    row's in its shape's order.
    """

    code: np.ndarray
    args: list[dict[str, Any]]
    slots: list[tuple[int, ...]]
    values: np.ndarray
