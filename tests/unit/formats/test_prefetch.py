"""A trace's chunks decoded by children forked before the command's imports
(traceforge.formats.prefetch) give exactly the table of a read without them, whoever did
which chunk: the children, the reader, or the reader after the children failed, died or
cut the file otherwise. Chunks are forced on small files (MIN_CHUNK_BYTES, CHUNK_BYTES
patched; forked children see the patched values)."""

from __future__ import annotations

import json
import os
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import pytest

from tests.unit.formats.test_kineto_chunks import assert_same, events, one_piece
from traceforge import background, cli
from traceforge.formats import chrome, load, prefetch
from traceforge.formats import kineto_chunks as chunks


@pytest.fixture
def big(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A document of ~40 chunks, large enough for 2 workers; no prefetch left behind."""
    monkeypatch.setattr(chunks, "MIN_CHUNK_BYTES", 16384)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4096)
    monkeypatch.setenv("TRACEFORGE_PARSE_WORKERS", "2")
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events(400), "traceName": "x"}))
    yield p
    prefetch.discard()


def _done(p: prefetch.Prefetch) -> None:
    """Wait until every child has answered (taken every chunk it could)."""
    assert wait([k.connection for k in p.kids], timeout=60)
    assert all(k.ready() for k in p.kids)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The chunks decoded in this process."""
    real, here = chunks.decode, []

    def spy(raw: Any, plan: chunks.Plan, i: int) -> Any:
        here.append(i)
        return real(raw, plan, i)

    monkeypatch.setattr(chunks, "decode", spy)
    return here


def test_chunks_the_children_took_are_the_readers(big: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    whole = one_piece(big)
    assert prefetch.start(str(big))
    running = prefetch.pending()
    assert running is not None and len(running.kids) == 1
    _done(running)
    here = _spy(monkeypatch)
    assert_same(chrome.read(big), whole)
    assert here == []  # the child had taken every chunk
    assert prefetch.pending() is None and running.kids == []


def test_the_reader_takes_what_is_left(big: Path) -> None:
    """Claimed at once: the chunks are shared between this process and the child."""
    whole = one_piece(big)
    assert prefetch.start(str(big))
    assert_same(chrome.read(big), whole)


@pytest.mark.parametrize("how", ["died", "failed", "other cut", "kinds", "file changed"])
def test_chunks_no_one_did_are_done_by_the_reader(big: Path, how: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = ["kernel", "memcpy", "memset", "gpu_annotation", "sync"]
    kinds = gpu if how == "kinds" else None
    whole = one_piece(big, kinds)
    plan = chunks.plan(big.read_bytes(), 2)
    assert plan is not None and plan.workers == 2
    assert prefetch.start(str(big))
    running = prefetch.pending()
    assert running is not None
    if how == "died":
        running.kids[0]._proc.kill()
    elif how == "failed":
        _done(running)
        # A child's answer the reader must not trust: chunks of another cut.
        monkeypatch.setattr(running.kids[0], "result", lambda: (0, [1, 2], []))
    elif how == "other cut":
        _done(running)
        monkeypatch.setattr(chunks, "CHUNK_BYTES", 5000)  # the reader cuts otherwise
        plan = chunks.plan(big.read_bytes(), 2)
        assert plan is not None
    elif how == "file changed":
        os.utime(big, ns=(1, 1))
    # The reader's own workers: this process only (the same cut: it has ~40 chunks).
    monkeypatch.setenv("TRACEFORGE_PARSE_WORKERS", "1")
    here = _spy(monkeypatch)
    assert_same(chrome.read(big, kinds), whole)
    assert sorted(here) == list(range(plan.chunks))  # each chunk once, here
    assert prefetch.pending() is None and running.kids == []


def test_a_prefetch_of_another_file_waits_for_its_own(big: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"traceEvents": events(3)}))
    assert prefetch.start(str(big))
    assert prefetch.claim(other) is None
    assert prefetch.pending() is not None
    assert_same(chrome.read(big), one_piece(big))
    assert prefetch.pending() is None


def test_a_forked_worker_does_not_claim_its_parents(big: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert prefetch.start(str(big))
    running = prefetch.pending()
    assert running is not None
    monkeypatch.setattr(running, "owner", os.getpid() + 1)
    assert prefetch.claim(big) is None
    prefetch.discard()  # not this process's to stop either
    assert running.kids
    monkeypatch.setattr(running, "owner", os.getpid())
    prefetch.discard()
    assert running.kids == [] and prefetch.pending() is None


@pytest.mark.parametrize("case", ["cached", "cache off", "small", "gzip", "not .json",
                                  "not JSON", "rocprofv3", "one worker", "missing",
                                  "directory"])
def test_no_prefetch_where_the_command_would_not_parse_on_several_cores(
        big: Path, case: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    p = big
    if case == "cached":
        load(big)
        background.settle()  # the entry is written beside
    elif case == "cache off":
        monkeypatch.setenv("TRACEFORGE_NO_CACHE", "1")
    elif case == "small":
        monkeypatch.setattr(chunks, "MIN_CHUNK_BYTES", big.stat().st_size)
    elif case == "gzip":
        p = tmp_path / "g.json"
        p.write_bytes(b"\x1f\x8b" + big.read_bytes())
    elif case == "not .json":
        p = big.rename(tmp_path / "t.txt")
    elif case == "not JSON":
        p.write_bytes(b"SQLite format 3\0" + big.read_bytes())
    elif case == "rocprofv3":
        p.write_text('{"rocprofiler-sdk-tool": [' + big.read_text()[1:])
    elif case == "one worker":
        monkeypatch.setenv("TRACEFORGE_PARSE_WORKERS", "1")
    elif case == "missing":
        p = tmp_path / "none.json"
    elif case == "directory":
        p = tmp_path
    assert not prefetch.start(str(p))
    assert prefetch.pending() is None


@pytest.mark.parametrize(("verb", "words", "started"), [
    ("info", ["{big}"], "{big}"),
    ("info", ["--format", "json", "{big}"], "{big}"),
    ("diff", ["{big}", "{big}"], None),  # several traces: the engine's workers read them
    ("annotate", ["-o", "{out}", "{big}"], "{big}"),  # an output that exists is no trace
    ("annotate", ["--output", "{out}", "{big}"], "{big}"),
    ("diff", ["{big}", "{out}"], None),
    ("convert", ["{big}", "{out}"], "{big}"),  # convert IN OUT: OUT is written (may exist)
    ("convert", ["{out}", "{big}"], "{out}"),  # (the input, whatever it holds)
    ("convert", ["{big}", "{out}", "{big}"], None),  # (a usage error to come)
    ("info", ["--help"], None),
])
def test_the_cli_prefetches_the_one_file_a_command_names(
        big: Path, verb: str, words: list[str], started: str | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = big.with_name("out.json")
    out.write_text("{}")
    calls: list[str] = []
    monkeypatch.setattr(prefetch, "start", lambda a: calls.append(a) or True)
    cli._prefetch([w.format(big=big, out=out) for w in words], verb)
    assert calls == ([] if started is None else [started.format(big=big, out=out)])


def test_a_command_that_fails_leaves_no_prefetch_running(big: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    kids: list[Any] = []
    real = prefetch.start

    def start(arg: str) -> bool:
        ok = real(arg)
        running = prefetch.pending()
        kids.extend(running.kids if running is not None else [])
        return ok

    with pytest.MonkeyPatch.context() as m:
        m.setattr(prefetch, "start", start)
        with pytest.raises(SystemExit) as e:
            cli.main(["top-kernels", str(big), "--no-such-option"])
    assert e.value.code == 2
    assert len(kids) == 1 and prefetch.pending() is None
    assert all(k._proc is None for k in kids)  # stopped and reaped
    assert "no-such-option" in capsys.readouterr().err


def test_a_cold_command_reads_through_the_prefetch(big: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    whole = one_piece(big)
    claimed: list[Any] = []
    real = prefetch.claim

    def claim(path: Path) -> Any:
        got = real(path)
        claimed.append(got)
        return got

    with pytest.MonkeyPatch.context() as m:
        m.setattr(prefetch, "claim", claim)
        cli.main(["top-kernels", "--format", "json", str(big)])
    printed = capsys.readouterr().out
    assert any(c is not None for c in claimed)
    capsys.readouterr()
    cli.main(["--no-cache", "top-kernels", "--format", "json", str(big)])
    assert capsys.readouterr().out == printed
    assert len(whole.events) > 0
