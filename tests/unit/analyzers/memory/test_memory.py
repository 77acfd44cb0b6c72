"""Memory: the memory table, ``traceforge memory``, snapshots, and bad input."""

from __future__ import annotations

import gzip
import json
import pickle
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import traceforge as tf
from tests.conftest import FIXTURES, SHARED, shared
from traceforge.analyzers.memory import memory, run_peak_memory, series, snapshot
from traceforge.cli import main
from traceforge.errors import TraceFormatError
from traceforge.formats import cache
from traceforge.formats import snapshot as snapshot_file

#: Every shared fixture that carries Kineto [memory] events.
MEMORY_FIXTURES = (
    "external/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "external/hta/df_index_resolver/df_index_resolver.json.gz",
    "external/tracelens/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "external/tracelens/traces/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz",
    "external/tracelens/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "external/tracelens/traces/h100/Falconsai_nsfw_image_detection__1016002.json.gz",
    "external/tracelens/traces/inference/vllm_decode_full/capture_traces/"
    "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz",
    "external/tracelens/traces/inference/sglang_decode/capture_traces/bs_32_rank0.json.gz",
    "external/tracelens/traces/perf_model/normalization/normalization_layer_test.json.gz",
    "external/tracelens/traces/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "external/tracelens/traces/mi300/google_owlv2-large-patch14-ensemble__1016001.json.gz",
    "external/tracelens/traces/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
    "external/tracelens/traces/mi300/Falconsai_nsfw_image_detection__1016002.json.gz",
)
_TYPE = {0: "cpu", 1: "cuda", 6: "hip"}


class _Result:
    def __init__(self, code: int, output: str) -> None:
        self.exit_code, self.output = code, output


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> _Result:
    """The CLI as a user runs it (errors: one line on stderr and the exit status)."""
    capsys.readouterr()
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return _Result(code, out.out + out.err)


