"""Nsight Systems SQLite reader, checked against nsys's own reports and raw SQL counts."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import shutil
import sqlite3
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import shared
from tests.conftest import sql_rows as _sql
from traceforge.cli import cli
from traceforge.errors import TraceFormatError

NSYS_DIR = "h200-nsys"
NSYS_FILES = (
    "h200-nsys/policy_fa2.sqlite.gz",  # nsys 2025.3
    "external/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",  # nsys 2022.2, schema 2.9
    "external/nvfuser/8fa9ec29/report1.sqlite",  # nsys 2024.6, schema 3.16
)


@pytest.fixture(scope="module")
def fa2_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The H200 export, gunzipped into a temp dir (for raw SQL oracles)."""
    src = shared(f"{NSYS_DIR}/policy_fa2.sqlite.gz")
    out = tmp_path_factory.mktemp("nsys") / "policy_fa2.sqlite"
    with gzip.open(src, "rb") as f, out.open("wb") as g:
        shutil.copyfileobj(f, g)
    return out


@pytest.fixture(scope="module")
def fa2(fa2_db: Path) -> tf.Trace:
    return tf.load(fa2_db)


def _plain(tmp_path: Path, rel: str) -> Path:
    src = shared(rel)
    if src.suffix != ".gz":
        return src
    out = tmp_path / src.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(src.read_bytes()))
    return out




def _oracle(name: str) -> list[dict[str, str]]:
    text = shared(f"{NSYS_DIR}/{name}").read_text()
    return list(csv.DictReader(io.StringIO(text)))


def test_kernel_table_reproduces_cuda_gpu_kern_sum(fa2: tf.Trace) -> None:
    rows = _oracle("policy_fa2_stats_cuda_gpu_kern_sum.csv")
    k = fa2.kernels()
    groups = {str(n): g["dur"].tolist() for n, g in k.groupby("name", observed=True)}
    assert set(groups) == {r["Name"] for r in rows}
    for r in rows:
        d = groups[r["Name"]]
        assert sum(d) == int(r["Total Time (ns)"]), r["Name"]
        assert len(d) == int(r["Instances"])
        assert min(d) == int(r["Min (ns)"]) and max(d) == int(r["Max (ns)"])
        assert f"{sum(d) / len(d):.1f}" == r["Avg (ns)"]
        assert f"{statistics.median(d):.1f}" == r["Med (ns)"]
        sd = statistics.stdev(d) if len(d) > 1 else 0.0
        assert f"{sd:.1f}" == r["StdDev (ns)"], r["Name"]


def test_top_kernels_cli_matches_nsys_totals(fa2_db: Path) -> None:
    res = CliRunner().invoke(cli, ["top-kernels", str(fa2_db), "-n", "0", "--format", "csv"])
    assert res.exit_code == 0, res.output
    ours = {r["full_name"]: r for r in csv.DictReader(io.StringIO(res.output))}
    for r in _oracle("policy_fa2_stats_cuda_gpu_kern_sum.csv"):
        o = ours[r["Name"]]
        assert int(o["calls"]) == int(r["Instances"])
        assert int(o["total_ns"]) == int(r["Total Time (ns)"])  # CSV: exact integer ns
        assert int(o["min_ns"]) == int(r["Min (ns)"])
        assert int(o["max_ns"]) == int(r["Max (ns)"])
    assert len(ours) == len(_oracle("policy_fa2_stats_cuda_gpu_kern_sum.csv"))


def test_nvtx_ranges_reproduce_nvtx_sum(fa2: tf.Trace) -> None:
    ann = fa2.of_kind("user_annotation")
    styles = dict(zip(ann.index, (a["style"] for a in fa2.args(ann.index.to_numpy())),
                      strict=True))
    rows = _oracle("policy_fa2_stats_nvtx_sum.csv")
    assert rows
    for r in rows:
        # nvtx_sum writes "domain:text" and ":text" for the default domain.
        name = r["Range"][1:] if r["Range"].startswith(":") else r["Range"]
        sel = ann[ann["name"].astype(str) == name]
        d = sel["dur"].tolist()
        assert len(d) == int(r["Instances"]), name
        assert sum(d) == int(r["Total Time (ns)"])
        assert min(d) == int(r["Min (ns)"]) and max(d) == int(r["Max (ns)"])
        assert f"{statistics.median(d):.1f}" == r["Med (ns)"]
        assert {styles[i] for i in sel.index} == {r["Style"]}


