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
from tests.cli.test_inputs import one_line_error, run_cli
from tests.support import hostile_files, rocpd_schema
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


# -- SQLite: nothing written beside, WAL, views, corruption (items 3, 4, 8) ----------------------

def _beside(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()}


def test_wal_database_writes_nothing_beside_it(tmp_path: Path) -> None:
    """A WAL-mode export (checkpointed): read-only opens once created -wal and -shm next
    to it; with the rows still in its -wal file, those rows are read from a private copy."""
    d = tmp_path / "in"
    d.mkdir()
    p = hostile_files.wal_checkpointed(d / "report.sqlite")
    before = _beside(d)
    assert len(tf.load(p, cache=False).kernels()) == 50
    assert _beside(d) == before
    d2 = tmp_path / "in2"
    d2.mkdir()
    q = hostile_files.nsys_db(d2 / "live.sqlite", kernels=30, wal=True)
    (d2 / "live.sqlite.build").unlink()
    Path(f"{d2}/live.sqlite.build-wal").unlink(missing_ok=True)
    before = _beside(d2)
    assert len(tf.load(q, cache=False).kernels()) == 30
    assert _beside(d2) == before


def test_database_in_an_unwritable_directory(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    p = hostile_files.wal_checkpointed(d / "report.sqlite")
    d.chmod(0o555)
    try:
        rc, out, err = run_cli(capsys, "top-kernels", str(p))
        assert rc == 0 and "gemm_kernel" in out, err
        assert _beside(d) == {"report.sqlite"}
    finally:
        d.chmod(0o755)


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_database_is_called_corrupt(damage: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Truncated or bit-flipped: "corrupt ... SQLite database", not "missing tables"."""
    p = hostile_files.nsys_db(tmp_path / "r.sqlite", kernels=2000)
    raw = bytearray(p.read_bytes())
    if damage == "truncate":
        raw = raw[:len(raw) // 3]
    else:
        for i in range(100, 4096, 7):  # the schema page
            raw[i] ^= 0x5A
    p.write_bytes(bytes(raw))
    rc, _, err = run_cli(capsys, "info", str(p))
    one_line_error(rc, err, "SQLite database")
    assert "missing tables" not in err


def test_looping_views_end_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A view over an infinite WITH RECURSIVE in place of a table the reader needs (nsys
    kernels, rocpd's documented views) never hangs: recursive views are not tables."""
    monkeypatch.setenv("TRACEFORGE_SQLITE_SECONDS", "5")
    p = hostile_files.nsys_db(tmp_path / "r.sqlite")
    hostile_files.looping_view(p, "CUPTI_ACTIVITY_KIND_KERNEL",
                               "x AS start, x + 1 AS \"end\", 0 AS deviceId, 7 AS streamId, "
                               "x AS correlationId, 0 AS globalPid, 1 AS demangledName, "
                               "2 AS shortName, 1 AS gridX")
    for verb in ("info", "top-kernels", "critical-path"):
        rc, _, err = run_cli(capsys, verb, str(p))
        one_line_error(rc, err, "missing tables")
    q = rocpd_schema.build(tmp_path / "results.db")
    hostile_files.looping_view(q, "kernels", "x AS name, x AS start, x + 1 AS \"end\"")
    rc, out, err = run_cli(capsys, "top-kernels", str(q))
    assert rc == 0, err  # read from the base tables


def test_deadline_and_row_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    """A view that multiplies rows (a 4-way cross join) is stopped by the row cap while it
    is read; a slow query by the deadline. One line each, naming the limit."""
    p = hostile_files.nsys_db(tmp_path / "r.sqlite", kernels=200)
    hostile_files.multiplying_view(p, "CUPTI_ACTIVITY_KIND_KERNEL",
                                   "CUPTI_ACTIVITY_KIND_KERNEL_orig")
    rc, _, err = run_cli(capsys, "top-kernels", str(p))
    one_line_error(rc, err, "more than", "rows")
    q = hostile_files.nsys_db(tmp_path / "slow.sqlite", kernels=200)
    hostile_files.multiplying_view(q, "CUPTI_ACTIVITY_KIND_KERNEL",
                                   "CUPTI_ACTIVITY_KIND_KERNEL_orig", empty=True)
    monkeypatch.setenv("TRACEFORGE_SQLITE_SECONDS", "1")
    rc, _, err = run_cli(capsys, "top-kernels", str(q))
    one_line_error(rc, err, "ran past 1 s", "TRACEFORGE_SQLITE_SECONDS")


# -- gzip bombs (item 2) ------------------------------------------------------------------------

def test_gzip_bomb_is_stopped_with_the_limit_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``{"traceEvents": [`` + 64 MiB of spaces + ``]}`` in 70 KB of gzip: the stream stops
    at the ratio (floor lowered for the test) or the size cap, one line naming the env var;
    the temporary file is gone."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    from traceforge.formats import gunzip
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(gunzip, "_scratch", None)
    monkeypatch.setattr(gunzip, "RATIO_FLOOR", 2**20)
    bomb = hostile_files.gzip_bomb(tmp_path / "bomb.json.gz", b" ", b'{"traceEvents": [', b"]}")
    assert bomb.stat().st_size < 200_000
    rc, _, err = run_cli(capsys, "info", str(bomb))
    one_line_error(rc, err, "expands more than 200x", "TRACEFORGE_GUNZIP_MAX_RATIO")
    monkeypatch.setenv("TRACEFORGE_GUNZIP_MAX_RATIO", "1e6")
    monkeypatch.setenv("TRACEFORGE_GUNZIP_MAX_BYTES", str(16 * 2**20))
    rc, _, err = run_cli(capsys, "info", str(bomb))
    one_line_error(rc, err, "larger than 0.015625 GiB", "TRACEFORGE_GUNZIP_MAX_BYTES")
    monkeypatch.setenv("TRACEFORGE_GUNZIP_MAX_BYTES", str(2**30))
    rc, _, err = run_cli(capsys, "info", str(bomb))  # within the limits: read, and empty
    one_line_error(rc, err, "bomb.json.gz")
    db = hostile_files.gzip_bomb(tmp_path / "bomb.sqlite.gz", b"\0",
                                 hostile_files.nsys_db(tmp_path / "x.sqlite").read_bytes())
    monkeypatch.setenv("TRACEFORGE_GUNZIP_MAX_BYTES", str(16 * 2**20))
    rc, _, err = run_cli(capsys, "info", str(db))
    one_line_error(rc, err, "TRACEFORGE_GUNZIP_MAX_BYTES")
    leftovers = [p for p in (tmp_path / "tmp").rglob("*") if p.is_file()]
    assert leftovers == []


def test_sigterm_removes_the_decompressed_copy(tmp_path: Path) -> None:
    """A run ended by SIGTERM while it reads a decompressed database (a slow view keeps it
    busy) exits 143 and leaves nothing in the temporary directory."""
    import gzip
    import os
    import signal
    import subprocess
    import sys
    import time

    db = hostile_files.nsys_db(tmp_path / "slow.sqlite", kernels=300)
    hostile_files.multiplying_view(db, "CUPTI_ACTIVITY_KIND_KERNEL",
                                   "CUPTI_ACTIVITY_KIND_KERNEL_orig", empty=True)
    gz = tmp_path / "slow.sqlite.gz"
    gz.write_bytes(gzip.compress(db.read_bytes()))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "TRACEFORGE_NO_CACHE": "1",
           "TRACEFORGE_SQLITE_SECONDS": "60"}
    proc = subprocess.Popen([sys.executable, "-m", "traceforge", "info", str(gz)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 30
        while not any(p.is_file() for p in tmp.rglob("*.sqlite")) and time.monotonic() < end:
            time.sleep(0.05)
        assert any(p.is_file() for p in tmp.rglob("*.sqlite")), "no decompressed copy seen"
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    assert list(tmp.iterdir()) == []


# -- diagnoses and the cache (items 8, 9) -------------------------------------------------------

def test_special_files_are_not_regular_files(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    import os

    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    for p in (fifo, Path("/dev/zero")):
        rc, _, err = run_cli(capsys, "info", str(p))
        one_line_error(rc, err, "not a regular file")


def test_file_under_an_unenterable_directory(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    import os

    if os.geteuid() == 0:
        pytest.skip("root enters every directory")
    d = tmp_path / "locked"
    d.mkdir()
    (d / "t.json").write_text("{}")
    d.chmod(0)
    try:
        for verb in ("info", "overlap"):
            rc, _, err = run_cli(capsys, verb, str(d / "t.json"))
            one_line_error(rc, err, "permission denied")
    finally:
        d.chmod(0o755)


def test_unenterable_directory_as_root_is_simulated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``Path.stat`` raising PermissionError (what a directory one cannot enter gives a
    non-root user): one line, in ``load`` and in the run reader, not an internal error."""
    p = tmp_path / "t.json"
    p.write_text("{}")
    real = Path.stat

    def denied(self: Path, **kw: object) -> object:
        if self == p:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "stat", denied)
    for verb in ("info", "overlap"):
        rc, _, err = run_cli(capsys, verb, str(p))
        one_line_error(rc, err, "permission denied")


def test_cache_entry_replaced_by_a_directory_heals(cdir: Path) -> None:
    from traceforge.formats import cache

    src = samples.path("h100-compiled")
    tf.load(src)
    entries = list(cdir.rglob("*" + cache.SUFFIX))
    assert entries
    for e in entries:
        e.unlink()
        e.mkdir()
        (e / "junk").write_text("x")
    assert len(tf.load(src).kernels()) > 0  # a miss, then the entry is written again
    assert all(e.is_file() for e in entries)


class _Planted:
    """A pickle that, if ever loaded, touches a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (Path.touch, (str(self.marker),))  # type: ignore[return-value]


def test_derived_tables_refuse_symlinks_and_shared_directories(cdir: Path,
                                                                tmp_path: Path) -> None:
    """A symlink planted where a derived table belongs, pointing at a file of the user's
    holding attacker bytes, is never read (O_NOFOLLOW); neither is anything in a cache
    directory others may write."""
    import pickle

    from traceforge.formats.derived import SUFFIX, DiskStore

    t = tf.load(samples.path("h100-compiled"))
    store = t.store
    assert isinstance(store, DiskStore)
    marker = tmp_path / "pwned"
    full = f"{store.prefix}|k"
    target = store._file(full)
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(pickle.dumps((full, _Planted(marker))))
    target.symlink_to(evil)
    assert store.get("k") is None and not marker.exists()
    target.unlink()
    store.put("k", {"a": 1})
    assert store.get("k") == {"a": 1}
    target.parent.chmod(0o777)
    try:
        assert store.get("k") is None
    finally:
        target.parent.chmod(0o700)
    assert target.name.endswith(SUFFIX)


# -- invalid intervals: one policy in every reader (item 7) -------------------------------------

def _invalid(kind: str, d: Path) -> Path:
    hf = hostile_files
    if kind == "kineto dur=-1":
        doc = {"traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10,
             "dur": -1, "args": {"device": 0, "stream": 7, "correlation": 1}}]}
        (d / "t.json").write_text(json.dumps(doc))
        return d / "t.json"
    if kind.startswith("nsys"):
        bad = {"nsys end<start": (hf.T0 + 500, hf.T0 + 100), "nsys end NULL": (hf.T0, None),
               "nsys start=-1": (-1, hf.T0)}[kind]
        return hf.nsys_db(d / "r.sqlite", start_end=[bad])
    if kind == "rocprof-db EndNs<BeginNs":
        return hf.rocprof_db(d / "results.db", (hf.T0 + 500, hf.T0 + 100))
    if kind == "rocprofv3-csv end<start":
        return hf.rocprofv3_csv(d / "1_kernel_trace.csv", (hf.T0 + 500, hf.T0 + 100))
    if kind == "rocprofv3-csv start=-1":
        return hf.rocprofv3_csv(d / "1_kernel_trace.csv", (-1, hf.T0))
    if kind == "rocpd end<start":
        return hf.rocpd_bad(d / "results.db",
                            'UPDATE "{t}" SET "end" = start - 100 WHERE rowid = 1')
    if kind == "perfetto end<begin":
        (d / "t.pftrace").write_bytes(hf.pftrace_end_before_begin())
        return d / "t.pftrace"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", [
    "kineto dur=-1", "nsys end<start", "nsys end NULL", "nsys start=-1",
    "rocprof-db EndNs<BeginNs", "rocprofv3-csv end<start", "rocprofv3-csv start=-1",
    "rocpd end<start", "perfetto end<begin"])
def test_invalid_intervals_are_refused_in_every_format(kind: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """One policy: an event that ends before it starts, has no end, or starts before 0 on
    a counter clock makes the read fail with one line naming the event (they once loaded
    as 0 µs kernels, or 1.27 s kernels in a 0.65 s trace)."""
    p = _invalid(kind, tmp_path)
    for verb in ("info", "top-kernels"):
        rc, _, err = run_cli(capsys, verb, str(p))
        one_line_error(rc, err, p.name)
        assert any(w in err for w in ("before", "no end", "negative")), err


@pytest.mark.parametrize("builder", ["nsys", "rocprof-db", "rocprofv3-csv"])
def test_valid_versions_of_those_files_load(builder: str, tmp_path: Path) -> None:
    hf = hostile_files
    p = {"nsys": lambda: hf.nsys_db(tmp_path / "r.sqlite"),
         "rocprof-db": lambda: hf.rocprof_db(tmp_path / "results.db", None),
         "rocprofv3-csv": lambda: hf.rocprofv3_csv(tmp_path / "1_kernel_trace.csv", None)}[
        builder]()
    t = tf.load(p, cache=False)
    assert len(t.kernels()) in (20, 50)
    assert (t.kernels()["dur"] > 0).all()


# -- memory guard (item 5) ----------------------------------------------------------------------

def test_memory_guard_ends_the_run_with_one_line(tmp_path: Path) -> None:
    """--max-memory below what a run needs (an interpreter with pandas alone passes 60 MB):
    exit 2, one line naming the limit and how to raise it; 0 turns the guard off."""
    import os
    import subprocess
    import sys

    p = tmp_path / "k.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": f"k{i % 7}", "pid": 0, "tid": 7, "ts": 2 * i,
         "dur": 1, "args": {"device": 0, "stream": 7, "correlation": i}}
        for i in range(100_000)]}))
    env = {**os.environ, "TRACEFORGE_NO_CACHE": "1"}
    r = subprocess.run([sys.executable, "-m", "traceforge", "--max-memory", "60MB",
                        "critical-path", str(p)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "memory limit of 0.1 GiB" in r.stderr, r.stderr
    assert "--max-memory" in r.stderr
    r = subprocess.run([sys.executable, "-m", "traceforge", "--max-memory", "lots", "info",
                        str(p)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--max-memory" in r.stderr and r.stderr.count("\n") == 1


def test_memory_in_use_is_measured() -> None:
    from traceforge import limits

    if not Path("/proc/self/smaps_rollup").exists():
        pytest.skip("no /proc/self/smaps_rollup")
    before, bound = limits.in_use(), limits.in_use(bound=True)
    block = bytearray(64 * 2**20)
    assert limits.in_use() - before > 50 * 2**20
    assert limits.in_use(bound=True) - bound > 50 * 2**20
    # The bound is never below the exact figure (the guard reads the exact one only when
    # the bound passes the limit), with a forked child sharing the block too.
    import os

    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child waits to be ended)
        import time

        time.sleep(30)
        os._exit(0)
    try:
        import time

        time.sleep(0.2)
        assert limits.in_use(bound=True) >= limits.in_use() > 50 * 2**20
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    del block
    assert limits.parse_limit("0") == 0 and limits.parse_limit("2GB") == 2 * 10**9
    assert limits.parse_limit(None) is None


@pytest.mark.parametrize("gz", [False, True])
def test_a_run_ended_mid_decode_keeps_its_own_error(tmp_path: Path, gz: bool) -> None:
    """A run ended while a view of the mapped file is still held (the memory guard or
    Ctrl-C in the middle of a decode: the traceback's frames keep the views) ends with
    its own error, not with the BufferError of closing a map that is still in use."""
    from traceforge.formats.source import content
    from traceforge.limits import MemoryLimitError

    p = tmp_path / ("t.json.gz" if gz else "t.json")
    body = json.dumps({"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 1}]})
    p.write_bytes(gzip.compress(body.encode()) if gz else body.encode())
    held: list[memoryview] = []
    with pytest.raises(MemoryLimitError), content(p, private=True) as raw:
        held.append(memoryview(raw)[1:5])  # a decode's slice, alive in a frame
        raise MemoryLimitError("limit")
    assert bytes(held[0]) == body.encode()[1:5]


@pytest.mark.parametrize("out", ["x.pftrace", "x.json"])
@pytest.mark.parametrize("verb", ["convert", "annotate"])
def test_args_an_integer_beyond_64_bits_is_written(tmp_path: Path, verb: str, out: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """JSON ints have no size limit and a trace may hold one past 64 bits (a fuzzed
    ``grid``): orjson refuses it, which ended the JSON writers in an internal error; the
    batch holding it is written by msgspec, exactly (the .pftrace keeps it mod 2**64)."""
    p = tmp_path / "t.json"
    rows = [b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %d, '
            b'"dur": 1, "args": {"device": 0, "correlation": %d%s}}'
            % (i, i, b', "grid": [%d, 1, 1]' % 10**30 if i == 3 else b"") for i in range(6)]
    p.write_bytes(b'{"traceEvents": [' + b", ".join(rows) + b"]}")
    o = tmp_path / out
    args = [str(p), str(o)] if verb == "convert" else [str(p), "-o", str(o)]
    rc, _, err = run_cli(capsys, verb, *args)
    assert rc == 0 and "internal error" not in err, err
    if out.endswith(".json"):
        events = json.loads(o.read_bytes())["traceEvents"]
        assert [10**30, 1, 1] in [e.get("args", {}).get("grid") for e in events]


@pytest.mark.parametrize("out", ["x.pftrace", "x.json"])
@pytest.mark.parametrize("verb", ["convert", "annotate"])
@pytest.mark.parametrize(("bad", "says"), [(b'"a": 1e400', "Number out of range"),
                                           (b'"registers per \x93thread": 8',
                                            "not valid UTF-8 text"),
                                           (b'"s": "a\x93b"', "not valid UTF-8 text")])
def test_args_a_number_out_of_range_is_one_line(tmp_path: Path, verb: str, out: str,
                                                bad: bytes, says: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """An args value msgspec cannot hold (1e400), or a key or a text that is not UTF-8 (a
    fuzzed byte), is skipped by the reader and met when the args are read: one line naming the
    file, exit 2 (both were internal errors), whether the values are decoded (JSON) or
    kept as their text or shapes (.pftrace), on a row among others; not UTF-8 is said in
    the same words with every msgspec (0.23 raises its own error for it, earlier versions
    Python's)."""
    p = tmp_path / "t.json"
    rows = [b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %d, '
            b'"dur": 1, "args": {"device": 0, "correlation": %d%s}}'
            % (i, i, b", " + bad if i == 3 else b"") for i in range(6)]
    p.write_bytes(b'{"traceEvents": [' + b", ".join(rows) + b"]}")
    o = str(tmp_path / out)
    args = [str(p), o] if verb == "convert" else [str(p), "-o", o]
    rc, _, err = run_cli(capsys, verb, *args)
    one_line_error(rc, err, p.name)
    assert says in err and "$[" not in err, err
