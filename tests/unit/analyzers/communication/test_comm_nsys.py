"""``comm`` where kernels carry no sizes: nsys exports (NCCL's NVTX payloads, against the raw
SQLite, nsys's own payload decoding, what was called and the Kineto trace of the same sizes;
fixtures/nccl_nsys_h100x2, made by examples/collectives_nsys.py on 2 NVLink H100s) and
rocpd databases (RCCL's API arguments, on the documented schema)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
import struct
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import traceforge as tf
from tests.conftest import FIXTURES, cli_main
from traceforge.analyzers.communication.instances import comm_reduce, comm_summary
from traceforge.analyzers.runs.rank_summaries import TIMELINE_KINDS
from traceforge.formats import nvtx_payloads
from traceforge.formats.multirank import load_run

FIX = FIXTURES / "nccl_nsys_h100x2"
FILES = [FIX / "nccl_rank0.sqlite", FIX / "nccl_rank1.sqlite"]
# nccl-tests' S and F, written out again: NCCL's payload counts one rank's part of the
# all-gather and reduce-scatter and one peer's of the all-to-all.
PARTS = {"ncclAllGather": True, "ncclReduceScatter": True, "ncclAlltoAll": True}
KIND = {"ncclAllReduce": "all_reduce", "ncclAllGather": "all_gather",
        "ncclReduceScatter": "reduce_scatter", "ncclBroadcast": "broadcast",
        "ncclAlltoAll": "all_to_all"}
FACTOR = {"all_reduce": 2 * (2 - 1) / 2, "all_gather": 1 / 2, "reduce_scatter": 1 / 2,
          "all_to_all": 1 / 2, "broadcast": 1.0}
CALLED = {"allreduce": "all_reduce", "allgather": "all_gather",
          "reducescatter": "reduce_scatter", "broadcast": "broadcast",
          "alltoall": "all_to_all"}


def _raw(path: Path) -> list[dict[str, Any]]:
    """The NCCL kernels of one export by start (absolute ns: session UTC + start), each with
    the k-th NCCL collective range's name, read with sqlite3 alone. Sizes come from nsys's
    own JSON decoding of rank 0's payloads (every rank makes the same calls)."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as c:
        utc = c.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
        kernels = c.execute(
            "SELECT k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON "
            "s.id = k.demangledName WHERE s.value LIKE 'ncclDevKernel%' ORDER BY k.start"
        ).fetchall()
        ranges = c.execute(
            "SELECT n.start, s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
            "WHERE s.value IN ('ncclAllReduce', 'ncclAllGather', 'ncclReduceScatter', "
            "'ncclBroadcast', 'ncclAlltoAll') ORDER BY n.start").fetchall()
    sizes = [json.loads(j).get("Message size [bytes]") for _, j in _nsys_json()]
    sizes = [s for s in sizes if s is not None]
    assert len(kernels) == len(ranges) == len(sizes) == 181
    out = []
    for (ts, end), (_, name), size in zip(kernels, ranges, sizes, strict=True):
        s = size * (2 if PARTS.get(name) else 1)
        out.append({"kind": KIND[name], "bytes": s, "ts": utc + ts, "end": utc + end})
    return out


def _nsys_json() -> list[tuple[int, str]]:
    doc = json.loads((FIX / "nsys_payload_json_rank0.json").read_text())
    return [(int(a), str(b)) for a, b in doc["rows"]]


def _instances() -> Any:
    r = comm_reduce([comm_summary(tf.load(f)) for f in FILES])
    return r, r.instances.sort_values("start_ns").reset_index(drop=True)


def test_payloads_decode_as_nsys_decodes_them() -> None:
    """Every rank-0 NVTX range's payload, decoded from ``binaryData``, equals nsys's own
    JSON (``--include-json``) of the same range."""
    t = tf.load(FILES[0])
    ev = t.events
    nccl = ev[ev["name"].astype(str).str.startswith("NCCL:")].sort_values("ts", kind="stable")
    got = [a.get("payload") for a in t.args(nccl.index.to_numpy())]
    want = [json.loads(j) for _, j in _nsys_json()]
    assert len(got) == len(want) == 184
    assert got == want
    assert want[1] == {"NCCL communicator ID": 10129809174676313323,
                       "Message size [bytes]": 4194304, "Reduction operation": "Sum"}


