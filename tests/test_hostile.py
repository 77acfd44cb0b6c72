"""Hostile inputs (issue 31): each test builds its hostile file in the test and checks
that every verb ends with output or one named line (exit 2), never a traceback, a hang or
a file written beside the input."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

import traceforge as tf
from tests.test_inputs import one_line_error, run_cli
from traceforge import samples


def _wild_kineto(dst: Path, share: float = 0.1) -> Path:
    """The bundled H100 sample moved to epoch microseconds (as newer Kineto writes them),
    with ts = -1 on ``share`` of its events."""
    doc = json.loads(gzip.decompress(samples.path("h100-compiled").read_bytes()))
    rng = random.Random(31)
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") != "M"]
    t0 = min(float(e["ts"]) for e in events if "ts" in e)
    for e in events:
        if "ts" in e:
            e["ts"] = -1 if rng.random() < share else float(e["ts"]) - t0 + 1.7e15
    dst.write_text(json.dumps(doc))
    return dst


@pytest.mark.parametrize("verb", ["info", "critical-path", "idle", "overlap", "top-kernels"])
def test_wild_timestamps_are_analysed_and_noted(verb: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """ts = -1 on 10% of a real trace's events once overflowed the innermost-range key and
    recursed until RecursionError (~4 GiB): now every verb answers, and the trace carries
    a note counting the far events."""
    p = _wild_kineto(tmp_path / "wild.json")
    rc, out, err = run_cli(capsys, verb, str(p))
    assert rc == 0, err
    assert "Traceback" not in out + err


def test_wild_timestamps_note(tmp_path: Path) -> None:
    t = tf.load(_wild_kineto(tmp_path / "wild.json"), cache=False)
    assert any("far outside the rest of the trace" in n for n in t.meta.notes)
    plain = tf.load(samples.path("h100-compiled"), cache=False)
    assert not any("far outside" in n for n in plain.meta.notes)


# -- sql sandbox (item 14) --------------------------------------------------------------------

@pytest.mark.parametrize("query", [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_blob('/etc/passwd')",
    "SELECT * FROM glob('/etc/*')",
    "COPY (SELECT 1) TO '{out}'",
    "ATTACH '{out}' AS x",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SELECT * FROM 'https://example.invalid/x.parquet'",
])
def test_sql_is_sandboxed(query: str, tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    """Files, URLs, ATTACH, COPY, extensions and configuration are all refused with one
    line; nothing is written."""
    out = tmp_path / "out.csv"
    rc, _, err = run_cli(capsys, "sql", "sample:h100-compiled", query.format(out=out))
    one_line_error(rc, err, "SQL: ")
    assert not out.exists()


def test_sql_allow_files_reads_but_never_writes_an_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _wild_kineto(tmp_path / "t.json", share=0)
    before = src.read_bytes()
    csv = tmp_path / "x.csv"
    csv.write_text("a\n1\n2\n")
    rc, out, err = run_cli(capsys, "sql", str(src), f"SELECT sum(a) AS s FROM read_csv('{csv}')",
                           "--allow-files", "--format", "csv")
    assert rc == 0 and "3" in out, err
    rc, out, err = run_cli(capsys, "sql", str(src), "SELECT count(*) AS n FROM events",
                           "--format", "csv")
    assert rc == 0, err
    copy = tmp_path / "copy.csv"
    rc, _, err = run_cli(capsys, "sql", str(src), f"COPY events TO '{copy}'", "--allow-files")
    assert rc == 0 and copy.exists(), err
    link = tmp_path / "link.json"
    link.hardlink_to(src)
    for target in (src, link):
        rc, _, err = run_cli(capsys, "sql", str(src), f"COPY events TO '{target}'",
                             "--allow-files")
        one_line_error(rc, err, "an input of this run")
    assert src.read_bytes() == before
