"""NVTX extended payloads of an nsys SQLite export, as one JSON object per range.

Libraries attach typed payloads to their NVTX ranges: NCCL's ``ncclAllReduce`` carries
``{"NCCL communicator ID", "Message size [bytes]", "Reduction operation"}``, its
``ncclCommInitRank*`` ranges ``"No. of ranks"`` and ``"Rank"`` (NCCL's
``src/include/nvtx_payload_schemas.h``). nsys records them, but ``nsys export --type
sqlite`` writes them only when asked:

* ``--include-blobs=true``: ``NVTX_EVENTS.binaryData``, the raw payload, laid out by the
  schemas in ``NVTX_PAYLOAD_SCHEMAS`` / ``NVTX_PAYLOAD_SCHEMA_ENTRIES`` (entry name,
  NVTX type, byte offset) and the enums in ``NVTX_PAYLOAD_ENUMS`` /
  ``NVTX_PAYLOAD_ENUM_ENTRIES``;
* with ``--include-json=true`` as well: ``NVTX_EVENTS.jsonText`` (or ``jsonTextId`` into
  ``StringIds``), nsys's own decoding as a JSON object.

Without either flag the schemas are exported and every event's payload is NULL (seen with
nsys 2025.3 on NCCL 2.27: see ``fixtures/nccl_nsys_h100x2``). :func:`payloads` prefers
nsys's JSON and decodes the blob otherwise. The blob (checked against nsys's JSON on every
range of that fixture) is a little-endian header, ``u64 count`` then per payload ``u64
schemaId, u64 size, u64 offset`` (from the blob's start), then the payloads' bytes; a
schema entry's offset is NULL for 0. Anything that does not fit (a short blob, an unknown
schema or type, an oversized count) leaves that range's payload out: a payload never
stops a trace from loading.
"""

from __future__ import annotations

import json
import sqlite3
import struct
from typing import Any

import numpy as np
import pandas as pd

from traceforge.formats import sqlite_db

#: struct format of each NVTX_PAYLOAD_ENTRY_TYPE_* (nvToolsExtPayload.h) on LP64 Linux.
_TYPES: dict[int, str] = {
    1: "b", 2: "B", 3: "h", 4: "H", 5: "i", 6: "I", 7: "q", 8: "Q", 9: "q", 10: "Q",
    11: "b", 12: "B", 13: "h", 14: "H", 15: "i", 16: "I", 17: "q", 18: "Q",
    19: "f", 20: "d", 22: "Q", 23: "Q",
}
_ENUM_FORMATS = {1: "B", 2: "H", 4: "I", 8: "Q"}
#: Payloads larger than these are not read (a hostile export cannot make work of them).
MAX_BLOB = 1 << 16
MAX_JSON = 1 << 16
_MAX_PAYLOADS = 16
_HEAD = struct.Struct("<QQQ")

Schema = list[tuple[str, str, int, dict[int, str] | None]]


def _schemas(conn: sqlite3.Connection) -> dict[int, Schema]:
    """schemaId -> [(entry name, struct format, offset, enum names or None)]."""
    have = set(sqlite_db.columns(conn, "NVTX_PAYLOAD_SCHEMA_ENTRIES"))
    if not {"schemaId", "idx", "type", "name", "offset"} <= have:
        return {}
    enums: dict[int, tuple[str, dict[int, str]]] = {}
    if {"schemaId", "size"} <= set(sqlite_db.columns(conn, "NVTX_PAYLOAD_ENUMS")):
        for sid, size in conn.execute("SELECT schemaId, size FROM NVTX_PAYLOAD_ENUMS"):
            if isinstance(sid, int) and size in _ENUM_FORMATS:
                enums[sid] = (_ENUM_FORMATS[size], {})
        if {"schemaId", "name", "value"} <= set(
                sqlite_db.columns(conn, "NVTX_PAYLOAD_ENUM_ENTRIES")):
            for sid, name, value in conn.execute(
                    "SELECT schemaId, name, value FROM NVTX_PAYLOAD_ENUM_ENTRIES"):
                if sid in enums and isinstance(name, str):
                    enums[sid][1][int(value) if isinstance(value, int) else 0] = name
    out: dict[int, Schema] = {}
    for sid, _idx, typ, name, off in conn.execute(
            'SELECT schemaId, idx, "type", name, "offset" FROM NVTX_PAYLOAD_SCHEMA_ENTRIES '
            "ORDER BY schemaId, idx"):
        if not isinstance(sid, int) or not isinstance(name, str):
            continue
        fmt = _TYPES.get(typ) if isinstance(typ, int) else None
        names: dict[int, str] | None = None
        if fmt is None and typ in enums:
            fmt, names = enums[typ]
        if fmt is None:
            continue
        out.setdefault(sid, []).append((name, fmt, off if isinstance(off, int) else 0, names))
    return out


