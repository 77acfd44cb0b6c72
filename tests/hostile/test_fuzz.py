"""Every reader against mutated inputs: a load works or raises TraceFormatError, fast, and
never touches its input.

Seeds are small files of each format: the shared real traces where present (cut down to a
few hundred events), else inputs built in code (``kineto_doc``, ``rocpd_schema``, the
Perfetto writer). Each mutant is one random mutation with a fixed seed: truncation, bit
flips, inserted or deleted bytes, deleted or retyped fields, huge numbers, NaN, negative
durations, duplicate keys, other text encodings, dropped SQLite tables, renamed columns.
A quarter of the mutants are hostile rather than damaged (issue 31): wild timestamps (``ts =
-1`` or 2**60 on a tenth of the events), gzip bombs, SQLite tables replaced by views that
recurse forever or multiply rows, WAL-mode databases (rows left in the ``-wal`` file), and
invalid intervals (an end before its start) in every format. Each loaded mutant also goes
through the shared timeline (the innermost-range lookup that once recursed on a wild
timestamp). The limits are lowered for the test (gzip output 8 MiB, SQLite 10 s).

``TRACEFORGE_FUZZ_PER_FORMAT`` sets the number of mutants per seed (default 40: the normal
suite); CI's fuzz stage sets 500. ``TRACEFORGE_FUZZ_N`` instead sets a total split evenly
over the seeds. Each seed has its own random stream, so a larger count only adds mutants.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import hashlib
import io
import json
import os
import random
import resource
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import traceforge as tf
from tests.conftest import EXTERNAL, SHARED
from tests.support import rocpd_schema
from tests.support.fuzz_hostile import hostile_mutant, json_nodes
from tests.unit.formats.test_chrome_reader import kineto_doc
from traceforge.errors import TraceFormatError

PER_FORMAT = int(os.environ.get("TRACEFORGE_FUZZ_PER_FORMAT", "0") or 0)
TOTAL = int(os.environ.get("TRACEFORGE_FUZZ_N", "0") or 0)
DEFAULT_PER_FORMAT = 40
SECONDS_PER_INPUT = 10.0
#: Bound on the peak resident memory of the fuzzing process (and of each child).
MAX_RSS = 2 * 2**30


def _reset_peak() -> None:
    """Reset this process's peak resident size (Linux: VmHWM), where the kernel allows."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _own_peak() -> int:
    """This process's peak resident size in bytes since :func:`_reset_peak` (Linux), else
    since it started."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- seeds ----------------------------------------------------------------------------------

def _cut_kineto(doc: dict[str, Any], n: int = 150) -> dict[str, Any]:
    ev = doc.get("traceEvents", [])
    meta = [e for e in ev if isinstance(e, dict) and e.get("ph") == "M"][:20]
    rest = [e for e in ev if isinstance(e, dict) and e.get("ph") != "M"][:n]
    return {**doc, "traceEvents": meta + rest}


def _cut_sqlite(src: Path, dst: Path, rows: int = 40) -> None:
    shutil.copyfile(src, dst)
    conn = sqlite3.connect(dst)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        for t in tables:
            if t in ("StringIds", "ThreadNames"):
                continue  # referenced by id from every other table
            conn.execute(f'DELETE FROM "{t}" WHERE rowid NOT IN '
                         f'(SELECT rowid FROM "{t}" ORDER BY rowid LIMIT {rows})')
        conn.commit()
        conn.execute("VACUUM")
    finally:
        conn.close()


def _cut_rocprofv3_json(doc: dict[str, Any], n: int = 25) -> dict[str, Any]:
    procs = doc["rocprofiler-sdk-tool"]
    out = []
    for p in procs[:1]:
        br = {k: (v[:n] if isinstance(v, list) else v)
              for k, v in (p.get("buffer_records") or {}).items()}
        used = {(r.get("dispatch_info") or {}).get("kernel_id") for r in br["kernel_dispatch"]}
        syms = [k for k in p.get("kernel_symbols") or [] if k.get("kernel_id") in used]
        strings = {"buffer_records": (p.get("strings") or {}).get("buffer_records", [])}
        kinds = [r.get("kind") for r in strings["buffer_records"]]
        if "HIP_RUNTIME_API" in kinds:
            t0 = br["kernel_dispatch"][0]["start_timestamp"]
            br["hip_api"] = [
                {"kind": kinds.index("HIP_RUNTIME_API"), "operation": i, "thread_id": 9,
                 "correlation_id": {"internal": i + 1, "external": 0},
                 "start_timestamp": t0 - 100 + i, "end_timestamp": t0 - 50 + i}
                for i in range(3)]
        out.append({"metadata": p.get("metadata"), "agents": p.get("agents"),
                    "kernel_symbols": syms, "strings": strings, "buffer_records": br})
    return {"rocprofiler-sdk-tool": out}


def _head_lines(p: Path, n: int = 40) -> bytes:
    return b"".join(p.read_bytes().splitlines(keepends=True)[:n])


def _pftrace(d: Path) -> bytes:
    """A cut-down bundled sample, written by our Perfetto writer."""
    from traceforge.render.chrome_json import trace_to_chrome
    from traceforge.render.perfetto import chrome_to_pftrace

    src = Path(tf.__file__).parent / "samples" / "h100-compiled.pt.trace.json.gz"
    cut = d / "pftrace-seed.json"
    cut.write_text(json.dumps(_cut_kineto(json.loads(gzip.decompress(src.read_bytes())), 200)))
    return chrome_to_pftrace(trace_to_chrome(tf.load(cut)))


#: name -> (file name, content kind, builder returning the bytes or None when absent)
Seed = tuple[str, str, Callable[[Path], bytes | None]]


def _shared_json(rel: str) -> Callable[[Path], bytes | None]:
    def build(_: Path) -> bytes | None:
        p = EXTERNAL / rel
        if not p.exists():
            return None
        raw = p.read_bytes()
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        return json.dumps(_cut_kineto(doc), indent=1).encode()
    return build


def _gz(builder: Callable[[Path], bytes | None]) -> Callable[[Path], bytes | None]:
    def build(d: Path) -> bytes | None:
        raw = builder(d)
        return None if raw is None else gzip.compress(raw)
    return build


def _nsys(d: Path) -> bytes | None:
    src = EXTERNAL / "nvfuser/8fa9ec29/report1.sqlite"
    if not src.exists():
        return None
    dst = d / "nsys-seed.sqlite"
    _cut_sqlite(src, dst)
    return dst.read_bytes()


def _rocpd(d: Path) -> bytes | None:
    return rocpd_schema.build(d / "rocpd-seed.db", processes=2).read_bytes()


def _shared_file(rel: str, cut: Callable[[Path], bytes] | None = None
                 ) -> Callable[[Path], bytes | None]:
    def build(_: Path) -> bytes | None:
        p = EXTERNAL / rel
        if not p.exists():
            return None
        return cut(p) if cut else p.read_bytes()
    return build


def _rocprof_json(_: Path) -> bytes | None:
    p = EXTERNAL / "kokkos_rocprof/6f0a1c4a/results.json"
    if not p.exists():
        return None
    return json.dumps(_cut_kineto(json.loads(p.read_bytes()), 120)).encode()


def _rocprofv3_json(_: Path) -> bytes | None:
    p = EXTERNAL / "tracelens/rocprof/908_results.json.gz"
    if not p.exists():
        return None
    return json.dumps(_cut_rocprofv3_json(json.loads(gzip.decompress(p.read_bytes())))).encode()


def _synthetic_kineto(_: Path) -> bytes:
    doc = kineto_doc(distributedInfo={"rank": 0, "world_size": 2, "backend": "nccl"},
                     deviceProperties=[{"id": 0, "name": "H100", "numSms": 132}],
                     baseTimeNanoseconds=1_700_000_000_000_000_000)
    return json.dumps(doc, indent=1).encode()


SEEDS: dict[str, Seed] = {
    "kineto-synthetic": ("synthetic.pt.trace.json", "json", _synthetic_kineto),
    "kineto-synthetic-gz": ("synthetic.pt.trace.json.gz", "json.gz", _gz(_synthetic_kineto)),
    "kineto-hta": ("base.json", "json", _shared_json("hta/trace_compare/base/base.json.gz")),
    "kineto-amd-gz": ("mi250.json.gz", "json.gz",
                      _gz(_shared_json("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"))),
    "nsys-sqlite": ("report.sqlite", "sqlite", _nsys),
    "rocpd": ("results.db", "sqlite", _rocpd),
    "rocprof-v1-csv": ("results.csv", "csv", _shared_file(
        "hpctrainingexamples/finite-difference/results.csv", _head_lines)),
    "rocprof-v1-json": ("results.json", "json", _rocprof_json),
    "rocprof-v1-db": ("results.db", "sqlite", _shared_file("kokkos_rocprof/6f0a1c4a/results.db")),
    "rocprofv3-csv-kernel": ("1_kernel_trace.csv", "csv",
                             _shared_file("rocprofiler-sdk/kernel_trace.csv")),
    "rocprofv3-csv-api": ("1_hip_api_trace.csv", "csv",
                          _shared_file("rocprofiler-sdk/hip_runtime_trace.csv")),
    "rocprofv3-csv-copy": ("1_memory_copy_trace.csv", "csv",
                           _shared_file("rocprofiler-sdk/memory_copy_trace.csv")),
    "rocprofv3-json": ("1_results.json", "json", _rocprofv3_json),
    "pftrace": ("trace.pftrace", "binary", _pftrace),
}


# -- mutations ------------------------------------------------------------------------------

JUNK: list[Any] = ["", "x", "-1", "NaN", 0, -1, -(2**63), 2**63, 2**70, 1e308, -1e308,
                   None, True, [], {}, [1, 2], {"a": 1}, "Agent x", "\u00e9\u4e2d", 3.5]


def _bytes_mutation(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    n = len(data)
    op = rng.choice(("truncate", "flip", "insert", "delete", "zero", "duplicate"))
    i = rng.randrange(max(n, 1))
    if op == "truncate":
        return f"truncate at {i}/{n}", data[:i]
    if op == "flip":
        buf = bytearray(data)
        k = rng.randint(1, 8)
        for _ in range(k):
            j = rng.randrange(n)
            buf[j] ^= 1 << rng.randrange(8)
        return f"{k} bit flips", bytes(buf)
    j = min(n, i + rng.randint(1, 64))
    if op == "insert":
        return f"insert at {i}", data[:i] + rng.randbytes(rng.randint(1, 16)) + data[i:]
    if op == "delete":
        return f"delete {i}:{j}", data[:i] + data[j:]
    if op == "zero":
        return f"zero {i}:{j}", data[:i] + bytes(j - i) + data[j:]
    return f"duplicate {i}:{j}", data[:j] + data[i:j] + data[j:]


_DURATION_KEYS = ("dur", "end_timestamp", "EndNs", "End_Timestamp", "ts")


def _json_mutation(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    doc = json.loads(data)
    nodes = [d for d in json_nodes(doc) if d]
    op = rng.choice(("delete", "retype", "huge", "nan", "negative", "duplicate", "encoding",
                     "empty-list"))
    if op == "encoding":
        text = data.decode()
        enc = rng.choice(("utf-16", "utf-32", "utf-8-sig", "latin-1"))
        text = text.replace('"name": "', '"name": "\u00e9', 3) if enc == "latin-1" else text
        return f"encoding {enc}", text.encode(enc, errors="replace")
    node = rng.choice(nodes)
    key = rng.choice(list(node))
    if op == "delete":
        del node[key]
        desc = f"delete {key!r}"
    elif op == "retype":
        node[key] = rng.choice(JUNK)
        desc = f"retype {key!r} -> {node[key]!r}"
    elif op == "huge":
        node[key] = rng.choice((2**64, 10**30, 1e308, -(2**63) - 1))
        desc = f"huge {key!r}"
    elif op == "nan":
        node[key] = rng.choice((float("nan"), float("inf"), float("-inf")))
        desc = f"nan {key!r}"
    elif op == "negative":
        hits = [d for d in nodes if any(k in d for k in _DURATION_KEYS)]
        node = rng.choice(hits) if hits else node
        key = next((k for k in _DURATION_KEYS if k in node), key)
        node[key] = -abs(node[key]) - 5 if isinstance(node[key], (int, float)) else -5
        desc = f"negative {key!r}"
    elif op == "empty-list":
        lists = [(d, k) for d in nodes for k, v in d.items() if isinstance(v, list)]
        if lists:
            node, key = rng.choice(lists)
            node[key] = []
        desc = f"empty list {key!r}"
    else:  # duplicate key: JSON allows it textually, the last one wins in most parsers
        text = json.dumps(doc)
        needle = f'"{key}": '
        at = text.find(needle)
        if at >= 0:
            text = text[:at] + f'"{key}": {json.dumps(rng.choice(JUNK))}, ' + text[at:]
        return f"duplicate {key!r}", text.encode()
    return desc, json.dumps(doc).encode()


def _csv_mutation(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    rows = list(csv.reader(io.StringIO(data.decode("utf-8", "replace"))))
    op = rng.choice(("drop-column", "rename-column", "cell", "ragged", "drop-rows",
                     "encoding", "negative"))
    if op == "encoding":
        enc = rng.choice(("utf-16", "utf-32", "latin-1"))
        return f"encoding {enc}", data.decode().encode(enc, errors="replace")
    c = rng.randrange(len(rows[0]))
    desc = f"{op} {rows[0][c]!r}"
    if op == "drop-column":
        rows = [r[:c] + r[c + 1:] for r in rows]
    elif op == "rename-column":
        rows[0][c] = rows[0][c] + "_x"
    elif op == "cell":
        r = rng.randrange(1, max(len(rows), 2)) if len(rows) > 1 else 0
        if r < len(rows) and c < len(rows[r]):
            rows[r][c] = str(rng.choice(JUNK))
            desc += f" row {r} -> {rows[r][c]!r}"
    elif op == "ragged":
        rows.append(["1"] * (len(rows[0]) + 3))
    elif op == "drop-rows":
        rows = rows[:1]
    else:
        for r in rows[1:]:
            if c < len(r):
                r[c] = "-" + r[c]
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC if rng.random() < 0.3 else csv.QUOTE_MINIMAL
               ).writerows(rows)
    return desc, buf.getvalue().encode()


def _sqlite_mutation(rng: random.Random, path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        t = rng.choice(tables)
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')]
        op = rng.choice(("drop-table", "rename-column", "null", "junk", "huge", "negative",
                         "empty"))
        c = rng.choice(cols) if cols else ""
        try:
            if op == "drop-table":
                conn.execute(f'DROP TABLE "{t}"')
            elif op == "rename-column" and c:
                conn.execute(f'ALTER TABLE "{t}" RENAME COLUMN "{c}" TO "{c}_x"')
            elif op == "null" and c:
                conn.execute(f'UPDATE "{t}" SET "{c}" = NULL')
            elif op == "junk" and c:
                conn.execute(f'UPDATE "{t}" SET "{c}" = ? WHERE rowid % 2 = 0',
                             (rng.choice(("x", "", "Agent 1", b"\x00\xff", 1.5)),))
            elif op == "huge" and c:
                conn.execute(f'UPDATE "{t}" SET "{c}" = ?',
                             (rng.choice((2**63 - 1, -(2**63), 1e308, 1e300)),))
            elif op == "negative" and c:
                conn.execute(f'UPDATE "{t}" SET "{c}" = -abs("{c}") - 5')
            else:
                conn.execute(f'DELETE FROM "{t}"')
            conn.commit()
        except sqlite3.Error as e:  # e.g. a view still names the column: drop the view too
            conn.rollback()
            return f"{op} {t}.{c} refused by sqlite ({e}); unchanged"
        return f"{op} {t}.{c}"
    finally:
        conn.close()


def _mutant(rng: random.Random, kind: str, seed: bytes, path: Path) -> str:
    """Write one mutant of ``seed`` to ``path``; returns the mutation in words."""
    if rng.random() < 0.25:
        return hostile_mutant(rng, kind, seed, path)
    structured = rng.random() < 0.65
    if kind == "sqlite" and structured:
        path.write_bytes(seed)
        return _sqlite_mutation(rng, path)
    if kind in ("json", "json.gz") and structured:
        plain = gzip.decompress(seed) if kind == "json.gz" else seed
        desc, out = _json_mutation(rng, plain)
        path.write_bytes(gzip.compress(out) if kind == "json.gz" else out)
        return desc
    if kind == "csv" and structured:
        desc, out = _csv_mutation(rng, seed)
        path.write_bytes(out)
        return desc
    if kind == "json.gz" and rng.random() < 0.5:  # bytes of the JSON inside the gzip
        desc, out = _bytes_mutation(rng, gzip.decompress(seed))
        path.write_bytes(gzip.compress(out))
        return desc + " (inside gzip)"
    desc, out = _bytes_mutation(rng, seed)
    path.write_bytes(out)
    return desc


# -- the test ---------------------------------------------------------------------------------

def _share(name: str) -> int:
    """This seed's number of mutants: PER_FORMAT, else TOTAL split evenly over the seeds."""
    if PER_FORMAT or not TOTAL:
        return PER_FORMAT or DEFAULT_PER_FORMAT
    names = list(SEEDS)
    base, extra = divmod(TOTAL, len(names))
    return base + (1 if names.index(name) < extra else 0)


