"""``annotate``/``convert`` at trace size: the hand-encoded ``.pftrace`` is byte for byte
what the ``perfetto`` wheel's message classes serialize (the old encoder, kept verbatim in
:mod:`tests.support.pftrace_reference`, is the oracle), Chrome JSON encoded in batches is what one
``orjson.dumps`` writes, the critical-path track merges only touching pieces of one thread
and kind, and ``annotate --steps/--window`` cut the trace as ``open`` does."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import traceforge as tf
from tests.conftest import REPO
from traceforge.analyzers.critical_path.handoff import merged_pieces
from traceforge.cli import cli
from traceforge.render import document as chrome_json
from traceforge.render.annotate import annotated_document
from traceforge.render.critical_path import PATH_PID
from traceforge.render.perfetto import chrome_to_pftrace
from traceforge.report.annotations import annotation_data

pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
FIX = REPO / "fixtures"


@pytest.fixture(scope="module")
def annotated() -> dict[str, object]:
    t = tf.load(FIX / "compiled.pt.trace.json.gz")
    doc = annotated_document(t, annotation_data(t))
    # Values the trace itself may lack: a counter, a bool, a nested and a negative arg.
    doc["traceEvents"] += [  # type: ignore[operator]
        {"ph": "C", "name": "c", "pid": 1, "tid": 0, "ts": 1.0, "args": {"v": 2.5}},
        {"ph": "X", "name": "odd", "cat": "x", "pid": "p", "tid": "t", "ts": 2.0, "dur": 1.0,
         "args": {"b": True, "n": -3, "l": [1, 2], "big": 2**70}},
    ]
    return doc


def test_pftrace_bytes_equal_the_message_classes(annotated: dict[str, object]) -> None:
    from tests.support.pftrace_reference import chrome_to_pftrace as reference

    new = chrome_to_pftrace(annotated)
    assert new == reference(annotated)
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    packets = pb.Trace.FromString(new).packet
    assert sum(p.HasField("track_event") for p in packets) > 1000


def test_chrome_json_batches_equal_one_dumps(annotated: dict[str, object],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chrome_json, "BATCH", 997)
    doc = {**annotated, "traceEvents": annotated["traceEvents"][:-1]}  # type: ignore[index]
    got = chrome_json.dumps_chrome(doc)
    assert got == orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
    assert len(orjson.loads(got)["traceEvents"]) > 3 * 997


def _seg(rows: list[tuple[int, int, str, int, int, int]]) -> pd.DataFrame:
    # (order, tid, kind, ts, dur, row) of one step on pid 1.
    return pd.DataFrame([{"step": 1, "order": o, "kind": k, "name": f"n{o}", "category": k,
                          "ts": ts, "dur": d, "row": r, "pid": 1, "tid": tid}
                         for o, tid, k, ts, d, r in rows])


def test_merge_only_touching_pieces_of_one_thread_and_kind() -> None:
    seg = _seg([(0, 1, "cpu_op", 0, 10, 5), (1, 1, "cpu_op", 10, 30, 6),
                (2, 1, "cpu_op", 40, 5, 7),     # touches: one run of 3, heaviest n1
                (3, 1, "cpu_op", 50, 5, 8),     # a gap before it: its own slice
                (4, 1, "runtime", 55, 5, 9),    # another kind
                (5, 2, "runtime", 60, 5, 10)])  # another thread
    m = merged_pieces(seg)
    assert m[["order", "last_order", "pieces", "ts", "dur"]].values.tolist() == [
        [0, 2, 3, 0, 45], [3, 3, 1, 50, 5], [4, 4, 1, 55, 5], [5, 5, 1, 60, 5]]
    assert m["name"].tolist() == ["n1", "n3", "n4", "n5"]
    assert int(m["dur"].sum()) == int(seg["dur"].sum())  # nothing covered twice or added
    assert merged_pieces(seg.iloc[:0]).empty


def test_a_step_drawn_in_too_many_slices_merges_runs_of_one_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A step whose path alternates kinds on one stream (tiny kernels and the idle time
    between them) would draw one slice per piece: past the bound, its touching pieces of
    one thread are one ``mixed`` slice with the time per kind; a step under the bound,
    and a hop to another thread, are drawn as before."""
    from traceforge.analyzers.critical_path import PathTrack, handoff
    from traceforge.render import critical_path as cp

    monkeypatch.setattr(handoff, "MAX_DRAWN_PER_STEP", 4)
    busy = _seg([(o, 7, "kernel" if o % 2 == 0 else "idle", 10 * o, 10, o if o % 2 == 0 else -1)
                 for o in range(9)]                              # 9 pieces, one stream
                + [(9, 1, "runtime", 90, 5, 20), (10, 7, "kernel", 95, 3, 21)])  # a hop
    calm = _seg([(0, 7, "kernel", 200, 10, 30), (1, 7, "idle", 210, 5, -1)]).assign(step=2)
    seg = pd.concat([busy, calm], ignore_index=True)
    m, kinds = handoff.drawn_pieces(seg)
    assert kinds == ["idle", "kernel"]
    assert m[["step", "order", "last_order", "pieces", "ts", "dur"]].values.tolist() == [
        [1, 0, 8, 9, 0, 90], [1, 9, 9, 1, 90, 5], [1, 10, 10, 1, 95, 3],
        [2, 0, 0, 1, 200, 10], [2, 1, 1, 1, 210, 5]]
    assert m["kind"].tolist() == ["mixed", "runtime", "kernel", "kernel", "idle"]
    assert m[["kernel_ns", "idle_ns"]].values.tolist()[0] == [50, 40]
    assert m[["kernel_ns", "idle_ns"]].values[1:].sum() == 0
    assert m["name"].tolist()[0] == "n0"  # the heaviest piece, the first of equals
    assert int(m["dur"].sum()) == int(seg["dur"].sum())
    track = PathTrack.of(0, seg, pd.DataFrame(columns=["id", "from_pid", "from_tid", "from_ts",
                                                    "to_pid", "to_tid", "to_ts"]))
    ev = [e for e in cp.chrome_events(track) if e["ph"] == "X"]
    assert ev[0]["name"] == "n0 +8 more" and ev[0]["args"] == {
        "kind": "mixed", "category": "kernel", "step": 1, "order": 0, "pieces": 9,
        "last_order": 8, "idle_ns": 40, "kernel_ns": 50}
    assert ev[1]["args"] == {"kind": "runtime", "category": "runtime", "step": 1,
                             "order": 9, "row": 20}
    # Under the bound, the steps are merged_pieces' rows unchanged.
    monkeypatch.setattr(handoff, "MAX_DRAWN_PER_STEP", 11)
    m, kinds = handoff.drawn_pieces(seg)
    assert kinds == [] and m.equals(merged_pieces(seg))


