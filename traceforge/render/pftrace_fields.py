"""Protobuf fields as the Perfetto writer encodes them by hand: a field's key, a
length-delimited field, and a DebugAnnotation (TrackEvent field 4): its frame, its value
field (one value, or a column of ints at once). :mod:`traceforge.render.pftrace_packets`
builds packets from them."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from traceforge.render.pftrace_varints import (
    U64_MASK,
    lengths,
    prefix_table,
    prefixed,
    varint,
    varint_matrix,
    varint_pieces,
)
from traceforge.render.slice_table import objects


def field_key(field: int, wire: int) -> bytes:
    """A field's key: its number and wire type."""
    return varint(field << 3 | wire)


def length_field(field: int, data: bytes) -> bytes:
    """A length-delimited field holding ``data``."""
    return field_key(field, 2) + varint(len(data)) + data


#: A TrackEvent's ``debug_annotations`` key (each DebugAnnotation framed after it), and
#: that key with each length 0..16383 after it (:func:`prefixed`).
ANN = field_key(4, 2)
ANN_TABLE = prefix_table(ANN)
DOUBLE = struct.Struct("<d").pack
DOUBLE_FIELD = b"\x29"  # DebugAnnotation.double_value (5), fixed64


def int_heads(v: np.ndarray, key_len: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The annotations of int args up to their keys (``key_len`` bytes each): framing and
    value field, as an object array, and each whole annotation's length."""
    m, vl = varint_matrix(v)
    body = 1 + vl + key_len
    if not len(v) or int(body.max()) >= 0x80:  # a long key: a longer frame
        head = prefixed(ANN_TABLE, ANN, body)
        value = list(map(b"\x20".__add__, varint_pieces(v)[0]))
        return objects(list(map(bytes.__add__, head, value))), lengths(head) + body
    fixed = np.empty((len(v), 13), dtype=np.uint8)
    fixed[:, 0] = ANN[0]
    fixed[:, 1] = body
    fixed[:, 2] = 0x20
    fixed[:, 3:] = m
    out = fixed.view("S13").reshape(-1).astype(object)
    zero = np.flatnonzero(v == 0)
    if len(zero):  # (its varint b"\x00" was cut off as padding)
        size, at = np.unique(body[zero], return_inverse=True)
        out[zero] = objects([ANN + bytes((b,)) + b"\x20\x00" for b in size.tolist()])[at]
    return out, 3 + vl + key_len


def annotation_value(v: Any) -> bytes:
    """A DebugAnnotation's value field (its ``name``, field 10, follows it)."""
    if v is True or v is False:
        return b"\x10\x01" if v else b"\x10\x00"
    t = type(v)
    if t is int and -(2**63) <= v < 2**63:
        return b"\x20" + varint(v & U64_MASK)
    if t is float:
        return DOUBLE_FIELD + DOUBLE(v)
    if t is str:
        return length_field(6, v.encode())
    if isinstance(v, int) and -(2**63) <= v < 2**63:
        return b"\x20" + varint(v & U64_MASK)
    if isinstance(v, float):
        return DOUBLE_FIELD + DOUBLE(v)
    if isinstance(v, str):
        return length_field(6, v.encode())
    return length_field(9, _JSON(v).encode())


#: ``json.dumps(v, default=str)``, its encoder made once.
_JSON = json.JSONEncoder(default=str).encode
