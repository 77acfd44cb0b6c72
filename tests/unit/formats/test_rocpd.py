"""rocpd reader on a synthetic database built to rocprofv3's documented schema.

No real rocpd file is available; tests/support/rocpd_schema.py builds one (schema source cited
there). Every expected number is a raw SQL query on the base tables of that database.
"""

from __future__ import annotations

import csv
import io
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import sql_rows as _sql
from tests.support import rocpd_schema
from traceforge.cli import cli

DISPATCH = f"rocpd_kernel_dispatch{rocpd_schema.UUID}"
SYMBOL = f"rocpd_info_kernel_symbol{rocpd_schema.UUID}"
REGION = f"rocpd_region{rocpd_schema.UUID}"
EVENT = f"rocpd_event{rocpd_schema.UUID}"
STRING = f"rocpd_string{rocpd_schema.UUID}"
PROCESS = f"rocpd_info_process{rocpd_schema.UUID}"




@pytest.fixture
def db(tmp_path: Path) -> Path:
    return rocpd_schema.build(tmp_path / "4242_results.db")


@pytest.fixture
def db2(tmp_path: Path) -> Path:
    return rocpd_schema.build(tmp_path / "merged_results.db", processes=2)


def test_sniffed_as_rocpd_and_kernels_match_raw_sql(db: Path) -> None:
    t = tf.load(db)
    assert t.meta.format == "rocpd"
    (n, total), = _sql(db, f'SELECT COUNT(*), SUM("end" - start) FROM "{DISPATCH}"')
    k = t.kernels()
    assert len(k) == n and int(k["dur"].sum()) == total
    names = {str(r[0]) for r in _sql(db, f'SELECT S.display_name FROM "{DISPATCH}" K '
                                     f'JOIN "{SYMBOL}" S ON S.id = K.kernel_id')}
    assert set(k["name"].astype(str)) == names
    (t0,) = _sql(db, f'SELECT MIN(start) FROM "{REGION}"')[0]
    assert t.meta.base_ns == t0  # the first event in the sample is a region


def test_runtime_calls_link_to_kernels_by_correlation(db: Path) -> None:
    (linked,) = _sql(db, f"""SELECT COUNT(*) FROM "{DISPATCH}" K
        JOIN "{EVENT}" KE ON KE.id = K.event_id
        WHERE KE.correlation_id IN (
            SELECT E.correlation_id FROM "{REGION}" R JOIN "{EVENT}" E ON E.id = R.event_id
            JOIN "{STRING}" S ON S.id = E.category_id WHERE S.string LIKE 'HIP_RUNTIME%')""")[0]
    t = tf.load(db)
    ev = t.events
    runtime = ev[ev["kind"] == "runtime"]
    k = t.kernels()
    assert int(k["corr"].isin(set(runtime["corr"])).sum()) == linked
    assert 0 < int(str(linked)) < len(k)  # the sample has one dispatch without a launch call
    launches = dict(zip(runtime["corr"], runtime["name"].astype(str), strict=False))
    assert {launches[c] for c in k["corr"] if c in launches} == {"hipLaunchKernel"}


def test_devices_markers_and_copies(db: Path) -> None:
    t = tf.load(db)
    gpus = _sql(db, "SELECT type_index, product_name, name FROM rocpd_info_agent "
                    "WHERE type = 'GPU' ORDER BY type_index")
    assert [(d.id, d.name, d.compute_capability) for d in t.meta.devices] == \
        [(int(str(i)), p, n) for i, p, n in gpus]
    ranges = _sql(db, f"""SELECT S.string FROM "{REGION}" R JOIN "{EVENT}" E ON E.id = R.event_id
        JOIN "{STRING}" C ON C.id = E.category_id JOIN "{STRING}" S ON S.id = R.name_id
        WHERE C.string LIKE 'MARKER%' AND R."end" > R.start""")
    ann = t.of_kind("user_annotation")
    assert sorted(ann["name"].astype(str)) == sorted(str(r[0]) for r in ranges)
    copies = _sql(db, "SELECT size, name FROM memory_copies ORDER BY start")
    mc = t.of_kind("memcpy").sort_values("ts")
    args = t.args(mc.index.to_numpy())
    assert [a["bytes"] for a in args] == [r[0] for r in copies]
    assert [a["direction"] for a in args] == ["HtoD" if "HOST_TO_DEVICE" in str(r[1]) else "DtoH"
                                              for r in copies]
    grid = _sql(db, f'SELECT grid_size_x, workgroup_size_x FROM "{DISPATCH}" ORDER BY start')
    kargs = t.args(t.kernels().sort_values("ts").index.to_numpy())
    assert [(a["grid_x"], a["workgroup_x"]) for a in kargs] == grid