def test_annotate_steps_and_window(tmp_path: Path) -> None:
    src = str(FIX / "compiled.pt.trace.json.gz")
    whole, part = tmp_path / "all.json", tmp_path / "part.json"
    r = CliRunner().invoke(cli, ["annotate", src, "-o", str(whole)])
    assert r.exit_code == 0, r.output
    from traceforge.analyzers.timeline.core import timeline

    one = str(int(timeline(tf.load(src)).steps.ranges["step"].iloc[-1]))
    r = CliRunner().invoke(cli, ["annotate", src, "-o", str(part), "--steps", one])
    assert r.exit_code == 0, r.output
    a, b = tf.load(whole), tf.load(part)
    assert 0 < len(b.events) < len(a.events)
    assert (b.events["pid"] == PATH_PID).any()
    r = CliRunner().invoke(cli, ["annotate", src, "-o", str(part), "--steps", one,
                                 "--window", "0:1ms"])
    assert r.exit_code != 0 and "not both" in str(r.exception)
    r = CliRunner().invoke(cli, ["annotate", src, "-o", str(tmp_path / "w.pftrace"),
                                 "--window", "0:5ms"])
    assert r.exit_code == 0, r.output


def test_written_in_batches_equals_whole(annotated: dict[str, object], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    from traceforge.render import perfetto, pftrace_chunks, pftrace_packets
    from traceforge.render.document import write_document

    whole = chrome_to_pftrace(annotated)
    # Packets are encoded a batch of CHUNK at a time and written when FLUSH_BYTES gather.
    monkeypatch.setattr(pftrace_packets, "FLUSH_BYTES", 4096)
    monkeypatch.setattr(pftrace_chunks, "CHUNK", 64)
    writes: list[bytes] = []
    perfetto.write_pftrace(annotated, writes.append)
    assert len(writes) > 10 and b"".join(writes) == whole
    monkeypatch.setattr(chrome_json, "BATCH", 500)
    doc = {**annotated, "traceEvents": annotated["traceEvents"][:-1]}  # type: ignore[index]
    out = tmp_path / "a.json.gz"
    with open(out, "wb") as f:
        write_document(doc, out, f)
    assert gzip.decompress(out.read_bytes()) == orjson.dumps(
        doc, option=orjson.OPT_SERIALIZE_NUMPY)


def test_a_failed_stream_keeps_the_old_file(tmp_path: Path) -> None:
    from typing import BinaryIO

    from traceforge import output_file as output

    out = tmp_path / "a.pftrace"
    out.write_bytes(b"good")

    def fill(f: BinaryIO) -> None:
        f.write(b"half")
        raise RuntimeError("encoder failed")

    with pytest.raises(RuntimeError):
        output.stream(out, fill)
    assert out.read_bytes() == b"good" and sorted(tmp_path.iterdir()) == [out]


def test_rows_encoded_from_columns_equal_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    """``annotate``/``convert`` encode the trace's rows from its columns (events built per
    batch of packets, in write order): the bytes are the old encoder's of the whole dict
    document, for .pftrace and for Chrome JSON, with batches far smaller than the trace."""
    from tests.support.pftrace_reference import chrome_to_pftrace as reference
    from traceforge.render import pftrace_chunks
    from traceforge.render.annotate import annotated_source
    from traceforge.render.chrome_json import ChromeSource

    t = tf.load(FIX / "compiled.pt.trace.json.gz")
    monkeypatch.setattr(pftrace_chunks, "CHUNK", 101)
    monkeypatch.setattr(chrome_json, "BATCH", 97)
    for src in (annotated_source(t, annotation_data(t)), ChromeSource(t)):
        doc = src.document()
        assert src.n > 20 * 101 and "f" in src.flows.ph  # flows bound
        assert chrome_to_pftrace(src) == reference(doc)
        assert chrome_json.dumps_chrome(src) == orjson.dumps(
            doc, option=orjson.OPT_SERIALIZE_NUMPY)


_ODD_ARGS = ('{"s": "a\\"b\\\\c \\u00e9 na\\u00efve", "i": 7, "neg": -3, "big": 12345678901234, '
             '"f": 1.5, "e": 1e300, "t": true, "no": false, "null": null, '
             '"l": [[1, 2], [3]], "d": {"x": 1, "y": [1.5, "z"]}, "z": 0, "m0": -0, '
             '"d18": 123456789012345678, "n18": -12345678901234567, '
             '"max": 9223372036854775807, "min": -9223372036854775808, '
             '"u64": 18446744073709551615, "d19": 9999999999999999999, "one": 1.0, '
             '"small": 65535, "ns": -256}')


def _odd_trace(path: Path, last_args: str) -> Path:
    """A Kineto trace whose ops and kernels carry every kind of JSON value, the same
    values written with other spacing on another row, and ``last_args`` on the last."""
    spaced = _ODD_ARGS.replace(", ", ",   ").replace(": ", ":")
    evs = [f'{{"ph": "X", "cat": "{c}", "name": "{n}", "pid": 1, "tid": {t}, "ts": {ts}, '
           f'"dur": 2, "args": {a}}}'
           for c, n, t, ts, a in [("cpu_op", "aten::mm", 1, 10, _ODD_ARGS),
                                  ("cpu_op", "aten::mm", 1, 20, spaced),
                                  ("kernel", "gemm_k", 7, 12, _ODD_ARGS),
                                  ("kernel", "gemm_k", 7, 22, last_args)]]
    path.write_text('{"traceEvents": [' + ", ".join(evs) + "]}")
    return path


@pytest.mark.parametrize("last_args", [_ODD_ARGS, "5"])
@pytest.mark.parametrize("cached", [False, True])
def test_source_args_as_json_text_encode_as_decoded(tmp_path: Path, last_args: str,
                                                    cached: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``convert``/``annotate`` to .pftrace take the source's args with each value still
    as its JSON text and decode each distinct text once: the bytes are those of the
    decoded args (the message-class encoder the oracle), from the source file and from a
    cache hit; a row whose args are no object ("5") makes that batch decode as before."""
    from tests.support.pftrace_reference import chrome_to_pftrace as reference
    from traceforge.model import Trace
    from traceforge.render.chrome_json import ChromeSource

    path = _odd_trace(tmp_path / "odd.json", last_args)
    if cached:
        tf.load(path)  # fills the cache: the next load is a hit
    t = tf.load(path, cache=cached)
    raw = t.raw_args(t.events.index.to_numpy())
    assert (raw is None) == (last_args == "5")
    assert t.arg_shapes(t.events.index.to_numpy()) is not None
    fast = chrome_to_pftrace(ChromeSource(t))
    with monkeypatch.context() as m:
        m.setattr(Trace, "arg_shapes", lambda self, rows: None)
        raw_only = chrome_to_pftrace(ChromeSource(t))
        m.setattr(Trace, "raw_args", lambda self, rows: None)
        slow = chrome_to_pftrace(ChromeSource(t))
    assert fast == raw_only == slow
    assert fast == reference(ChromeSource(t).document())



def test_tags_after_shaped_args_or_made_as_dicts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tags follow a row's shaped args, as a dict's new keys do; a row whose tag would
    replace one of its args (or an id) is made as a dict: the bytes are those of the
    dicts, and the oracle's, whether the tags come as dicts or as columns."""
    from tests.support.pftrace_reference import chrome_to_pftrace as reference
    from traceforge.model import Trace
    from traceforge.render.chrome_json import ChromeSource

    t = tf.load(FIX / "compiled.pt.trace.json.gz")

    def tags(rows: np.ndarray, names: object, cats: object, args: list[dict[str, object]]
             ) -> None:
        for r, a in zip(rows.tolist(), args, strict=True):
            if r % 3 == 1:
                a["grid"] = "replaced"  # a kernel's own arg
            if r % 3 == 2:
                a["correlation"] = -5  # an id
            if r % 2:
                a["tag"] = r

    fast = chrome_to_pftrace(ChromeSource(t, tags=tags))
    with monkeypatch.context() as m:
        m.setattr(Trace, "arg_shapes", lambda self, rows: None)
        assert fast == chrome_to_pftrace(ChromeSource(t, tags=tags))
    assert fast == reference(ChromeSource(t, tags=tags).document())

    class AsColumns:
        """The same tags, also as columns (as ``annotate``'s ``RowTags`` gives them)."""

        def __call__(self, rows: np.ndarray, names: object, cats: object,
                     args: list[dict[str, object]]) -> None:
            tags(rows, names, cats, args)

        def columns(self, rows: np.ndarray, names: object, cats: object) -> list[Any]:
            from traceforge.render.slice_table import column

            n = len(rows)
            return [column("grid", np.full(n, "replaced", dtype=object), rows % 3 == 1),
                    column("correlation", np.full(n, -5, dtype=np.int64), rows % 3 == 2),
                    column("tag", rows.astype(np.int64), rows % 2 == 1)]

    assert chrome_to_pftrace(ChromeSource(t, tags=AsColumns())) == fast


@pytest.mark.parametrize("name", ["counters/probe.nsys.sqlite.gz",
                                  "nccl_nsys_h100x2/nccl_rank0.sqlite"])
@pytest.mark.parametrize("cached", [False, True])
def test_sqlite_args_as_columns_encode_as_their_dicts(name: str, cached: bool,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    """An nsys export's args come as columns (``Trace.arg_columns``: read, or rebuilt
    from the cache) and are encoded a batch at a time: the bytes are those of its dicts
    (the path without columns) and the oracle's, with tags as columns that add keys,
    replace a kernel's own arg (made as a dict) or an id (likewise)."""
    from tests.support.pftrace_reference import chrome_to_pftrace as reference
    from traceforge.model import Trace
    from traceforge.render.chrome_json import ChromeSource
    from traceforge.render.slice_table import column

    monkeypatch.setenv("TRACEFORGE_CACHE", str(tmp_path))
    if cached:
        tf.load(FIX / name)
    t = tf.load(FIX / name, cache=cached)

    class Tags:
        def __call__(self, rows: np.ndarray, names: object, cats: object,
                     args: list[dict[str, object]]) -> None:
            for r, a in zip(rows.tolist(), args, strict=True):
                if r % 3 == 1:
                    a["gridX"] = "replaced"
                if r % 3 == 2:
                    a["correlation"] = -5
                if r % 2:
                    a["tag"] = r

        def columns(self, rows: np.ndarray, names: object, cats: object) -> list[Any]:
            n = len(rows)
            return [column("gridX", np.full(n, "replaced", dtype=object), rows % 3 == 1),
                    column("correlation", np.full(n, -5, dtype=np.int64), rows % 3 == 2),
                    column("tag", rows.astype(np.int64), rows % 2 == 1)]

    assert t.arg_columns(np.arange(3)) is not None
    for tags in (None, Tags()):
        fast = chrome_to_pftrace(ChromeSource(t, tags=tags))
        with monkeypatch.context() as m:
            m.setattr(Trace, "arg_columns", lambda self, rows: None)
            assert fast == chrome_to_pftrace(ChromeSource(t, tags=tags))
        assert fast == reference(ChromeSource(t, tags=tags).document())


def test_dict_slices_every_int_flows_and_names_in_packet_order() -> None:
    """Slices given as dicts (annotate's path tracks, a plain document): ints of every size
    (int64 ends, beyond it, bools), several flows starting and ending on one slice, and
    instants and counters between slices interning names in packet order: the bytes are
    the message-class encoder's, whatever the batch size."""
    from tests.support.pftrace_reference import chrome_to_pftrace as reference
    from traceforge.render import pftrace_chunks

    ints = {"a": 0, "b": -1, "c": 2**63 - 1, "d": -(2**63), "e": 2**63, "f": 2**70,
            "g": -(2**70), "h": True, "i": 65536, "j": -257, "k": 1.25, "l": "x",
            "m": float("nan"), "o": float("-inf"), "p": -0.0}
    ev: list[dict[str, object]] = []
    for k in range(40):
        name = f"s{k % 7}"
        ev.append({"ph": "X", "name": name, "cat": "kernel" if k % 2 else "", "pid": 1,
                   "tid": k % 3, "ts": 10 * k, "dur": 5 + k % 4, "args": {**ints, "n": k}})
        ev.append({"ph": "i", "name": f"i{k % 5}", "pid": 1, "tid": k % 3, "ts": 10 * k + 1})
        ev.append({"ph": "C", "name": f"c{k % 3}", "pid": 1, "ts": 10 * k + 2,
                   "args": {"v": k}})
        for ph, fid in (("s", k), ("s", 1000 + k), ("f", k - 1), ("f", 2000 + k)):
            ev.append({"ph": ph, "id": fid, "cat": "c", "pid": 1, "tid": k % 3,
                       "ts": 10 * k + 3, **({"bp": "e"} if ph == "f" else {})})
    doc = {"traceEvents": ev}
    want = reference(doc)
    for chunk in (1, 7, 1 << 14):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(pftrace_chunks, "CHUNK", chunk)
            assert chrome_to_pftrace(doc) == want


def _children(monkeypatch: pytest.MonkeyPatch, *, fail: bool) -> list[int]:
    """Forked children that fail (``ForkError``: their part is made here), or that run
    and are counted (one entry each in the list returned)."""
    from traceforge import forks

    started: list[int] = []

    class Failing(forks.Child[None]):
        def result(self) -> None:
            raise forks.ForkError("no")

    class Counted(forks.Child[None]):
        def __init__(self, work: object) -> None:
            started.append(1)
            super().__init__(work)  # type: ignore[arg-type]

    monkeypatch.setattr(forks, "Child", Failing if fail else Counted)
    return started


@pytest.mark.parametrize("child", ["runs", "fails"])
def test_ranges_encoded_in_children_equal_one_process(child: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A large trace's batches of packets are shared between this process (from the
    front) and forked children (from the back), each batch encoded with the names
    interned before it, the slices' flows worked out in another child meanwhile: the
    bytes are those of one process (and the oracle's), whether the children run or fail
    (their batches, or the flows, then made here), and written to a file,
    whether the children's batches are added to it by the kernel or, where it cannot,
    read and written here."""
    from tests.support.pftrace_reference import chrome_to_pftrace as reference
    from traceforge import forks
    from traceforge.render import pftrace_chunks
    from traceforge.render.annotate import annotated_source

    t = tf.load(FIX / "compiled.pt.trace.json.gz")
    src = annotated_source(t, annotation_data(t))
    doc = src.document()
    monkeypatch.setattr(pftrace_chunks, "CHUNK", 97)
    one = chrome_to_pftrace(src)
    monkeypatch.setattr(pftrace_chunks, "PARALLEL_PACKETS", 500)
    monkeypatch.setattr(forks, "cores", lambda: 3)
    started = _children(monkeypatch, fail=child == "fails")
    assert chrome_to_pftrace(src) == one == reference(doc)
    assert child == "fails" or len(started) == 3  # two helpers, the flows
    from traceforge.render.document import write_document

    out = tmp_path / "a.pftrace"
    with open(out, "wb") as f:
        write_document(src, out, f)
    assert out.read_bytes() == one

    def no_kernel_copy(*a: Any) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "copy_file_range", no_kernel_copy)
    with open(out, "wb") as f:
        write_document(src, out, f)
    assert out.read_bytes() == one


@pytest.mark.parametrize("child", ["runs", "fails"])
def test_json_events_in_children_equal_one_dumps(child: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Chrome JSON of a large trace: its rows' batches shared between this process and
    forked children: the bytes are ``orjson.dumps`` of the whole document, plain and
    gzip, whether the children run or fail."""
    import gzip

    from traceforge import forks
    from traceforge.render.annotate import annotated_source
    from traceforge.render.document import write_document

    t = tf.load(FIX / "compiled.pt.trace.json.gz")
    src = annotated_source(t, annotation_data(t))
    want = orjson.dumps(src.document(), option=orjson.OPT_SERIALIZE_NUMPY)
    monkeypatch.setattr(chrome_json, "BATCH", 97)
    monkeypatch.setattr(chrome_json, "PARALLEL_ROWS", 500)
    monkeypatch.setattr(forks, "cores", lambda: 3)
    started = _children(monkeypatch, fail=child == "fails")
    assert chrome_json.dumps_chrome(src) == want
    out = tmp_path / "a.json.gz"
    with open(out, "wb") as f:
        write_document(src, out, f)
    assert gzip.decompress(out.read_bytes()) == want
    assert child == "fails" or len(started) == 4


def test_partly_overlapping_slices_go_to_lanes_in_order() -> None:
    """A thread whose slices overlap partly puts them on lane tracks (walked a slice at a
    time); threads whose slices follow one another stay on their own track: tracks are
    made in order of their first slice, as the message-class encoder makes them."""
    import numpy as np

    from tests.support.pftrace_reference import chrome_to_pftrace as reference
    from traceforge.render.pftrace_layout import lane, lanes_of

    ev: list[dict[str, object]] = [
        {"ph": "X", "name": n, "pid": 1, "tid": tid, "ts": ts, "dur": d}
        for n, tid, ts, d in [("seq", 9, 0, 3), ("a", 1, 0, 10), ("b", 1, 5, 10),
                              ("c", 1, 6, 2), ("d", 1, 7, 20), ("seq", 9, 3, 0),
                              ("seq", 9, 3, 4), ("e", 1, 30, 1), ("z", 2, 1, 1)]]
    ev.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "T"}})
    got = chrome_to_pftrace({"traceEvents": ev})
    assert got == reference({"traceEvents": ev}) and b"T [2]" in got and b"T [3]" in got
    rng = np.random.default_rng(3)
    th = np.sort(rng.integers(0, 4, 400))
    t0 = rng.integers(0, 1000, 400)
    t1 = t0 + rng.integers(0, 50, 400)
    o = np.lexsort((t0 - t1, t0, th))
    th, t0, t1 = th[o], t0[o], t1[o]
    want, lanes, prev = [], [], -1
    for h, a, b in zip(th.tolist(), t0.tolist(), t1.tolist(), strict=True):
        if h != prev:
            lanes, prev = [], h
        want.append(lane(lanes, a, b))
    assert lanes_of(th, t0, t1).tolist() == want and max(want) > 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.sampled_from([0, 0, 1, 2, 3, 5, 8, 13])),
                min_size=1, max_size=30))
