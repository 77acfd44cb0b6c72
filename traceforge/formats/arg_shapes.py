"""JSON args texts grouped by shape: the texts of many events' ``args`` objects, equal but
for some int values (a Kineto op's ``External id``/``Ev Idx``, a kernel's
``correlation``), as a few shapes and a column of those values
(:class:`~traceforge.args_provider.ArgShapes`).

An int value here is a JSON number of at most 18 digits written right after a colon
(and at most one space), without fraction or exponent, and followed by ``,``, ``}`` or
whitespace. Each text is masked: such a number becomes one marker byte (a control
character, never in valid JSON text, and refused when the texts hold one), so texts with
equal masks have their numbers at the same places and are equal elsewhere. Each mask is
then checked by decoding it once with a distinct sentinel in place of each marker: it is
a shape only where every sentinel is the whole value of one of its top-level args, in
order (a number inside a string, a nested object or a duplicated key fails this, and its
rows are left to the plain decode). Rows of one shape differ only in valid int runs at
its slots, so the shape's decode holds for every row.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from traceforge.args_provider import ArgShapes

#: Marks a masked number; deletes the rest of its bytes.
_MARK, _GONE = 0x1E, 0x1F
#: Bytes that may end an int value.
_ENDS = np.zeros(256, dtype=bool)
_ENDS[[ord(c) for c in ",} \n\r\t"]] = True
#: The longest int value masked (digits; 18 always fit int64).
_DIGITS = 18
#: Verified masks kept for later calls (beyond it, masks are checked again).
_KEEP = 1 << 14
#: Above this share of distinct masks among the texts, none is given as shapes: checking
#: and encoding a shape per row costs more than decoding the rows.
_DISTINCT, _FEW = 0.25, 256


class Shapes:
    """Groups args texts by shape (:meth:`of`), keeping the masks it has checked."""

    def __init__(self) -> None:
        #: mask -> (args with the sentinels, the slots) or None where it is no shape
        self.known: dict[bytes, tuple[dict[str, msgspec.Raw], tuple[int, ...]] | None] = {}

    def of(self, texts: list[Any]) -> ArgShapes | None:
        """The shapes of ``texts`` (each an args object's JSON text: bytes or
        ``msgspec.Raw``), None where the texts hold a marker byte or differ beyond their
        ints (of :data:`_FEW` or more, more distinct masks than :data:`_DISTINCT` of them)."""
        n = len(texts)
        size = np.fromiter(map(len, texts), dtype=np.int64, count=n)
        # Padding: a window read after a number near the end stays in the buffer.
        text = b"".join([*texts, b"\x00" * (_DIGITS + 2)])
        if b"\x1e" in text or b"\x1f" in text:
            return None
        at, end, values = _ints(text, int(size.sum()))
        masked = _masked(text, at, end)
        # Each row's mask: its bytes less the masked numbers' deleted ones.
        row = np.searchsorted(np.cumsum(size), at, side="right")
        size = size - np.bincount(row, weights=end - at - 1, minlength=n).astype(np.int64)
        stop = np.cumsum(size)
        first: dict[bytes, int] = {}
        local = np.fromiter(map(first.setdefault, map(masked.__getitem__, map(
            slice, (stop - size).tolist(), stop.tolist())), range(n)),
            dtype=np.int64, count=n)
        if n >= _FEW and len(first) > n * _DISTINCT:
            return None  # (rows whose args differ beyond their ids: read them as they are)
        # Shapes numbered in order of their first rows.
        reps = np.fromiter(first.values(), dtype=np.int64, count=len(first))
        number = np.full(n, -1, dtype=np.int64)
        checked = self._check(list(first))
        args: list[dict[str, Any]] = []
        slots: list[tuple[int, ...]] = []
        for j, got in enumerate(checked):
            if got is None:
                continue
            number[reps[j]] = len(args)
            args.append(got[0])
            slots.append(got[1])
        code = number[local]
        keep = code[row] >= 0
        return ArgShapes(code, args, slots, values[keep] if not keep.all() else values)

    def _check(self, masks: list[bytes]) -> list[tuple[dict[str, msgspec.Raw],
                                                       tuple[int, ...]] | None]:
        """Each mask's args (sentinels at its slots) and slots, or None where it is no
        shape; masks not met before are decoded together."""
        known = self.known
        new = [m for m in masks if m not in known]
        if new:
            texts = [_with_sentinels(m) for m in new]
            try:
                decoded: list[Any] = msgspec.json.decode(
                    b"[" + b",".join(texts) + b"]", type=list[dict[str, msgspec.Raw]])
            except (msgspec.MsgspecError, UnicodeDecodeError):  # one is no object: one by one
                decoded = [_decoded(t) for t in texts]
            if len(known) + len(new) > _KEEP:
                known.clear()
            for m, d in zip(new, decoded, strict=True):
                known[m] = None if d is None else _slots(d, m.count(b"\x1e"))
        return [known[m] for m in masks]


def _ints(text: bytes, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The int values in ``text[:size]`` (see the module's doc): each one's first byte
    (its sign, if any), the byte after its last digit, and its value.

    Each candidate's first 8 bytes are read as one little-endian uint64 and handled a
    word at a time (SWAR): which bytes are digits, where the first that is not lies (its
    run of digits), and the value of a run of up to 8 digits, by the 8-digit parse of
    Lemire's "Faster integer parsing" with the run moved to the word's top (leading
    zeros). A run of 8 or more is measured in a wider window, its first digits read by
    Horner's rule in int64 and added to the value of its last 8. (Not a product with
    the digits' place values: numpy hands that to BLAS, whose other threads, where it
    runs several (a notebook; the CLI starts one), then spin on other cores.)"""
    buf = np.frombuffer(text, dtype=np.uint8)
    colon = np.flatnonzero(buf[:size] == 58)
    at = colon + 1 + (buf[colon + 1] == 32)
    digits = at + (buf[at] == 45)
    is_digit = buf[digits] - np.uint8(48) < 10
    at, digits = at[is_digit], digits[is_digit]
    # Every 8-byte window of the text as a uint64 (the padding keeps the last in it).
    words = np.ndarray((len(buf) - 7,), dtype="<u8", buffer=text, strides=(1,))
    x = words[digits] ^ _ZEROS  # a digit's byte is now its value, 0-9
    hi = x & _HI
    # The top bit of each byte that is no digit: its high nibble not 0, or its low > 9.
    other = (((hi & _LOW7) + _LOW7) | hi) & _TOP | (((x & _LO) + _SIX) & _BIT4) << _U3
    first = other & (~other + _U1)  # (its lowest: the byte after the run)
    run = (np.frexp(first.astype(np.float64))[1] - 8) // 8
    long = np.flatnonzero(other == 0)
    if len(long):
        wide = buf[digits[long, None] + np.arange(_DIGITS + 1)] - np.uint8(48) < 10
        run[long] = np.where(wide.all(axis=1), _DIGITS + 1, np.argmin(wide, axis=1))
    end = digits + run
    ok = (run <= _DIGITS) & _ENDS[buf[end]] & ((buf[digits] != 48) | (run == 1))
    at, digits, end, run, x = at[ok], digits[ok], end[ok], run[ok], x[ok]
    values = _eight(x << (_U8 * (_U8 - np.minimum(run, 8).astype(np.uint64))))
    big = np.flatnonzero(run > 8)
    if len(big):
        head = np.zeros(len(big), dtype=np.int64)
        rb, db = run[big] - 8, digits[big]
        for j in range(int(rb.max())):
            head = np.where(rb > j, head * 10 + (buf[db + j].astype(np.int64) - 48), head)
        values[big] = _eight(words[end[big] - 8] ^ _ZEROS) + head * 10**8
    return at, end, np.where(digits > at, -values, values)


