"""Small hostile input files built in code (issue 31): a minimal nsys export, views that
loop, WAL-mode databases, gzip bombs. Nothing large is committed; each is made in a test."""

from __future__ import annotations

import shutil
import sqlite3
import zlib
from pathlib import Path

T0 = 1_000_000_000


def nsys_db(path: Path, kernels: int = 50, *, start_end: list[tuple[int | None, int | None]]
            | None = None, wal: bool = False) -> Path:
    """A minimal Nsight Systems export: StringIds and a kernel table with ``kernels`` rows
    (``start_end`` replaces the times of the first rows: invalid intervals)."""
    build = path.with_name(path.name + ".build") if wal else path
    conn = sqlite3.connect(build)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, "end" INTEGER,
            deviceId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
            demangledName INTEGER, shortName INTEGER, gridX INTEGER);
    """)
    conn.execute("INSERT INTO StringIds VALUES (1, 'gemm_kernel'), (2, 'gemm')")
    rows = [(T0 + 1000 * i, T0 + 1000 * i + 600, 0, 7, i, 4242 << 24, 1, 2, 128)
            for i in range(kernels)]
    for i, (s, e) in enumerate(start_end or []):
        rows[i] = (s, e, *rows[i][2:])  # type: ignore[assignment]
    conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?)", rows)
    conn.commit()
    if wal:
        # The rows still in the -wal file, as a live or killed profiler leaves them.
        shutil.copyfile(build, path)
        shutil.copyfile(f"{build}-wal", f"{path}-wal")
    conn.close()
    return path


def wal_checkpointed(path: Path) -> Path:
    """A WAL-mode database with everything checkpointed and no -wal file beside it."""
    nsys_db(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    assert not Path(f"{path}-wal").exists()
    return path


LOOP = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r"


def looping_view(path: Path, name: str, columns: str) -> None:
    """Replace table ``name`` with a view over an infinite ``WITH RECURSIVE``."""
    conn = sqlite3.connect(path)
    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    if kind:
        conn.execute(f'DROP {kind[0].upper()} "{name}"')
    conn.execute(f'CREATE VIEW "{name}" AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL '
                 f'SELECT x + 1 FROM r) SELECT {columns} FROM r')
    conn.commit()
    conn.close()


def multiplying_view(path: Path, name: str, base: str, empty: bool = False) -> None:
    """Replace table ``name`` with a view that cross-joins ``base`` with itself four times
    (``empty``: keeping none of the rows, so it yields nothing, slowly)."""
    conn = sqlite3.connect(path)
    conn.execute(f'ALTER TABLE "{name}" RENAME TO "{name}_orig"')
    where = " WHERE a.rowid + b.rowid + c.rowid + d.rowid < 0" if empty else ""
    conn.execute(f'CREATE VIEW "{name}" AS SELECT a.* FROM "{base}" a, "{base}" b, '
                 f'"{base}" c, "{base}" d{where}')
    conn.commit()
    conn.close()


def gzip_bomb(path: Path, inner: bytes, prefix: bytes = b"", suffix: bytes = b"",
              size: int = 64 * 2**20) -> Path:
    """A gzip file whose content is ``prefix``, ``size`` bytes of ``inner`` repeated, then
    ``suffix``: a few tens of KB on disk."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [z.compress(prefix)]
    block = (inner * (2**20 // len(inner) + 1))[:2**20]
    for _ in range(size // 2**20):
        parts.append(z.compress(block))
    parts += [z.compress(suffix), z.flush()]
    path.write_bytes(b"".join(parts))
    return path