def test_a_thread_nests_exactly_when_every_slice_goes_on_lane_zero(
        spans: list[tuple[int, int]]) -> None:
    """``nested`` (brackets matched by depth, vectorized) says a thread's slices all go
    on lane 0 exactly when the slice-at-a-time walk puts them there: touching slices,
    slices of no length, equal starts and equal ends included; ``lanes_of`` walks only
    the others, so its lanes are the walk's."""
    from traceforge.render.pftrace_layout import lane, lanes_of, nested

    t0 = np.asarray([a for a, _ in spans], dtype=np.int64)
    t1 = t0 + np.asarray([d for _, d in spans], dtype=np.int64)
    o = np.lexsort((np.arange(len(t0)), t0 - t1, t0))
    t0, t1 = t0[o], t1[o]
    lanes: list[list[int]] = []
    want = [lane(lanes, a, b) for a, b in zip(t0.tolist(), t1.tolist(), strict=True)]
    assert nested(t0, t1) == (max(want) == 0)
    assert lanes_of(np.zeros(len(t0), dtype=np.int64), t0, t1).tolist() == want


@pytest.mark.parametrize("crossed", [False, True])
def test_a_thread_deeper_than_16_bit_levels_is_matched_the_same(crossed: bool) -> None:
    """40,000 slices each inside the one before (levels past an int16's range: the
    brackets then sorted by int64 levels) nest; the innermost ending after its parent
    does not."""
    from traceforge.render.pftrace_layout import nested

    n = 40_000
    t0 = np.arange(n, dtype=np.int64)
    t1 = 2 * n - t0
    if crossed:
        t1[-1] = t1[-2] + 1
    assert nested(t0, t1) is not crossed