def test_runtime_calls_link_to_kernels(fa2: tf.Trace, fa2_db: Path) -> None:
    (n_linked,) = _sql(fa2_db, """SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        WHERE k.correlationId IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME)""")[0]
    ev = fa2.events
    launches = set(ev.loc[ev["kind"].isin(["runtime", "driver"]), "corr"].tolist())
    k = fa2.kernels()
    assert int(k["corr"].isin(launches).sum()) == n_linked
    assert n_linked > 0.99 * len(k)


def test_memcpy_bytes_and_directions(fa2: tf.Trace, fa2_db: Path) -> None:
    raw = dict(_sql(fa2_db, "SELECT copyKind, SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                            "GROUP BY copyKind"))
    mc = fa2.of_kind("memcpy")
    args = fa2.args(mc.index.to_numpy())
    ours: dict[int, int] = {}
    for a in args:
        ours[a["copyKind"]] = ours.get(a["copyKind"], 0) + a["bytes"]
    assert ours == raw
    assert all(a["direction"] in ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP") for a in args)


def test_gpu_info_processes_threads(fa2: tf.Trace, fa2_db: Path) -> None:
    gpus = _sql(fa2_db, "SELECT id, name, smCount FROM TARGET_INFO_GPU ORDER BY id")
    assert [(d.id, d.name, d.sms) for d in fa2.meta.devices] == gpus
    (pid,) = {p for (p,) in _sql(fa2_db, "SELECT DISTINCT (globalTid >> 24) & 16777215 "
                                         "FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
    assert fa2.meta.process_names[pid] == _sql(
        fa2_db, f"SELECT name FROM PROCESSES WHERE pid = {pid}")[0][0]
    rt = fa2.of_kind("runtime")
    assert set(rt["pid"].tolist()) == {pid}
    assert any(p == pid for p, _ in fa2.meta.thread_names)


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_counts_and_totals_match_raw_sql(rel: str, tmp_path: Path) -> None:
    db = _plain(tmp_path, rel)
    t = tf.load(shared(rel))
    assert t.meta.format == "nsys-sqlite"
    for table, kind in (("CUPTI_ACTIVITY_KIND_KERNEL", "kernel"),
                        ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
                        ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        try:
            n, total = _sql(db, f'SELECT COUNT(*), COALESCE(SUM("end" - start), 0) FROM {table}')[0]
        except sqlite3.OperationalError:  # table absent in this export
            n, total = 0, 0
        sel = t.of_kind(kind)
        assert (len(sel), int(sel["dur"].sum())) == (n, total), table
    (n_api,) = _sql(db, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0]
    assert len(t.of_kind("runtime", "driver")) == n_api
    assert t.meta.devices and t.meta.versions["nsys"]


def test_nvtx_domains_old_schema() -> None:
    t = tf.load(shared(NSYS_FILES[1]))
    names = set(t.of_kind("user_annotation")["name"].astype(str))
    assert "saxpy" in names  # default domain, inline text
    assert any(n.startswith("MPI:") for n in names)  # named domain, textId -> StringIds


def test_inputs_untouched_and_nothing_written_beside(tmp_path: Path) -> None:
    src = shared(NSYS_FILES[2])
    db = tmp_path / "r.sqlite"
    shutil.copyfile(src, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    tf.load(db)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sqlite"]


def test_sqlite_that_is_not_nsys_names_missing_tables(tmp_path: Path) -> None:
    db = tmp_path / "other.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE foo (a INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(TraceFormatError, match="missing tables: StringIds"):
        tf.load(db)
    res = CliRunner().invoke(cli, ["top-kernels", str(db)])
    assert res.exit_code != 0


def test_nsys_rep_without_nsys_says_how_to_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = shared("external/nvfuser/8fa9ec29/report1.nsys-rep")
    monkeypatch.setenv("TRACEFORGE_NSYS", str(tmp_path / "no-nsys-here"))
    with pytest.raises(TraceFormatError, match="nsys export --type sqlite"):
        tf.load(rep)
    assert list(tmp_path.iterdir()) == []
