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
the step rule). Files hold data only, never code (not pickles): a JSON header (the key and
the value's tree: plain values, frames, arrays, this package's dataclasses by name) and the
arrays' raw bytes, see :func:`encode`; reading one builds arrays from bytes and sets the
fields of ``traceforge.*`` dataclasses, so a planted or damaged file is at worst a wrong
table, never code run. As defence in depth a file is read only from a cache directory the
current user owns and no one else may write, opened with ``O_NOFOLLOW``, and only when it
is a regular file the current user owns.
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
                data = bytearray(st.st_size)
                if fh.readinto(data) != st.st_size:
                    return None
            value = decode(data, full)
        except FileNotFoundError:
            return None
        except Exception as e:  # noqa: BLE001 - a damaged file of any kind is a miss
            log.debug("derived table %s unreadable: %s", f, e)
            return None
        if value is None:
            return None
        with contextlib.suppress(OSError):
            os.utime(f)  # last use, for the cache's LRU eviction
        return value

    def put(self, key: str, value: Any) -> None:
        full = f"{self.prefix}|{key}"
        f = self._file(full)
        try:
            data = pieces(full, value)
        except Exception as e:  # noqa: BLE001 - a value the format does not hold is not kept
            log.debug("derived table %s not kept: %s", key, e)
            return
        tmp = ""
        try:
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=f.parent)
            with os.fdopen(fd, "wb") as fh:
                for piece in data:
                    fh.write(piece)
            if f.is_dir() and not f.is_symlink():
                shutil.rmtree(f)  # a directory where a table belongs: heal
            os.replace(tmp, f)
        except OSError as e:
            log.debug("derived table %s not kept: %s", f, e)
            if tmp:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


# -- the file format: data only ----------------------------------------------------------
#
# A derived table is a tree of plain values (None, bool, int, float, str, list, tuple,
# dict), numpy arrays, pandas frames/series/indexes and dataclasses of this package. The
# file is MAGIC, the length of a JSON header, the header (the full key and the tree, every
# node a JSON value or a list tagged by its first item) and the arrays' raw bytes. Reading
# it builds numpy arrays from bytes (never of dtype object) and dataclasses of
# ``traceforge.*`` by setting their fields: nothing in the file names code to run.

MAGIC = b"TFDERIVED2\n"


class Unstorable(TypeError):
    """A value the format does not hold (kept in memory only)."""


