"""Large SQLite tables read as Arrow batches (``sqlite_db.frame``'s ADBC path): the same
frame as sqlite3's rows give, the same bounds, and sqlite3 wherever the driver cannot be
trusted with the query (views, unindexed lookups, values unlike a column's first ones)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.conftest import shared
from traceforge.errors import TraceFormatError
from traceforge.formats import nsys, sqlite_db

pytest.importorskip("adbc_driver_sqlite")

ROWS = 300


def _db(path: Path, *, keyed: bool = True, late: Any = None) -> Path:
    """A table of ints, ints with NULLs, an all-NULL column, reals, text with NULLs, blobs
    and string ids looked up in ``StringIds`` (keyed by its INTEGER PRIMARY KEY or not);
    ``late``: a value put in the int column of the last row (a type the first rows lack)."""
    con = sqlite3.connect(path)
    key = "INTEGER PRIMARY KEY" if keyed else "INTEGER"
    con.execute(f"CREATE TABLE StringIds (id {key}, value TEXT)")
    con.executemany("INSERT INTO StringIds VALUES (?, ?)",
                    [(i, f"kernel_{i}") for i in range(20)])
    con.execute("CREATE TABLE T (start INTEGER, a INTEGER, gaps INTEGER, empty INTEGER, "
                "r REAL, txt TEXT, b BLOB, nameId INTEGER)")
    rows = [(1000 + 7 * i, -(2**62) + i, i if i % 3 else None, None, i / 8, None
             if i % 5 == 0 else f"t{i % 4}", bytes([i % 256]) * (i % 3), i % 23)
            for i in range(ROWS)]
    if late is not None:
        rows[-1] = (rows[-1][0], late, *rows[-1][2:])
    con.executemany("INSERT INTO T VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    con.execute("CREATE VIEW V AS SELECT * FROM T")
    con.commit()
    con.close()
    return path


SQL = ("SELECT start AS ts, a, gaps, empty, r, txt, b, "
       "(SELECT value FROM StringIds WHERE id = t.nameId) AS name FROM {} t")


def _paths_taken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path ("arrow" or "sqlite3") each later ``frame`` call that names its tables
    takes, in order."""
    taken: list[str] = []
    real = sqlite_db._arrow_fetch

    def spy(*a: Any, **k: Any) -> Any:
        fetch = real(*a, **k)
        if fetch is None:
            taken.append("sqlite3")
            return None

        def fetched() -> Any:
            got = fetch()
            taken.append("sqlite3" if got is None else "arrow")
            return got

        return fetched

    monkeypatch.setattr(sqlite_db, "_arrow_fetch", spy)
    return taken


