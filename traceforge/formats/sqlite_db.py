"""Read-only access to the SQLite databases behind nsys, rocpd and legacy rocprof outputs.

Inputs are never modified and nothing is written beside them: databases are opened with a
``file:...?mode=ro&immutable=1`` URI (plain ``sqlite3.connect(path)`` would create a
missing file, and a read-only open of a WAL-mode database still creates ``-wal`` and
``-shm`` files next to it, or fails in a directory the user cannot write). A database
whose ``-wal`` file holds data is copied with it into a private temporary directory and
opened there. A gzipped database (``report.sqlite.gz``) is decompressed once into that
directory (see :mod:`traceforge.formats.gunzip` for the limits), never beside the input,
and removed at exit, SIGTERM included.

Databases may come from others, so every query is bounded: views whose definition recurses
(``WITH RECURSIVE``, which can yield rows forever) are not offered as tables; each
connection has a deadline (``TRACEFORGE_SQLITE_SECONDS``, default 120 s plus 120 s per GB
of database) enforced by SQLite's progress handler; and :func:`frame` refuses a result
with more rows than all base tables together hold (no documented view multiplies rows).
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd

from traceforge import errors
from traceforge.errors import TraceFormatError
from traceforge.formats import columns as id_columns
from traceforge.formats import gunzip

#: The first 16 bytes of every SQLite 3 database file.
MAGIC = b"SQLite format 3\x00"

#: Seconds a connection's queries may take: TRACEFORGE_SQLITE_SECONDS, else this plus as
#: much again per GB of database.
BASE_SECONDS = 120.0


def is_sqlite(head: bytes) -> bool:
    """Whether ``head`` (the possibly gunzipped first bytes) is a SQLite 3 database."""
    return head.startswith(MAGIC)


@lru_cache(maxsize=8)
def _plain_copy(path: str, mtime_ns: int, size: int) -> Path:
    """A decompressed copy of a gzipped database (cached per file version)."""
    return gunzip.to_scratch(Path(path), Path(path).name.removesuffix(".gz"))


def plain_path(path: Path) -> Path:
    """``path`` itself, or a decompressed temporary copy when the file is gzip."""
    with path.open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if not gz:
        return path
    st = path.stat()
    return _plain_copy(str(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=8)
def _wal_copy(path: str, mtime_ns: int, wal_mtime_ns: int) -> Path:
    """A WAL-mode database and its ``-wal`` file copied side by side into the scratch
    directory, where opening it may create its ``-shm``."""
    d = gunzip.scratch() / f"wal-{len(list(gunzip.scratch().iterdir()))}"
    d.mkdir()
    out = d / Path(path).name
    shutil.copyfile(path, out)
    shutil.copyfile(f"{path}-wal", f"{out}-wal")
    return out


class Bounded(sqlite3.DatabaseError):
    """A query stopped by a bound of this module (raised inside :func:`connect`)."""


def seconds_for(size: int) -> float:
    """The deadline of a connection to a database of ``size`` bytes."""
    env = os.environ.get("TRACEFORGE_SQLITE_SECONDS", "").strip()
    try:
        return float(env) if env else BASE_SECONDS * (1 + size / 1e9)
    except ValueError:
        return BASE_SECONDS * (1 + size / 1e9)


#: Per open connection (by id): the row cap :func:`frame` applies (computed on first use).
_row_caps: dict[int, int | None] = {}
#: Per open connection (by id): its URI, its deadline (monotonic) and limit (seconds), for
#: the Arrow reads of :func:`frame`, which open a connection of their own.
_opened: dict[int, tuple[str, float, float]] = {}
#: Rows per Arrow batch (the row cap and the deadline are checked between batches).
ARROW_BATCH_ROWS = 65_536
#: Tables scanned by fewer rows than this are read by sqlite3 (opening a second
#: connection and importing the driver cost more than they save there).
ARROW_MIN_ROWS = 50_000


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the database at ``path`` (gzip allowed), bounded in time
    (see the module docstring); nothing is written beside ``path``."""
    real = plain_path(path)
    wal = Path(f"{real}-wal")
    try:
        wal_st = wal.stat() if wal.exists() else None
    except OSError:
        wal_st = None
    if wal_st is not None and wal_st.st_size > 0:
        real = _wal_copy(str(real), real.stat().st_mtime_ns, wal_st.st_mtime_ns)
        uri = f"file:{quote(str(real.resolve()))}?mode=ro"
    else:
        # immutable: no locks, no -wal/-shm files, works in a directory we cannot write.
        uri = f"file:{quote(str(real.resolve()))}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:
        raise TraceFormatError(path, f"cannot open SQLite database ({e})") from None
    limit = seconds_for(real.stat().st_size)
    deadline = time.monotonic() + limit
    expired: list[bool] = []

    def progress() -> int:
        if time.monotonic() > deadline:
            expired.append(True)
            return 1
        return 0

    conn.set_progress_handler(progress, 20_000)
    _row_caps[id(conn)] = None
    _opened[id(conn)] = (uri, deadline, limit)
    try:
        yield conn
    except Bounded as e:
        raise TraceFormatError(path, str(e)) from None
    except sqlite3.DatabaseError as e:
        errors.exit_if_terminated()  # SIGTERM arrived inside a query: exit, not an error line
        if expired:
            raise TraceFormatError(
                path, f"SQLite queries ran past {limit:.0f} s (a looping view?); "
                "TRACEFORGE_SQLITE_SECONDS raises the limit") from None
        raise TraceFormatError(path, f"corrupt or unreadable SQLite database ({e})") from None
    except UnicodeDecodeError:
        # sqlite3 decodes TEXT as UTF-8; a damaged page can hold anything.
        raise TraceFormatError(path, "corrupt SQLite database (text that is not UTF-8)"
                               ) from None
    finally:
        _row_caps.pop(id(conn), None)
        _opened.pop(id(conn), None)
        conn.close()