@pytest.fixture(scope="module")
def seed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-seeds")


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


@pytest.mark.parametrize("name", list(SEEDS))
def test_reader_survives_mutants(name: str, seed_dir: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from traceforge.analyzers.timeline.core import timeline
    from traceforge.formats import gunzip

    monkeypatch.setenv("TRACEFORGE_GUNZIP_MAX_BYTES", str(8 * 2**20))
    monkeypatch.setenv("TRACEFORGE_SQLITE_SECONDS", "3")
    monkeypatch.setattr(gunzip, "RATIO_FLOOR", 2**20)
    fname, kind, build = SEEDS[name]
    seed = build(seed_dir)
    if seed is None:
        pytest.skip(f"{name}: seed file not under {SHARED}")
    # The unmutated seed loads: mutants start from a valid input of this format.
    (tmp_path / fname).write_bytes(seed)
    tf.load(tmp_path / fname)
    rng = random.Random(f"traceforge-fuzz-{name}")
    problems: list[str] = []
    slowest = 0.0
    _reset_peak()  # this test's peak, not the suite's (earlier tests in the process ran larger)
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    for k in range(_share(name)):
        case = tmp_path / f"m{k}"
        case.mkdir()
        path = case / fname
        how = _mutant(rng, kind, seed, path)
        before = _digest(case)
        t0 = time.perf_counter()
        try:
            timeline(tf.load(path))
        except TraceFormatError as e:
            msg = str(e)
            if "damaged or unexpected" in msg:  # load() caught what no reader foresaw
                problems.append(f"{name} #{k} [{how}]: {msg[len(str(path)) + 2:][:200]}")
            elif "\n" in msg or str(path) not in msg:
                problems.append(f"{name} #{k} [{how}]: message not one line naming the file: "
                                f"{msg[:200]!r}")
        except Exception as e:  # noqa: BLE001 - exactly what this test looks for
            problems.append(f"{name} #{k} [{how}]: {type(e).__name__}: "
                            f"{' '.join(str(e).split())[:200]}")
        elapsed = time.perf_counter() - t0
        slowest = max(slowest, elapsed)
        if elapsed > SECONDS_PER_INPUT:
            problems.append(f"{name} #{k} [{how}]: took {elapsed:.1f} s")
        if _digest(case) != before:
            problems.append(f"{name} #{k} [{how}]: the input folder changed")
        shutil.rmtree(case)
    assert not problems, f"{len(problems)} of {_share(name)} mutants:\n" + "\n".join(problems)
    # Peak memory of this process since the mutants began, and of its largest child (the
    # reader's workers) where one grew past every earlier child of the suite.
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    peak = max(_own_peak(), kids * 1024 if kids > kids0 else 0)
    assert peak < MAX_RSS, f"peak memory {peak / 2**30:.2f} GiB (bound {MAX_RSS / 2**30} GiB)"