def decode_blob(blob: Any, schemas: dict[int, Schema]) -> dict[str, Any] | None:
    """The named fields of one ``binaryData`` blob, or None when it does not decode."""
    if not isinstance(blob, (bytes, bytearray, memoryview)) or len(blob) > MAX_BLOB:
        return None
    b = bytes(blob)
    if len(b) < 8:
        return None
    (count,) = struct.unpack_from("<Q", b, 0)
    if not 1 <= count <= _MAX_PAYLOADS or len(b) < 8 + _HEAD.size * count:
        return None
    fields: dict[str, Any] = {}
    for i in range(count):
        sid, size, start = _HEAD.unpack_from(b, 8 + _HEAD.size * i)
        schema = schemas.get(sid)
        if schema is None or start + size > len(b):
            continue
        for name, fmt, off, names in schema:
            width = struct.calcsize(fmt)
            if off < 0 or off + width > size:
                continue
            (v,) = struct.unpack_from("<" + fmt, b, start + off)
            fields[name] = names.get(v, v) if names is not None else v
    return fields or None


def json_object(text: Any) -> dict[str, Any] | None:
    if not isinstance(text, str) or not text.startswith("{") or len(text) > MAX_JSON:
        return None
    try:
        d = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return d if isinstance(d, dict) else None


def select_columns(have: list[str]) -> str:
    """The SELECT list (after a comma) of the payload columns an ``NVTX_EVENTS n`` has."""
    parts = []
    if "jsonText" in have:
        parts.append("n.jsonText AS payload_json")
    if "jsonTextId" in have:
        parts.append("(SELECT value FROM StringIds WHERE id = n.jsonTextId) "
                     "AS payload_json_id")
    if "binaryData" in have:
        parts.append("n.binaryData AS payload_blob")
    return "".join(", " + p for p in parts)


def raw_columns(df: pd.DataFrame) -> list[str]:
    """The columns :func:`select_columns` added to ``df``."""
    return [c for c in ("payload_json", "payload_json_id", "payload_blob") if c in df.columns]


def payloads(conn: sqlite3.Connection, df: pd.DataFrame) -> pd.Series:
    """Per row of an NVTX frame read with :func:`select_columns`: its payload as a JSON
    object string, or None (drop :func:`raw_columns` from ``df`` afterwards)."""
    out: list[str | None] = [None] * len(df)
    cols = raw_columns(df)
    if cols:
        schemas: dict[int, Schema] | None = None
        some = df[cols].notna().any(axis=1).to_numpy()
        raw = df.loc[some, cols]
        for i, vals in zip(np.flatnonzero(some).tolist(),
                           raw.itertuples(index=False, name=None), strict=True):
            row = dict(zip(cols, vals, strict=True))
            d = json_object(row.get("payload_json")) or json_object(row.get("payload_json_id"))
            if d is None and row.get("payload_blob") is not None:
                if schemas is None:
                    schemas = _schemas(conn)
                d = decode_blob(row["payload_blob"], schemas)
            if d:
                out[i] = json.dumps(d, separators=(",", ":"))
    return pd.Series(out, index=df.index, dtype=object)