@lru_cache(maxsize=16)
def _tables(path: str, mtime_ns: int, size: int) -> frozenset[str]:
    with connect(Path(path)) as conn:
        rows = conn.execute(
            "SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'view')"
        ).fetchall()
    views = {str(name): str(text or "") for name, kind, text in rows if kind == "view"}
    # A view that recurses, or reads one that does (rocpd's views over a base table that
    # was replaced by a looping view), could yield rows forever: not a table.
    bad = {v for v, text in views.items() if "RECURSIVE" in text.upper()}
    grew = True
    while grew:
        grew = False
        for v, text in views.items():
            if v not in bad and any(_names(text, b) for b in bad):
                bad.add(v)
                grew = True
    return frozenset(str(name) for name, kind, _ in rows if str(name) not in bad)


def _names(sql: str, name: str) -> bool:
    """Whether ``sql`` mentions ``name`` as a word (quoted or not)."""
    return re.search(rf"(?<![\w$]){re.escape(name)}(?![\w$])", sql, re.IGNORECASE) is not None


def tables(path: Path) -> frozenset[str]:
    """Names of the tables, and of the views that do not recurse, in the database.

    A file that is not a readable database (truncated, bit-flipped) raises the one-line
    ``TraceFormatError`` of :func:`connect` ("corrupt or unreadable SQLite database"),
    which is the right diagnosis, rather than answering no tables ("missing tables").
    """
    st = path.stat()
    return _tables(str(path), st.st_mtime_ns, st.st_size)


def _row_cap(conn: sqlite3.Connection) -> int:
    """Rows all base tables hold together (by largest rowid, which costs a lookup each),
    plus slack: the most rows a query over documented views can honestly return."""
    cap = _row_caps.get(id(conn))
    if cap is not None:
        return cap
    total = 10_000
    names = [str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]
    for name in names:
        total += _rows_at_most(conn, name)
    _row_caps[id(conn)] = total
    return total


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """Column names of ``table`` (empty when it does not exist)."""
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info('{table}')").fetchall()]


@dataclass(frozen=True)
class Query:
    """One query of :func:`frames`: its SQL, the tables it scans and the (table, column)
    pairs it looks single rows up by (see :func:`frame`)."""

    sql: str
    scans: Sequence[str] = ()
    lookups: Sequence[tuple[str, str]] = ()


def frame(conn: sqlite3.Connection, sql: str, *, scans: Sequence[str] = (),
          lookups: Sequence[tuple[str, str]] = ()) -> pd.DataFrame:
    """Run ``sql`` and return its rows as a DataFrame.

    SQLite's errors (a damaged page, a column a schema lacks) propagate, so that
    :func:`connect` names the file.

    The result may hold no more rows than the base tables together (:func:`_row_cap`):
    a view built to multiply rows is stopped while it is read, not after it filled memory.

    ``scans``: the tables ``sql`` reads row by row; ``lookups``: (table, column) pairs it
    reads single rows of by that column (scalar subqueries). Where every one is a base
    table and every lookup column is its table's key or indexed (the query's time is then
    linear in the rows scanned), the rows come as Arrow batches from ADBC's SQLite driver
    (several times faster than sqlite3's row tuples on a table of :data:`ARROW_MIN_ROWS`
    or more) into the same frame, the row cap and the deadline checked between batches;
    anything else, or anything the driver refuses (a value unlike the column's first
    ones), is read by sqlite3.
    """
    return frames(conn, [Query(sql, scans, lookups)])[0]


