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


# -- invalid intervals, one file per format (item 7) --------------------------------------------

KERNEL_CSV_HEADER = ('"Kind","Agent_Id","Queue_Id","Thread_Id","Dispatch_Id","Kernel_Id",'
                     '"Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n')


def rocprofv3_csv(path: Path, bad: tuple[int, int] | None) -> Path:
    """A rocprofv3 kernel trace CSV with 20 dispatches; ``bad`` replaces the first times."""
    rows = [(T0 + 1000 * i, T0 + 1000 * i + 500) for i in range(20)]
    if bad:
        rows[0] = bad
    path.write_text(KERNEL_CSV_HEADER + "".join(
        f'"KERNEL_DISPATCH",1,1,7,{i},3,"gemm",{i},{s},{e}\n' for i, (s, e) in enumerate(rows)))
    return path


def rocprof_db(path: Path, bad: tuple[int, int] | None) -> Path:
    """A legacy rocprof results.db (table KERN) with 20 dispatches."""
    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE KERN (KernelName TEXT, BeginNs INTEGER, EndNs INTEGER, '
                 '"gpu-id" INTEGER, "queue-id" INTEGER, pid INTEGER)')
    rows = [(T0 + 1000 * i, T0 + 1000 * i + 500) for i in range(20)]
    if bad:
        rows[0] = bad
    conn.executemany("INSERT INTO KERN VALUES ('gemm', ?, ?, 0, 1, 42)", rows)
    conn.commit()
    conn.close()
    return path


def rocpd_bad(path: Path, sql: str) -> Path:
    """The rocpd test database with ``sql`` run on its kernel dispatch table ``{t}``."""
    from tests.support import rocpd_schema

    rocpd_schema.build(path)
    conn = sqlite3.connect(path)
    (t,) = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE "
                        "'rocpd_kernel_dispatch%'").fetchone()
    conn.execute(sql.format(t=t))
    conn.commit()
    conn.close()
    return path


def pftrace_end_before_begin() -> bytes:
    """A Perfetto TrackEvent trace whose one slice ends 50 ns before it begins."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    tr = pb.Trace()
    p = tr.packet.add()
    p.trusted_packet_sequence_id = 1
    p.track_descriptor.uuid = 9
    p.track_descriptor.thread.pid, p.track_descriptor.thread.tid = 4, 5
    for ts, typ in ((1000, pb.TrackEvent.TYPE_SLICE_BEGIN), (950, pb.TrackEvent.TYPE_SLICE_END),
                    (2000, pb.TrackEvent.TYPE_SLICE_BEGIN), (2500, pb.TrackEvent.TYPE_SLICE_END)):
        p = tr.packet.add()
        p.trusted_packet_sequence_id = 1
        p.timestamp = ts
        p.track_event.type = typ
        p.track_event.track_uuid = 9
        if typ == pb.TrackEvent.TYPE_SLICE_BEGIN:
            p.track_event.name = "hipLaunchKernel"
    data: bytes = tr.SerializeToString()
    return data