def _raw_peaks(path: Path) -> dict[str, tuple[int, bool]]:
    """The oracle, from the raw JSON: per device, the largest ``Total Allocated``; where
    the trace records none, the largest running sum of ``Bytes`` in time order."""
    with gzip.open(path) as f:
        doc = json.load(f)
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    mem = sorted((e for e in evs if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    out: dict[str, tuple[int, bool]] = {}
    running: dict[str, int] = {}
    for e in mem:
        a = e["args"]
        dev = _TYPE[a["Device Type"]] + ("" if a["Device Type"] == 0 else f":{a['Device Id']}")
        if "Total Allocated" in a:
            v, rec = a["Total Allocated"], True
        else:
            running[dev] = running.get(dev, 0) + a["Bytes"]
            v, rec = running[dev], False
        best = out.get(dev)
        out[dev] = (max(v, best[0]) if best else v, rec)
    return out


@pytest.mark.parametrize("rel", MEMORY_FIXTURES, ids=lambda r: r.rsplit("/", 1)[-1][:40])
def test_peak_allocated_equals_raw_total_allocated(rel: str) -> None:
    path = shared(rel)
    oracle = _raw_peaks(path)
    rep = memory(tf.load(path))
    got = {r.device: (r.peak_allocated_bytes, r.totals) for r in rep.devices.itertuples()}
    assert set(got) == set(oracle)
    for dev, (peak, recorded) in oracle.items():
        assert got[dev] == (peak, "recorded" if recorded else "growth"), dev


def test_memory_is_lazy_and_kept_beside_the_cache_entry(cdir: Path) -> None:
    path = shared(MEMORY_FIXTURES[4])
    t = tf.load(path, kinds=["kernel"])
    assert "memory" not in t.memo  # loading reads no memory events
    m = t.memory()
    assert len(m) == 236 and m.attrs["source"] == "Kineto memory events"
    side = list(cdir.glob("*.memory.arrow"))
    assert len(side) == 1
    again = tf.load(path, kinds=["kernel"]).memory()
    assert again.equals(m)
    # cache info lists the entry once, with the memory table counted in its size
    assert len(cache.entries()) == 1


def _kineto(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _mem(ts: float, nbytes: Any, alloc: Any = None, resv: Any = None, addr: int = 0,
         name: str = "[memory]", tid: int = 1, **more: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"Device Type": 1, "Device Id": 0, "Addr": addr, "Bytes": nbytes}
    if alloc is not None:
        args["Total Allocated"] = alloc
    if resv is not None:
        args["Total Reserved"] = resv
    args.update(more)
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": name, "pid": 1,
            "tid": tid, "ts": ts, "args": args}


def _op(name: str, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts,
            "dur": dur, "args": {}}


def _step(n: int, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1,
            "tid": 1, "ts": ts, "dur": dur, "args": {}}


def _synthetic(tmp_path: Path) -> Path:
    """Three steps; each allocates a 100-byte activation in aten::mm (freed in the step)
    and leaks a 10-byte buffer from aten::cat; reserved 1000 throughout."""
    evs: list[dict[str, Any]] = []
    total, addr = 0, 1000
    for s in range(3):
        base = 100.0 * s
        evs += [_step(s, base, 90), _op("aten::mm", base + 10, 20), _op("aten::cat", base + 40, 10)]
        total += 100
        evs.append(_mem(base + 15, 100, total, 1000, addr=addr))
        total += 10
        evs.append(_mem(base + 45, 10, total, 1000, addr=addr + 1 + s))
        total -= 100
        evs.append(_mem(base + 60, -100, total, 1000, addr=addr))
    evs.append(_mem(305, 5000, total, 1000, name="[OutOfMemory]"))
    return _kineto(tmp_path / "synthetic.json", evs)


def test_steps_ops_live_and_oom_on_a_synthetic_trace(tmp_path: Path) -> None:
    rep = memory(tf.load(_synthetic(tmp_path)))
    d = rep.devices.iloc[0]
    assert (d.device, d.peak_allocated_bytes, d.peak_allocated_at_ns) == ("cuda:0", 130, 245_000)
    assert (d.reserved_at_peak_bytes, d.unused_at_peak_bytes) == (1000, 870)
    assert rep.steps[["step", "start_bytes", "peak_bytes", "end_bytes", "growth_bytes"]
                     ].values.tolist() == [[0, 0, 110, 10, 10], [1, 10, 120, 20, 10],
                                           [2, 20, 130, 30, 10]]
    assert any("grows in every step" in n for n in rep.notes)
    ops = rep.ops.set_index("op")
    assert ops.loc["aten::mm", "alloc_bytes"] == 300
    assert ops.loc["aten::cat", "alloc_bytes"] == 30
    # At the peak (t=245 us, step 2's leak): step 2's activation and the three leaks.
    assert ops.loc["aten::mm", "live_at_peak_bytes"] == 100
    assert ops.loc["aten::cat", "live_at_peak_bytes"] == 30
    assert sorted(rep.live["size_bytes"].tolist()) == [10, 10, 10, 100]
    assert rep.oom[["request_bytes", "allocated_bytes"]].values.tolist() == [[5000, 30]]
    assert rep.oom_live.set_index("op")["live_bytes"].to_dict() == {"aten::cat": 30}


def test_ops_kept_with_the_memory_table_so_warm_runs_read_no_op_rows(
        cdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pyarrow as pa

    from traceforge.commands import memory as memory_cmd

    path = _synthetic(tmp_path)
    cold = memory(tf.load(path))
    (side,) = cdir.glob("*.memory.arrow")
    t = pa.ipc.open_file(pa.memory_map(str(side))).read_all()
    assert {"op", "op_row"} <= set(t.column_names)
    # Row numbers of the whole trace: each op row names its op there.
    whole = tf.load(path)
    rows = [r for r in t.column("op_row").to_pylist() if r >= 0]
    assert rows and all(str(whole.events.loc[r, "name"]).startswith("aten::") for r in rows)
    # The verb's warm load keeps no op rows, yet the ops are the same.
    assert "cpu_op" not in memory_cmd.KINDS
    warm_trace = tf.load(path, kinds=memory_cmd.KINDS)
    assert warm_trace.of_kind("cpu_op").empty
    warm = memory(warm_trace)
    assert warm.ops.equals(cold.ops) and warm.live.equals(cold.live)
    assert warm.steps.equals(cold.steps) and warm.oom_live.equals(cold.oom_live)
    assert _cli(["memory", str(path), "--table", "ops"], capsys).exit_code == 0


def test_no_memory_events_is_one_line(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    p = _kineto(tmp_path / "t.json", [_op("aten::mm", 0, 5)])
    r = _cli(["memory", str(p)], capsys)
    assert r.exit_code == 2
    assert "traceforge capture --memory" in r.output and len(r.output.strip().splitlines()) == 1


def test_bad_memory_args_are_notes_not_tracebacks(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    p = _kineto(tmp_path / "t.json", [
        _mem(1, 64, 64, 128), _mem(2, None, 64, 128), _mem(3, "x"),
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 4},  # no args at all
        _mem(5, 32, -5, -1), _mem(6, 1e30, 1, 1)])
    r = _cli(["memory", str(p), "--format", "json"], capsys)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert any("without a numeric Bytes" in n for n in doc["notes"])
    assert any("negative" in n for n in doc["notes"])


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


def _snap() -> dict[str, Any]:
    frames = [{"filename": "/src/train.py", "line": 12, "name": "forward"}]
    return {
        "segments": [
            {"device": 0, "address": 4096, "total_size": 2 * 2**20, "allocated_size": 2**20,
             "active_size": 2**20, "requested_size": 2**20 - 8, "stream": 0,
             "segment_type": "large", "frames": [],
             "blocks": [{"address": 4096, "size": 2**20, "requested_size": 2**20 - 8,
                         "state": "active_allocated", "frames": frames},
                        {"address": 4096 + 2**20, "size": 3 * 2**18, "state": "inactive"},
                        {"address": 4096 + 2**20 + 3 * 2**18, "size": 2**18,
                         "state": "inactive"}]}],
        "device_traces": [[
            {"action": "segment_alloc", "addr": 4096, "size": 2 * 2**20, "time_us": 1},
            {"action": "alloc", "addr": 4096, "size": 2**20, "time_us": 2, "frames": frames},
            {"action": "alloc", "addr": 9999, "size": 512, "time_us": 3},
            {"action": "free_requested", "addr": 9999, "size": 512, "time_us": 4},
            {"action": "free_completed", "addr": 9999, "size": 512, "time_us": 5}]],
    }


def test_snapshot_segments_free_blocks_and_timeline(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "snap.pickle"
    p.write_bytes(pickle.dumps(_snap()))
    rep = snapshot(snapshot_file.read(p))
    d = rep.devices.iloc[0]
    assert (d.reserved_bytes, d.allocated_bytes, d.free_bytes) == (2 * 2**20, 2**20, 2**20)
    assert d.largest_free_bytes == 3 * 2**18 and d.fragmentation_pct == 25.0
    assert rep.blocks.iloc[0]["where"] == "forward (train.py:12)"
    pk = rep.peaks.iloc[0]
    assert (pk.peak_active_bytes, pk.peak_time_us) == (2**20 + 512, 3)
    assert rep.timeline["active_bytes"].tolist()[-1] == 2**20
    r = _cli(["memory", str(p), "--format", "json"], capsys)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["devices"][0]["largest_free_bytes"] == 3 * 2**18


def test_a_snapshot_with_objects_never_runs_code(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "pwned"
    p = tmp_path / "evil.pickle"
    p.write_bytes(pickle.dumps({"segments": [_Evil(marker)]}))
    r = _cli(["memory", str(p)], capsys)
    assert r.exit_code == 2 and not marker.exists()
    assert "not a plain memory snapshot" in r.output and len(r.output.strip().splitlines()) == 1
    with pytest.raises(TraceFormatError, match="refused io.open"):
        snapshot_file.read(p)
    # A hand-made protocol-0 pickle that would run a shell command.
    p0 = tmp_path / "evil0.pkl"
    p0.write_bytes(b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.")
    r = _cli(["memory", str(p0)], capsys)
    assert r.exit_code == 2 and "refused os.system" in r.output
    assert not marker.exists()


@pytest.mark.parametrize("cut", [1, 2, 10, 100, -1])
def test_truncated_and_odd_pickles_are_one_line(tmp_path: Path, cut: int,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    raw = pickle.dumps(_snap())
    p = tmp_path / "cut.pickle"
    p.write_bytes(raw[:cut])
    r = _cli(["memory", str(p)], capsys)
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output
    for odd in ([1, 2], {"segments": 3}, {"segments": [], "device_traces": 5}):
        p.write_bytes(pickle.dumps(odd))
        r = _cli(["memory", str(p)], capsys)
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1


def test_nsys_cuda_memory_usage_events(tmp_path: Path) -> None:
    src = shared("external/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    p = tmp_path / "m.sqlite"
    shutil.copyfile(src, p)
    t0 = tf.load(p, cache=False)
    raw0 = t0.meta.base_ns - int(t0.meta.extra.get("nsys_session_start_ns", 0) or 0)
    gpid = (7 << 24)
    with sqlite3.connect(p) as c:
        c.executemany(
            "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, "
            "address, pc, bytes, memKind, memoryOperationType) VALUES (?,?,?,?,?,?,?,?,?)",
            [(raw0 + 100, gpid, 0, 1, 4096, 0, 1000, 2, 0),
             (raw0 + 200, gpid, 0, 1, 8192, 0, 500, 2, 0),
             (raw0 + 250, gpid, 0, 1, 9999, 0, 700, 1, 0),  # pinned host: not device memory
             (raw0 + 300, gpid, 0, 1, 4096, 0, 1000, 2, 1)])
    m = tf.load(p, cache=False).memory()
    assert m[["ts", "delta_bytes", "pid"]].values.tolist() == [[100, 1000, 7], [200, 500, 7],
                                                               [300, -1000, 7]]
    assert "1 allocation(s) of pinned host memory (700 bytes)" in " ".join(m.attrs["notes"])
    rep = memory(tf.load(p, cache=False))
    assert rep.devices.iloc[0][["peak_allocated_bytes", "totals"]].tolist() == [1500, "growth"]


def test_rocprofv3_memory_allocation_trace(tmp_path: Path) -> None:
    (tmp_path / "9_kernel_trace.csv").write_text(
        '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id",'
        '"Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
        '"KERNEL_DISPATCH","Agent 4",2,3,77,1,5,"gemm_kernel",10,1000,1600\n')
    (tmp_path / "9_memory_allocation_trace.csv").write_text(
        '"Kind","Operation","Agent_Id","Allocation_Size","Address","Correlation_Id",'
        '"Start_Timestamp","End_Timestamp"\n'
        '"MEMORY_ALLOCATION","MEMORY_ALLOCATION_ALLOCATE","Agent 4",4096,"0x7f00",1,1100,1101\n'
        '"MEMORY_ALLOCATION","MEMORY_ALLOCATION_ALLOCATE","Agent 4",2048,"0x8f00",2,1200,1201\n'
        '"MEMORY_ALLOCATION","MEMORY_ALLOCATION_FREE","Agent 4",0,"0x7f00",3,1300,1301\n')
    m = tf.load(tmp_path).memory()
    assert m[["ts", "device", "delta_bytes"]].values.tolist() == [[100, 4, 4096], [200, 4, 2048],
                                                                  [300, 4, -4096]]


def test_run_peak_memory_prefers_the_trace(tmp_path: Path) -> None:
    t = tf.load(_synthetic(tmp_path))
    assert run_peak_memory([t], 99.0) == (130.0, "trace")
    empty = tf.load(_kineto(tmp_path / "e.json", [_op("aten::mm", 0, 5)]))
    assert run_peak_memory([empty], 99.0) == (99.0, "capture summary")
    assert run_peak_memory([empty]) == (None, "")


def test_series_keeps_the_peak_when_thinned(tmp_path: Path) -> None:
    t = tf.load(_synthetic(tmp_path))
    s = series(t, max_points=3)
    assert s["allocated_bytes"].max() == 130 and len(s) <= 4
    assert np.isfinite(s["reserved_bytes"]).all()


def test_shared_fixture_folder_is_where_the_oracle_reads() -> None:
    assert SHARED.name == "fixtures"


def test_capture_memory_records_memory_events_on_cpu(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    with tf.capture(mode="sdpa", out=tmp_path, name="m", steps="1,1,2", memory=True,
                    memory_snapshot=True, quiet=True) as run:
        for _ in range(5):
            torch.ones(256, 256) @ torch.ones(256, 256)
            tf.step()
    assert run.trace_path is not None
    rep = memory(tf.load(run.trace_path))
    assert "cpu" in set(rep.devices["device"]) and rep.steps["step"].tolist() == [2, 3]
    # No GPU here: no snapshot, and the summary says why.
    assert "no CUDA device: no memory snapshot" in run.notes
    assert not (tmp_path / "m.sdpa.memory.pickle").exists()


def test_snapshot_window_follows_the_schedule(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from traceforge.capture.memory import MemorySnapshot
    from traceforge.capture.options import parse_steps

    calls: list[Any] = []

    class FakeMemory:
        def _record_memory_history(self, **kw: Any) -> None:
            calls.append(("record", kw.get("enabled", "all")))

        def _dump_snapshot(self, path: str) -> None:
            calls.append(("dump", Path(path).name))
            Path(path).write_bytes(pickle.dumps(_snap()))

    snap = MemorySnapshot(tmp_path / "x.memory.pickle", [])
    monkeypatch.setattr(snap, "_memory", lambda: FakeMemory())
    steps = parse_steps("1,1,2")
    for k in range(1, 7):
        snap.on_step(k, steps)
    snap.finish()
    assert calls == [("record", "all"), ("dump", "x.memory.pickle"), ("record", None)]
    assert snap.written and tf.memory_snapshot(tmp_path / "x.memory.pickle").devices.size


#: An H100 capture of examples/memory_train.py with --memory and --memory-snapshot.
GPU = FIXTURES / "capture_h100.memory_train.both"


def test_gpu_capture_step_peaks_equal_max_memory_allocated() -> None:
    t = tf.load(f"{GPU}.pt.trace.json.gz")
    summary = json.loads(Path(f"{GPU}.summary.json").read_text())
    want = {i: summary["steps"]["peak_memory_bytes"][i] for i in summary["steps"]["recorded"]}
    rep = memory(t)
    got = rep.steps[rep.steps["device"] == "cuda:0"].set_index("step")["peak_bytes"].to_dict()
    assert got == want  # torch.cuda.max_memory_allocated per step, to the byte
    assert set(want.values()) == {746_520_576}
    d = rep.devices.set_index("device").loc["cuda:0"]
    assert (d.peak_allocated_bytes, d.peak_reserved_bytes) == (746_520_576, 769_654_784)
    # the gradients (one per parameter: 134,414,336 bytes) are live at the peak
    assert rep.ops.set_index("op").loc["aten::empty_strided", "live_at_peak_bytes"] == 134_414_336
    peak, source = run_peak_memory([t], 1.0)
    assert (peak, source) == (746_520_576, "trace")


def test_gpu_snapshot_agrees_with_the_trace() -> None:
    rep = tf.memory_snapshot(f"{GPU}.memory.pickle")
    d = rep.devices.iloc[0]
    # dumped after the last recorded step: what the trace has allocated at that step's end
    assert (d.allocated_bytes, d.reserved_bytes) == (477_691_904, 769_654_784)
    assert rep.peaks.iloc[0]["peak_active_bytes"] == 746_520_576
    # the peak is inside AdamW's step; the blocks live at the dump (parameters, optimizer
    # state) were allocated before the history started: no stack recorded for them
    assert rep.peaks.iloc[0]["where"].startswith("_multi_tensor_adam (adam.py:")


def test_capture_table_takes_the_trace_peak_else_the_summary() -> None:
    import pandas as pd

    from traceforge.capture import compare as capture_compare
    from traceforge.commands.capture import _with_peaks

    summary = json.loads(Path(f"{GPU}.summary.json").read_text())
    summary["trace"]["path"] = GPU.name + ".pt.trace.json.gz"
    other = {**summary, "trace": None}
    rows = capture_compare.comparison([summary, other])
    df = _with_peaks(pd.DataFrame(rows, columns=list(capture_compare.COLUMNS)),
                     [summary, other], FIXTURES)
    assert df["peak_memory_from"].tolist() == ["trace", "capture summary"]
    assert df["peak_memory_bytes"].tolist() == [746_520_576] * 2
    assert "peak_gib" not in df.columns


def test_memory_of_a_run_reads_every_rank_through_the_engine(
        cdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = FIXTURES / "capture_h100.memory_train.both.pt.trace.json.gz"
    run = tmp_path / "run"
    run.mkdir()
    for r in (0, 1):
        shutil.copyfile(src, run / f"train.rank{r}.pt.trace.json.gz")
    one = memory(tf.load(src))
    for args in ([str(run)], [str(p) for p in sorted(run.iterdir())]):
        out = tmp_path / f"o{len(args)}"
        r = _cli(["memory", *args, "--format", "csv", "-o", str(out)], capsys)
        assert r.exit_code == 0, r.output
        import pandas as pd

        dev = pd.read_csv(out / "devices.csv")
        assert dev["rank"].tolist() == [0, 0, 1, 1]
        for rank in (0, 1):
            got = dev[dev["rank"] == rank].drop(columns="rank").reset_index(drop=True)
            assert got["peak_allocated_bytes"].tolist() == one.devices[
                "peak_allocated_bytes"].tolist()
        steps = pd.read_csv(out / "steps.csv")
        assert len(steps) == 2 * len(one.steps)


def test_legacy_call_stack_read_from_the_whole_trace(
        cdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Older Kineto (with_stack) puts the stack in the op's "Call stack" arg; the verb
    # loads no op rows, so the op's row is the whole trace's, read from there.
    op = _op("aten::mm", 10, 20)
    op["args"] = {"Call stack": "train.py(9): step;model.py(42): forward"}
    path = _kineto(tmp_path / "legacy.json", [_step(0, 0, 90), _op("aten::add", 1, 2), op,
                                               _mem(15, 100, 100, 1000, addr=7)])
    for _ in range(2):  # cold, then warm from the memory table's file
        r = _cli(["memory", str(path), "--table", "ops", "--format", "json"], capsys)
        assert r.exit_code == 0, r.output
        rows = json.loads(r.output)
        assert rows[0]["op"] == "aten::mm"
        assert rows[0]["stack"] == "model.py(42): forward > train.py(9): step"
