"""One cache entry on disk: its name and key, its Arrow layout, and opening and writing it.

An entry is one uncompressed Arrow IPC file, named by a hash of the source file's real
path. Its schema metadata holds a header (the key it was built for, its row count and
columns, the reader, the meta) and the flows as an embedded IPC stream; its columns are
the event table's (categoricals as Arrow dictionaries) and the args provider's
(:mod:`traceforge.formats.cache_args`). Files are written to a temporary name in the
cache directory and published with ``os.replace``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from traceforge import model
from traceforge.formats import arrow_frames, cache_meta
from traceforge.formats.cache_args import args_columns
from traceforge.formats.cache_settings import SUFFIX as SUFFIX
from traceforge.formats.cache_settings import entry_file
from traceforge.model import EVENT_COLUMNS, FLOW_COLUMNS, KINDS, Trace, TraceMeta

if TYPE_CHECKING:
    import pyarrow as pa

#: Bump when the layout of an entry changes (also when readers start producing different
#: tables from the same file and the code fingerprint below would not notice).
CACHE_FORMAT = 1
#: Schema metadata keys: the entry's header (JSON) and its flows (an Arrow IPC stream).
META_KEY = b"traceforge.meta"
FLOWS_KEY = b"traceforge.flows"


# -- keys ----------------------------------------------------------------------------------
def code_fingerprint() -> str:
    """The trace model's shape plus the size and mtime of the modules that build tables.

    A new TraceMeta field, a new kind or an edited reader then invalidates old entries by
    itself; released versions change only with the package.
    """
    from traceforge.version import __version__

    parts: list[object] = [
        CACHE_FORMAT, __version__, list(EVENT_COLUMNS.items()), list(KINDS),
        list(FLOW_COLUMNS.items()),
        [f.name for f in dataclasses.fields(TraceMeta)],
        [f.name for f in dataclasses.fields(model.Device)],
    ]
    here = Path(__file__).resolve().parent
    for f in sorted(here.glob("*.py")) + [Path(model.__file__)]:
        with contextlib.suppress(OSError):
            st = f.stat()
            parts.append((f.name, st.st_size, st.st_mtime_ns))
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


_fingerprint: str | None = None


def key(path: Path) -> tuple[Path, str] | None:
    """The entry file and key of ``path`` now, or None when it cannot be stat'ed. Taken
    *before* parsing and passed to the write, so that a file changed during the parse is
    never stored as current."""
    try:
        real = path.resolve(strict=True)
        st = real.stat()
    except (OSError, RuntimeError):
        return None
    return key_of(real, st)


def key_of(real: Path, st: os.stat_result) -> tuple[Path, str]:
    """(entry file, key) for a source file at its real path ``real`` with stat ``st``
    (taken once, when the file was found: :func:`traceforge.formats.identify`)."""
    global _fingerprint
    if _fingerprint is None:
        _fingerprint = code_fingerprint()
    # The inode too: a file replaced by rename within one tick of the coarse file clock
    # can keep size and mtime; contents are never hashed (that would cost a full read).
    k = f"{real}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{_fingerprint}"
    return entry_file(real), k


# -- layout --------------------------------------------------------------------------------
def open_entry(entry: Path) -> tuple[pa.Table, dict[str, Any]] | None:
    """The table and header of an entry, or None when it is missing or damaged."""
    import pyarrow as pa

    try:
        mm = pa.memory_map(str(entry), "r")
        t = pa.ipc.open_file(mm).read_all()
        t.validate()  # buffer sizes against lengths (cheap; not a scan of the values)
        head = msgspec.json.decode((t.schema.metadata or {})[META_KEY])
    except (OSError, KeyError, ValueError, TypeError, msgspec.DecodeError, pa.ArrowException):
        return None
    if not isinstance(head, dict) or t.num_rows != head.get("rows"):
        return None
    return t, head


def entry_table(trace: Trace, key: str, reader: str, path: Path) -> pa.Table:
    """The Arrow table (with its schema metadata) that stores ``trace`` under ``key``;
    TypeError, ValueError, OverflowError or msgspec.EncodeError where it cannot."""
    import pyarrow as pa

    ev = trace.events
    meta_enc = cache_meta.encode(trace.meta)
    if not cache_meta.same(cache_meta.decode(meta_enc), trace.meta):
        raise TypeError("meta does not round-trip")
    arrays = {str(c): arrow_frames.column_array(ev[c]) for c in ev.columns}
    args_mod, arg_arrays, args_head = args_columns(trace)
    arrays.update(arg_arrays)
    head = {
        "key": key, "rows": len(ev), "columns": [str(c) for c in ev.columns],
        "reader": reader, "args": args_mod, "source": str(path.resolve()),
        "meta_path": trace.meta.path, "meta": meta_enc,
    }
    if args_head is not None:
        head["args_header"] = args_head
    md = {META_KEY: msgspec.json.encode(head)}
    if not trace.flows.empty:
        md[FLOWS_KEY] = arrow_frames.ipc_bytes(arrow_frames.frame_table(trace.flows))
    table = pa.table(arrays)
    return table.replace_schema_metadata(md)


def publish(d: Path, entry: Path, table: pa.Table) -> None:
    """Write ``table`` to a temporary file in ``d`` and move it to ``entry``; OSError (or
    Arrow's own errors) where it cannot, leaving nothing behind."""
    import pyarrow as pa

    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=d)
    try:
        os.close(fd)
        # Arrow's own file, not a Python one: written beside the command (background.later),
        # the write then never waits for the GIL.
        with pa.OSFile(tmp, "wb") as f, pa.ipc.new_file(f, table.schema) as w:
            # One record batch: every column is then one contiguous buffer to map.
            w.write_table(table.combine_chunks(), max_chunksize=max(1, table.num_rows))
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)  # a directory where the entry belongs: heal, not "unwritable"
        os.replace(tmp, entry)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
