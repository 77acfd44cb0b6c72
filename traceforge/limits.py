"""The memory limit of a CLI run: ``--max-memory SIZE`` (or ``TRACEFORGE_MAX_MEMORY``).

A trace from someone else may hold tens of millions of events, and a run that grows past
the machine's memory ends in the kernel's OOM killer (or swaps the machine to a halt)
instead of an answer. So the CLI watches its own memory: a daemon thread reads, every
:data:`POLL_S`, the proportional anonymous memory (``Pss_Anon``: pages shared with forked
workers counted once) of this process and of its child processes (the reader's forked
chunk decoders, the report's critical-path child; first a cheap upper bound of it, the
anonymous resident pages, and the exact figure only when that bound passes the limit),
and once the sum passes the limit the
run ends with one line naming the limit and how to raise it (exit 2), temporary files
removed. Default: 90% of the memory the system reports available when the run starts
(``MemAvailable``); ``0`` or ``off`` turns the guard off. Linux only (elsewhere there is
no guard). The main thread gets a signal and ends the run as an error does; when it is
inside one long C call (a JSON decode) that no signal interrupts, the watcher itself ends
the process :data:`GRACE_S` later (the same line, temporary files removed). A single
allocation larger than what is left still fails as MemoryError.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
from pathlib import Path

from traceforge.errors import TraceforgeError

#: Seconds between two looks at the memory in use.
POLL_S = 0.2
#: Share of the available memory that the default limit allows.
AVAILABLE_SHARE = 0.9


class MemoryLimitError(TraceforgeError):
    """The run passed its memory limit."""

    exit_code = 2


def available_bytes() -> int | None:
    """``MemAvailable`` of /proc/meminfo, or None where there is none."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _pss_anon(pid: str) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    fields = {}
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            fields[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return fields.get("Pss_Anon", fields.get("Pss", 0))


def _rss_bound(pid: str) -> int:
    """Resident bytes of ``pid`` that its ``Pss_Anon`` cannot exceed: its anonymous
    resident pages (``statm``'s resident less its file and shmem pages), or every resident
    page where the kernel gives no ``Pss_Anon`` (:func:`_pss_anon` falls back on ``Pss``).
    ``statm`` is a few counters; ``smaps_rollup`` walks every page of the process (25-50 ms
    at 1.6 GiB, with the process's memory map locked)."""
    try:
        size = Path(f"/proc/{pid}/statm").read_text().split()
        resident, shared = int(size[1]), int(size[2])
    except (OSError, ValueError, IndexError):
        return 0
    return (resident - shared if _has_pss_anon() else resident) * _PAGE


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@functools.cache
def _has_pss_anon() -> bool:
    """Whether this kernel's ``smaps_rollup`` gives ``Pss_Anon`` (read once, when the
    guard first looks: not at import, which every command does)."""
    try:
        return "Pss_Anon:" in Path("/proc/self/smaps_rollup").read_text()
    except OSError:
        return False


def _children(pid: str) -> list[str]:
    out: list[str] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += (task / "children").read_text().split()
    except OSError:
        pass
    return out


def in_use(bound: bool = False) -> int:
    """Bytes of anonymous memory this process and its descendants use (PSS). ``bound``:
    a figure never below that one, from a few counters per process (:func:`_rss_bound`:
    pages shared with forked children counted in each), for a look that is cheap when
    the use is well under a limit."""
    todo, seen, total = [str(os.getpid())], set(), 0
    measure = _rss_bound if bound else _pss_anon
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += measure(pid)
        todo += _children(pid)
    return total


def parse_limit(text: str | None) -> int | None:
    """Bytes from ``--max-memory`` / the env var (None: the default; 0: no guard)."""
    if text is None or not text.strip():
        return None
    t = text.strip().lower()
    if t in ("0", "off", "none", "no"):
        return 0
    from traceforge.formats.cache_settings import parse_size  # the one size syntax (5GB, 512MiB)

    return parse_size(text)


def default_limit() -> int | None:
    avail = available_bytes()
    return None if avail is None else int(AVAILABLE_SHARE * avail) + in_use()


_hit: list[int] = []
#: Seconds the main thread has to end the run after the signal; the main thread may be
#: inside one long C call (a JSON decode), which no signal interrupts.
GRACE_S = 1.0


def _hard_exit(limit: int) -> None:
    """End the process from the watcher: the line, the temporary files, exit 2."""
    from traceforge.formats import gunzip

    sys.stderr.write(f"traceforge: error: {_message(limit)}\n")
    sys.stderr.flush()
    gunzip.cleanup()
    os._exit(2)


def _message(limit: int) -> str:
    return (f"the run passed its memory limit of {limit / 2**30:.1f} GiB (a trace this large "
            "needs more: --max-memory SIZE or TRACEFORGE_MAX_MEMORY raises it, 0 turns it off)")


def _on_limit(signum: int, frame: object) -> None:
    raise MemoryLimitError(_message(_hit[0] if _hit else 0))


def guard(limit: int | None) -> threading.Event | None:
    """Start watching memory against ``limit`` (None: the default; 0: none); returns the
    event that stops the watcher, or None when there is none."""
    if limit is None:
        limit = default_limit()
    if not limit or not Path("/proc/self/smaps_rollup").exists():
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    signal.signal(signal.SIGUSR2, _on_limit)
    stop = threading.Event()
    owner = os.getpid()

    def watch() -> None:
        signalled = 0.0
        while not stop.wait(POLL_S):
            if os.getpid() != owner:
                return
            # The bound first: the exact figure walks every page of every process.
            if in_use(bound=True) <= limit or in_use() <= limit:
                continue
            if not signalled:
                _hit[:] = [limit]
                os.kill(owner, signal.SIGUSR2)  # the main thread raises MemoryLimitError
                signalled = time.monotonic()
            elif time.monotonic() - signalled > GRACE_S:
                _hard_exit(limit)

    threading.Thread(target=watch, name="traceforge-memory-guard", daemon=True).start()
    return stop
