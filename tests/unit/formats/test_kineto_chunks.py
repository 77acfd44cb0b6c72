"""Kineto files decoded in chunks on several cores give exactly the one-piece table.

Chunks are forced on small files (MIN_CHUNK_BYTES=1); a spy on the reader tells whether
a read went through chunks or fell back to one piece, so each test knows which it saw.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES, SHARED
from traceforge import forks
from traceforge.errors import TraceFormatError
from traceforge.formats import chrome
from traceforge.formats import kineto_chunks as chunks
from traceforge.model import Trace

SAMPLES = Path(chrome.__file__).resolve().parents[1] / "samples"


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Cut every file into up to 3 chunks; count reads by path taken."""
    monkeypatch.setattr(chunks, "MIN_CHUNK_BYTES", 1)
    monkeypatch.setenv("TRACEFORGE_PARSE_WORKERS", "3")
    seen = {"chunks": 0, "one piece": 0}
    real = chrome._read_chunks

    def spy(p: Path, raw: Any, kinds: Any) -> Trace | None:
        if chunks.workers() < 2:
            return real(p, raw, kinds)  # one_piece() below: not counted
        try:
            t = real(p, raw, kinds)
        except chrome._OnePiece:
            seen["one piece"] += 1
            raise
        seen["chunks" if t is not None else "one piece"] += 1
        return t

    monkeypatch.setattr(chrome, "_read_chunks", spy)
    return seen


def one_piece(path: Path, kinds: Any = None) -> Trace:
    old = os.environ.get("TRACEFORGE_PARSE_WORKERS")
    os.environ["TRACEFORGE_PARSE_WORKERS"] = "1"
    try:
        return chrome.read(path, kinds)
    finally:
        if old is None:
            del os.environ["TRACEFORGE_PARSE_WORKERS"]
        else:
            os.environ["TRACEFORGE_PARSE_WORKERS"] = old


def assert_same(a: Trace, b: Trace) -> None:
    pd.testing.assert_frame_equal(a.events, b.events)
    for col in ("name", "cat"):
        assert list(a.events[col].cat.categories) == list(b.events[col].cat.categories)
    pd.testing.assert_frame_equal(a.flows, b.flows)
    assert a.meta == b.meta
    rows = np.arange(0, len(a.events), max(1, len(a.events) // 40))
    assert a.args(rows) == b.args(rows)


def table_or_error(read: Callable[[Path], Trace], p: Path) -> Trace | str:
    """What ``read(p)`` gives: the trace, or the message of the TraceFormatError."""
    try:
        return read(p)
    except TraceFormatError as e:
        return str(e)


def traces() -> list[Path]:
    found = sorted(SAMPLES.glob("*.json*")) + sorted(FIXTURES.glob("*.json.gz"))
    for rel in ("h200-ddp/ddp_rank0.pt.trace.json.gz",
                "external/param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json",
                "external/hta/triton_example/triton_example.json.gz",
                "external/tracelens/traces/mi300/resnet_act_checkpoint.json.gz"):
        if (SHARED / rel).exists():
            found.append(SHARED / rel)
    return found


@pytest.mark.parametrize("path", traces(), ids=lambda p: p.name)
def test_chunks_give_the_one_piece_table(path: Path, forced: dict[str, int]) -> None:
    whole = one_piece(path)
    assert_same(chrome.read(path), whole)
    gpu = ["kernel", "memcpy", "memset", "gpu_annotation", "sync"]
    assert_same(chrome.read(path, gpu), one_piece(path, gpu))
    assert forced == {"chunks": 2, "one piece": 0}


def events(n: int, name: str = "k") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": "Spans", "tid": "x", "args": {"name": "s"}}]
    for i in range(n):
        out.append({"ph": "X", "cat": "kernel", "name": f"{name}{i % 7}", "pid": 0, "tid": 7,
                    "ts": 1000.0 + i, "dur": 0.5,
                    "args": {"correlation": i, "stream": 7, "device": 0}})
        out.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": "Traces",
                    "tid": f"t{i % 3}", "ts": 999.5 + i, "dur": 0.25,
                    "args": {"External id": i}})
        out.append({"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": i, "pid": 1,
                    "tid": 1, "ts": 999.5 + i})
    return out


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("bare", [False, True], ids=["document", "bare list"])
def test_documents_and_bare_lists_compact_or_indented(
        tmp_path: Path, forced: dict[str, int], indent: int | None, bare: bool) -> None:
    doc: Any = events(300) if bare else {
        "schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "H100"}],
        "traceEvents": events(300), "traceName": "after the events",
        "baseTimeNanoseconds": 10**18}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc, indent=indent))
    assert_same(chrome.read(p), one_piece(p))
    assert forced["chunks"] == 1
    if not bare:
        assert chrome.read(p).meta.base_ns >= 10**18
        assert chrome.read(p).meta.devices


