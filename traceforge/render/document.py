"""A Chrome trace document as the bytes of an output file, chosen by the file's name:
``.json`` (Chrome/Kineto JSON), ``.json.gz`` (the same, gzip) or ``.pftrace`` /
``.perfetto-trace`` (Perfetto protobuf). ``convert`` and ``annotate`` both write here.

Below :mod:`traceforge.render.chrome_json` (which builds the document from a Trace) and
beside :mod:`traceforge.render.perfetto` (which re-encodes one): it imports neither back."""

from __future__ import annotations

import gzip
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, cast

from traceforge.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

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


#: Below this many rows per core a Source's events are encoded here (a fork costs more).
PARALLEL_ROWS = 1 << 17


class Flows(Protocol):
    """Flow events kept as columns (``flow_table.FlowTable``), made dicts a batch at a time."""

    def __len__(self) -> int: ...

    def dicts(self, lo: int = 0, hi: int | None = None) -> list[dict[str, Any]]: ...


class Source(Protocol):
    """A document built a batch of events at a time (``chrome_json.ChromeSource``): the keys
    before ``traceEvents``, the events (``n`` rows' events built by :meth:`events`, then
    ``flows``, then ``extra``), the keys after."""

    head: dict[str, Any]
    tail: dict[str, Any]
    n: int
    extra: list[dict[str, Any]]

    @property
    def flows(self) -> Flows: ...

    def events(self, rows: np.ndarray, json_values: bool = False) -> list[dict[str, Any]]: ...


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
        sink(b"{" + b"".join(_json(k) + b":" + _json(v, opt) + b","
                             for k, v in doc.head.items()) + b'"traceEvents":[')
        _stream_events(doc, _FirstComma(sink))
        sink(b"]" + b"".join(b"," + _json(k) + b":" + _json(v, opt)
                             for k, v in doc.tail.items()) + b"}")
        return
    events = doc.get("traceEvents")
    if not isinstance(events, list) or len(events) <= BATCH:
        sink(_json(doc, opt))
        return
    head = b"{"
    for n, (key, value) in enumerate(doc.items()):
        head += (b"," if n else b"") + _json(key) + b":"
        if key != "traceEvents":
            head += _json(value, opt)
            continue
        sink(head + b"[")
        for i in range(0, len(events), BATCH):
            sink((b"," if i else b"") + _json(events[i:i + BATCH], opt)[1:-1])
        head = b"]"
    sink(head + b"}")


class _FirstComma:
    """A sink for events each written as ``,`` + its JSON: the first comma is dropped."""

    def __init__(self, sink: Callable[[bytes], Any]) -> None:
        self.sink, self.first = sink, True

    def __call__(self, data: bytes) -> None:
        if self.first and data:
            data, self.first = data[1:], False
        self.sink(data)


def _stream_events(doc: Source, put: Callable[[bytes], Any]) -> None:
    """``doc``'s events as ``,``-led JSON into ``put``, a batch at a time: the rows' batches
    shared out among the cores (:func:`traceforge.render.shared_output.write_shared`: this process
    writes from the front while forked children take batches from the back), then
    ``flows`` and ``extra``."""
    import numpy as np
    import orjson

    from traceforge.formats.source import paused_gc
    from traceforge.render.shared_output import helpers_for, write_shared

    opt = orjson.OPT_SERIALIZE_NUMPY

    def rows(k: int, out: Callable[[bytes], Any]) -> None:
        with paused_gc():  # (a batch's dicts are gone before it is back)
            batch = doc.events(np.arange(k * BATCH, min(k * BATCH + BATCH, doc.n)))
            data = b"," + _json(batch, opt)[1:-1] if batch else b""
            del batch
        if data:
            out(data)

    def child(k: int, f: BinaryIO) -> None:
        with open(f.fileno(), "wb", closefd=False) as out:
            rows(k, out.write)

    write_shared(-(-doc.n // BATCH), helpers_for(doc.n, PARALLEL_ROWS),
                 lambda k: rows(k, put), child, put)
    for a in range(0, len(doc.flows), BATCH):
        put(b"," + _json(doc.flows.dicts(a, a + BATCH), opt)[1:-1])
    for a in range(0, len(doc.extra), BATCH):
        if doc.extra[a:a + BATCH]:
            put(b"," + _json(doc.extra[a:a + BATCH], opt)[1:-1])


def write_document(doc: Doc, out: str | Path, f: BinaryIO) -> None:
    """``doc`` encoded as the file ``out`` names it, written into the open file ``f`` a
    batch at a time (never the whole encoded document in memory)."""
    if output_kind(out) == "perfetto":
        from traceforge.render.perfetto import write_pftrace
        from traceforge.render.pftrace_chunks import Rows

        write_pftrace(doc if isinstance(doc, Mapping) else cast(Rows, doc), f.write, f)
        return
    if Path(out).name.lower().endswith(".gz"):
        from traceforge.render.gzip_output import GzipOutput

        with GzipOutput(f) as z:
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
        data = gzip.compress(data, compresslevel=6, mtime=0)
    return data


def _json(obj: Any, opt: int = 0) -> bytes:
    """``orjson.dumps(obj, option=opt)``; where orjson refuses an integer beyond 64 bits
    (JSON has no such limit and a trace may hold one), msgspec's encoding, which writes
    it exactly: the same JSON values (a float's exponent may lose its ``+``)."""
    import orjson

    try:
        return orjson.dumps(obj, option=opt)
    except TypeError as e:
        if "64-bit" not in str(e):
            raise
    import msgspec

    return msgspec.json.encode(obj, enc_hook=_plain)


def _plain(o: Any) -> Any:
    """A numpy value as the Python value orjson writes for it."""
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"cannot write {type(o).__name__} as JSON")
