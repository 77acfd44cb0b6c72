"""Hostile mutations for tests/hostile/test_fuzz.py (issue 31): wild timestamps, gzip bombs, views
that loop or multiply rows, WAL databases, invalid intervals in every format."""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import shutil
import sqlite3
import zlib
from pathlib import Path
from typing import Any

#: Column names that hold an event's start and end in the formats' tables and CSVs.
_START_END = (("start", "end"), ("BeginNs", "EndNs"), ("Start_Timestamp", "End_Timestamp"),
              ("start_timestamp", "end_timestamp"))


def hostile_mutant(rng: random.Random, kind: str, seed: bytes, path: Path) -> str:
    """Write one hostile mutant of ``seed`` to ``path``; returns it in words."""
    if kind in ("json", "json.gz"):
        plain = gzip.decompress(seed) if kind == "json.gz" else seed
        if kind == "json.gz" and rng.random() < 0.4:
            return _bomb(rng, plain, path)
        desc, out = _json(rng, plain)
        path.write_bytes(gzip.compress(out) if kind == "json.gz" else out)
        return desc
    if kind == "sqlite":
        path.write_bytes(seed)
        return _sqlite(rng, path)
    if kind == "csv":
        desc, out = _csv(rng, seed)
        path.write_bytes(out)
        return desc
    if kind == "binary" and rng.random() < 0.5:  # a gzip bomb whatever the format
        return _bomb(rng, seed, path)
    path.write_bytes(seed[: rng.randrange(len(seed) + 1)])
    return "truncated (hostile fallback)"


def _bomb(rng: random.Random, plain: bytes, path: Path) -> str:
    """The content with 16 MiB of spaces (or zeros) inserted, gzipped: ~20 KB on disk."""
    at = rng.randrange(len(plain) + 1)
    fill = rng.choice((b" ", b"\0"))
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [z.compress(plain[:at])]
    block = fill * 2**20
    parts += [z.compress(block) for _ in range(16)]
    parts += [z.compress(plain[at:]), z.flush()]
    path.write_bytes(b"".join(parts))
    return f"gzip bomb: 16 MiB of {fill!r} at {at}"