@pytest.mark.parametrize("first", [0, 1, 2])
def test_a_batch_opening_the_sequence_marks_only_its_first_packet(first: int) -> None:
    """Whatever the sequence's first packet is (a slice begin, a slice end, another
    event), only it is marked cleared: the batch's bytes are PacketEncoder's one by one."""
    from functools import partial

    import numpy as np

    from traceforge.render.pftrace_packets import (
        INSTANT,
        SLICE_BEGIN,
        SLICE_END,
        PacketEncoder,
    )
    from traceforge.render.pftrace_slices import FlowFields, SliceBatch
    from traceforge.render.pftrace_varints import varint

    kinds = [[0, 2, 1], [1, 0, 2], [2, 0, 1]][first]
    one = PacketEncoder(None)
    for t, c in enumerate(kinds):
        if c == 0:
            one.event(10 + t, 5, SLICE_BEGIN, "a", "c", {"x": 1})
        elif c == 1:
            one.event(10 + t, 5, SLICE_END)
        else:
            one.event(10 + t, 5, INSTANT, "i")
    w = PacketEncoder(None)
    got = SliceBatch(w, FlowFields.none()).packets(
        np.asarray(kinds), np.zeros(3, dtype=np.int64), np.full(3, 5),
        [varint(10 + t) for t in range(3)], np.ones(3, dtype=np.int64),
        (["a"], ["c"], [{"x": 1}]),
        [partial(w.event_packet, 10 + kinds.index(2), 5, INSTANT, "i")])
    assert got == bytes(one.buf)


