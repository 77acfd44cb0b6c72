"""Args of the readers that build frames (``traceforge.formats.frame_args``): ``ColumnArgs``
column by column gives the dicts it gave a row at a time; ``PartArgs`` (each table's args
over its own rows) gives what ``ColumnArgs`` gives over the concatenated, reordered frame,
and its cache columns rebuild that provider; and ``sqlite_db.string_codes`` gives what a
``StringIds`` subquery per row gives, or steps aside."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import traceforge
from tests.conftest import shared
from traceforge import background
from traceforge.formats import frame_args, nsys, nsys_tables, sqlite_db
from traceforge.formats.cache_args import ARGS_PREFIX, CachedArgs, Rebuild


def _row_at_a_time(cols: dict[str, np.ndarray], rows: np.ndarray) -> list[dict[str, Any]]:
    """``ColumnArgs.__call__`` as it was, a row at a time over every column (the oracle),
    but for what holds no value: there None and Python's float NaN only (a float32 NaN,
    pandas' NA and NaT were kept as values, and NA then failed the JSON encoding)."""
    out = []
    for r in rows.tolist():
        d: dict[str, Any] = {}
        for k, arr in cols.items():
            v = arr[r]
            if v is None or v is pd.NA or v is pd.NaT or (
                    isinstance(v, (float, np.floating)) and v != v):
                continue
            v = v.item() if hasattr(v, "item") else v
            if k == "host_pid" and v < 0:
                continue
            if k in frame_args.JSON_COLUMNS and isinstance(v, str):
                try:
                    v = json.loads(v)
                except ValueError:
                    continue
            d[k] = int(v) if isinstance(v, float) and v.is_integer() else v
        out.append(d)
    return out


_CELLS = {
    "i": st.integers(-(2**63), 2**63 - 1),
    "i53": st.integers(-(2**53), 2**53),  # (exact as floats too)
    "f": st.one_of(st.floats(allow_nan=True),
                   st.sampled_from([np.nan, 2.0**70, -3.0, 0.5, np.inf, -np.inf, -0.0])),
    "o": st.one_of(st.none(), st.just(np.nan), st.text(max_size=4), st.binary(max_size=3),
                   st.sampled_from(['{"a": 1}', "[1, 2]", "not json", "7"]),
                   st.integers(-5, 5), st.floats(allow_nan=True),
                   st.sampled_from([np.float64("nan"), np.float64(2.0), np.float32("nan"),
                                    pd.NA, pd.NaT, np.int64(-3)])),
    "f32": st.floats(width=32, allow_nan=True),
    "b": st.booleans(),
    "u": st.integers(0, 2**64 - 1),
}


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_column_args_are_the_row_at_a_time_dicts(data: st.DataObject) -> None:
    n = data.draw(st.integers(0, 25))
    keys = data.draw(st.lists(st.sampled_from(
        ["gridX", "host_pid", "payload", "call_args", "Input Dims", "bytes", "short_name"]),
        unique=True, max_size=5))
    cols: dict[str, np.ndarray] = {}
    for k in keys:
        # (a host pid is a number: the oracle itself fails on text there)
        kind = data.draw(st.sampled_from(sorted(set(_CELLS) - ({"o"} if k == "host_pid"
                                                                  else set()))))
        cols[k] = _column(data, kind, n)
    provider = frame_args.ColumnArgs.__new__(frame_args.ColumnArgs)
    provider.cols = cols
    rows = np.asarray(data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=30))
                      if n else [], dtype=np.int64)
    # (repr: the same keys in the same order, values of the same types, NaN equal to NaN)
    assert repr(provider(rows)) == repr(_row_at_a_time(cols, rows))
    assert repr(from_columns(provider.arg_columns(rows), len(rows))) == repr(provider(rows))


def from_columns(cols: list[Any], n: int) -> list[dict[str, Any]]:
    """The dicts arg columns stand for: each row's present values, keys in column order;
    ints come as int64 columns, reals as float64 ones, and a key once per row."""
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for c in cols:
        assert c.values.dtype in (np.int64, np.float64, object)
        present = np.ones(n, dtype=bool) if c.present is None else c.present
        for i in np.flatnonzero(present).tolist():
            assert c.key not in out[i]
            v = c.values[i]
            out[i][c.key] = v.item() if isinstance(v, np.generic) else v
    return out