def _json(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    doc = json.loads(data)
    nodes = json_nodes(doc)
    timed = [d for d in nodes if any(isinstance(d.get(k), (int, float)) for k in
                                     ("ts", "start_timestamp", "BeginNs"))]
    op = rng.choice(("wild-ts", "wild-ts", "invalid-interval"))
    if op == "wild-ts" and timed:
        value = rng.choice((-1, 0, 2**60, -(2**50), 1.7e15))
        n = 0
        for d in timed:
            if rng.random() < 0.1:
                key = next(k for k in ("ts", "start_timestamp", "BeginNs")
                           if isinstance(d.get(k), (int, float)))
                d[key] = value
                n += 1
        return f"wild ts={value} on {n} events", json.dumps(doc).encode()
    for s, e in (("ts", "dur"), *_START_END):
        hits = [d for d in nodes if isinstance(d.get(s), (int, float))
                and isinstance(d.get(e), (int, float))]
        if hits:
            d = rng.choice(hits)
            if e == "dur":
                d[e] = -abs(d[e]) - 1
            else:
                d[e] = d[s] - rng.choice((1, 1000, 10**9))
            return f"invalid interval {s}/{e}", json.dumps(doc).encode()
    return "no timed events to make hostile", data


def json_nodes(doc: Any) -> list[dict[str, Any]]:
    """Every JSON object inside ``doc``, nested ones included (no recursion)."""
    out: list[dict[str, Any]] = []
    todo = [doc]
    while todo:
        x = todo.pop()
        if isinstance(x, dict):
            out.append(x)
            todo += list(x.values())
        elif isinstance(x, list):
            todo += x
    return out


def _csv(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    rows = list(csv.reader(io.StringIO(data.decode("utf-8", "replace"))))
    head = rows[0] if rows else []
    for s, e in _START_END:
        if s in head and e in head and len(rows) > 1:
            i, j = head.index(s), head.index(e)
            r = rows[rng.randrange(1, len(rows))]
            op = rng.choice(("end<start", "negative start", "wild start"))
            if max(i, j) < len(r):
                if op == "end<start":
                    r[i], r[j] = r[j], r[i]
                elif op == "negative start":
                    r[i] = "-1"
                else:
                    r[i] = str(rng.choice((0, 2**60)))
            buf = io.StringIO()
            csv.writer(buf, quoting=csv.QUOTE_MINIMAL).writerows(rows)
            return f"{op} in {s}/{e}", buf.getvalue().encode()
    return "no interval columns", data


def _sqlite(rng: random.Random, path: Path) -> str:
    op = rng.choice(("looping-view", "multiplying-view", "wal", "wal-rows", "invalid-interval",
                     "wild-ts"))
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        t = rng.choice(tables)
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')]
        timed = [(tb, s, e) for tb in tables
                 for c in [[r[1] for r in conn.execute(f'PRAGMA table_info("{tb}")')]]
                 for s, e in _START_END if s in c and e in c]
        if op == "looping-view" and cols:
            sel = ", ".join(f'x AS "{c}"' for c in cols)
            _drop(conn, t)
            conn.execute(f'CREATE VIEW "{t}" AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL '
                         f'SELECT x + 1 FROM r) SELECT {sel} FROM r')
        elif op == "multiplying-view":
            conn.execute(f'ALTER TABLE "{t}" RENAME TO "{t}__base"')
            conn.execute(f'CREATE VIEW "{t}" AS SELECT a.* FROM "{t}__base" a, "{t}__base" b, '
                         f'"{t}__base" c')
        elif op in ("invalid-interval", "wild-ts") and timed:
            tb, s, e = rng.choice(timed)
            if op == "invalid-interval":
                conn.execute(f'UPDATE "{tb}" SET "{e}" = "{s}" - 7 WHERE rowid = '
                             f'(SELECT min(rowid) FROM "{tb}")')
            else:
                conn.execute(f'UPDATE "{tb}" SET "{s}" = ?, "{e}" = ? + 5 WHERE rowid % 10 = 0',
                             (rng.choice((-1, 0, 2**60)),) * 2)
            t = tb
        elif op in ("wal", "wal-rows"):
            conn.close()
            return _wal(rng, path, op == "wal-rows")
        conn.commit()
        return f"{op} {t}"
    except sqlite3.Error as e:
        conn.rollback()
        return f"{op} refused by sqlite ({e}); unchanged"
    finally:
        conn.close()


def _drop(conn: sqlite3.Connection, name: str) -> None:
    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    if kind:
        conn.execute(f'DROP {kind[0].upper()} "{name}"')


def _wal(rng: random.Random, path: Path, rows_in_wal: bool) -> str:
    """WAL mode; with ``rows_in_wal``, a change left in the -wal file beside it."""
    build = path.with_name(path.name + ".build")
    shutil.copyfile(path, build)
    conn = sqlite3.connect(build)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        if not rows_in_wal:
            conn.close()
            shutil.copyfile(build, path)
            return "wal mode"
        conn.execute("PRAGMA wal_autocheckpoint=0")
        t = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                         "AND name NOT LIKE 'sqlite_%' ORDER BY random() LIMIT 1").fetchone()
        if t:
            conn.execute(f'DELETE FROM "{t[0]}" WHERE rowid % 3 = 0')
            conn.commit()
        shutil.copyfile(build, path)
        shutil.copyfile(f"{build}-wal", f"{path}-wal")
        return f"wal mode, rows of {t[0] if t else '-'} deleted in the -wal file"
    finally:
        conn.close()
        for f in (build, Path(f"{build}-wal"), Path(f"{build}-shm")):
            f.unlink(missing_ok=True)