def _eight(y: np.ndarray) -> np.ndarray:
    """The values of 8-digit numbers, each a uint64 of its digits' values (0-9), the
    first in the lowest byte, as int64."""
    v = y * _U10 + (y >> _U8)
    v = (((v & _PAIRS) * _K1) + (((v >> _U16) & _PAIRS) * _K2)) >> _U32
    out: np.ndarray = v.astype(np.int64)
    return out


_U = np.uint64
_ZEROS, _HI, _LO = _U(0x3030303030303030), _U(0xF0F0F0F0F0F0F0F0), _U(0x0F0F0F0F0F0F0F0F)
_LOW7, _TOP = _U(0x7F7F7F7F7F7F7F7F), _U(0x8080808080808080)
_SIX, _BIT4 = _U(0x0606060606060606), _U(0x1010101010101010)
_PAIRS, _K1, _K2 = _U(0x000000FF000000FF), _U(100 + (1000000 << 32)), _U(1 + (10000 << 32))
_U1, _U3, _U8, _U10, _U16, _U32 = (_U(k) for k in (1, 3, 8, 10, 16, 32))


def _masked(text: bytes, at: np.ndarray, end: np.ndarray) -> bytes:
    """``text`` with each number ``at:end`` made one marker byte (padding kept)."""
    buf = np.frombuffer(text, dtype=np.uint8).copy()
    buf[at] = _MARK
    rest = end - at - 1
    total = int(rest.sum())
    if total:
        # The bytes after each number's first, all at once: run starts repeated, plus steps.
        start = np.repeat(at + 1 - (np.cumsum(rest) - rest), rest)
        buf[start + np.arange(total)] = _GONE
    out: bytes = buf.tobytes()
    return out.translate(None, b"\x1f")


def _sentinel(j: int) -> bytes:
    """The j-th slot's stand-in when a mask is checked: an int no trace writes."""
    return str(-9_000_000_000_000_000_000 - j).encode()


def _with_sentinels(mask: bytes) -> bytes:
    parts = mask.split(b"\x1e")
    out = [parts[0]]
    for j, p in enumerate(parts[1:]):
        out += [_sentinel(j), p]
    return b"".join(out)


def _decoded(text: bytes) -> dict[str, msgspec.Raw] | None:
    try:
        got: dict[str, msgspec.Raw] = msgspec.json.decode(text,
                                                           type=dict[str, msgspec.Raw])
    except (msgspec.MsgspecError, UnicodeDecodeError):
        return None
    return got


def _slots(args: dict[str, msgspec.Raw], count: int
           ) -> tuple[dict[str, msgspec.Raw], tuple[int, ...]] | None:
    """The positions of the sentinels among ``args``' values, where each of the ``count``
    is the whole value of one arg, in order; else None."""
    sentinels = {_sentinel(j): j for j in range(count)}
    found = [(i, sentinels.get(bytes(v))) for i, v in enumerate(args.values())]
    slots = tuple(i for i, j in found if j is not None)
    if [j for _, j in found if j is not None] != list(range(count)):
        return None
    return args, slots
