"""A trace's meta as JSON in a cache entry, and back to an equal value.

Meta holds dataclasses of the trace model, tuples, dicts with keys of any type and, in
``extra``, DataFrames: :func:`encode` tags each so that :func:`decode` rebuilds it, and
:func:`same` is the equality the cache checks a round trip with before storing.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from traceforge import model
from traceforge.formats import arrow_frames


def encode(v: Any) -> Any:
    """A JSON-able form of ``v`` that :func:`decode` turns back into an equal value."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, float)):
        return v.item() if isinstance(v, np.generic) else v
    if isinstance(v, np.generic):
        return v.item()
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        cls = type(v)
        if cls.__module__ != model.__name__:
            raise TypeError(f"cannot cache a {cls.__name__} in meta")
        return {"__dc": cls.__name__,
                "v": {f.name: encode(getattr(v, f.name)) for f in dataclasses.fields(v)}}
    if isinstance(v, tuple):
        return {"__tuple": [encode(x) for x in v]}
    if isinstance(v, list):
        return [encode(x) for x in v]
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            if any(k.startswith("__") for k in v):
                return {"__items": [[k, encode(x)] for k, x in v.items()]}
            return {k: encode(x) for k, x in v.items()}
        return {"__items": [[encode(k), encode(x)] for k, x in v.items()]}
    if isinstance(v, pd.DataFrame):
        ipc = arrow_frames.ipc_bytes(arrow_frames.frame_table(v))
        return {"__frame": base64.b64encode(ipc).decode()}
    raise TypeError(f"cannot cache a {type(v).__name__} in meta")


def _hashable(v: Any) -> Any:
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def decode(v: Any) -> Any:
    if isinstance(v, list):
        return [decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if "__tuple" in v:
        return tuple(decode(x) for x in v["__tuple"])
    if "__items" in v:
        return {_hashable(decode(k)): decode(x) for k, x in v["__items"]}
    if "__dc" in v:
        cls = getattr(model, v["__dc"])
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: decode(x) for k, x in v["v"].items() if k in names})
    if "__frame" in v:
        return arrow_frames.table_frame(arrow_frames.read_ipc(base64.b64decode(v["__frame"])))
    return {k: decode(x) for k, x in v.items()}


def same(a: Any, b: Any) -> bool:
    """Deep equality that also compares DataFrames (meta.extra may hold one).

    numpy scalars equal the Python numbers they stand for (the cache stores them as such).
    """
    a = a.item() if isinstance(a, np.generic) else a
    b = b.item() if isinstance(b, np.generic) else b
    if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
        return isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame) and a.equals(b) \
            and list(a.dtypes.astype(str)) == list(b.dtypes.astype(str))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(
            same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b  # NaN
    return type(a) is type(b) and bool(a == b)
