"""The varints and byte pieces of the hand-encoded protobuf (:mod:`traceforge.render.
pftrace_packets`), one at a time and a column at a time: a varint from a table or a
numpy array of many, the lengths of byte pieces, a prefix and a varint from a table, and
the ints among JSON texts."""

from __future__ import annotations

import numpy as np

#: Ints are written mod 2**64 (a negative int64 as its 10-byte varint).
U64_MASK = 2**64 - 1


def _varint(n: int) -> bytes:
    """The varint of a non-negative ``n``."""
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    if n < 0x200000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14))
    if n < 0x10000000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14 & 0x7F | 0x80, n >> 21))
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


_SMALL = [bytes((i,)) for i in range(0x80)]
VARINT_TABLE = [_varint(i) for i in range(0x4000)]


def varint(n: int) -> bytes:
    """:func:`_varint` of a non-negative ``n``, from a table below 16384."""
    return VARINT_TABLE[n] if n < 0x4000 else _varint(n)


def varint_pieces(ns: np.ndarray) -> tuple[list[bytes], np.ndarray]:
    """The varints of int64 values taken mod 2**64 (``_varint(v & U64_MASK)`` of each),
    and their lengths."""
    m, length = varint_matrix(ns)
    # Each row as 10-byte strings without their trailing NULs: a varint's last byte is
    # non-zero (its top 7 bits) but for the value 0, the varint b"\x00".
    out: list[bytes] = m.view("S10").reshape(-1).tolist()
    for i in np.flatnonzero(m[:, 0] == 0).tolist() if len(m) else []:
        out[i] = b"\x00"
    return out, length


def varint_matrix(ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints of int64 values taken mod 2**64, one per row of a (n, 10) uint8 array
    (NUL after its end), and their lengths."""
    rest = ns.astype(np.uint64)
    m = np.zeros((len(rest), 10), dtype=np.uint8)
    length = np.ones(len(rest), dtype=np.int64)
    for j in range(10):
        m[:, j] = (rest & np.uint64(0x7F)).astype(np.uint8)
        rest = rest >> np.uint64(7)
        more = rest != 0
        if not more.any():  # (the rest of every row stays NUL)
            break
        m[more, j] |= 0x80
        length += more
    return m, length


def varint_lengths(ns: np.ndarray) -> np.ndarray:
    """The length of the varint of each of ``ns`` (non-negative int64)."""
    out = np.ones(len(ns), dtype=np.int64)
    for k in range(1, 10):
        big = ns >= (1 << (7 * k))
        if not big.any():
            break
        out += big
    return out


def lengths(items: list[bytes] | np.ndarray) -> np.ndarray:
    """``len`` of each item, as int64."""
    return np.fromiter(map(len, items), dtype=np.int64, count=len(items))


def prefixed(table: np.ndarray, prefix: bytes, n: np.ndarray, suffix: bytes = b""
             ) -> list[bytes]:
    """``prefix + varint(v) + suffix`` for each of ``n`` (non-negative), from ``table``
    (an object array of them for 0..16383, :func:`prefix_table`) where it holds them."""
    if not len(n) or int(n.max()) < len(table):
        out: list[bytes] = table[n].tolist()
        return out
    return [prefix + varint(v) + suffix for v in n.tolist()]


def prefix_table(prefix: bytes, suffix: bytes = b"") -> np.ndarray:
    """``prefix + varint(v) + suffix`` for v in 0..16383, as an object array (for
    :func:`prefixed`)."""
    return np.fromiter([prefix + v + suffix for v in VARINT_TABLE], dtype=object,
                       count=0x4000)


def int_texts(texts: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Which of ``texts`` (JSON texts, an object array) are ints of at most 18 characters,
    and their values (int64): (positions, values), or None where none is."""
    size = lengths(texts)
    cand = np.flatnonzero((size >= 1) & (size <= 18))
    if not len(cand):
        return None
    m = np.asarray(texts[cand].tolist(), dtype="S18").view(np.uint8).reshape(len(cand), 18)
    digit = (m >= 48) & (m <= 57)
    neg = m[:, 0] == 45
    ok = (digit | (m == 0)).all(axis=1) | (neg & (digit[:, 1:] | (m[:, 1:] == 0)).all(axis=1)
                                           & digit[:, 1])
    ok &= digit[:, 0] | neg
    if not ok.any():
        return None
    m, digit, neg = m[ok], digit[ok], neg[ok]
    v = np.zeros(len(m), dtype=np.int64)
    for j in range(18):
        v = np.where(digit[:, j], v * 10 + (m[:, j].astype(np.int64) - 48), v)
    return cand[ok], np.where(neg, -v, v)