def frames(conn: sqlite3.Connection, queries: Sequence[Query]) -> list[pd.DataFrame]:
    """:func:`frame` of each query; the ones read through ADBC are read at once, a thread
    each (the driver reads without Python's lock: an nsys export's kernel and API tables
    together), and converted in order."""
    fetches = [_arrow_fetch(conn, q.sql, q.scans, q.lookups) if q.scans else None
               for q in queries]
    tables: list[Any] = [None] * len(queries)
    todo = [(i, f) for i, f in enumerate(fetches) if f is not None]
    if len(todo) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(len(todo), os.cpu_count() or 1)) as pool:
            for i, running in [(i, pool.submit(f)) for i, f in todo]:
                tables[i] = running.result()
    else:
        for i, f in todo:
            tables[i] = f()
    out: list[pd.DataFrame] = []
    for i, q in enumerate(queries):
        table, tables[i] = tables[i], None  # (each Arrow table let go once converted)
        out.append(_arrow_result(table) if table is not None else _sqlite3_frame(conn, q.sql))
        del table
    return out


def _sqlite3_frame(conn: sqlite3.Connection, sql: str) -> pd.DataFrame:
    cap = _row_cap(conn)
    cur = conn.execute(sql)
    names = [str(d[0]) for d in cur.description or ()]
    rows: list[Any] = []
    while batch := cur.fetchmany(65_536):
        rows += batch
        if len(rows) > cap:
            cur.close()
            raise Bounded(_too_many(cap))
    out: pd.DataFrame = pd.DataFrame.from_records(rows, columns=names, coerce_float=True)
    return out


#: Ids per query of :func:`string_codes` (SQLite allows 999 bound values on old builds).
_IDS_PER_QUERY = 500


def string_codes(conn: sqlite3.Connection, cols: Sequence[pd.Series], table: str = "StringIds",
                 key: str = "id", value: str = "value"
                 ) -> tuple[list[np.ndarray], pd.Series] | None:
    """What ``(SELECT value FROM table WHERE key = <cell>)`` gives for each cell of the id
    columns ``cols``, as codes into the distinct values returned (a Series, its dtype as a
    column of those values gets), each distinct id looked up once: a subquery per row
    made a Python string per row (1.2M kernels' names were ~0.6 s of SQL and as many
    strings). Code -1: a NULL cell, an id the table lacks, or a NULL value.

    None (the caller then runs the subqueries) where a column holds other than integers
    (text or a fraction is compared by SQLite's affinity rules) or the table holds a
    looked-up id twice (which row a subquery takes is SQLite's choice).
    """
    ids: list[tuple[np.ndarray, np.ndarray]] = []
    for s in cols:
        if s.dtype.kind == "i":
            a = s.to_numpy(dtype=np.int64)
            ids.append((a, np.ones(len(a), dtype=bool)))
            continue
        if s.dtype == np.float64 or s.isna().all():
            v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            present = ~np.isnan(v)
            with np.errstate(invalid="ignore"):
                a = v.astype(np.int64)
            if (a[present].astype(np.float64) != v[present]).any() or (
                    np.abs(v[present]) >= 2.0**62).any():
                return None
            ids.append((np.where(present, a, 0), present))
            continue
        return None
    wanted = np.unique(np.concatenate([a[ok] for a, ok in ids])) if ids else np.zeros(0, int)
    got: list[tuple[Any, Any]] = []
    for i in range(0, len(wanted), _IDS_PER_QUERY):
        chunk = wanted[i:i + _IDS_PER_QUERY].tolist()
        got += conn.execute(f'SELECT "{key}", "{value}" FROM "{table}" WHERE "{key}" IN '
                            f'({",".join("?" * len(chunk))})', chunk).fetchall()
    keys = [id_columns.as_int(k) for k, _ in got]
    found = np.asarray(keys, dtype=np.int64) if None not in keys else np.zeros(0, np.int64)
    if None in keys or len(np.unique(found)) != len(found):
        return None
    by_id = np.argsort(found, kind="stable")
    found = found[by_id]
    codes, distinct = pd.factorize(pd.Series([got[j][1] for j in by_id.tolist()],
                                             dtype=object))
    out: list[np.ndarray] = []
    for a, ok in ids:
        at = np.searchsorted(found, a).clip(0, max(len(found) - 1, 0))
        hit = ok & (found[at] == a) if len(found) else np.zeros(len(a), dtype=bool)
        out.append(np.where(hit, codes[at] if len(found) else -1, -1))
    return out, pd.Series(list(distinct))


