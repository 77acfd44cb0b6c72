"""A Chrome trace document as the bytes of an output file, chosen by the file's name:
``.json`` (Chrome/Kineto JSON), ``.json.gz`` (the same, gzip) or ``.pftrace`` /
``.perfetto-trace`` (Perfetto protobuf). ``convert`` and ``annotate`` both write here.

Below :mod:`traceforge.render.chrome_json` (which builds the document from a Trace) and
beside :mod:`traceforge.render.perfetto` (which re-encodes one): it imports neither back."""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def dumps_chrome(doc: Mapping[str, Any]) -> bytes:
    """Serialize a Chrome trace document to JSON bytes."""
    import orjson

    return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)


def document_bytes(doc: Mapping[str, Any], out: str | Path) -> bytes:
    """``doc`` encoded as the file ``out`` names it."""
    if output_kind(out) == "perfetto":
        from traceforge.render.perfetto import chrome_to_pftrace

        return chrome_to_pftrace(doc)
    data = dumps_chrome(doc)
    if Path(out).name.lower().endswith(".gz"):
        data = gzip.compress(data, compresslevel=6)
    return data