def _column(data: st.DataObject, kind: str, n: int) -> np.ndarray:
    cells = data.draw(st.lists(_CELLS[kind], min_size=n, max_size=n))
    dtype = {"i": np.int64, "i53": np.int64, "f": np.float64, "o": object, "f32": np.float32,
             "b": bool, "u": np.uint64}[kind]
    if dtype is object:
        arr = np.empty(n, dtype=object)
        arr[:] = cells
        return arr
    return np.asarray(cells, dtype=dtype)


def _parts(data: st.DataObject, kinds: list[str]
           ) -> tuple[list[pd.DataFrame], list[dict[str, np.ndarray]], np.ndarray, np.ndarray]:
    """Parts (each a frame and its args columns), a reordering of their rows and a
    whole-trace host_pid column."""
    frames: list[pd.DataFrame] = []
    parts: list[dict[str, np.ndarray]] = []
    for _ in range(data.draw(st.integers(1, 4))):
        n = data.draw(st.integers(0, 8))
        have = data.draw(st.lists(st.sampled_from([k for k in _KEYS if k != "host_pid"]),
                                  unique=True, max_size=4))
        cols = {k: _column(data, data.draw(st.sampled_from(kinds)), n) for k in have}
        parts.append(cols)
        frames.append(pd.DataFrame({"row": np.zeros(n), **{
            k: pd.Series(a, dtype=a.dtype) for k, a in cols.items()}}))  # (no inference)
    total = sum(len(f) for f in frames)
    order = np.asarray(data.draw(st.permutations(range(total))), dtype=np.int64)
    host_pid = np.asarray(data.draw(st.lists(st.integers(-3, 9), min_size=total,
                                             max_size=total)), dtype=np.int64)
    return frames, parts, order, host_pid


_KEYS = ["short_name", "bytes", "host_pid", "payload", "gridX", "Input Dims"]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_part_args_are_the_column_args_of_the_concatenated_frame(data: st.DataObject) -> None:
    """Against the reader as it was: its parts concatenated (every args column over every
    row), reordered, the whole-trace column beside them; with the dtypes SQLite readers'
    frames hold (int64, float64, objects). Ints within 2**53: the concatenation made a
    column some parts lacked float64, so larger ones came out rounded (no longer)."""
    frames, parts, order, host_pid = _parts(data, ["i53", "f", "o"])
    wide = pd.concat(frames, ignore_index=True, sort=False).take(order).reset_index(drop=True)
    wide["host_pid"] = host_pid
    oracle = frame_args.ColumnArgs(wide, _KEYS)
    provider = frame_args.PartArgs(parts, [len(f) for f in frames], order,
                                   {"host_pid": host_pid}, _KEYS)
    rows = np.asarray(data.draw(st.lists(st.integers(0, max(len(order) - 1, 0)),
                                         max_size=20)) if len(order) else [], dtype=np.int64)
    assert repr(provider(rows)) == repr(oracle(rows))
    assert list(provider.dense_columns()) == list(oracle.cols)
    assert repr(from_columns(provider.arg_columns(rows), len(rows))) == repr(oracle(rows))


def _through_the_cache(provider: Any, tmp: Path) -> Any:
    """The provider the cache rebuilds from what ``provider`` gives it to store: its
    columns written to an Arrow file beside the events' length and read back."""
    import pyarrow as pa

    cols = provider.cache_columns()
    arrays = {f"{ARGS_PREFIX}{k}": v if isinstance(v, pa.Array) else
              pa.array(v, from_pandas=True) for k, v in cols.items()}
    table = pa.table(arrays) if arrays else pa.table({"x": pa.nulls(0)})
    with pa.OSFile(str(tmp), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table)
    back = pa.ipc.open_file(pa.memory_map(str(tmp))).read_all()
    back.validate(full=True)
    stored = {c: back.column(c) for c in back.column_names if c.startswith(ARGS_PREFIX)}
    header = getattr(provider, "cache_header", lambda: None)()
    return Rebuild("traceforge.formats.frame_args", Path("t"), stored, header)()


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_part_args_through_the_cache_give_the_same_args(data: st.DataObject) -> None:
    """What the cache stores rebuilds a provider that gives the fresh dicts (ints past
    2**53 included), but for a column with cells Arrow converts (text beside bytes is
    stored as bytes, bools beside floats as floats) or whose tables disagree on its type
    (stored one value per row, in the final order): there the dicts the cache gave before
    PartArgs, which stored every column so."""
    # (not "u": SQLite's ints are signed, and uint64 exists for ColumnArgs' own test)
    frames, parts, order, host_pid = _parts(data, sorted(set(_CELLS) - {"u"}))
    provider = frame_args.PartArgs(parts, [len(f) for f in frames], order,
                                   {"host_pid": host_pid}, _KEYS)
    before = frame_args.ColumnArgs.__new__(frame_args.ColumnArgs)
    before.cols = provider.dense_columns()
    rows = np.arange(len(order))
    with tempfile.TemporaryDirectory() as d:
        try:
            oracle = _through_the_cache(before, Path(d) / "before.arrow")(rows)
        except (TypeError, ValueError):  # (what the cache then stores as JSON documents)
            return
        cached = _through_the_cache(provider, Path(d) / "t.arrow")(rows)
    fresh = provider(rows)
    whole = provider.cache_header()["whole"]
    for k in _KEYS:
        plain = k not in whole[1:] and all(_plain(p[k]) for p in parts if k in p)
        want = [{key: v for key, v in r.items() if key == k} for r in
                (fresh if plain else oracle)]
        assert repr([{key: v for key, v in r.items() if key == k} for r in cached]) == \
            repr(want), k
    assert all(list(r) == sorted(r, key=_KEYS.index) for r in cached)  # (keys in order)