def test_a_cut_inside_a_string_falls_back_to_one_piece(
        tmp_path: Path, forced: dict[str, int]) -> None:
    # Names made of "}, {" fill most of the file: cut candidates land inside them.
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events(200, name="}, {" * 200)}))
    assert_same(chrome.read(p), one_piece(p))
    assert forced == {"chunks": 0, "one piece": 1}


def test_a_list_of_objects_after_the_events_is_never_read_as_events(
        tmp_path: Path, forced: dict[str, int]) -> None:
    # Cuts that land in a later list of objects would make those objects "events".
    tail = [{"a": i, "ph": "X", "ts": 1, "dur": 1} for i in range(3000)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events(5), "deviceProperties": tail}))
    t = chrome.read(p)
    assert_same(t, one_piece(p))
    assert len(t.events) == 10
    assert forced["chunks"] == 0


def test_the_events_key_inside_a_string_is_not_taken_for_the_key(
        tmp_path: Path, forced: dict[str, int]) -> None:
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"note": 'a "traceEvents": [ in a string',
                             "traceEvents": events(200)}))
    assert_same(chrome.read(p), one_piece(p))


def test_a_bad_event_in_a_later_chunk_is_named_as_in_one_piece(
        tmp_path: Path, forced: dict[str, int]) -> None:
    evs = events(300)
    evs[700]["dur"] = -1.0
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    with pytest.raises(TraceFormatError) as whole:
        one_piece(p)
    with pytest.raises(TraceFormatError) as chunked:
        chrome.read(p)
    assert str(chunked.value) == str(whole.value)
    assert "event 700" in str(chunked.value)


def test_a_file_off_the_typed_schema_is_read_in_one_piece(
        tmp_path: Path, forced: dict[str, int]) -> None:
    evs = events(300)
    evs[500]["args"]["correlation"] = "77"  # a string id: only the lenient decoder takes it
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    t = chrome.read(p)
    assert_same(t, one_piece(p))
    assert forced == {"chunks": 0, "one piece": 1}


def test_a_worker_that_dies_falls_back_to_one_piece(
        tmp_path: Path, forced: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid()
    real = chunks.decode

    def dying(raw: Any, plan: chunks.Plan, i: int) -> Any:
        if os.getpid() != parent:
            os._exit(3)
        return real(raw, plan, i)

    monkeypatch.setattr(chunks, "decode", dying)
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events(300)}))
    assert_same(chrome.read(p), one_piece(p))
    assert forced == {"chunks": 0, "one piece": 1}


def test_string_ids_are_numbered_alike_in_every_process(tmp_path: Path) -> None:
    # Ids of string pids/tids once followed set order, which string hashing randomizes
    # per process: a cache entry and a fresh parse could disagree.
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events(20)}))
    code = ("import sys; from traceforge.formats import chrome; t = chrome.read(sys.argv[1]);"
            "print(t.events.pid.tolist(), t.events.tid.tolist())")
    outs = {subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True,
                           text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
            for seed in (1, 2, 3, 4)}
    assert len(outs) == 1


