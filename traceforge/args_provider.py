"""The ``args`` of a trace's rows: how a reader hands them over (an :data:`ArgsProvider`,
called with row positions and decoding only those rows), and their distinct values for
a few keys (op shapes: many rows, few values), asked of the provider when it can answer
itself. A leaf: :class:`traceforge.model.Trace` holds a provider; readers make them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