def _too_many(cap: int) -> str:
    return (f"a query returned more than {cap:,} rows, more than the database's tables "
            "hold (a view that multiplies rows?)")


def _arrow_fetch(conn: sqlite3.Connection, sql: str, scans: Sequence[str],
                 lookups: Sequence[tuple[str, str]]) -> Callable[[], Any] | None:
    """The read of :func:`frame` through ADBC, as a function any thread may call (it
    touches no ``conn``): an Arrow table, or None where the driver refuses the query or
    returns no rows (sqlite3 reads it then; with no rows, its columns' types are those of
    no values). None where the query cannot be read so (see :func:`frame`)."""
    opened = _opened.get(id(conn))
    if opened is None or not _linear(conn, scans, lookups):
        return None
    if sum(_rows_at_most(conn, t) for t in scans) < ARROW_MIN_ROWS:
        return None
    try:
        from adbc_driver_sqlite import dbapi
    except ImportError:  # (no wheel for this platform: sqlite3 reads it)
        return None
    import pyarrow as pa

    uri, deadline, limit = opened
    cap = _row_cap(conn)

    def fetch() -> pa.Table | None:
        batches: list[pa.RecordBatch] = []
        rows = 0
        try:
            with dbapi.connect(uri) as db, db.cursor() as cur:
                cur.adbc_statement.set_options(
                    **{"adbc.sqlite.query.batch_rows": str(ARROW_BATCH_ROWS)})
                cur.execute(sql)
                reader = cur.fetch_record_batch()
                for batch in reader:
                    rows += batch.num_rows
                    if rows > cap:
                        raise Bounded(_too_many(cap))
                    if time.monotonic() > deadline:
                        raise Bounded(f"SQLite queries ran past {limit:.0f} s; "
                                      "TRACEFORGE_SQLITE_SECONDS raises the limit")
                    batches.append(batch)
                table = pa.Table.from_batches(batches, schema=reader.schema)
        except Bounded:
            raise
        except Exception:  # the driver's errors, and Arrow's on what it made: sqlite3 reads it
            return None
        return table if rows else None

    return fetch


def _arrow_result(table: Any) -> pd.DataFrame:
    """The frame of an Arrow table :func:`_arrow_fetch` read."""
    rows = table.num_rows
    out: pd.DataFrame = table.to_pandas()
    for name, col in zip(table.column_names, table.columns, strict=True):
        if col.null_count == rows:  # all NULL: as from_records makes it
            out[name] = pd.Series([None] * rows, dtype=object)
    return out


def _rows_at_most(conn: sqlite3.Connection, table: str) -> int:
    """An upper bound of ``table``'s rows: its largest rowid (a lookup), else its count."""
    q = table.replace('"', '""')
    try:
        (n,) = conn.execute(f'SELECT max(rowid) FROM "{q}"').fetchone()
    except sqlite3.OperationalError:  # WITHOUT ROWID
        (n,) = conn.execute(f'SELECT count(*) FROM "{q}"').fetchone()
    return max(int(n), 0) if isinstance(n, int) else 0


def _linear(conn: sqlite3.Connection, scans: Sequence[str],
            lookups: Sequence[tuple[str, str]]) -> bool:
    """Whether every table of ``scans`` and ``lookups`` is a base table and every lookup
    column its table's integer key or the first column of one of its indexes (False
    where the schema cannot be read so: sqlite3 then reads the query as before)."""
    try:
        kinds = dict(conn.execute("SELECT name, type FROM sqlite_master").fetchall())
        if any(kinds.get(t) != "table" for t in (*scans, *(t for t, _ in lookups))):
            return False
        for table, col in lookups:
            info = conn.execute(f"PRAGMA table_info({_quoted(table)})").fetchall()
            keys = [r for r in info if r[5]]
            if len(keys) == 1 and keys[0][1] == col and str(keys[0][2]).upper() == "INTEGER":
                continue
            firsts = [conn.execute(f"PRAGMA index_info({_quoted(str(ix[1]))})").fetchone()
                      for ix in conn.execute(f"PRAGMA index_list({_quoted(table)})")]
            if not any(f is not None and f[2] == col for f in firsts):
                return False
    except (sqlite3.Error, TypeError, ValueError):
        return False
    return True


def _quoted(name: str) -> str:
    """``name`` as an SQL string literal (an index's name comes from the file)."""
    return "'" + name.replace("'", "''") + "'"


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
