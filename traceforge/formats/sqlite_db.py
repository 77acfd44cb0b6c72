"""Read-only access to the SQLite databases behind nsys, rocpd and legacy rocprof outputs.

Inputs are never modified: databases are opened with a ``file:...?mode=ro`` URI (plain
``sqlite3.connect(path)`` would create a missing file and may write a journal beside it).
A gzipped database (``report.sqlite.gz``, as shipped with test fixtures) is decompressed
once into a private temporary directory, never beside the input, and removed at exit.
"""

from __future__ import annotations

import atexit
import gzip
import json
import shutil
import sqlite3
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd

from traceforge.errors import TraceFormatError

#: The first 16 bytes of every SQLite 3 database file.
MAGIC = b"SQLite format 3\x00"

_tmpdir: Path | None = None


def is_sqlite(head: bytes) -> bool:
    """Whether ``head`` (the possibly gunzipped first bytes) is a SQLite 3 database."""
    return head.startswith(MAGIC)


def _scratch() -> Path:
    global _tmpdir
    if _tmpdir is None:
        _tmpdir = Path(tempfile.mkdtemp(prefix="traceforge-sqlite-"))
        atexit.register(shutil.rmtree, _tmpdir, True)
    return _tmpdir


@lru_cache(maxsize=8)
def _plain_copy(path: str, mtime_ns: int, size: int) -> Path:
    """A decompressed copy of a gzipped database (cached per file version)."""
    out = _scratch() / f"{len(list(_scratch().iterdir()))}-{Path(path).name.removesuffix('.gz')}"
    try:
        with gzip.open(path, "rb") as src, out.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (OSError, EOFError, zlib.error) as e:
        out.unlink(missing_ok=True)
        raise TraceFormatError(path, f"truncated or corrupt gzip ({e})") from None
    return out


def plain_path(path: Path) -> Path:
    """``path`` itself, or a decompressed temporary copy when the file is gzip."""
    with path.open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if not gz:
        return path
    st = path.stat()
    return _plain_copy(str(path), st.st_mtime_ns, st.st_size)


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the database at ``path`` (gzip allowed)."""
    real = plain_path(path)
    uri = f"file:{quote(str(real.resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:
        raise TraceFormatError(path, f"cannot open SQLite database ({e})") from None
    try:
        yield conn
    except sqlite3.DatabaseError as e:
        raise TraceFormatError(path, f"corrupt or unreadable SQLite database ({e})") from None
    except UnicodeDecodeError:
        # sqlite3 decodes TEXT as UTF-8; a damaged page can hold anything.
        raise TraceFormatError(path, "corrupt SQLite database (text that is not UTF-8)"
                               ) from None
    finally:
        conn.close()


@lru_cache(maxsize=16)
def _tables(path: str, mtime_ns: int, size: int) -> frozenset[str]:
    with connect(Path(path)) as conn:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
        ).fetchall()
    return frozenset(str(r[0]) for r in rows)


def tables(path: Path) -> frozenset[str]:
    """Names of the tables and views in the database (empty when it cannot be read)."""
    st = path.stat()
    try:
        return _tables(str(path), st.st_mtime_ns, st.st_size)
    except TraceFormatError:
        return frozenset()


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """Column names of ``table`` (empty when it does not exist)."""
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info('{table}')").fetchall()]


def frame(conn: sqlite3.Connection, sql: str) -> pd.DataFrame:
    """Run ``sql`` and return its rows as a DataFrame.

    pandas wraps SQLite's errors (a damaged page, a column a schema lacks) in its own
    DatabaseError; the SQLite error is raised again so that :func:`connect` names the file.
    """
    try:
        return pd.read_sql_query(sql, conn)
    except sqlite3.Error:
        raise
    except Exception as e:
        cause = e.__cause__
        if isinstance(cause, sqlite3.Error):
            raise sqlite3.DatabaseError(str(cause)) from None
        raise


def pick(have: list[str], *wanted: str, alias: str | None = None, prefix: str = "") -> str:
    """SQL for the first of ``wanted`` that exists in ``have``, else NULL, as ``alias``.

    Export schemas rename and add columns between versions, so readers select what the
    file has instead of assuming one layout.
    """
    name = alias or wanted[0]
    for w in wanted:
        if w in have:
            return f'{prefix}"{w}" AS "{name}"'
    return f'NULL AS "{name}"'


def args_from_cache(path: Path, columns: dict[str, np.ndarray]) -> ColumnArgs:
    """A :class:`ColumnArgs` over the columns the cache stored (``path`` is not read)."""
    provider = ColumnArgs.__new__(ColumnArgs)
    provider.cols = dict(columns)
    return provider


#: Args columns a reader keeps as JSON text (nested lists), decoded when args are read.
JSON_COLUMNS = frozenset({"Input Dims"})


class ColumnArgs:
    """Args provider for readers that build a frame: per-row source fields as dicts.

    ``columns`` lists the frame columns that are args (grid, bytes, NVTX domain, ...);
    missing values are left out, and a negative ``host_pid`` (unknown) too.
    """

    def __init__(self, df: pd.DataFrame, columns: Sequence[str]) -> None:
        self.cols = {c: df[c].to_numpy() for c in columns if c in df.columns}

    def cache_columns(self) -> dict[str, np.ndarray]:
        """The per-row arrays the columnar cache stores to rebuild this provider."""
        return self.cols

    def __call__(self, rows: np.ndarray) -> list[dict[str, Any]]:
        out = []
        for r in rows.tolist():
            d: dict[str, Any] = {}
            for k, arr in self.cols.items():
                v = arr[r]
                if v is None or (isinstance(v, float) and v != v):
                    continue
                v = v.item() if hasattr(v, "item") else v
                if k == "host_pid" and v < 0:
                    continue
                if k in JSON_COLUMNS and isinstance(v, str):
                    try:
                        v = json.loads(v)
                    except ValueError:
                        continue
                # Columns with gaps come back as floats from pandas; ids stay integers.
                d[k] = int(v) if isinstance(v, float) and v.is_integer() else v
            out.append(d)
        return out