def test_a_column_of_one_key_encodes_as_each_value_does() -> None:
    """An int or float arg column (one key: a tag, a drawn slice's arg) is encoded at
    once, byte for byte what ``annotation`` gives each value: every int64 (negative,
    zero, the extremes), every double (-0.0, infinities, NaN, subnormal), keys short
    and long enough for a longer frame."""
    from traceforge.render.pftrace_packets import PacketEncoder

    rng = np.random.default_rng(1)
    w = PacketEncoder()
    ints = np.concatenate([rng.integers(-2**63, 2**63 - 1, 300, dtype=np.int64),
                           np.array([0, 1, -1, 127, 128, 2**62, -2**63, 2**63 - 1]),
                           rng.integers(0, 300, 300)]).astype(np.int64)
    reals = np.concatenate([rng.normal(size=300) * 10.0 ** rng.integers(-300, 300, 300),
                            np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-320])])
    for key in ("a", "achieved_tflops_per_s", "x" * 130, "k" * 200):
        assert w._int_column(key, ints).tolist() == [w.annotation(key, x)
                                                     for x in ints.tolist()]
        assert w._float_column(key, reals).tolist() == [w.annotation(key, x)
                                                        for x in reals.tolist()]
        assert w._int_column(key, ints[:0]).tolist() == []


def test_flow_fields_by_slice_number() -> None:
    """FlowFields.of: a slice's fields (its starts, then its ends, as bind_flows orders
    them), b"" for a slice without flows, one past the last or before the first."""
    import numpy as np

    from traceforge.render.pftrace_packets import FLOW, TERMINATING_FLOW
    from traceforge.render.pftrace_slices import FlowFields, flow_fields

    def field(key: bytes, fid: int) -> bytes:
        return key + fid.to_bytes(8, "little")

    got = flow_fields(np.asarray([2, 2, 5]), np.asarray([7, 8, 7]),
                      np.asarray([False, True, True]))
    flows, length = got.of(np.asarray([0, 2, 3, 5, 9, 2]))
    two = field(FLOW, 7) + field(TERMINATING_FLOW, 8)
    assert flows == [b"", two, b"", field(TERMINATING_FLOW, 7), b"", two]
    assert length.tolist() == [len(f) for f in flows]
    none, n = FlowFields.none().of(np.asarray([0, 1]))
    assert none == [b"", b""] and n.tolist() == [0, 0]
