"""The columnar trace cache: hits, misses, stale and damaged entries, concurrency, limits.

Every check compares a cached load with a fresh parse of the same file (the reader is the
oracle here; the readers themselves are checked against raw files elsewhere), and proves a
hit by making the reader fail if it is called.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from tests.conftest import FIXTURES, shared
from traceforge import load
from traceforge.cli import cli
from traceforge.formats import cache, cache_files, cache_meta, cache_settings
from traceforge.model import GPU_KINDS, Device, Trace, TraceMeta

EAGER = FIXTURES / "compiled.pt.trace.json.gz"  # small: keeps these tests fast

#: One file of each format with an args provider of its own kind.
FORMATS = {
    "kineto": "h100/compiled.pt.trace.json.gz",
    "kineto-ddp": "h200-ddp/ddp_rank1.pt.trace.json.gz",
    "nsys-small": "external/nvfuser/8fa9ec29/report1.sqlite",
    "rocprofv3-json": "external/tracelens/rocprof/908_results.json.gz",
    "rocprofv3-csv": "external/rocprofiler-sdk/kernel_trace.csv",
    "rocprof-csv": "external/hpctrainingexamples/finite-difference/results.csv",
    "rocprof-db": "external/kokkos_rocprof/6f0a1c4a/results.db",
    "rocprof-json": "external/kokkos_rocprof/6f0a1c4a/results.json",
}


@pytest.fixture
def trace_copy(tmp_path: Path) -> Path:
    p = tmp_path / "src" / "compiled.pt.trace.json.gz"
    p.parent.mkdir()
    shutil.copy(EAGER, p)
    return p


def _entries(d: Path) -> list[Path]:
    return sorted(d.glob("*.arrow")) if d.exists() else []


def _no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every Kineto parse fail, so a load that succeeds came from the cache."""
    from traceforge.formats import chrome

    def boom(*a: Any, **k: Any) -> Trace:
        raise AssertionError("parsed although cached")

    monkeypatch.setattr(chrome, "read", boom)


def _meta_equal(a: TraceMeta, b: TraceMeta) -> None:
    assert cache_meta.same(a, b), (a, b)


def _assert_same(fresh: Trace, cached: Trace, n_args: int = 40) -> None:
    pd.testing.assert_frame_equal(fresh.events, cached.events)
    pd.testing.assert_frame_equal(fresh.flows, cached.flows)
    _meta_equal(fresh.meta, cached.meta)
    for c in ("name", "kind", "cat"):
        assert list(fresh.events[c].cat.categories) == list(cached.events[c].cat.categories)
    idx = fresh.events.index.to_numpy()
    rows = idx[np.linspace(0, len(idx) - 1, min(n_args, len(idx))).astype(int)] if len(idx) else idx
    assert fresh.args(rows) == cached.args(rows)