def test_workers_only_from_the_main_thread_and_as_configured(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEFORGE_PARSE_WORKERS", "4")
    assert chunks.workers() == (4 if sys.platform == "linux" else 1)
    monkeypatch.setenv("TRACEFORGE_PARSE_WORKERS", "lots")
    assert chunks.workers() == 1
    monkeypatch.setenv("TRACEFORGE_PARSE_WORKERS", "4")
    got: list[int] = []
    th = threading.Thread(target=lambda: got.append(chunks.workers()))
    th.start()
    th.join()
    assert got == [1]


def test_small_files_are_not_cut() -> None:
    assert chunks.plan(b'{"traceEvents": [{"ph": "X"}, {"ph": "X"}]}', 8) is None


def test_the_file_is_not_changed_by_the_brackets_written_in_place(
        tmp_path: Path, forced: dict[str, int]) -> None:
    # Chunks get their brackets in a copy-on-write map of the file: the file stays as is.
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events(300), "traceName": "x"}, indent=1))
    before, mtime = p.read_bytes(), p.stat().st_mtime_ns
    chrome.read(p)
    chrome.read(p)
    assert forced["chunks"] == 2
    assert p.read_bytes() == before
    assert p.stat().st_mtime_ns == mtime


def test_no_fork_or_memory_file_falls_back_to_one_piece(
        tmp_path: Path, forced: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> int:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(forks, "memory_file", refuse)
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events(300)}))
    assert_same(chrome.read(p), one_piece(p))
    assert forced == {"chunks": 0, "one piece": 1}


NAMES = ["aten::mm", "}, {", "},{", '"traceEvents": [', "]}", "a\nb", "ü}, {\"x\"", "k"]


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, bool]:
    """A Kineto-like file whose bytes hold cut candidates everywhere they can be: names
    made of ``}, {``, args with lists of objects, a list of objects after the events."""
    evs: list[Any] = []
    for i in range(draw(st.integers(20, 250))):
        args: dict[str, Any] = {"External id": i}
        if draw(st.booleans()):
            args["nested"] = [{"a": j, "s": draw(st.sampled_from(NAMES))}
                              for j in range(draw(st.integers(0, 3)))]
        kind = draw(st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "fwdbwd"]))
        if kind == "fwdbwd":
            evs.append({"ph": "s", "cat": kind, "name": "fwdbwd", "id": i, "pid": 1,
                        "tid": 1, "ts": 10.0 + i})
            continue
        if kind == "kernel":
            args.update({"correlation": i, "stream": 7, "device": 0})
        evs.append({"ph": "X", "cat": kind, "name": draw(st.sampled_from(NAMES)),
                    "pid": draw(st.sampled_from([0, 1, "Spans"])), "tid": 7,
                    "ts": 10.0 + i * 0.5, "dur": draw(st.sampled_from([0.25, 1.0, 3.5])),
                    "args": args})
    bare = draw(st.booleans())
    if bare:
        doc: Any = evs
    else:
        keys = [("traceEvents", evs), ("schemaVersion", 1),
                ("deviceProperties", [{"id": d, "name": "}, {"} for d in range(40)]),
                ("baseTimeNanoseconds", 10**18)]
        doc = dict(draw(st.permutations(keys)))
    indent = draw(st.sampled_from([None, 0, 1, 2]))
    seps = draw(st.sampled_from([None, (",", ":")]))
    return json.dumps(doc, indent=indent, separators=seps, ensure_ascii=False), bare


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents(), n=st.integers(2, 5))
def test_any_layout_reads_as_in_one_piece(tmp_path_factory: pytest.TempPathFactory,
                                          doc: tuple[str, bool], n: int) -> None:
    p = tmp_path_factory.mktemp("layout") / "t.json"
    p.write_text(doc[0], encoding="utf-8")
    whole = table_or_error(one_piece, p)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(chunks, "MIN_CHUNK_BYTES", 1)
        mp.setenv("TRACEFORGE_PARSE_WORKERS", str(n))
        chunked = table_or_error(chrome.read, p)
    if isinstance(whole, str) or isinstance(chunked, str):
        assert chunked == whole
    else:
        assert_same(chunked, whole)


