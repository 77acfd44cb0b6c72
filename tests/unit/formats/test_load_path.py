"""The load path reads each file once (issue 26, item 7): run discovery hands every file on
with what it learned (resolved path, stat, cache key, the reader of a profiler's folder),
so a file is opened for its head once, sniffed in one pass, keyed once, and its content
opened once; on a cache hit it is not opened at all.

Counted per file: ``open`` (audit events naming the file: ``open``, ``sqlite3.connect``),
``head`` (``read_head``), ``key`` (cache keys computed), ``sniff:<reader>`` (each reader's
``sniff``). benchmarks/load_path_counts.py prints the same counts for real traces.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import traceforge.formats as formats
from tests.conftest import shared
from tests.support import rocpd_schema
from tests.unit.formats.test_chrome_reader import kineto_doc
from traceforge import engine
from traceforge.formats import SourceFile, cache, cache_files, identify, source
from traceforge.formats.multirank import load_run, run_files
from traceforge.model import Trace

_counters: list[tuple[set[str], Counter[tuple[str, str]]]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _counters or event not in ("open", "sqlite3.connect") or not args:
        return
    target = args[0]
    if isinstance(target, (str, bytes, os.PathLike)):
        name = os.fsdecode(target).removeprefix("file:").split("?", 1)[0]
        names, c = _counters[-1]
        if name in names:
            c[(name, "open")] += 1


sys.addaudithook(_audit)  # for the whole process; counts only inside counting()


@contextmanager
def counting(files: list[Path], monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[Callable[[Path], Counter[str]]]:
    names = {str(f) for f in files} | {str(f.resolve()) for f in files}
    c: Counter[tuple[str, str]] = Counter()

    def wrap(owner: Any, attr: str, what: str) -> None:
        orig = getattr(owner, attr)

        def counted(p: Any, *a: Any, **k: Any) -> Any:
            if str(p) in names:
                c[(str(p), what)] += 1
            return orig(p, *a, **k)

        monkeypatch.setattr(owner, attr, counted)

    for name in formats.READERS:
        wrap(formats._reader(name), "sniff", f"sniff:{name}")  # noqa: SLF001
    wrap(formats, "read_head", "head")
    wrap(source, "read_head", "head")
    wrap(cache, "key_of", "key")  # a SourceFile's key
    wrap(cache_files, "key_of", "key")  # cache.key(path)'s

    def of(f: Path) -> Counter[str]:
        keys = {str(f), str(f.resolve())}
        out: Counter[str] = Counter()
        for (p, what), n in c.items():
            if p in keys:
                out[what] += n
        return out

    _counters.append((names, c))
    try:
        yield of
    finally:
        _counters.pop()


def _run(tmp_path: Path) -> list[Path]:
    d = tmp_path / "run"
    d.mkdir()
    a = d / "rank0.json"
    a.write_text(json.dumps(kineto_doc(distributedInfo={"rank": 0, "world_size": 2})))
    b = d / "rank1.json.gz"
    b.write_bytes(gzip.compress(json.dumps(
        kineto_doc(distributedInfo={"rank": 1, "world_size": 2})).encode()))
    return [a, b]


def test_a_run_folder_is_opened_and_sniffed_once_per_file(
        tmp_path: Path, cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _run(tmp_path)
    with counting(files, monkeypatch) as of:
        cold = load_run(tmp_path / "run", workers=1)
    assert [t.meta.rank for t in cold] == [0, 1]
    for f, opens in zip(files, (2, 3), strict=True):  # head + content (+ the gunzip)
        n = of(f)
        assert n["head"] == 1 and n["key"] == 1, (f.name, n)
        assert n["open"] == opens, (f.name, n)
        sniffs = {k: v for k, v in n.items() if k.startswith("sniff:")}
        assert sniffs and max(sniffs.values()) == 1, (f.name, n)  # one pass: each reader once
    with counting(files, monkeypatch) as of:
        warm = load_run(tmp_path / "run", workers=1)
    for f in files:  # a cache hit: keyed once, never opened or sniffed
        assert of(f) == Counter({"key": 1}), (f.name, of(f))
    assert [len(t.events) for t in warm] == [len(t.events) for t in cold]


def event_count(trace: Trace) -> int:
    return len(trace.events)


def test_the_engine_hands_on_what_discovery_found(
        tmp_path: Path, cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _run(tmp_path)
    with counting(files, monkeypatch) as of:
        ranked = engine.map_ranks(tmp_path / "run", event_count, workers=1)
    assert [r.rank for r in ranked] == [0, 1]
    for f in files:
        n = of(f)
        assert n["head"] == 1 and n["key"] == 1, (f.name, n)


def test_discovery_gives_source_files(tmp_path: Path) -> None:
    files = _run(tmp_path)
    found, note = run_files(tmp_path / "run")
    assert note is None
    assert all(isinstance(s, SourceFile) for s in found)
    assert [s.path for s in found] == files  # as named: the trace's meta.path
    assert [os.fspath(s) for s in found] == [str(f) for f in files]
    assert found[0].st.st_size == files[0].stat().st_size
    assert found[0].cache_key() == cache.key(files[0])  # the same key
    assert identify(found[0]) is found[0]


def test_a_database_is_sniffed_in_one_pass(
        tmp_path: Path, cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = rocpd_schema.build(tmp_path / "results.db")
    with counting([db], monkeypatch) as of:
        load_run(db, workers=1)
    n = of(db)
    assert n["head"] == 1 and n["key"] == 1, n
    assert max(v for k, v in n.items() if k.startswith("sniff:")) == 1, n


def test_a_profiler_folder_is_sniffed_once(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = shared("external/rocprofiler-sdk")
    with counting([d], monkeypatch) as of:
        traces = load_run(d, workers=1)
    assert of(d)["sniff:rocprof"] == 1, of(d)  # by discovery, which names the reader
    assert traces and all(len(t.events) for t in traces)