def test_sizes_and_busbw_match_the_raw_sqlite_and_the_calls() -> None:
    raws = [[x for x in _raw(f) if x["bytes"] > 4] for f in FILES]  # 4 B: barriers
    r, inst = _instances()
    inst = inst[inst["bytes"] > 4].reset_index(drop=True)
    called = json.loads((FIX / "calls.json").read_text())["calls"]
    assert len(inst) == len(raws[0]) == len(raws[1]) == len(called) == 158
    assert r.matched and not any("no message size" in n for n in r.notes)
    # The 16 MiB broadcasts' root finishes before the receiver starts (NCCL buffers them).
    assert any(n.startswith("6 collectives had a rank's kernel end before") for n in r.notes)
    for i, (a, b, c) in enumerate(zip(*raws, called, strict=True)):
        assert inst.loc[i, "kind"] == a["kind"] == CALLED[c["kind"]], i
        assert inst.loc[i, "bytes"] == a["bytes"] == b["bytes"] == c["S"], i
        sync = max(a["end"], b["end"]) - max(a["ts"], b["ts"])
        want = a["bytes"] * FACTOR[a["kind"]] / sync
        assert inst.loc[i, "busbw_sync_gbps"] == pytest.approx(want, rel=1e-3), i
        assert inst.loc[i, "group_size"] == 2


def test_nsys_agrees_with_kineto_of_the_same_sizes() -> None:
    """The all-reduce sweep's median synchronized busbw per size on the nsys exports and on
    the Kineto traces taken right after on the same machine: within 3% at every size from
    2 KiB to 1 GiB (measured: 2.5% at most; the 1 KiB calls open each trace)."""
    _, ns = _instances()
    kin = sorted((FIX / "kineto").glob("allreduce_sweep_rank*.json.gz"))
    k = comm_reduce([comm_summary(tf.load(f)) for f in kin]).instances
    ratios = []
    for size in (2**p for p in range(11, 31)):
        a = statistics.median(ns.loc[(ns["kind"] == "all_reduce") & (ns["bytes"] == size),
                                     "busbw_sync_gbps"])
        b = statistics.median(k.loc[k["bytes"] == size, "busbw_sync_gbps"])
        assert abs(a / b - 1) <= 0.03, (size, a, b)
        ratios.append(a / b)
    assert abs(statistics.median(ratios) - 1) <= 0.01


def test_cli_reads_sizes_through_the_engine_and_the_cache(tmp_path: Path) -> None:
    # The engine reads a kinds selection (row labels are not positions) and, the second
    # time, the cache: both must keep the payloads.
    for _ in range(2):
        code, out, _ = cli_main("comm", *map(str, FILES), "--format", "json")
        assert code == 0
        doc = json.loads(out)
        rows = {(r["kind"], r["size"]): r for r in doc["by_size"]}
        assert rows[("all_reduce", "1 GiB")]["count"] == 5
        assert rows[("all_gather", "16 MiB")]["count"] == 6
        assert 300 < rows[("all_reduce", "1 GiB")]["busbw_median_gbps"] < 450
    t = tf.load(FILES[1], kinds=TIMELINE_KINDS)
    s = comm_summary(t).kernels
    assert s["in_nelems"].notna().all()


def test_export_without_blobs_says_how_to_get_sizes(tmp_path: Path) -> None:
    """nsys's default export writes the schemas and a NULL payload on every range."""
    copies = []
    for f in FILES:
        dst = tmp_path / f.name
        shutil.copyfile(f, dst)
        with closing(sqlite3.connect(dst)) as c:
            c.execute("UPDATE NVTX_EVENTS SET binaryData = NULL")
            c.commit()
        copies.append(dst)
    r = comm_reduce([comm_summary(tf.load(f)) for f in copies])
    assert r.instances["bytes"].isna().all() and len(r.instances) == 181
    assert set(r.instances["kind"]) == {"all_reduce", "all_gather", "reduce_scatter",
                                        "broadcast", "all_to_all"}
    assert any("--include-blobs=true" in n for n in r.notes)


def test_hostile_payloads_are_left_out() -> None:
    schema = {7: [("Message size [bytes]", "Q", 8, None), ("op", "I", 16, {0: "Sum"})]}
    good = struct.pack("<QQQQ", 1, 7, 24, 32) + struct.pack("<QQI4x", 1, 4096, 0)
    assert nvtx_payloads.decode_blob(good, schema) == {"Message size [bytes]": 4096,
                                                       "op": "Sum"}
    bad = [b"", b"\x01", good[:40],  # short
           struct.pack("<Q", 1 << 40) + good[8:],  # absurd count
           struct.pack("<QQQQ", 1, 7, 24, 1 << 40) + good[32:],  # offset past the end
           struct.pack("<QQQQ", 1, 99, 24, 32) + good[32:],  # unknown schema
           good + b"\0" * nvtx_payloads.MAX_BLOB, "text", None]
    for b in bad:
        assert nvtx_payloads.decode_blob(b, schema) is None, b
    for text in ("[1, 2]", "{", "x" * 10, "{" + " " * nvtx_payloads.MAX_JSON + "}"):
        assert nvtx_payloads.json_object(text) is None


