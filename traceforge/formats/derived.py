"""Derived tables of a cached trace (its timeline, its critical-path graph, its op FLOPs),
kept next to the trace's cache entry so that the next process skips computing them.

A warm verb's time is analysis, not loading: the shared timeline of a 288 MB trace takes
~0.25 s and its critical-path graph ~1 s, every run. :meth:`traceforge.model.Trace.derived`
asks the trace's :class:`DiskStore` (given by the cache reader) before computing, and
hands it what it computed.

A stored table is only read back for the same thing it was made from: its file holds the
full key, the cache entry's key (source path, size, mtime, inode, reader code), which
event kinds the trace kept, a fingerprint of every module of the package (size and mtime:
any edit of any analyzer makes old tables misses) and the table's own key (which names
the step rule). Files are pickles, the only way to store these objects whole, and a pickle
runs code when read: so one is read only from a cache directory that the current user owns
and that no one else may write (not group- or world-writable), opened with ``O_NOFOLLOW``
(a planted symlink to a file of the user's is refused, not followed), and only when it is
a regular file the current user owns.
Like the cache, nothing here raises: a damaged, foreign or unreadable file is a miss, an
unwritable directory means no store. Files are written to a temporary name and published
with ``os.replace``; ``traceforge cache clear`` and the cache's size cap (least recently
used first) remove them with the entries.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pickle
import shutil
import stat
import tempfile
from collections.abc import Collection
from pathlib import Path
from typing import Any

log = logging.getLogger("traceforge")

#: File suffix of a derived table (the entry's hashed name, then the table key's hash).
SUFFIX = ".derived"

_package_print: str | None = None


def package_fingerprint() -> str:
    """Size and mtime of every module and data file of the package (device ceilings,
    kernel families), hashed; computed once per process."""
    global _package_print
    if _package_print is None:
        from traceforge.version import __version__

        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha1(__version__.encode())
        for f in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".json")):
            with contextlib.suppress(OSError):
                st = f.stat()
                h.update(f"{f.relative_to(root)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        _package_print = h.hexdigest()
    return _package_print


def private_dir(d: Path) -> bool:
    """Whether ``d`` is owned by the current user and writable by no one else, so that no
    other user can have placed a file in it."""
    if not hasattr(os, "getuid"):
        return True
    try:
        st = os.stat(d)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


class DiskStore:
    """The derived tables of one cached trace (entry ``entry`` with key ``key``, rows of
    ``kinds``): see the module docstring."""

    def __init__(self, entry: Path, key: str, kinds: Collection[str] | None) -> None:
        self.entry = entry
        kept = "all" if kinds is None else ",".join(sorted(kinds))
        self.prefix = f"{key}|kinds={kept}|code={package_fingerprint()}"

    def _file(self, full: str) -> Path:
        digest = hashlib.sha1(full.encode()).hexdigest()[:20]
        return self.entry.with_name(f"{self.entry.stem}.{digest}{SUFFIX}")

    def get(self, key: str) -> Any | None:
        full = f"{self.prefix}|{key}"
        f = self._file(full)
        if not private_dir(f.parent):
            return None
        try:
            fd = os.open(f, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                if not stat.S_ISREG(st.st_mode) or (
                        hasattr(os, "getuid") and st.st_uid != os.getuid()):
                    return None
                stored, value = pickle.load(fh)
        except FileNotFoundError:
            return None
        except Exception as e:  # noqa: BLE001 - a damaged file of any kind is a miss
            log.debug("derived table %s unreadable: %s", f, e)
            return None
        if stored != full:
            return None
        with contextlib.suppress(OSError):
            os.utime(f)  # last use, for the cache's LRU eviction
        return value

    def put(self, key: str, value: Any) -> None:
        full = f"{self.prefix}|{key}"
        f = self._file(full)
        try:
            data = pickle.dumps((full, value), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001 - an object that does not pickle is not kept
            log.debug("derived table %s not kept: %s", key, e)
            return
        tmp = ""
        try:
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=f.parent)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            if f.is_dir() and not f.is_symlink():
                shutil.rmtree(f)  # a directory where a table belongs: heal
            os.replace(tmp, f)
        except OSError as e:
            log.debug("derived table %s not kept: %s", f, e)
            if tmp:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