@pytest.mark.parametrize("shape", ["one member", "two members", "truncated", "garbage after"])
def test_gzip_files_read_in_chunks_as_in_one_piece(
        tmp_path: Path, forced: dict[str, int], shape: str) -> None:
    text = json.dumps({"traceEvents": events(400), "traceName": "t"}, indent=1).encode()
    body = gzip.compress(text)
    if shape == "two members":
        body = gzip.compress(text[:len(text) // 2]) + gzip.compress(text[len(text) // 2:])
    elif shape == "truncated":
        body = body[:len(body) // 2]
    elif shape == "garbage after":
        body += b"not gzip"
    p = tmp_path / "t.json.gz"
    p.write_bytes(body)
    whole = table_or_error(one_piece, p)
    chunked = table_or_error(chrome.read, p)
    if isinstance(whole, str) or isinstance(chunked, str):
        assert chunked == whole
        assert forced["chunks"] == 0
    else:
        assert_same(chunked, whole)
        assert forced == {"chunks": 1, "one piece": 0}


@pytest.mark.parametrize("odd", [" 5", "1_000", "123456789012345678901"])
def test_string_ids_that_numpy_would_read_as_numbers_stay_names(
        tmp_path: Path, forced: dict[str, int], odd: str) -> None:
    # Only ints and plain digit strings under 19 digits are numbers; " 5", "1_000" and a
    # 21-digit string are named like "Spans". numpy's int64 conversion, which a file with
    # no other string ids would reach, reads the first two as 5 and 1000 and overflows on
    # the third.
    evs = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": odd if i == 500 else 1,
            "tid": 2, "ts": 10.0 + i, "dur": 0.5} for i in range(1000)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    for t in (chrome.read(p), one_piece(p)):
        assert sorted(set(t.events["pid"].tolist())) == [-2, 1]
    assert_same(chrome.read(p), one_piece(p))
    assert forced["chunks"] == 2


def test_children_are_forked_with_sigterm_default() -> None:
    """The CLI turns SIGTERM into SystemExit; a child forked with that handler and
    terminated by Child.close() would raise inside its copy of the parent's code (seen as a
    flaky 'can only test a child process' in this file's property test)."""
    import signal

    from traceforge.forks import Child, can_fork

    if not can_fork():
        pytest.skip("no fork here")

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        child = Child(lambda: signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
        assert child.result() is True
        child.close()
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, old)


def test_files_past_chunk_bytes_are_decoded_one_chunk_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31 item 5: the decoded structs of a chunk live only until its columns are
    built, so a file is cut into CHUNK_BYTES pieces even for one worker (in this process,
    in order), and each worker takes the next chunk not yet taken; the table is the one-piece
    one."""
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events(300), "traceName": "x"}))
    whole = one_piece(p)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4096)
    real, sizes, pids = chunks.decode, [], set()

    def spy(raw: Any, plan: chunks.Plan, i: int) -> Any:
        got = real(raw, plan, i)
        sizes.append(len(got[0]))
        pids.add(os.getpid())
        return got

    monkeypatch.setattr(chunks, "decode", spy)
    monkeypatch.setenv("TRACEFORGE_PARSE_WORKERS", "1")
    assert_same(chrome.read(p), whole)
    assert len(sizes) >= p.stat().st_size // 4096 and max(sizes) < 300
    assert pids == {os.getpid()}  # one worker: no fork
    raw = p.read_bytes()
    monkeypatch.setattr(chunks, "MIN_CHUNK_BYTES", 1)
    plan = chunks.plan(raw, 3)
    assert plan is not None and plan.workers == 3 and plan.chunks > 3
    monkeypatch.setenv("TRACEFORGE_PARSE_WORKERS", "3")
    assert_same(chrome.read(p), whole)


def _args_file(tmp_path: Path, layout: str, name: str = "k") -> Path:
    """300 steps of :func:`events` (kernels named ``name``...) with args of every JSON
    kind, some big, as a document ("indented": with newlines) or a bare list."""
    evs = events(300, name=name)
    for i, e in enumerate(evs):
        e.setdefault("args", {}).update({"s": "a\"b\\ é", "l": [[i, 2], [3]], "f": 1.5,
                                         "t": True, "null": None, "pad": "x" * (i % 97)})
    doc: Any = evs if layout == "bare list" else {"traceEvents": evs, "traceName": "t"}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc, indent=2 if layout == "indented" else None))
    return p


@pytest.mark.parametrize("layout", ["document", "indented", "bare list", "cut in a string"])
def test_args_are_scanned_a_chunk_at_a_time_as_in_one_piece(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """``LazyArgs`` scans a plain file's args ~CHUNK_BYTES at a time in a private map,
    handing each chunk's pages back once decoded (a 288 MB trace's pages no longer all
    count in the process at once): every row's args and raw args are those of the
    one-piece scan, the file is unchanged, and a cut that lands in a string makes the scan
    one piece again."""
    from traceforge.formats import kineto_args

    p = _args_file(tmp_path, layout, "}, {" * 50 if layout == "cut in a string" else "k")
    before = p.read_bytes()
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4096)
    t = one_piece(p)
    rows = np.arange(len(t.events), dtype=np.int64)
    scanned, drops = [], []
    real_scan, real_drop = kineto_args._scan_in_chunks, kineto_args._drop_pages

    def scan(path: Path) -> Any:
        try:
            got = real_scan(path)
        except Exception:
            scanned.append(None)
            raise
        scanned.append(got)
        return got

    monkeypatch.setattr(kineto_args, "_scan_in_chunks", scan)
    monkeypatch.setattr(kineto_args, "_drop_pages", lambda r: drops.append(r) or real_drop(r))
    src = t.args_provider.src_index  # type: ignore[attr-defined]
    chunked = kineto_args.LazyArgs(p, src)
    got, got_raw = chunked(rows), chunked.raw(rows)
    if layout == "cut in a string":
        assert scanned == [None]  # the cut was refused: decoded in one piece
    else:
        assert scanned and scanned[0] is not None and drops
    monkeypatch.setattr(kineto_args, "_scan_in_chunks", lambda path: None)
    whole = kineto_args.LazyArgs(p, src)
    assert got == whole(rows) and len(got) == len(rows) == 600
    raw_whole = whole.raw(rows)
    assert got_raw is not None and raw_whole is not None
    assert [{k: bytes(v) for k, v in d.items()} for d in got_raw] == \
        [{k: bytes(v) for k, v in d.items()} for d in raw_whole]
    assert p.read_bytes() == before


def _decoded_chunks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The chunks args scans decode from now on, in order (a spy on ChunkScan.decode)."""
    from traceforge.formats import kineto_args

    decoded: list[int] = []
    real = kineto_args.ChunkScan.decode

    def spy(self: Any, i: int) -> Any:
        decoded.append(i)
        return real(self, i)

    monkeypatch.setattr(kineto_args.ChunkScan, "decode", spy)
    return decoded


@pytest.mark.parametrize("layout", ["document", "indented", "bare list"])
def test_args_decode_only_the_chunks_of_the_rows_asked_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """A file the reader cut into chunks tells its args provider where each chunk's
    events begin; rows' args then decode only the chunks that hold them (each once, in
    any order) and equal the whole-file scan's, raw args too; the file is unchanged."""
    from traceforge.formats import kineto_args

    p = _args_file(tmp_path, layout)
    before = p.read_bytes()
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4096)
    t = one_piece(p)  # (one worker: still read in chunks)
    lazy = t.args_provider
    assert isinstance(lazy, kineto_args.LazyArgs)
    starts, src = lazy.starts, lazy.src_index
    assert starts is not None and len(starts) > 5 and starts[-1] == 1 + 3 * 300
    whole = kineto_args.LazyArgs(p, src)  # no chunks known: the whole file is scanned
    last = len(starts) - 2
    tail = np.flatnonzero(src >= starts[last])
    head = np.flatnonzero(src < starts[1])
    rows = np.arange(len(t.events))[::-1]
    assert len(tail) and len(head)
    want = whole(tail), whole(head), whole(rows)
    decoded = _decoded_chunks(monkeypatch)
    assert t.args(tail) == want[0] and decoded == [last]
    assert t.args(head) == want[1] and decoded == [last, 0]
    assert t.args(rows) == want[2]
    assert sorted(decoded) == list(range(len(starts) - 1))
    got_raw, raw_whole = lazy.raw(rows), whole.raw(rows)
    assert got_raw is not None and raw_whole is not None
    assert [{k: bytes(v) for k, v in d.items()} for d in got_raw] == \
        [{k: bytes(v) for k, v in d.items()} for d in raw_whole]
    (codes, uniq), (codes_w, uniq_w) = (x.distinct(rows, ("l", "pad")) for x in (lazy, whole))
    assert codes.tolist() == codes_w.tolist() and uniq == uniq_w and len(uniq) > 50
    assert p.read_bytes() == before