def _frames(path: Path, sql: str, monkeypatch: pytest.MonkeyPatch, **reads: Any
            ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(frame through ``frame``'s Arrow path where it takes it, the sqlite3 frame, the
    paths taken)."""
    monkeypatch.setattr(sqlite_db, "ARROW_MIN_ROWS", 0)
    monkeypatch.setattr(sqlite_db, "ARROW_BATCH_ROWS", 64)
    taken = _paths_taken(monkeypatch)
    with sqlite_db.connect(path) as conn:
        fast = sqlite_db.frame(conn, sql, **reads)
        plain = sqlite_db.frame(conn, sql)
    return fast, plain, taken


def test_arrow_frame_is_the_sqlite3_frame(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    db = _db(tmp_path / "t.sqlite")
    before = sorted(p.name for p in tmp_path.iterdir())
    fast, plain, taken = _frames(db, SQL.format("T"), monkeypatch, scans=("T",),
                                 lookups=(("StringIds", "id"),))
    assert taken == ["arrow"]
    pd.testing.assert_frame_equal(fast, plain)
    assert plain["empty"].dtype == object and plain["gaps"].dtype == np.float64
    assert fast["a"].tolist()[:2] == [-(2**62), -(2**62) + 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing beside the input


@pytest.mark.parametrize("case", ["view", "unkeyed lookup", "late text", "late real",
                                  "too few rows"])
def test_arrow_frame_falls_back(case: str, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    late = {"late text": "oops", "late real": 2.5}.get(case)
    db = _db(tmp_path / "t.sqlite", keyed=case != "unkeyed lookup", late=late)
    table = "V" if case == "view" else "T"
    fast, plain, taken = _frames(db, SQL.format(table), monkeypatch, scans=(table,),
                                 lookups=(("StringIds", "id"),))
    if case == "too few rows":
        monkeypatch.setattr(sqlite_db, "ARROW_MIN_ROWS", ROWS + 1)
        with sqlite_db.connect(db) as conn:
            fast = sqlite_db.frame(conn, SQL.format(table), scans=(table,))
        assert taken[-1] == "sqlite3"
    else:
        assert taken == ["sqlite3"]
    pd.testing.assert_frame_equal(fast, plain)


def test_arrow_frame_keeps_the_bounds(tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    db = _db(tmp_path / "t.sqlite")
    monkeypatch.setattr(sqlite_db, "ARROW_MIN_ROWS", 0)
    monkeypatch.setattr(sqlite_db, "ARROW_BATCH_ROWS", 64)
    monkeypatch.setattr(sqlite_db, "_row_cap", lambda conn: ROWS - 1)
    with pytest.raises(TraceFormatError, match="more than 299 rows"), \
            sqlite_db.connect(db) as conn:
        sqlite_db.frame(conn, SQL.format("T"), scans=("T",))
    monkeypatch.undo()
    monkeypatch.setattr(sqlite_db, "ARROW_MIN_ROWS", 0)
    monkeypatch.setenv("TRACEFORGE_SQLITE_SECONDS", "-1")  # past its deadline at once
    monkeypatch.setattr(sqlite_db, "_linear", lambda *a: True)
    with pytest.raises(TraceFormatError, match="ran past"), sqlite_db.connect(db) as conn:
        sqlite_db.frame(conn, SQL.format("T"), scans=("T",))


@pytest.mark.parametrize("name", [
    "nccl_nsys_h100x2/nccl_rank0.sqlite",
    "nsys_memory_h100/train.nocache.sqlite.gz",
    "shared:h200-nsys/policy_fa2.sqlite.gz",
    "shared:external/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
    "shared:external/nvfuser/8fa9ec29/report1.sqlite",
])
def test_nsys_reads_the_same_trace_through_arrow(name: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = (shared(name.removeprefix("shared:")) if name.startswith("shared:")
            else Path(__file__).parents[3] / "fixtures" / name)
    monkeypatch.setattr(sqlite_db, "ARROW_MIN_ROWS", 0)
    taken = _paths_taken(monkeypatch)
    fast = nsys.read(path)
    assert "arrow" in taken
    monkeypatch.setattr(sqlite_db, "_arrow_fetch", lambda *a, **k: None)
    plain = nsys.read(path)
    pd.testing.assert_frame_equal(fast.events, plain.events)
    rows = np.arange(len(plain.events))
    assert fast.args_provider(rows) == plain.args_provider(rows)
    assert fast.meta == plain.meta


def test_frames_reads_at_once_what_frame_reads_one_by_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Several queries, some through the driver (on threads), one through sqlite3, one the
    driver refuses: each frame as frame gives it, in order; a bound hit by one is raised."""
    db = _db(tmp_path / "t.sqlite", late="text")
    monkeypatch.setattr(sqlite_db, "ARROW_MIN_ROWS", 0)
    monkeypatch.setattr(sqlite_db, "ARROW_BATCH_ROWS", 64)
    taken = _paths_taken(monkeypatch)
    queries = [sqlite_db.Query("SELECT start AS ts, gaps, (SELECT value FROM StringIds "
                               "WHERE id = t.nameId) AS name FROM T t", ("T",),
                               (("StringIds", "id"),)),
               sqlite_db.Query("SELECT start, r FROM T", ("T",)),
               sqlite_db.Query("SELECT a FROM T", ("T",)),  # (text after ints: sqlite3)
               sqlite_db.Query("SELECT count(*) AS n FROM V")]
    with sqlite_db.connect(db) as conn:
        got = sqlite_db.frames(conn, queries)
        assert sorted(taken) == ["arrow", "arrow", "sqlite3"]
        for q, df in zip(queries, got, strict=True):
            pd.testing.assert_frame_equal(df, sqlite_db.frame(conn, q.sql))
    monkeypatch.setattr(sqlite_db, "_row_cap", lambda conn: ROWS - 1)
    with pytest.raises(TraceFormatError, match="more than 299 rows"), \
            sqlite_db.connect(db) as conn:
        sqlite_db.frames(conn, queries[:2])


def test_a_hostile_index_name_is_read_by_sqlite3(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    db = _db(tmp_path / "t.sqlite", keyed=False)
    con = sqlite3.connect(db)
    con.execute("""CREATE INDEX "it's'); DROP TABLE T; --" ON StringIds (id)""")
    con.commit()
    con.close()
    fast, plain, taken = _frames(db, SQL.format("T"), monkeypatch, scans=("T",),
                                 lookups=(("StringIds", "id"),))
    assert taken == ["arrow"]  # the index found under its odd name
    pd.testing.assert_frame_equal(fast, plain)