def test_miss_writes_then_hit_reads_without_parsing(cdir: Path, trace_copy: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = load(trace_copy, cache=False)
    assert _entries(cdir) == []
    first = load(trace_copy)
    assert len(_entries(cdir)) == 1
    _no_parse(monkeypatch)
    hit = load(trace_copy)
    _assert_same(fresh, first)
    _assert_same(fresh, hit)
    assert hit.meta.path == str(trace_copy)


def test_cached_traces_pickle_with_their_args(cdir: Path, trace_copy: Path) -> None:
    # load_run and (later) Dask workers send traces between processes.
    import pickle

    fresh = load(trace_copy, cache=False)
    load(trace_copy)
    for kinds in (None, GPU_KINDS):
        hit = load(trace_copy, kinds=kinds)
        hit.args([0])  # a built provider must not be pickled along
        back = pickle.loads(pickle.dumps(hit))
        ref = fresh if kinds is None else load(trace_copy, kinds=kinds, cache=False)
        _assert_same(ref, back)


def test_kinds_from_cache_equal_a_fresh_kinds_parse(cdir: Path, trace_copy: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = load(trace_copy, kinds=GPU_KINDS, cache=False)
    miss = load(trace_copy, kinds=GPU_KINDS)  # writes the whole table, returns GPU rows
    _no_parse(monkeypatch)
    hit = load(trace_copy, kinds=GPU_KINDS)
    assert set(hit.events["kind"].astype(str)) <= set(GPU_KINDS)
    _assert_same(fresh, miss)
    _assert_same(fresh, hit)
    hosts = load(trace_copy, kinds={"cpu_op", "runtime"})
    assert set(hosts.events["kind"].astype(str)) == {"cpu_op", "runtime"}


def test_inputs_stay_untouched(cdir: Path, trace_copy: Path) -> None:
    before = (hashlib.sha256(trace_copy.read_bytes()).hexdigest(), trace_copy.stat().st_mtime_ns)
    load(trace_copy)
    load(trace_copy)
    after = (hashlib.sha256(trace_copy.read_bytes()).hexdigest(), trace_copy.stat().st_mtime_ns)
    assert before == after
    assert sorted(p.name for p in trace_copy.parent.iterdir()) == [trace_copy.name]


def test_stale_entry_after_touch_is_rebuilt(cdir: Path, trace_copy: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    load(trace_copy)
    (entry,) = _entries(cdir)
    st = trace_copy.stat()
    os.utime(trace_copy, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    from traceforge.formats import chrome

    calls: list[Path] = []
    real = chrome.read

    def counting(path: Any, *a: Any, **k: Any) -> Trace:
        calls.append(Path(path))
        return real(path, *a, **k)

    monkeypatch.setattr(chrome, "read", counting)
    load(trace_copy)
    assert calls, "a touched file must be parsed again"
    assert _entries(cdir) == [entry]  # rebuilt in place, not a second entry
    calls.clear()
    load(trace_copy)
    assert not calls


def test_changed_content_same_size_and_mtime_is_not_served(cdir: Path, tmp_path: Path) -> None:
    # The key holds size and mtime_ns: a different file at the same path with another
    # size reads as stale (content is not hashed, as in make and ccache's direct mode).
    p = tmp_path / "t.json"
    ev = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 5}
    p.write_text(json.dumps({"traceEvents": [ev]}))
    assert int(load(p).events["dur"].iloc[0]) == 5000
    p.write_text(json.dumps({"traceEvents": [{**ev, "dur": 50}]}))
    assert int(load(p).events["dur"].iloc[0]) == 50000


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "other-arrow"])
def test_damaged_entry_is_ignored_and_rebuilt(cdir: Path, trace_copy: Path, damage: str,
                                              caplog: pytest.LogCaptureFixture) -> None:
    fresh = load(trace_copy)
    (entry,) = _entries(cdir)
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        entry.write_bytes(b"\x00garbage" * 100)
    elif damage == "empty":
        entry.write_bytes(b"")
    else:
        import pyarrow as pa

        with pa.OSFile(str(entry), "wb") as f, pa.ipc.new_file(f, pa.schema([("x", pa.int64())])
                                                             ) as w:
            w.write_table(pa.table({"x": [1, 2]}))
    with caplog.at_level(logging.WARNING, logger="traceforge"):
        again = load(trace_copy)
    _assert_same(fresh, again)
    assert cache_files.open_entry(entry) is not None, "the entry is rebuilt"
    assert not caplog.records, "a damaged entry is not an error"


def test_concurrent_writers(cdir: Path, trace_copy: Path) -> None:
    code = ("import sys; from traceforge import load; t = load(sys.argv[1]); "
            "print(len(t.events), int(t.events['dur'].sum()))")
    env = {**os.environ, "TRACEFORGE_CACHE": str(cdir)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(trace_copy)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0] == outs[1][0]
    assert [p.name for p in cdir.iterdir() if p.name.startswith(".tmp")] == []
    (entry,) = _entries(cdir)
    fresh = load(trace_copy, cache=False)
    assert outs[0][0].split() == [str(len(fresh.events)), str(int(fresh.events["dur"].sum()))]
    assert cache_files.open_entry(entry) is not None


def test_unwritable_cache_dir_means_no_cache_and_one_note(
        tmp_path: Path, trace_copy: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TRACEFORGE_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(cache_settings, "_noted", set())
    fresh = load(trace_copy, cache=False)
    with caplog.at_level(logging.WARNING, logger="traceforge"):
        a = load(trace_copy)
        b = load(trace_copy, kinds=GPU_KINDS)
    _assert_same(fresh, a)
    assert set(b.events["kind"].astype(str)) <= set(GPU_KINDS)
    notes = [r for r in caplog.records if "cache" in r.getMessage()]
    assert len(notes) == 1 and "not writable" in notes[0].getMessage()


def test_cli_with_unwritable_cache_still_exits_0(tmp_path: Path, trace_copy: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    env = {**os.environ, "TRACEFORGE_CACHE": str(blocker / "c")}
    p = subprocess.run([sys.executable, "-m", "traceforge", "top-kernels", str(trace_copy),
                        "-n", "2", "--format", "csv"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("\n") <= 1 and "Traceback" not in p.stderr
    assert len(p.stdout.splitlines()) == 3


def test_lru_eviction_keeps_the_cap(cdir: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    files = []
    for i in range(3):
        p = tmp_path / f"t{i}.pt.trace.json.gz"
        shutil.copy(FIXTURES / "compiled.pt.trace.json.gz", p)
        files.append(p)
    load(files[0])
    (e0,) = _entries(cdir)
    size = e0.stat().st_size
    monkeypatch.setenv("TRACEFORGE_CACHE_SIZE", str(int(size * 2.5)))
    load(files[1])
    e1 = next(e for e in _entries(cdir) if e != e0)
    os.utime(e0, ns=(1, 1_000_000_000))  # used long ago
    os.utime(e1, ns=(1, 2_000_000_000))
    load(files[0])  # a hit marks e0 as just used
    load(files[2])  # the third entry goes over the cap: e1, least recently used, goes
    left = _entries(cdir)
    assert e0 in left and e1 not in left and len(left) == 2
    assert sum(p.stat().st_size for p in left) <= size * 2.5


def test_parse_size() -> None:
    assert cache.parse_size("5GB") == 5 * 10**9
    assert cache.parse_size("500MiB") == 500 * 2**20
    assert cache.parse_size("1234") == 1234
    with pytest.raises(ValueError):
        cache.parse_size("lots")


def test_no_cache_option_env_and_kwarg(cdir: Path, trace_copy: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    r = CliRunner().invoke(cli, ["--no-cache", "top-kernels", str(trace_copy), "-n", "1"])
    assert r.exit_code == 0, r.output
    assert _entries(cdir) == []
    assert "TRACEFORGE_NO_CACHE" not in os.environ  # restored after the command
    load(trace_copy, cache=False)
    assert _entries(cdir) == []
    monkeypatch.setenv("TRACEFORGE_NO_CACHE", "1")
    load(trace_copy)
    assert _entries(cdir) == []
    load(trace_copy, cache=True)  # the keyword wins over the environment
    assert len(_entries(cdir)) == 1


def test_cache_info_and_clear(cdir: Path, trace_copy: Path) -> None:
    r = CliRunner().invoke(cli, ["cache", "info", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["entries"] == 0
    load(trace_copy)
    r = CliRunner().invoke(cli, ["cache", "info", "--format", "json"])
    doc = json.loads(r.output)
    assert doc["directory"] == str(cdir) and doc["entries"] == 1
    assert doc["traces"][0]["source"] == str(trace_copy.resolve())
    assert doc["traces"][0]["events"] == len(load(trace_copy).events)
    assert doc["bytes"] == _entries(cdir)[0].stat().st_size
    r = CliRunner().invoke(cli, ["cache", "info"])
    assert r.exit_code == 0 and str(trace_copy.resolve()) in r.output.replace("\n", "")
    r = CliRunner().invoke(cli, ["cache", "clear"])
    assert r.exit_code == 0 and "Removed 1 cache entry" in r.output
    assert _entries(cdir) == []
    assert trace_copy.exists()


def test_bad_cache_size_option_is_a_usage_error(cdir: Path) -> None:
    r = CliRunner().invoke(cli, ["--cache-size", "huge", "cache", "info"])
    assert r.exit_code == 2 and "not a size" in r.output


def test_meta_round_trips_generically() -> None:
    meta = TraceMeta(
        path="x", format="f", base_ns=3, rank=1, world_size=2,
        devices=(Device(0, "H100", "nvidia", 132, 80 * 2**30, "9.0"),),
        versions={"cuda": "13"}, distributed={"rank": 1, "pg": [{"ranks": [0, 1]}]},
        process_names={1: "python"}, thread_names={(1, 2): "main"},
        notes=("a", "b"),
        extra={"traceforge": {"steps": [1, 2]}, "rank_pids": {0: 11, 1: 12},
               "t": (1, (2, 3)), "np": np.int64(5), "__odd": {"__tuple": 1},
               "counters": pd.DataFrame({"track": ["a"], "ts": np.array([1], dtype=np.int64),
                                         "value": [0.5]})})
    back = cache_meta.decode(json.loads(json.dumps(cache_meta.encode(meta))))
    _meta_equal(meta, back)
    assert isinstance(back.thread_names, dict) and (1, 2) in back.thread_names


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_format_loads_the_same_through_the_cache(name: str, cdir: Path,
                                                       tmp_path: Path) -> None:
    src = shared(FORMATS[name])
    fresh = load(src, cache=False)
    first = load(src)
    hit = load(src)
    assert len(_entries(cdir)) == 1, "every format is cached"
    _assert_same(fresh, first)
    _assert_same(fresh, hit)
    gpu_fresh = load(src, kinds=GPU_KINDS, cache=False)
    gpu_hit = load(src, kinds=GPU_KINDS)
    _assert_same(gpu_fresh, gpu_hit, n_args=10)


def test_perfetto_loads_the_same_through_the_cache(cdir: Path, tmp_path: Path) -> None:
    pytest.importorskip("perfetto")
    out = tmp_path / "nsys.pftrace"
    r = CliRunner().invoke(cli, ["--no-cache", "convert",
                                 str(shared(FORMATS["nsys-small"])), str(out)])
    assert r.exit_code == 0, r.output
    fresh = load(out, cache=False)
    load(out)
    _assert_same(fresh, load(out))


def test_in_memory_args_provider_is_stored_as_json(cdir: Path, tmp_path: Path) -> None:
    # A provider the cache knows nothing about (here Trace.from_events' list): args are
    # stored as one JSON document per row.
    p = tmp_path / "source.bin"
    p.write_bytes(b"stands for the source file of the key")
    args = [{"grid": [i, 1, 1], "note": "é", "n": np.int64(i)} for i in range(4)]
    t = Trace.from_events([{"name": f"k{i}", "kind": "kernel", "ts": i, "dur": 1}
                           for i in range(4)], TraceMeta(format="synthetic"), args=args)
    assert cache.write(p, t, "synthetic")
    back = cache.read(p, None, lambda name: False)
    assert back is not None
    pd.testing.assert_frame_equal(t.events, back.events)
    assert back.args(np.array([3, 0])) == [{"grid": [3, 1, 1], "note": "é", "n": 3},
                                           {"grid": [0, 1, 1], "note": "é", "n": 0}]


def test_kineto_args_come_from_the_source_rows(cdir: Path, tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    evs = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": i, "dur": 1,
            "args": {"grid": [i, 1, 1], "note": "é"}} for i in range(5)]
    p.write_text(json.dumps({"traceEvents": evs}))
    fresh = load(p, cache=False)
    load(p)
    _assert_same(fresh, load(p))
    assert load(p).args([3]) == [{"grid": [3, 1, 1], "note": "é"}]


def test_other_model_or_reader_version_rebuilds(cdir: Path, trace_copy: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # The key holds a fingerprint of the trace model (TraceMeta fields, columns, kinds) and
    # of the reader modules: a new TraceMeta field or an edited reader must not be served
    # an old entry.
    load(trace_copy)
    (entry,) = _entries(cdir)
    before = entry.stat().st_mtime_ns
    old = cache_files.code_fingerprint()
    monkeypatch.setattr(cache_files, "_fingerprint", old + "-other")
    from traceforge.formats import chrome

    calls: list[int] = []
    real = chrome.read

    def counting(*a: Any, **k: Any) -> Trace:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(chrome, "read", counting)
    load(trace_copy)
    assert calls and _entries(cdir) == [entry]
    assert entry.stat().st_mtime_ns >= before


def test_cache_info_flags_a_damaged_entry(cdir: Path, trace_copy: Path) -> None:
    load(trace_copy)
    (entry,) = _entries(cdir)
    entry.write_bytes(b"not arrow")
    r = CliRunner().invoke(cli, ["cache", "info", "--format", "json"])
    (row,) = json.loads(r.output)["traces"]
    assert row["state"].startswith("damaged")


def test_args_providers_decode_once_when_threads_ask_together() -> None:
    """The report asks for args from two threads (its critical-path graphs are built on
    one): a cached trace's provider is rebuilt once and the Kineto file decoded once, and
    both still pickle (their locks are made again)."""
    import pickle
    import threading
    import time

    from traceforge.args_provider import no_args
    from traceforge.formats import kineto_args
    from traceforge.formats.cache_args import CachedArgs, Provider

    built: list[int] = []

    def rebuild() -> Any:
        built.append(1)
        time.sleep(0.05)
        return lambda rows: [{"row": int(r)} for r in rows]

    ca = CachedArgs(rebuild, None)
    ts = [threading.Thread(target=ca, args=(np.arange(3),)) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert built == [1]
    kept = pickle.loads(pickle.dumps(CachedArgs(Provider(no_args), None)))
    assert kept(np.arange(2)) == [{}, {}]

    path = FIXTURES / "eager.pt.trace.json.gz"
    lazy = kineto_args.LazyArgs(path, np.arange(10, dtype=np.int64))
    decoded: list[int] = []
    real = kineto_args.msgspec.json.decode

    def counting(*a: Any, **k: Any) -> Any:
        if k.get("type") is not None:
            decoded.append(1)
            time.sleep(0.05)
        return real(*a, **k)

    orig = kineto_args.msgspec.json.decode
    kineto_args.msgspec.json.decode = counting
    try:
        ts = [threading.Thread(target=lazy, args=(np.arange(3),)) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        kineto_args.msgspec.json.decode = orig
    assert decoded == [1]
    again = pickle.loads(pickle.dumps(lazy))
    assert again(np.arange(3)) == lazy(np.arange(3))


@pytest.mark.parametrize("name", ["kineto", "kineto-ddp", "nsys-small", "rocprofv3-json"])
def test_an_entry_written_beside_the_command_gives_what_a_hit_gives(
        name: str, cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a CLI command the new entry is written on a thread while the command goes on:
    the trace it gets (the whole table, or rows of some kinds selected from it in memory
    instead of read back from the entry) equals a fresh parse and the later hit."""
    from traceforge import background

    src = shared(FORMATS[name])
    fresh = {kinds: load(src, kinds=kinds, cache=False) for kinds in (None, GPU_KINDS)}
    for kinds in (GPU_KINDS, None):
        cache.clear()
        with background.settling():
            miss = load(src, kinds=kinds)
            entry = cache.key(src)
            assert entry is not None and cache.writing(entry[0])
            _assert_same(fresh[kinds], miss, n_args=10)
        assert len(_entries(cdir)) == 1  # written by the end of the block
    with monkeypatch.context() as m:
        _no_parse(m)
        for kinds in (None, GPU_KINDS):
            _assert_same(fresh[kinds], load(src, kinds=kinds), n_args=10)


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_entry_that_fails_to_write_beside_the_command_is_no_traceback(
        cdir: Path, trace_copy: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """An error of Arrow's writer on the writing thread leaves no entry and says nothing
    (threading would print a traceback for an error the thread let through; pytest turns
    that into the warning made an error here)."""
    import pyarrow as pa

    from traceforge import background

    def broken(*a: Any, **k: Any) -> None:
        raise pa.ArrowInvalid("damaged table")

    monkeypatch.setattr(cache, "publish", broken)
    fresh = load(trace_copy, cache=False)
    with background.settling():
        got = load(trace_copy)
    _assert_same(fresh, got)
    assert _entries(cdir) == []
    assert "Traceback" not in capfd.readouterr().err