# -- rocpd: RCCL's API arguments (rocpd_arg), on the documented schema ----------------------
def _rocpd_with_rccl_args(path: Path) -> Path:
    """tests/rocpd_schema's two processes, each ncclDevKernel_Generic launch wrapped in an
    RCCL API region with its arguments as rocprofv3 stores them (rocpd_arg: name, value
    text; ``datatype`` the ncclDataType_t number): an all-reduce of 2**20 float32 and an
    all-gather of 1000 bfloat16 per rank."""
    from tests.support import rocpd_schema as rs

    u = rs.UUID
    with closing(sqlite3.connect(path)) as c:
        rs.create(c)
        for r in range(2):
            rs.add_process(c, f"guid-{r}", 4242 + 101 * r, r, 1_700_000_000_000 + 777 * r)
        launches = c.execute(
            "SELECT R.guid, R.nid, R.pid, R.tid, R.start, R.end FROM rocpd_region R "
            "JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid "
            "JOIN rocpd_kernel_dispatch K ON K.guid = R.guid JOIN rocpd_event KE ON "
            "KE.id = K.event_id AND KE.guid = K.guid AND KE.correlation_id = E.correlation_id "
            "JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid "
            "WHERE S.kernel_name LIKE 'ncclDevKernel_Generic%' ORDER BY R.guid, R.start"
        ).fetchall()
        assert len(launches) == 4
        calls = [("ncclAllReduce", [("count", "size_t", "1048576"), ("datatype",
                  "ncclDataType_t", "7"), ("op", "ncclRedOp_t", "0")]),
                 ("ncclAllGather", [("sendcount", "size_t", "1000"),
                                    ("datatype", "ncclDataType_t", "9")])]
        for i, (guid, nid, pid, tid, start, end) in enumerate(launches):
            name, args = calls[i % 2]
            cat = c.execute(f'SELECT id FROM "rocpd_string{u}" WHERE string = ? AND guid = ?',
                            ("RCCL_API", guid)).fetchone()
            cat_id = cat[0] if cat else c.execute(
                f'INSERT INTO "rocpd_string{u}" (guid, string) VALUES (?, ?)',
                (guid, "RCCL_API")).lastrowid
            name_id = c.execute(f'INSERT INTO "rocpd_string{u}" (guid, string) VALUES (?, ?)',
                                (guid, name)).lastrowid
            ev = c.execute(f'INSERT INTO "rocpd_event{u}" (guid, category_id, correlation_id) '
                           "VALUES (?, ?, 0)", (guid, cat_id)).lastrowid
            c.execute(f'INSERT INTO "rocpd_region{u}" (guid, nid, pid, tid, start, "end", '
                      "name_id, event_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      (guid, nid, pid, tid, start - 100, end + 100, name_id, ev))
            for pos, (a, typ, v) in enumerate(args):
                c.execute(f'INSERT INTO "rocpd_arg{u}" (guid, event_id, position, type, name, '
                          "value) VALUES (?, ?, ?, ?, ?, ?)", (guid, ev, pos, typ, a, v))
        c.commit()
    return path


def test_rocpd_rccl_call_args_size_the_generic_kernels(tmp_path: Path) -> None:
    db = _rocpd_with_rccl_args(tmp_path / "rccl_results.db")
    ranks = load_run([db])  # one database of two processes: split per rank
    assert len(ranks) == 2
    r = comm_reduce([comm_summary(t) for t in ranks])
    inst = r.instances.sort_values("start_ns").reset_index(drop=True)
    assert list(inst["kind"]) == ["all_reduce", "all_gather"]
    assert list(inst["dtype"]) == ["float32", "bfloat16"]
    # nccl-tests' S: the all-reduce buffer; the all-gather's total, n = 2 ranks x 1000.
    assert list(inst["bytes"]) == [4 * 2**20, 2 * 1000 * 2]
    assert (inst["n_ranks"] == 2).all() and (inst["group_size"] == 2).all()
    assert not any("carry no message size" in n for n in r.notes)


def test_nsys_rep_is_exported_with_blobs_and_retried_without(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A .nsys-rep is exported with --include-blobs (sizes); an nsys that refuses the option
    (before 2024) is asked again without it."""
    from traceforge.formats.nsys import REP_MAGIC

    log = tmp_path / "calls.log"
    fake = tmp_path / "nsys"
    fake.write_text(f"""#!/bin/sh
echo "$@" >> "{log}"
case "$*" in *--include-blobs*) [ -n "$REFUSE" ] && exit 1 ;; esac
while [ "$1" != "--output" ]; do shift; done
cp "{FILES[0]}" "$2"
""")
    fake.chmod(0o755)
    monkeypatch.setenv("TRACEFORGE_NSYS", str(fake))
    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(REP_MAGIC + b"\0" * 64)
    s = comm_summary(tf.load(rep, cache=False)).kernels
    assert s["in_nelems"].notna().all() and "--include-blobs true" in log.read_text()
    monkeypatch.setenv("REFUSE", "1")
    log.write_text("")
    assert len(tf.load(rep, cache=False).kernels()) > 0
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and "--include-blobs" not in calls[1]
