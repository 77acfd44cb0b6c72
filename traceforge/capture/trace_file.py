"""Writing what a capture made: the gzipped Kineto trace with a top-level ``traceforge`` key,
and the run summary JSON beside it."""

from __future__ import annotations

import gzip
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from traceforge.errors import CaptureError

#: A kernel event's name where Kineto writes it, right after its category.
_KERNEL_NAME = re.compile(rb'"cat"\s*:\s*"kernel"\s*,\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


def kernel_names(data: bytes) -> dict[str, int]:
    """Kernel names and launch counts of a Kineto JSON document (its raw bytes): what the
    capture table classifies (attention backends) without parsing the document."""
    out: dict[str, int] = {}
    for m in _KERNEL_NAME.finditer(data):
        try:
            name = json.loads(b'"' + m.group(1) + b'"')
        except ValueError:
            continue
        out[name] = out.get(name, 0) + 1
    return out


def check_writable(folder: Path) -> None:
    """Create ``folder`` and prove a file can be written there, before the target runs."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".traceforge-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        why = e.strerror or str(e)
        raise CaptureError(f"{folder}: cannot write (output directory is not writable: {why})"
                           ) from None


def embed_metadata(raw: Path, dest: Path, meta: dict[str, Any]) -> dict[str, int]:
    """Gzip Kineto JSON ``raw`` to ``dest`` with ``meta`` as its top-level ``traceforge`` key.

    The key is spliced in before the closing brace rather than by parsing the document, so a
    trace of hundreds of MB is not held as Python objects. Returns the kernel names and
    their launch counts (:func:`kernel_names`).
    """
    data = raw.read_bytes().rstrip()
    if not data.endswith(b"}"):
        raise CaptureError(f"{raw}: the profiler wrote an incomplete trace")
    kernels = kernel_names(data)
    block = json.dumps(meta, default=str, separators=(",", ":")).encode()
    body = data[:-1].rstrip()
    sep = b"," if not body.endswith(b"{") else b""
    # A temporary name, renamed when complete: a reader never sees half a trace, and a
    # failed write leaves an earlier trace of the same name as it was.
    tmp = dest.with_name(f".{dest.name}.tmp")
    try:
        with gzip.open(tmp, "wb", compresslevel=6) as f:
            f.write(body + sep + b'\n  "traceforge": ' + block + b"\n}\n")
        tmp.replace(dest)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise CaptureError(f"{dest}: cannot write ({e.strerror or e})") from None
    return kernels


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """The run summary JSON (the same facts as the trace's ``traceforge`` key, and more)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(summary, indent=1, default=str) + "\n")
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise CaptureError(f"{path}: cannot write ({e.strerror or e})") from None


def read_summary(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CaptureError(f"{path}: cannot read run summary ({e})") from None
    return data
