"""How the columnar cache stores a trace's ``args`` and rebuilds its provider on a hit.

A reader's provider may offer ``cache_columns()`` (a few per-row arrays, e.g. the Kineto
source row of each event), ``cache_header()`` (a small JSON-able dict or None, e.g. where
the Kineto reader cut the file) and its module an ``args_from_cache(path, columns,
header)`` that rebuilds it; any other provider's args are stored as one JSON document
per row. Both live in columns that are only read when args are asked for.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from traceforge.args_provider import ArgColumn, ArgShapes, distinct_args, no_args
from traceforge.model import Trace

if TYPE_CHECKING:
    import pyarrow as pa

#: Prefix of the args columns in an entry; the JSON column when args are stored whole.
ARGS_PREFIX = "args:"
JSON_ARGS = "args:json"


# -- args ----------------------------------------------------------------------------------
def _json_hook(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"cannot store a {type(v).__name__} in args")


def args_columns(trace: Trace
                 ) -> tuple[str | None, dict[str, pa.Array], dict[str, Any] | None]:
    """(module that rebuilds the provider or None, columns to store, the provider's
    header or None) for a trace's args."""
    import pyarrow as pa

    prov = trace.args_provider
    n = len(trace.events)
    if prov is no_args:
        return None, {}, None
    cols = getattr(prov, "cache_columns", None)
    mod = type(prov).__module__
    if callable(cols) and mod.startswith("traceforge.formats."):
        try:
            # (a provider may give Arrow arrays of its own: frame_args' run-end encoded)
            out = {f"{ARGS_PREFIX}{k}": v if isinstance(v, pa.Array) else
                   pa.array(v, from_pandas=True) for k, v in cols().items()}
        except (TypeError, ValueError):
            out = {}  # e.g. a column mixing numbers and strings: JSON below
        if out and all(len(a) == n for a in out.values()):
            head = getattr(prov, "cache_header", None)
            return mod, out, head() if callable(head) else None
    # Any other provider: one JSON document per row, decoded on demand.
    enc = msgspec.json.Encoder(enc_hook=_json_hook)
    docs = [enc.encode(d) for d in prov(np.arange(n, dtype=np.int64))]
    return None, {JSON_ARGS: pa.array(docs, type=pa.binary())}, None


class _JsonArgs:
    def __init__(self, col: pa.ChunkedArray) -> None:
        self.col = col

    def __call__(self, rows: np.ndarray) -> list[dict[str, Any]]:
        import pyarrow as pa

        dec = msgspec.json.decode
        vals = self.col.take(pa.array(np.asarray(rows, dtype=np.int64))).to_pylist()
        out: list[dict[str, Any]] = []
        for v in vals:
            d = dec(v) if v else {}
            out.append(d if isinstance(d, dict) else {})
        return out


class Rebuild:
    """How to rebuild a cached trace's args provider (picklable: traces cross processes)."""

    def __init__(self, module: str | None, source: Path,
                 columns: dict[str, pa.ChunkedArray],
                 header: dict[str, Any] | None = None) -> None:
        self.module, self.source, self.columns = module, source, columns
        self.header = header

    def __call__(self) -> Callable[[np.ndarray], list[dict[str, Any]]]:
        if JSON_ARGS in self.columns:
            return _JsonArgs(self.columns[JSON_ARGS])
        mod = str(self.module)
        if not mod.startswith("traceforge.formats."):
            raise ImportError(f"no args provider module {mod!r}")
        # (ChunkedArray.to_numpy copies; args are read only when asked for. A run-end
        # encoded column is the provider's to decode, a part at a time.)
        got = {c.removeprefix(ARGS_PREFIX): a if _encoded(a) else a.to_numpy()
               for c, a in self.columns.items()}
        fn = importlib.import_module(mod).args_from_cache
        result: Callable[[np.ndarray], list[dict[str, Any]]] = fn(self.source, got,
                                                                  self.header)
        return result


def _encoded(a: pa.ChunkedArray) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_run_end_encoded(a.type))


class CachedArgs:
    """Args of a cached trace: the provider is rebuilt from its columns on first use.

    ``rows`` maps this trace's row labels to rows of the cached table (a kinds selection).
    """

    def __init__(self, rebuild: Callable[[], Callable[[np.ndarray], list[dict[str, Any]]]],
                 rows: np.ndarray | None) -> None:
        self._rebuild = rebuild
        self._inner: Callable[[np.ndarray], list[dict[str, Any]]] | None = None
        self.rows = rows
        self._lock = threading.Lock()  # one rebuild when two threads ask at once

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_inner": None, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _provider(self) -> Callable[[np.ndarray], list[dict[str, Any]]]:
        if self._inner is None:
            with self._lock:
                if self._inner is None:
                    self._inner = self._rebuild()
        return self._inner

    def __call__(self, rows: np.ndarray) -> list[dict[str, Any]]:
        inner = self._provider()
        r = np.asarray(rows, dtype=np.int64)
        return inner(r if self.rows is None else self.rows[r])

    def raw(self, rows: np.ndarray) -> list[dict[str, Any]] | None:
        """The rebuilt provider's ``raw`` (values as JSON text), None where it has none."""
        inner = self._provider()
        fn = getattr(inner, "raw", None)
        if fn is None:
            return None
        r = np.asarray(rows, dtype=np.int64)
        got: list[dict[str, Any]] | None = fn(r if self.rows is None else self.rows[r])
        return got

    def shapes(self, rows: np.ndarray) -> ArgShapes | None:
        """The rebuilt provider's ``shapes`` (:class:`ArgShapes`), None where it has none."""
        fn = getattr(self._provider(), "shapes", None)
        if fn is None:
            return None
        r = np.asarray(rows, dtype=np.int64)
        got: ArgShapes | None = fn(r if self.rows is None else self.rows[r])
        return got

    def arg_columns(self, rows: np.ndarray) -> list[ArgColumn] | None:
        """The rebuilt provider's ``arg_columns`` (:class:`ArgColumn`), None where it has
        none."""
        fn = getattr(self._provider(), "arg_columns", None)
        if fn is None:
            return None
        r = np.asarray(rows, dtype=np.int64)
        got: list[ArgColumn] | None = fn(r if self.rows is None else self.rows[r])
        return got

    def distinct(self, rows: np.ndarray, keys: Sequence[str]
                 ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """:func:`traceforge.args_provider.distinct_args` of the rebuilt provider."""
        r = np.asarray(rows, dtype=np.int64)
        return distinct_args(self._provider(), r if self.rows is None else self.rows[r],
                                   keys)


class Provider:
    """A provider that is already built (a full trace in memory), as a rebuild step."""

    def __init__(self, provider: Callable[[np.ndarray], list[dict[str, Any]]]) -> None:
        self.provider = provider

    def __call__(self) -> Callable[[np.ndarray], list[dict[str, Any]]]:
        return self.provider
