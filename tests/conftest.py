"""Shared test fixtures: where the real traces live, and a small in-code trace builder."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from traceforge.model import Trace, TraceMeta

REPO = Path(__file__).resolve().parents[1]
#: Our own fixtures (copied from shared/fixtures/{h100,h200-*} and captured by traceforge).
FIXTURES = REPO / "fixtures"
#: The shared real-trace folder beside the repository (absent on some machines).
SHARED = Path(os.environ.get("TRACEFORGE_SHARED_FIXTURES", REPO.parent / "shared" / "fixtures"))
EXTERNAL = SHARED / "external"


#: The user's real home, before the tests replace it (tests/quality/test_home.py checks they did).
REAL_HOME = Path.home()
#: Set (to 1) where the HTA oracle must run: an HTA test that would skip fails instead
#: (.ci/run sets it in its lowest-versions venv, where HTA 0.5.0 works).
REQUIRE_HTA = "TRACEFORGE_REQUIRE_HTA"


#: No test phase (setup, call, teardown) runs longer than this; the slowest take ~20 s
#: on CI's 2 cores. One that hangs fails with every thread's stack, where CI would
#: otherwise wait out its 90 minutes and print nothing about where.
TEST_TIMEOUT_S = int(os.environ.get("TRACEFORGE_TEST_TIMEOUT", "300"))


class TestHang(Exception):
    """A test phase ran past TEST_TIMEOUT_S."""


@contextlib.contextmanager
def _deadline(nodeid: str) -> Iterator[None]:
    if (not hasattr(signal, "SIGALRM") or TEST_TIMEOUT_S <= 0
            or threading.current_thread() is not threading.main_thread()):
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        names = {t.ident: t.name for t in threading.enumerate()}
        stacks = "".join(f"\n--- thread {names.get(tid, tid)}\n" + "".join(
            traceback.format_stack(f)) for tid, f in sys._current_frames().items())
        raise TestHang(f"{nodeid} ran past {TEST_TIMEOUT_S} s; every thread's stack:{stacks}")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TEST_TIMEOUT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _deadline(item.nodeid):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _deadline(item.nodeid):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with _deadline(item.nodeid):
        yield


@pytest.fixture(scope="session", autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """HOME is a temporary folder for the whole session: nothing a test runs (traceforge's
    default cache under ~/.cache, a library's config) writes into the user's home."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("USERPROFILE", str(home))
        for var in ("XDG_CACHE_HOME", "LOCALAPPDATA"):
            mp.delenv(var, raising=False)
        yield home


def hta_module(name: str = "hta.trace_analysis", *, pandas3_ok: bool = True) -> Any:
    """Import an HTA module for an oracle comparison, or skip (no hta; pandas 3 where HTA
    0.5.0 needs pandas < 3, ``pandas3_ok=False``). Where ``$TRACEFORGE_REQUIRE_HTA`` is
    set the test fails instead of skipping: the oracle must run there."""
    import importlib

    import pandas as pd

    why = None
    if not pandas3_ok and int(pd.__version__.split(".")[0]) >= 3:
        why = (f"HTA 0.5.0 needs pandas < 3 here (HTA#318), this is pandas {pd.__version__}; "
               "the lowest-versions CI run (pandas 2.1) runs this comparison")
    else:
        try:
            module = importlib.import_module(name)
            _hta_in_process()
            return module
        except ImportError as e:
            why = f"{name} not importable ({e}): pip install 'traceforge[hta]'"
    if os.environ.get(REQUIRE_HTA):
        pytest.fail(f"${REQUIRE_HTA} is set but the HTA oracle cannot run: {why}")
    pytest.skip(why)


def _hta_in_process() -> None:
    """HTA parses a multi-rank folder in a ``fork`` multiprocessing Pool by default. Forked
    from an xdist worker (execnet's receiver thread runs beside the test), a pool worker can
    inherit a lock held mid-fork and never exit; ``Pool.__exit__`` then waits on it for
    ever (CI, 2026-11-26: test_hta_timeline's DDP pair sat in Pool.terminate -> join until
    the test deadline). The oracle parses its ranks one after another in the test process
    instead: the same parse, no fork."""
    import functools

    from hta.common.trace import Trace as HtaTrace

    load = HtaTrace.load_traces
    if getattr(load, "in_process", False):
        return

    @functools.wraps(load)
    def load_traces(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["use_multiprocessing"] = False
        return load(self, *args, **kwargs)

    load_traces.in_process = True  # type: ignore[attr-defined]
    HtaTrace.load_traces = load_traces  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def _session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("traceforge-cache")


@pytest.fixture(autouse=True)
def _isolated_cache(_session_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test caches into one temporary directory, never the user's ~/.cache.

    One directory for the session: tests that load the same fixture share its entry (the
    suite then exercises cache hits everywhere); cache tests point it elsewhere themselves.
    """
    monkeypatch.setenv("TRACEFORGE_CACHE", str(_session_cache))
    monkeypatch.delenv("TRACEFORGE_NO_CACHE", raising=False)
    monkeypatch.delenv("TRACEFORGE_CACHE_SIZE", raising=False)
    return _session_cache


@pytest.fixture
def cdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache directory of the test's own (cache tests count and damage its files)."""
    from traceforge.formats import cache_settings

    d = tmp_path / "cache"
    monkeypatch.setenv("TRACEFORGE_CACHE", str(d))
    monkeypatch.setattr(cache_settings, "_noted", set())
    return d


def shared(rel: str) -> Path:
    """A file under shared/fixtures, or skip the test when it is not there."""
    p = SHARED / rel
    if not p.exists():
        pytest.skip(f"shared fixture {rel} not present")
    return p


def ev(name: str, kind: str = "kernel", ts: int = 0, dur: int = 0, **kw: Any) -> dict[str, Any]:
    """One event row for Trace.from_events (times in ns)."""
    row: dict[str, Any] = {"name": name, "kind": kind, "ts": ts, "dur": dur}
    if kind in ("kernel", "memcpy", "memset", "gpu_annotation"):
        row.setdefault("device", 0)
        row.setdefault("stream", 7)
    row.update(kw)
    return row


def make_trace(rows: list[dict[str, Any]], **meta: Any) -> Trace:
    """A Trace from ``ev`` rows; ``meta`` keywords go to TraceMeta."""
    return Trace.from_events(rows, TraceMeta(format="synthetic", **meta))


def sql_rows(db: Path, query: str) -> list[tuple[object, ...]]:
    """Rows of ``query`` on a SQLite file opened read-only: the raw-file oracle for readers."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def cli_main(*args: str) -> tuple[int, str, str]:
    """Run ``traceforge ARGS`` in process through ``cli.main`` (its error mapping and exit
    codes included): (exit code, stdout, stderr)."""
    import contextlib
    import io

    from traceforge.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()
