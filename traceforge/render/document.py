"""A Chrome trace document as the bytes of an output file, chosen by the file's name:
``.json`` (Chrome/Kineto JSON), ``.json.gz`` (the same, gzip) or ``.pftrace`` /
``.perfetto-trace`` (Perfetto protobuf). ``convert`` and ``annotate`` both write here.

Below :mod:`traceforge.render.chrome_json` (which builds the document from a Trace) and
beside :mod:`traceforge.render.perfetto` (which re-encodes one): it imports neither back."""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Protocol, cast

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


#: Events serialized per orjson call by :func:`dumps_chrome`.
BATCH = 16_384


class Source(Protocol):
    """A document built a batch of events at a time (``chrome_json.ChromeSource``): the keys
    before ``traceEvents``, the events, the keys after."""

    head: dict[str, Any]
    tail: dict[str, Any]

    def batches(self, size: int) -> Iterable[list[dict[str, Any]]]: ...


Doc = Mapping[str, Any] | Source


def dumps_chrome(doc: Doc) -> bytes:
    """Serialize a Chrome trace document to JSON bytes (what ``orjson.dumps(doc)`` writes)."""
    chunks: list[bytes] = []
    stream_chrome(doc, chunks.append)
    return b"".join(chunks)


def stream_chrome(doc: Doc, sink: Callable[[bytes], Any]) -> None:
    """Write ``doc`` as JSON into ``sink`` (a file's ``write``): the bytes ``orjson.dumps``
    writes for the whole document, with ``traceEvents`` encoded :data:`BATCH` events at a
    time, so the JSON is never whole in memory (nor, for a :class:`Source`, its events)."""
    import orjson

    opt = orjson.OPT_SERIALIZE_NUMPY
    if not isinstance(doc, Mapping):
        dumps = orjson.dumps
        sink(b"{" + b"".join(dumps(k) + b":" + dumps(v, option=opt) + b","
                             for k, v in doc.head.items()) + b'"traceEvents":[')
        sep = b""
        for batch in doc.batches(BATCH):
            if batch:
                sink(sep + dumps(batch, option=opt)[1:-1])
                sep = b","
        sink(b"]" + b"".join(b"," + dumps(k) + b":" + dumps(v, option=opt)
                             for k, v in doc.tail.items()) + b"}")
        return
    events = doc.get("traceEvents")
    if not isinstance(events, list) or len(events) <= BATCH:
        sink(orjson.dumps(doc, option=opt))
        return
    head = b"{"
    for n, (key, value) in enumerate(doc.items()):
        head += (b"," if n else b"") + orjson.dumps(key) + b":"
        if key != "traceEvents":
            head += orjson.dumps(value, option=opt)
            continue
        sink(head + b"[")
        for i in range(0, len(events), BATCH):
            sink((b"," if i else b"") + orjson.dumps(events[i:i + BATCH], option=opt)[1:-1])
        head = b"]"
    sink(head + b"}")


def write_document(doc: Doc, out: str | Path, f: BinaryIO) -> None:
    """``doc`` encoded as the file ``out`` names it, written into the open file ``f`` a
    batch at a time (never the whole encoded document in memory)."""
    if output_kind(out) == "perfetto":
        from traceforge.render.perfetto import write_pftrace
        from traceforge.render.pftrace_chunks import Rows

        write_pftrace(doc if isinstance(doc, Mapping) else cast(Rows, doc), f.write)
        return
    if Path(out).name.lower().endswith(".gz"):
        with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=6) as z:
            stream_chrome(doc, z.write)
        return
    stream_chrome(doc, f.write)


def document_bytes(doc: Doc, out: str | Path) -> bytes:
    """``doc`` encoded as the file ``out`` names it."""
    if output_kind(out) == "perfetto":
        from traceforge.render.perfetto import chrome_to_pftrace
        from traceforge.render.pftrace_chunks import Rows

        return chrome_to_pftrace(doc if isinstance(doc, Mapping) else cast(Rows, doc))
    data = dumps_chrome(doc)
    if Path(out).name.lower().endswith(".gz"):
        data = gzip.compress(data, compresslevel=6)
    return data