def test_base_tables_when_views_are_absent(db: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.db"
    shutil.copy(db, bare)
    conn = sqlite3.connect(bare)
    for v in rocpd_schema.DATA_VIEWS:
        conn.execute(f'DROP VIEW "{v}"')
    conn.commit()
    conn.close()
    (n, total), = _sql(bare, f'SELECT COUNT(*), SUM("end" - start) FROM "{DISPATCH}"')
    (n_regions,) = _sql(bare, f'SELECT COUNT(*) FROM "{REGION}"')[0]
    t = tf.load(bare)
    assert len(t.kernels()) == n and int(t.kernels()["dur"].sum()) == total
    assert int(t.events["kind"].isin(["runtime", "user_annotation", "other"]).sum()) == n_regions
    assert set(t.events["pid"][t.events["device"] < 0]) == \
        {r[0] for r in _sql(bare, f'SELECT pid FROM "{PROCESS}"')}


def test_dispatch_missing_from_kernels_view_is_still_read(db: Path, tmp_path: Path) -> None:
    odd = tmp_path / "odd.db"
    shutil.copy(db, odd)
    conn = sqlite3.connect(odd)
    # The documented view INNER-joins the region name: a NULL one hides the dispatch there.
    conn.execute(f'UPDATE "{DISPATCH}" SET region_name_id = NULL WHERE id = 1')
    conn.commit()
    conn.close()
    (n,) = _sql(odd, f'SELECT COUNT(*) FROM "{DISPATCH}"')[0]
    (n_view,) = _sql(odd, "SELECT COUNT(*) FROM kernels")[0]
    t = tf.load(odd)
    assert int(str(n_view)) < int(str(n)) and len(t.kernels()) == n
    assert any("kernels view" in note for note in t.meta.notes)


def test_top_kernels_cli_matches_raw_sql(db: Path) -> None:
    res = CliRunner().invoke(cli, ["top-kernels", str(db), "-n", "0", "--format", "csv"])
    assert res.exit_code == 0, res.output
    ours = {r["full_name"]: r for r in csv.DictReader(io.StringIO(res.output))}
    rows = _sql(db, f"""SELECT S.display_name, COUNT(*), SUM(K."end" - K.start)
        FROM "{DISPATCH}" K JOIN "{SYMBOL}" S ON S.id = K.kernel_id GROUP BY S.display_name""")
    assert len(ours) == len(rows)
    for name, calls, total in rows:
        assert int(ours[str(name)]["calls"]) == calls
        assert int(ours[str(name)]["total_ns"]) == total  # CSV: exact integer ns


def test_several_processes_get_ranks_in_pid_order(db2: Path) -> None:
    t = tf.load(db2)
    per_pid = _sql(db2, f"""SELECT P.pid, COUNT(*) FROM "{DISPATCH}" K
        JOIN "{PROCESS}" P ON P.id = K.pid GROUP BY P.pid ORDER BY P.pid""")
    assert t.meta.world_size == len(per_pid) == 2
    k = t.kernels()
    for rank, (pid, n) in enumerate(per_pid):
        assert int((k["rank"] == rank).sum()) == n
        host = t.events[(t.events["device"] < 0) & (t.events["rank"] == rank)]
        assert set(host["pid"]) == {pid}
    # The same correlation id occurs in both processes: pairs stay within a rank.
    assert k.groupby("corr")["rank"].nunique().max() == 2


def test_not_rocpd_sqlite_is_left_to_other_readers(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE rocpd_op (id INTEGER)")  # the older rocmProfileData layout
    conn.commit()
    conn.close()
    from traceforge.formats import rocpd

    assert not rocpd.sniff(other, other.read_bytes()[:100])
    with pytest.raises(tf.TraceFormatError):
        tf.load(other)
