"""Decode a large Kineto file in chunks, one per CPU core, in forked worker processes.

msgspec decodes on one core, and the reader's column passes hold the GIL, so a 300 MB
trace takes about 1.5 s on one core whatever the machine has. The events of the
``traceEvents`` array are independent, so the array is cut into runs of whole events and
each run is decoded (and its columns built, :mod:`traceforge.formats.kineto_columns`) in
a process of its own; the parent joins the runs' columns in file order.

Where to cut needs no parser. A cut goes at a ``},`` followed (after whitespace) by
``{``; every chunk is then decoded as a JSON text of its own (the last one with the
document's tail), and a cut inside a string or a nested object leaves some chunk
unbalanced, which msgspec rejects. Any such failure, a worker that dies, or a file that
does not fit the typed schema makes the reader decode the file again in one piece, so
the result never depends on whether chunks were used.

Workers are forked (:mod:`traceforge.forks`), only from the main thread of a process that
is not itself a worker (a process pool's or Dask's), where extra processes would
oversubscribe. A command started on a file not yet cached has them forked before it
imports pandas and its verb's modules (:mod:`traceforge.formats.prefetch`), with the same
cut: the reader then takes the chunks they have not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import msgspec

from traceforge.forks import can_fork, cores
from traceforge.formats.kineto_schema import SCHEMAS, Doc

#: Fewer bytes per worker than this and a fork costs about what it saves (on 16 cores,
#: the 288 MB benchmark trace reads in the same time with 16 MB and 8 MB chunks).
MIN_CHUNK_BYTES = 16 << 20
#: Most workers one file is cut for; past this the parent's join dominates.
MAX_WORKERS = 16
#: Bytes decoded by one msgspec call. The decoded structs (~100 bytes per event, however
#: small the event is in the file) live only until the chunk's columns are built, so
#: this bounds them: 10M empty ``{}`` events (30 MB) once held 1.4 GB of structs at once.
#: A worker decodes its chunks one after another, each the next one no worker has taken
#: (:func:`traceforge.forks.taking_map`: all finish together).
CHUNK_BYTES = 2 << 20
_WS = b" \t\r\n"


class ChunkError(Exception):
    """A chunk could not be decoded as cut: decode the file in one piece instead."""


def workers() -> int:
    """How many processes may decode one file: ``TRACEFORGE_PARSE_WORKERS`` or the cores
    this process may run on; 1 where forking is unavailable or unwise."""
    if not can_fork():
        return 1
    env = os.environ.get("TRACEFORGE_PARSE_WORKERS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            return 1
    return min(MAX_WORKERS, cores())


def _skip_ws(raw: Any, i: int) -> int:
    while i < len(raw) and raw[i] in _WS:
        i += 1
    return i


@dataclass(frozen=True)
class Plan:
    """Where a file's events array is cut: it starts at ``start``; ``cuts`` are the
    commas between chunks; ``head`` holds the document fields before the array (None
    for a bare list)."""

    start: int
    cuts: list[int]
    head: Doc | None
    workers: int = 1

    @property
    def chunks(self) -> int:
        return len(self.cuts) + 1


def _array_start(raw: Any) -> tuple[int, Doc | None] | None:
    """Where the events array's content starts, and the document fields before it (None
    for a bare list); None when the array cannot be found without a parser."""
    i = _skip_ws(raw, 0)
    if i >= len(raw):
        return None
    if raw[i] == ord("["):
        return i + 1, None
    if raw[i] != ord("{"):
        return None
    k = raw.find(b'"traceEvents"')
    if k < 0 or k > len(raw) // 4:
        return None  # no events key, or most of the file comes before it
    j = _skip_ws(raw, k + len(b'"traceEvents"'))
    if j >= len(raw) or raw[j] != ord(":"):
        return None
    j = _skip_ws(raw, j + 1)
    if j >= len(raw) or raw[j] != ord("["):
        return None
    try:
        # The head, closed right after the array opens, is a valid document only where
        # the key sits at its top level, not inside a string or a nested value.
        head = msgspec.json.decode(bytes(raw[:j + 1]) + b"]}", type=Doc)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None
    return j + 1, head


def forks_for(size: int, n: int) -> int:
    """How many of ``n`` workers a file of ``size`` bytes is decoded by: at least
    MIN_CHUNK_BYTES each."""
    return max(1, min(n, size // max(MIN_CHUNK_BYTES, 1)))


def plan(raw: Any, n: int) -> Plan | None:
    """How to cut ``raw`` for at most ``n`` workers of at least MIN_CHUNK_BYTES each, in
    chunks of about CHUNK_BYTES; None: decode it in one piece."""
    forks = forks_for(len(raw), n)
    n = max(forks, -(-len(raw) // max(CHUNK_BYTES, 1)))
    if n < 2:
        return None
    found = _array_start(raw)
    if found is None:
        return None
    start, head = found
    cuts: list[int] = []
    step = (len(raw) - start) // n
    at = start
    for k in range(1, n):
        at = max(at, start + k * step)
        while (c := raw.find(b"},", at)) >= 0:
            at = c + 2
            j = _skip_ws(raw, at)
            if j < len(raw) and raw[j] == ord("{"):
                cuts.append(c + 1)
                break
        if c < 0:
            break
    return Plan(start, cuts, head, forks) if cuts else None


_PREFIX = b'{"traceEvents":['


def decode(raw: Any, plan: Plan, i: int) -> tuple[list[Any], Doc | None]:
    """Chunk ``i``'s events, and for the last chunk of a document the fields after the
    events array.

    Every chunk but the last is decoded as a list of its own: where the events array
    ended inside it, the text after the list would make it invalid JSON, so a cut past
    the end of the array (in a later list of objects) cannot pass unnoticed. The last
    chunk is decoded as a document: the events with the fields after them.

    In a writable buffer (a copy-on-write map, private to this process) the brackets go
    in place of the commas around the chunk, and the last chunk's document opening over
    the bytes before it, which other chunks own but this process no longer needs: no
    chunk is copied. A read-only buffer (a gunzipped file) is copied chunk by chunk.
    """
    last = len(plan.cuts)
    begin = plan.start - 1 if i == 0 else plan.cuts[i - 1]  # "[" or the comma before
    end = len(raw) if i == last else plan.cuts[i] + 1  # through the comma after
    as_doc = i == last and plan.head is not None
    mv = memoryview(raw)
    text: Any = None
    try:
        if not mv.readonly:
            if as_doc:
                begin -= len(_PREFIX) - 1
                raw[begin:begin + len(_PREFIX)] = _PREFIX
            else:
                raw[begin] = ord("[")
            if i < last:
                raw[end - 1] = ord("]")
            text = mv[begin:end]
        else:
            with mv[begin + 1:end - (i < last)] as body:
                text = b"".join([_PREFIX if as_doc else b"[", body, b"]" if i < last else b""])
        return _decode_text(text, as_doc)
    finally:
        if isinstance(text, memoryview):
            text.release()
        mv.release()


def _decode_text(text: Any, as_doc: bool) -> tuple[list[Any], Doc | None]:
    for list_type, doc_type in SCHEMAS:
        try:
            if as_doc:
                doc = msgspec.json.decode(text, type=doc_type)
                if doc.traceEvents is None:
                    raise ChunkError("no events")
                events = doc.traceEvents
                doc.traceEvents = []  # the fields only: the events go their own way
                return events, doc
            return msgspec.json.decode(text, type=list_type), None
        except msgspec.ValidationError:
            continue
        except (msgspec.DecodeError, UnicodeDecodeError) as e:
            raise ChunkError(str(e)) from None
    raise ChunkError("does not fit the typed schema")


def document(plan: Plan, tail: Doc | None) -> Doc:
    """The document fields of the file: those before its events array and after it."""
    if plan.head is None or tail is None:
        return Doc()  # a bare list
    fields = {f: getattr(tail, f) for f in tail.__struct_fields__
              if f != "traceEvents" and getattr(tail, f) is not None}
    return msgspec.structs.replace(plan.head, traceEvents=[], **fields)
