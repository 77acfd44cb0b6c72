"""Reading a trace file's bytes: plain or gzip, with one-line errors."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from traceforge.errors import TraceFormatError


def read_bytes(path: Path) -> bytes:
    """The whole content of ``path``, gunzipped when it is gzip."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceFormatError(path, f"cannot read ({e.strerror})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceFormatError(path, f"truncated or corrupt gzip ({e})") from None
    return raw


def read_head(path: Path, n: int = 4096) -> bytes:
    """First ``n`` bytes of the file's content, gunzipped when the file is gzip."""
    with path.open("rb") as f:
        head = f.read(n)
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as g:
                return g.read(n)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceFormatError(path, f"truncated or corrupt gzip ({e})") from None
    return head
