"""nsys reports of several processes (torchrun under nsys): pids, ranks and splitting.

The two-process report is built from the real H200 export: the export's own table
definitions and a slice of its rows, with the kernel and runtime rows copied a second time
under another process id (and GPU 1), plus NVTX rows of a third process that ran no GPU
work (the torchrun launcher). Expected numbers are raw SQL counts per globalPid.
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import shared
from tests.conftest import sql_rows as _sql
from traceforge.cli import cli
from traceforge.formats.nsys import split_processes

_KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_COPIED = ("StringIds", "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME", "META_DATA_EXPORT",
           "ThreadNames", "PROCESSES", _KERNEL, _RUNTIME, "NVTX_EVENTS")
SECOND_PID, LAUNCHER_PID = 2080, 999
_PID_SHIFT = 1 << 24




@pytest.fixture(scope="module")
def two_proc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("nsys2")
    src = tmp / "policy_fa2.sqlite"
    with gzip.open(shared("h200-nsys/policy_fa2.sqlite.gz"), "rb") as f, src.open("wb") as g:
        shutil.copyfileobj(f, g)
    out = tmp / "torchrun_2proc.sqlite"
    conn = sqlite3.connect(out)
    conn.execute("ATTACH DATABASE ? AS s", (f"file:{src}?mode=ro",))
    for table in _COPIED:
        (ddl,) = conn.execute("SELECT sql FROM s.sqlite_master WHERE name = ?", (table,)).fetchone()
        conn.execute(ddl)
    for table in _COPIED[:4]:
        conn.execute(f"INSERT INTO main.{table} SELECT * FROM s.{table}")
    (gpid,) = conn.execute(f"SELECT DISTINCT globalPid FROM s.{_KERNEL}").fetchone()
    pid = (gpid >> 24) & 0xFFFFFF
    # A slice: the first 300 kernels and the runtime calls that launched them.
    conn.execute(f"INSERT INTO main.{_KERNEL} SELECT * FROM s.{_KERNEL} ORDER BY start LIMIT 300")
    conn.execute(f"""INSERT INTO main.{_RUNTIME} SELECT * FROM s.{_RUNTIME} WHERE correlationId
                     IN (SELECT correlationId FROM main.{_KERNEL})""")
    conn.execute("INSERT INTO main.NVTX_EVENTS SELECT * FROM s.NVTX_EVENTS")
    conn.execute("INSERT INTO main.PROCESSES SELECT * FROM s.PROCESSES WHERE pid = ?", (pid,))
    conn.execute("INSERT INTO main.ThreadNames SELECT * FROM s.ThreadNames "
                 "WHERE (globalTid >> 24) & 16777215 = ?", (pid,))
    delta = (SECOND_PID - pid) * _PID_SHIFT
    # The second process: the same kernels, on GPU 1, 1 us later; its own runtime calls.
    kcols = [str(r[1]) for r in conn.execute(f"PRAGMA main.table_info({_KERNEL})")]
    sel = ", ".join({"globalPid": f"globalPid + {delta}", "deviceId": "1",
                     "start": "start + 1000", "end": '"end" + 1000'}.get(c, f'"{c}"')
                    for c in kcols)
    conn.execute(f"INSERT INTO main.{_KERNEL} SELECT {sel} FROM s.{_KERNEL} "
                 "ORDER BY start LIMIT 200")
    rcols = [str(r[1]) for r in conn.execute(f"PRAGMA main.table_info({_RUNTIME})")]
    sel = ", ".join({"globalTid": f"globalTid + {delta}"}.get(c, f'"{c}"') for c in rcols)
    conn.execute(f"""INSERT INTO main.{_RUNTIME} SELECT {sel} FROM s.{_RUNTIME}
        WHERE correlationId IN (SELECT correlationId FROM s.{_KERNEL} ORDER BY start LIMIT 200)""")
    pcols = [str(r[1]) for r in conn.execute("PRAGMA main.table_info(PROCESSES)")]
    for new, name in ((SECOND_PID, "python3"), (LAUNCHER_PID, "torchrun")):
        vals = {"globalPid": gpid + (new - pid) * _PID_SHIFT, "pid": new, "name": name}
        conn.execute(f"INSERT INTO main.PROCESSES ({', '.join(pcols)}) VALUES "
                     f"({', '.join('?' * len(pcols))})", [vals.get(c) for c in pcols])
    # The launcher: NVTX ranges only, no GPU work.
    ncols = [str(r[1]) for r in conn.execute("PRAGMA main.table_info(NVTX_EVENTS)")]
    ldelta = (LAUNCHER_PID - pid) * _PID_SHIFT
    sel = ", ".join({"globalTid": f"globalTid + {ldelta}"}.get(c, f'"{c}"') for c in ncols)
    conn.execute(f"INSERT INTO main.NVTX_EVENTS SELECT {sel} FROM s.NVTX_EVENTS "
                 "WHERE eventType = 59")
    conn.commit()
    conn.execute("DETACH DATABASE s")
    conn.close()
    return out


def _per_pid(db: Path) -> list[tuple[int, int]]:
    rows = _sql(db, f"""SELECT (globalPid >> 24) & 16777215 AS pid, COUNT(*) FROM {_KERNEL}
                        GROUP BY pid ORDER BY pid""")
    return [(int(str(p)), int(str(n))) for p, n in rows]


def test_ranks_number_gpu_processes_in_pid_order(two_proc: Path) -> None:
    t = tf.load(two_proc)
    per_pid = _per_pid(two_proc)
    assert len(per_pid) == 2 and t.meta.world_size == 2
    assert t.meta.extra["rank_pids"] == {r: p for r, (p, _) in enumerate(per_pid)}
    k = t.kernels()
    for rank, (pid, n) in enumerate(per_pid):
        sel = k[k["rank"] == rank]
        assert len(sel) == n
        assert {a["host_pid"] for a in t.args(sel.index.to_numpy())} == {pid}
    ev = t.events
    host = ev[ev["device"] < 0]
    (n_launcher,) = _sql(two_proc, f"""SELECT COUNT(*) FROM NVTX_EVENTS
        WHERE (globalTid >> 24) & 16777215 = {LAUNCHER_PID}""")[0]
    launcher = host[host["pid"] == LAUNCHER_PID]
    assert len(launcher) == n_launcher and set(launcher["rank"]) == {-1}
    for rank, (pid, _) in enumerate(per_pid):
        assert set(host.loc[host["rank"] == rank, "pid"]) == {pid}


def test_split_processes_gives_one_trace_per_gpu_process(two_proc: Path) -> None:
    parts = split_processes(tf.load(two_proc))
    per_pid = _per_pid(two_proc)
    assert [p.meta.rank for p in parts] == [0, 1]
    for part, (pid, n) in zip(parts, per_pid, strict=True):
        assert len(part.kernels()) == n
        assert part.meta.world_size == 2 and part.meta.extra["pid"] == pid
        assert set(part.events["rank"]) == {part.meta.rank}
        (n_rt,) = _sql(two_proc, f"""SELECT COUNT(*) FROM {_RUNTIME}
            WHERE (globalTid >> 24) & 16777215 = {pid}""")[0]
        assert int(part.events["kind"].isin(["runtime", "driver"]).sum()) == n_rt
        assert set(part.meta.process_names) <= {pid}
        # args still decode through the parent trace after re-indexing
        args = part.args(part.kernels().index[:3].to_numpy())
        assert {a["host_pid"] for a in args} == {pid}


def test_load_run_splits_a_multi_process_report(two_proc: Path) -> None:
    runs = tf.load_run(two_proc)
    assert [len(r.kernels()) for r in runs] == [n for _, n in _per_pid(two_proc)]
    res = CliRunner().invoke(cli, ["overlap", str(two_proc), "--format", "csv"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines[0].startswith("rank") and {ln.split(",")[0] for ln in lines[1:]} >= {"0", "1"}


def test_single_process_report_is_one_rank(tmp_path: Path) -> None:
    src = shared("h200-nsys/policy_fa2.sqlite.gz")
    t = tf.load(src)
    parts = split_processes(t)
    assert len(parts) == 1 and parts[0].meta.rank == 0
    assert len(parts[0].kernels()) == len(t.kernels())