class _Writer:
    """The tree of a value; its arrays' bytes as views of the arrays themselves (a
    contiguous column is written to the file from its own memory, never copied)."""

    def __init__(self) -> None:
        self.bufs: list[memoryview] = []

    def array(self, a: Any) -> list[Any]:
        import numpy as np

        if a.dtype.hasobject:
            import pandas as pd

            flat = a.ravel()
            if pd.api.types.infer_dtype(flat, skipna=False) == "string":
                # Names repeat: each distinct string once, and codes (read back as one
                # take, every row of a name sharing one object, as a pickle does).
                codes, uniques = pd.factorize(flat)
                return ["aos", list(a.shape), uniques.tolist(),
                        self.array(codes.astype(np.int32 if len(uniques) < 2**31
                                                else np.int64))]
            return ["ao", list(a.shape), [self.value(x) for x in flat.tolist()]]
        # As bytes whatever the dtype (numpy exports no buffer of datetime64, say).
        raw: Any = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        self.bufs.append(memoryview(raw))
        return ["a", a.dtype.str, list(a.shape), len(self.bufs) - 1]

    def column(self, s: Any) -> list[Any]:
        import numpy as np
        import pandas as pd

        dt = s.dtype
        if isinstance(dt, pd.CategoricalDtype):
            return ["cat", self.array(np.asarray(s.cat.codes)), self.index(dt.categories),
                    bool(dt.ordered)]
        if isinstance(dt, np.dtype):
            return self.array(s.to_numpy())
        if isinstance(dt, pd.StringDtype) and dt.storage == "pyarrow":
            import pyarrow as pa

            arr: Any = pa.array(s)  # the column's own Arrow data: its buffers as they are
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks()
            if arr.offset:
                arr = pa.concat_arrays([arr])
            bufs: list[int | None] = []
            for b in arr.buffers():
                if b is None:
                    bufs.append(None)
                else:
                    self.bufs.append(memoryview(b).cast("B"))
                    bufs.append(len(self.bufs) - 1)
            return ["astr", str(dt), str(arr.type), len(arr), arr.null_count, bufs]
        if isinstance(dt, pd.StringDtype):
            vals = s.to_numpy(dtype=object)
            return ["str", str(dt), [v if isinstance(v, str) else None for v in vals]]
        return ["ext", str(dt), self.value(s.tolist())]

    def index(self, ix: Any) -> list[Any]:
        import pandas as pd

        if isinstance(ix, pd.MultiIndex):
            raise Unstorable("MultiIndex")
        if isinstance(ix, pd.RangeIndex):
            return ["ri", ix.start, ix.stop, ix.step, self.value(ix.name)]
        return ["ix", self.column(ix.to_series(index=None)), self.value(ix.name)]

    def value(self, v: Any) -> Any:  # noqa: C901 - one branch per kind of value
        import dataclasses

        import numpy as np
        import pandas as pd

        from traceforge.errors import TraceforgeError

        if v is None or isinstance(v, (bool, str)):
            return v
        if type(v) is int:
            if -(2**63) <= v < 2**63:
                return v
            return ["big", str(v)]
        if type(v) is float:
            return ["f", v.hex()]
        if isinstance(v, list):
            return ["l", [self.value(x) for x in v]]
        if isinstance(v, tuple) and type(v) is tuple:
            return ["t", [self.value(x) for x in v]]
        if isinstance(v, dict) and type(v) is dict:
            return ["d", [[self.value(k), self.value(x)] for k, x in v.items()]]
        if isinstance(v, np.ndarray):
            return self.array(v)
        if isinstance(v, np.generic):
            return ["s", self.array(np.asarray(v))]
        if isinstance(v, pd.DataFrame):
            if not v.columns.is_unique:
                raise Unstorable("duplicate column names")
            return ["df", self.index(v.columns), self.index(v.index),
                    [self.column(v.iloc[:, i]) for i in range(v.shape[1])],
                    self.value(dict(v.attrs))]
        if isinstance(v, pd.Series):
            return ["se", self.column(v), self.index(v.index), self.value(v.name)]
        if isinstance(v, pd.Index):
            return ["pix", self.index(v)]
        cls = type(v)
        if cls.__module__.startswith("traceforge."):
            if dataclasses.is_dataclass(v):
                return ["dc", cls.__module__, cls.__qualname__,
                        [[f.name, self.value(getattr(v, f.name))]
                         for f in dataclasses.fields(v)]]
            if isinstance(v, TraceforgeError):
                return ["err", cls.__module__, cls.__qualname__, self.value(list(v.args))]
        raise Unstorable(f"{cls.__module__}.{cls.__qualname__}")


