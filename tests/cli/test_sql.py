"""SQL over any trace: query results against arithmetic on the raw files."""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import FIXTURES, shared, sql_rows
from traceforge.cli import cli
from traceforge.errors import UsageError

pytest.importorskip("duckdb")

EAGER = FIXTURES / "eager.pt.trace.json.gz"


def _raw_events(p: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(gzip.decompress(p.read_bytes()))["traceEvents"]
    return events


def _ns(us: float) -> int:
    return round(us * 1000)


def test_kernel_time_by_stream_matches_the_raw_json() -> None:
    raw = [e for e in _raw_events(EAGER) if e.get("cat") == "kernel"]
    want: dict[int, tuple[int, int]] = {}
    for e in raw:
        n, total = want.get(e["tid"], (0, 0))
        want[e["tid"]] = (n + 1, total + _ns(e["dur"]))
    df = tf.sql(tf.load(EAGER), "SELECT stream, count(*) AS n, sum(dur) AS total FROM events "
                                "WHERE kind = 'kernel' GROUP BY stream ORDER BY stream")
    got = {int(r.stream): (int(r.n), int(r.total)) for r in df.itertuples()}
    assert got == want


def test_names_are_strings_and_rows_join_args() -> None:
    t = tf.load(EAGER)
    raw = [e for e in _raw_events(EAGER) if e.get("cat") == "kernel"]
    longest = max(raw, key=lambda e: (e["dur"], e["name"]))
    df = tf.sql(t, "SELECT row, name, dur FROM events WHERE kind = 'kernel' "
                   "ORDER BY dur DESC, name DESC LIMIT 1")
    assert df["name"].iloc[0] == longest["name"]
    assert int(df["dur"].iloc[0]) == _ns(longest["dur"])
    (args,) = t.args([int(df["row"].iloc[0])])
    assert args["correlation"] == longest["args"]["correlation"]


def test_activity_and_steps_tables() -> None:
    raw = _raw_events(EAGER)
    gpu = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    steps = {e["name"] for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")}
    t = tf.load(EAGER)
    df = tf.sql(t, "SELECT kind, count(*) AS n FROM activity GROUP BY kind")
    assert int(df["n"].sum()) == len(gpu)
    st = tf.sql(t, "SELECT step, ts, \"end\" FROM steps ORDER BY step")
    assert {f"ProfilerStep#{s}" for s in st["step"]} == steps
    assert (st["ts"] < st["end"]).all()
    # activity rows point at events rows: the launch call of each kernel is a runtime row
    j = tf.sql(t, "SELECT e.kind, count(*) AS n FROM activity a JOIN events e "
                  "ON e.row = a.launch_row GROUP BY e.kind")
    assert set(j["kind"]) <= {"runtime", "driver"}


def test_nsys_kernels_match_the_sqlite_file() -> None:
    db = shared("external/nvfuser/8fa9ec29/report1.sqlite")
    ((n, total),) = sql_rows(
        db, "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    df = tf.sql(tf.load(db), "SELECT count(*) AS n, sum(dur) AS total FROM events "
                             "WHERE kind = 'kernel'")
    assert (int(df["n"].iloc[0]), int(df["total"].iloc[0])) == (n, total)


def test_rocprof_csv_kernel_count_matches_the_file() -> None:
    p = shared("external/hpctrainingexamples/finite-difference/results.csv")
    with p.open() as f:
        rows = list(csv.DictReader(f))
    df = tf.sql(tf.load(p), "SELECT count(*) AS n FROM activity WHERE kind = 'kernel'")
    assert int(df["n"].iloc[0]) == len(rows)


def test_cli_formats_and_errors() -> None:
    q = "SELECT kind, count(*) AS n FROM events GROUP BY kind ORDER BY kind"
    r = CliRunner().invoke(cli, ["sql", str(EAGER), q, "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    raw_kernels = sum(1 for e in _raw_events(EAGER) if e.get("cat") == "kernel")
    assert {"kind": "kernel", "n": raw_kernels} in rows
    r = CliRunner().invoke(cli, ["sql", str(EAGER), q, "--format", "csv"])
    assert next(csv.reader(io.StringIO(r.output))) == ["kind", "n"]
    r = CliRunner().invoke(cli, ["sql", str(EAGER), q, "--format", "md"])
    assert r.output.startswith("### SQL on")
    for bad in ("SELEC 1", "SELECT nope FROM events", "SELECT * FROM no_such_table"):
        r = CliRunner().invoke(cli, ["sql", str(EAGER), bad])
        # main() maps UsageError to exit 2 (checked as a subprocess below)
        assert isinstance(r.exception, UsageError) and r.exception.exit_code == 2
        assert "\n" not in str(r.exception) and str(r.exception).startswith("SQL: ")


def test_a_table_shows_the_first_rows_and_says_how_many() -> None:
    """A table or Markdown shows at most --max-rows rows and a note with the count; JSON
    and CSV every row."""
    q = "SELECT row, name FROM events ORDER BY row"
    n = len(json.loads(CliRunner().invoke(cli, ["sql", str(EAGER), q, "--format",
                                                 "json"]).output))
    assert n > 1000
    for fmt in ("table", "md"):
        r = CliRunner().invoke(cli, ["sql", str(EAGER), q, "--format", fmt, "--max-rows", "7"])
        assert r.exit_code == 0, r.output
        assert f"the first 7 of {n:,} rows" in r.output
        assert "| 6 |" in r.output if fmt == "md" else " 6  " in r.output
        assert "| 7 |" not in r.output
    r = CliRunner().invoke(cli, ["sql", str(EAGER), q, "--format", "csv", "--max-rows", "7"])
    assert len(r.output.splitlines()) == n + 1 and "first" not in r.output
    few = CliRunner().invoke(cli, ["sql", str(EAGER), "SELECT 1 AS x"])
    assert "rows" not in few.output


def test_cli_sql_error_is_one_line_on_stderr() -> None:
    import subprocess

    p = subprocess.run([sys.executable, "-m", "traceforge", "sql", str(EAGER), "SELEC 1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "SQL: Parser Error" in p.stderr


def test_missing_duckdb_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(UsageError, match=r"traceforge\[sql\]"):
        tf.sql(tf.load(EAGER), "SELECT 1")