def _plain(a: np.ndarray) -> bool:
    """Cells Arrow stores as they are: no bools, and text or bytes but not both."""
    if a.dtype == object:
        kinds = {type(v) for v in a.tolist()}
        return not ({str, bytes} <= kinds or bool in kinds or np.bool_ in kinds)
    return a.dtype != bool


def test_part_args_are_stored_run_end_encoded(tmp_path: Path) -> None:
    """Each table's column over its own rows (a run of nulls over the others' rows),
    rebuilt as PartArgs; a column whose tables disagree on its type is stored one value
    per row in the final order."""
    import pyarrow as pa

    order = np.asarray([3, 0, 4, 1, 2])
    parts = [{"gridX": np.asarray([7, 8])}, {"returnValue": np.asarray([0.5, 1.0, 0.0])}]
    provider = frame_args.PartArgs(parts, [2, 3], order, {"host_pid": np.arange(5)},
                                   ["gridX", "host_pid", "returnValue"])
    cols = provider.cache_columns()
    assert pa.types.is_run_end_encoded(cols["gridX"].type)
    assert cols["gridX"].run_ends.to_pylist() == [1, 2, 5]  # 2 rows, then nulls
    assert cols["returnValue"].run_ends.to_pylist() == [2, 3, 4, 5]
    assert provider.cache_header() == {
        "layout": "parts", "sizes": [2, 3], "keys": [["gridX"], ["returnValue"]],
        "whole": ["host_pid"], "columns": ["gridX", "host_pid", "returnValue"]}
    rebuilt = _through_the_cache(provider, tmp_path / "a.arrow")
    assert isinstance(rebuilt, frame_args.PartArgs)
    rows = np.arange(5)
    assert rebuilt(rows) == provider(rows) == [
        {"host_pid": 0, "returnValue": 1}, {"gridX": 7, "host_pid": 1},
        {"host_pid": 2, "returnValue": 0}, {"gridX": 8, "host_pid": 3},
        {"host_pid": 4, "returnValue": 0.5}]
    mixed = frame_args.PartArgs(
        [{"value": np.asarray([1.5])}, {"value": np.asarray([3])}], [1, 1],
        np.asarray([1, 0]), {}, ["value"])
    assert not pa.types.is_run_end_encoded(pa.array(mixed.cache_columns()["value"]).type)
    assert mixed.cache_header()["whole"] == ["value"]
    assert _through_the_cache(mixed, tmp_path / "b.arrow")(np.arange(2)) == [
        {"value": 3}, {"value": 1.5}]


