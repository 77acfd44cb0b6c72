"""A Chrome trace document as the bytes of an output file, chosen by the file's name:
``.json`` (Chrome/Kineto JSON), ``.json.gz`` (the same, gzip) or ``.pftrace`` /
``.perfetto-trace`` (Perfetto protobuf). ``convert`` and ``annotate`` both write here."""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from traceforge.errors import UsageError

#: Output suffixes and what they write.
OUTPUTS = {".json": "chrome", ".json.gz": "chrome", ".pftrace": "perfetto",
           ".perfetto-trace": "perfetto"}


def output_kind(out: str | Path) -> str:
    """``chrome`` or ``perfetto`` from the name's suffix, or a UsageError listing them."""
    name = Path(out).name.lower()
    for suffix, kind in OUTPUTS.items():
        if name.endswith(suffix):
            return kind
    raise UsageError(f"{out}: unknown output type (use one of {', '.join(OUTPUTS)})")


def write_document(doc: Mapping[str, Any], out: str | Path, f: BinaryIO) -> None:
    """``doc`` encoded as the file ``out`` names it, written into the open file ``f`` a
    batch at a time (never the whole encoded document in memory)."""
    if output_kind(out) == "perfetto":
        from traceforge.render.perfetto import write_pftrace

        write_pftrace(doc, f.write)
        return
    from traceforge.render.chrome_json import stream_chrome

    if Path(out).name.lower().endswith(".gz"):
        with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=6) as z:
            stream_chrome(doc, z.write)
        return
    stream_chrome(doc, f.write)


def document_bytes(doc: Mapping[str, Any], out: str | Path) -> bytes:
    """``doc`` encoded as the file ``out`` names it."""
    if output_kind(out) == "perfetto":
        from traceforge.render.perfetto import chrome_to_pftrace

        return chrome_to_pftrace(doc)
    from traceforge.render.chrome_json import dumps_chrome

    data = dumps_chrome(doc)
    if Path(out).name.lower().endswith(".gz"):
        data = gzip.compress(data, compresslevel=6)
    return data
