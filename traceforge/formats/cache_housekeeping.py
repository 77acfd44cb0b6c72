"""Keeping the trace cache directory in order: listing its entries, evicting the least
recently used beyond the size cap, clearing it.

An entry's derived tables (:mod:`traceforge.formats.derived`) and memory tables
(:mod:`traceforge.formats.memory`) are named after it and counted and removed with it.
Each function first waits for an entry this process is writing beside its command
(:func:`traceforge.background.settle`), so a listing never misses it and a clear never
races it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from traceforge import background
from traceforge.formats.cache_files import SUFFIX, open_entry
from traceforge.formats.cache_settings import cache_dir
from traceforge.formats.derived import SUFFIX as DERIVED_SUFFIX
from traceforge.formats.memory import SUFFIX as MEMORY_SUFFIX


@dataclass(frozen=True)
class Entry:
    """One cache file and what it says about itself (for ``traceforge cache info``)."""

    path: Path
    size: int
    used_ns: int
    source: str
    rows: int
    valid: bool


def _files(d: Path) -> Iterator[Path]:
    """Entries, their derived and memory tables and stray temporary files of them."""
    try:
        yield from (p for p in d.iterdir() if p.name.endswith((SUFFIX, DERIVED_SUFFIX)))
    except OSError:
        return


def evict(limit: int, keep: Path | None = None) -> list[Path]:
    """Remove least recently used entries until the directory holds at most ``limit`` bytes.

    Stray temporary files older than an hour (a run killed mid-write) go too. ``keep``:
    the entry just written, removed only where it alone is over the limit. Called by the
    write itself (on its thread), so it does not wait for writes.
    """
    d = cache_dir()
    stats = []
    for p in _files(d):
        with contextlib.suppress(OSError):
            st = p.stat()
            if p.name.startswith(".tmp-"):
                if st.st_mtime < time.time() - 3600:
                    p.unlink()
                continue
            stats.append((st.st_mtime_ns, st.st_size, p))
    total = sum(s for _, s, _ in stats)
    removed: list[Path] = []
    for _, size, p in sorted(stats, key=lambda x: x[0]):
        if total <= limit:
            break
        if keep is not None and p == keep and total - size <= limit:
            continue
        with contextlib.suppress(OSError):
            p.unlink()
            total -= size
            removed.append(p)
    return removed


def entries() -> list[Entry]:
    """Every entry in the cache directory, most recently used first."""
    background.settle()
    out: list[Entry] = []
    files = [p for p in _files(cache_dir()) if not p.name.startswith(".tmp-")]
    # An entry's size includes its derived tables (named after it).
    extra: dict[str, int] = {}
    for p in files:
        if p.name.endswith((DERIVED_SUFFIX, MEMORY_SUFFIX)):
            with contextlib.suppress(OSError):
                stem = p.name.split(".", 1)[0]
                extra[stem] = extra.get(stem, 0) + p.stat().st_size
    for p in files:
        if not p.name.endswith(SUFFIX) or p.name.endswith(MEMORY_SUFFIX):
            continue
        try:
            st = p.stat()
        except OSError:
            continue
        opened = open_entry(p)
        head = opened[1] if opened else {}
        out.append(Entry(p, st.st_size + extra.get(p.stem, 0), st.st_mtime_ns,
                         str(head.get("source", "")), int(head.get("rows", 0)),
                         opened is not None))
    return sorted(out, key=lambda e: -e.used_ns)


def clear() -> tuple[int, int]:
    """Remove every entry, its derived tables and stray temporary files; returns (entries,
    bytes) removed."""
    background.settle()
    n = b = 0
    for p in _files(cache_dir()):
        with contextlib.suppress(OSError):
            size = p.stat().st_size
            p.unlink()
            n += (p.name.endswith(SUFFIX) and not p.name.startswith(".tmp-")
                  and not p.name.endswith(MEMORY_SUFFIX))
            b += size
    return n, b