def test_nsys_args_through_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached nsys trace (a second load) gives the args of the fresh read."""
    monkeypatch.setenv("TRACEFORGE_CACHE", str(tmp_path))
    path = Path(__file__).parents[3] / _EXPORTS[1]
    fresh = nsys.read(path)
    traceforge.load(path)
    background.settle()
    cached = traceforge.load(path)
    assert isinstance(cached.args_provider, CachedArgs)
    rows = np.arange(len(fresh.events))
    assert cached.args_provider(rows) == fresh.args_provider(rows)
    assert isinstance(cached.args_provider._provider(), frame_args.PartArgs)


def test_part_args_refuse_parts_that_disagree() -> None:
    with pytest.raises(ValueError, match="size"):
        frame_args.PartArgs([{"a": np.zeros(3)}], [2], np.arange(2), {}, ["a"])
    with pytest.raises(ValueError, match="rows"):
        frame_args.PartArgs([{"a": np.zeros(2)}], [2], np.arange(3), {}, ["a"])


def _ids_db(path: Path, *, twice: bool = False) -> Path:
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE StringIds (id INTEGER{'' if twice else ' PRIMARY KEY'}, "
                "value TEXT)")
    con.executemany("INSERT INTO StringIds VALUES (?, ?)",
                    [(i, None if i == 4 else f"s{i % 7}") for i in range(1, 30)]
                    + ([(3, "again")] if twice else []))
    con.execute("CREATE TABLE T (k INTEGER, gaps INTEGER, r REAL, odd)")
    con.executemany("INSERT INTO T VALUES (?, ?, ?, ?)",
                    [(i % 35, None if i % 4 == 0 else i % 31, float(i % 9), i % 5)
                     for i in range(200)])
    con.commit()
    con.close()
    return path


def _subqueries(conn: sqlite3.Connection, col: str) -> list[Any]:
    return [r[0] for r in conn.execute(
        f"SELECT (SELECT value FROM StringIds WHERE id = t.{col}) FROM T t")]


def test_string_codes_are_the_subqueries(tmp_path: Path) -> None:
    db = _ids_db(tmp_path / "t.sqlite")
    with sqlite_db.connect(db) as conn:
        df = sqlite_db.frame(conn, "SELECT k, gaps, r, odd, NULL AS none FROM T")
        got = sqlite_db.string_codes(conn, [df["k"], df["gaps"], df["r"], df["none"]])
        assert got is not None
        codes, values = got
        texts = values.tolist()
        # (ids 30-34 are missing, id 4's value is NULL, gaps holds NULLs, r is real)
        for c, col in zip(codes, ("k", "gaps", "r"), strict=False):
            assert [texts[i] if i >= 0 else None for i in c.tolist()] == _subqueries(conn, col)
        assert (codes[3] == -1).all()
        assert len(set(texts)) == len(texts) == 7  # each distinct value once


def test_string_codes_step_aside(tmp_path: Path) -> None:
    """Text in an id column (SQLite's affinity rules decide what it equals) and an id the
    table holds twice (SQLite picks the row) are left to the subqueries."""
    db = _ids_db(tmp_path / "t.sqlite")
    with sqlite_db.connect(db) as conn:
        assert sqlite_db.string_codes(conn, [pd.Series(["3", 4], dtype=object)]) is None
        assert sqlite_db.string_codes(conn, [pd.Series([3.5, np.nan])]) is None
    twice = _ids_db(tmp_path / "twice.sqlite", twice=True)
    with sqlite_db.connect(twice) as conn:
        assert sqlite_db.string_codes(conn, [pd.Series([3, 5])]) is None
        assert sqlite_db.string_codes(conn, [pd.Series([5, 6])]) is not None


_EXPORTS = ["fixtures/nccl_nsys_h100x2/nccl_rank0.sqlite",
            "fixtures/nsys_memory_h100/train.cached.sqlite.gz",
            "fixtures/counters/model.nsys.sqlite.gz"]


@pytest.mark.parametrize("name", [*_EXPORTS, "h200-nsys/policy_fa2.sqlite.gz",
                                  "external/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"])
def test_nsys_names_by_id_are_the_subqueries(name: str) -> None:
    """The kernels' and API calls' names looked up once per id equal the reader's old
    subquery per row (which it still runs where string_codes steps aside)."""
    path = Path(__file__).parents[3] / name if name.startswith("fixtures/") else shared(name)
    with sqlite_db.connect(path) as conn:
        for read in (nsys_tables.kernels, nsys_tables.api):
            plain = read(conn, by_id=False)
            fast = read(conn)
            assert sorted(fast.columns) == sorted(plain.columns)
            fast = fast[plain.columns]
            for col in fast.columns:
                a, b = fast[col], plain[col]
                if col in ("name", "kind", "cat"):
                    a, b = a.astype(object), b.astype(object)
                pd.testing.assert_series_equal(a, b, check_dtype=col != "short_name")