class _Reader:
    def __init__(self, bufs: list[memoryview]) -> None:
        self.bufs = bufs

    def array(self, n: list[Any]) -> Any:
        import numpy as np

        if n[0] == "aos":
            uniques = np.empty(len(n[2]), dtype=object)
            uniques[:] = n[2]
            return uniques.take(self.array(n[3])).reshape(n[1])
        if n[0] == "ao":
            out = np.empty(len(n[2]), dtype=object)
            out[:] = [self.value(x) for x in n[2]]
            return out.reshape(n[1])
        dt = np.dtype(n[1])
        if dt.hasobject:
            raise ValueError("object dtype")
        return np.frombuffer(self.bufs[n[3]], dtype=dt).reshape(n[2])

    def column(self, n: list[Any]) -> Any:
        import pandas as pd

        if n[0] == "cat":
            return pd.Categorical.from_codes(self.array(n[1]), categories=self.index(n[2]),
                                             ordered=n[3])
        if n[0] == "astr":
            import pyarrow as pa

            typ = {"string": pa.string(), "large_string": pa.large_string()}[n[2]]
            bufs = [None if b is None else pa.py_buffer(self.bufs[b]) for b in n[5]]
            arr = pa.Array.from_buffers(typ, n[3], bufs, n[4])
            arr.validate(full=True)
            dt = pd.api.types.pandas_dtype(n[1])
            return arr.to_pandas(types_mapper=lambda _: dt).array
        if n[0] in ("str", "ext"):
            vals = n[2] if n[0] == "str" else self.value(n[2])
            return pd.array(vals, dtype=n[1])
        return self.array(n)

    def series(self, n: list[Any], index: Any, name: Any = None) -> Any:
        import pandas as pd

        col = self.column(n)
        # An object array stays object (pandas 3 would otherwise infer its str dtype).
        dtype = object if n[0] in ("aos", "ao") else None
        return pd.Series(col, index=index, name=name, dtype=dtype, copy=False)

    def index(self, n: list[Any]) -> Any:
        import pandas as pd

        if n[0] == "ri":
            return pd.RangeIndex(n[1], n[2], n[3], name=self.value(n[4]))
        col = self.column(n[1])
        dtype = object if n[1][0] in ("aos", "ao") else col.dtype
        return pd.Index(col, name=self.value(n[2]), dtype=dtype, copy=False)

    def value(self, n: Any) -> Any:  # noqa: C901 - one branch per tag
        import dataclasses
        import importlib

        import pandas as pd

        from traceforge.errors import TraceforgeError

        if not isinstance(n, list):
            return n
        tag = n[0]
        if tag == "f":
            return float.fromhex(n[1])
        if tag == "big":
            return int(n[1])
        if tag == "l":
            return [self.value(x) for x in n[1]]
        if tag == "t":
            return tuple(self.value(x) for x in n[1])
        if tag == "d":
            return {self.value(k): self.value(x) for k, x in n[1]}
        if tag in ("a", "aos", "ao"):
            return self.array(n)
        if tag == "s":
            return self.array(n[1])[()]
        if tag == "df":
            cols, idx = self.index(n[1]), self.index(n[2])
            # Joined without consolidating (a copy of every column into 2-D blocks).
            df = (pd.concat([self.series(c, idx, i) for i, c in enumerate(n[3])], axis=1)
                  if n[3] else pd.DataFrame(index=idx))
            df.columns = cols
            df.attrs.update(self.value(n[4]))
            return df
        if tag == "se":
            return self.series(n[1], self.index(n[2]), self.value(n[3]))
        if tag == "pix":
            return self.index(n[1])
        if tag in ("dc", "err"):
            if not n[1].startswith("traceforge."):
                raise ValueError(f"not a traceforge class: {n[1]}")
            cls = importlib.import_module(n[1])
            for part in n[2].split("."):
                cls = getattr(cls, part)
            if tag == "err":
                if not (isinstance(cls, type) and issubclass(cls, TraceforgeError)):
                    raise ValueError(f"not an error class: {n[2]}")
                return cls(*self.value(n[3]))
            if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
                raise ValueError(f"not a dataclass: {n[2]}")
            obj = object.__new__(cls)
            for name, x in n[3]:
                object.__setattr__(obj, name, self.value(x))
            return obj
        raise ValueError(f"unknown tag {tag!r}")


def pieces(full: str, value: Any) -> list[memoryview | bytes]:
    """The pieces of a derived-table file holding ``value`` under the key ``full``, in
    order (:class:`Unstorable` for a value the format does not hold): written one after
    the other, a table's columns go to the file without a copy of the table in memory."""
    import orjson

    w = _Writer()
    tree = w.value(value)
    spans, at = [], 0
    for b in w.bufs:
        spans.append([at, b.nbytes])
        at += -(-b.nbytes // 64) * 64
    try:
        head = orjson.dumps({"key": full, "value": tree, "spans": spans})
    except TypeError as e:
        raise Unstorable(str(e)) from e
    start = -(-(len(MAGIC) + 8 + len(head)) // 64) * 64
    out: list[memoryview | bytes] = [MAGIC + len(head).to_bytes(8, "little") + head]
    out.append(bytes(start - len(out[0])))
    for b in w.bufs:
        out.append(b)
        out.append(bytes(-(-b.nbytes // 64) * 64 - b.nbytes))
    return out


def encode(full: str, value: Any) -> bytes:
    """:func:`pieces` joined: the whole file's bytes."""
    return b"".join(pieces(full, value))


def decode(data: bytearray, full: str) -> Any | None:
    """The value of a derived-table file's bytes when it was stored under the key
    ``full`` (None for another key); ValueError (or KeyError, TypeError) when damaged."""
    import orjson

    view = memoryview(data)
    if bytes(view[:len(MAGIC)]) != MAGIC:
        raise ValueError("not a derived table")
    n = int.from_bytes(view[len(MAGIC):len(MAGIC) + 8], "little")
    head = orjson.loads(view[len(MAGIC) + 8:len(MAGIC) + 8 + n])
    if head["key"] != full:
        return None
    start = -(-(len(MAGIC) + 8 + n) // 64) * 64
    bufs = []
    for off, size in head["spans"]:
        if off < 0 or size < 0 or start + off + size > len(data):
            raise ValueError("truncated")
        bufs.append(view[start + off:start + off + size])
    return _Reader(bufs).value(head["value"])