def test_args_chunks_travel_through_the_cache(
        tmp_path: Path, cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache entry keeps where the reader cut the file: a hit's args provider
    decodes only the chunks of the rows asked for, as the fresh read's does."""
    from traceforge.formats import load

    p = _args_file(tmp_path, "document")
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4096)
    fresh = load(p, cache=False)
    load(p)  # writes the entry
    hit = load(p, kinds=["kernel"])
    assert hit.store is not None  # (read from the entry)
    decoded = _decoded_chunks(monkeypatch)
    rows = np.arange(len(hit.events))[-5:]
    src = fresh.args_provider.src_index  # type: ignore[attr-defined]
    starts = fresh.args_provider.starts  # type: ignore[attr-defined]
    kernels = np.flatnonzero(fresh.events["kind"].to_numpy() == "kernel")[-5:]
    got = hit.args(rows)
    want = np.unique(np.searchsorted(starts, src[kernels], side="right") - 1).tolist()
    assert sorted(decoded) == want and len(want) < len(starts) - 1
    assert got == fresh.args(kernels)


@pytest.mark.parametrize("case", ["other cuts", "other counts", "gzip", "past the end"])
def test_args_chunks_that_do_not_fit_the_file_read_it_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """Where the chunks a provider was given are not the file's (cut another way, other
    counts, a gzip, a row past them), it decodes the file whole: the args are the same."""
    from traceforge.formats import kineto_args

    p = _args_file(tmp_path, "document")
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4096)
    t = one_piece(p)
    lazy = t.args_provider
    assert isinstance(lazy, kineto_args.LazyArgs) and lazy.starts is not None
    starts, src = lazy.starts.copy(), lazy.src_index
    if case == "other cuts":
        starts = np.concatenate([starts[:2], starts[1:]])  # one chunk more
    elif case == "other counts":
        starts[2] += 1
    elif case == "gzip":
        gz = tmp_path / "t.json.gz"
        gz.write_bytes(gzip.compress(p.read_bytes()))
        p = gz
    else:
        starts = starts[:-1]
    rows = np.arange(len(t.events))
    whole = kineto_args.LazyArgs(p, src)
    assert kineto_args.LazyArgs(p, src, starts)(rows) == whole(rows)


@pytest.mark.parametrize("value", [None, "0,5", [0], [0, "5"], [1, 5, 9], [0, 9, 5],
                                   [0, 2**70], [0, True]])
def test_chunk_starts_a_cache_header_cannot_hold_are_ignored(value: Any) -> None:
    """A cache header edited by hand (or by another program) never steers the args scan:
    anything but ints from 0, never decreasing, means the file is scanned whole."""
    from traceforge.formats import kineto_args

    lazy = kineto_args.args_from_cache(Path("t.json"), {"src": np.arange(3)},
                                       {"chunk_starts": value})
    assert lazy.starts is None
    good = kineto_args.args_from_cache(Path("t.json"), {"src": np.arange(3)},
                                       {"chunk_starts": [0, 2, 3]})
    assert good.starts is not None and good.starts.tolist() == [0, 2, 3]
