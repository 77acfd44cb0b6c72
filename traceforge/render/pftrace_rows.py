"""Arg columns (:class:`~traceforge.args_provider.ArgColumn`) encoded as each row's debug
annotations joined, byte for byte what
:meth:`~traceforge.render.pftrace_packets.PacketEncoder.annotations` gives for the dict of
the row's present values (keys in column order), laid out in one byte buffer.

A batch of an nsys export's rows holds ~30 columns (a kernel's grid and block, an API
call's return value, the ids), most of them ints: a ``bytes`` object per cell, joined per
row, cost more than the rest of the packet. Here every int cell of the batch is framed at
once (one varint pass over all of them, the keys' bytes put in place by one scatter),
reals likewise, and only other values (text, bools) come as a ``bytes`` each; each row's
bytes are then one slice of the buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from traceforge.render.pftrace_fields import ANN, DOUBLE_FIELD
from traceforge.render.pftrace_varints import lengths, varint_matrix

if TYPE_CHECKING:
    from traceforge.render.pftrace_packets import PacketEncoder
    from traceforge.render.slice_table import ArgColumn

#: A DebugAnnotation's ``int_value`` field (4, varint).
_INT_FIELD = 0x20
#: The longest body framed with a one-byte length.
_SHORT = 0x7F
_INT, _REAL, _OTHER = 0, 1, 2


def column_rows(w: PacketEncoder, columns: Sequence[ArgColumn], rows: np.ndarray
                ) -> list[bytes]:
    """Rows ``rows`` of ``columns``, each row's annotations joined (what
    ``w.annotations`` gives for the dict of its present values, keys in column order)."""
    n = len(rows)
    keys: list[bytes] = []
    # Per column with cells here: its kind, the rows (positions) of its cells, values.
    kinds: list[int] = []
    at_of: list[np.ndarray] = []
    vals_of: list[np.ndarray] = []
    for col in columns:
        at = np.arange(n) if col.present is None else np.flatnonzero(col.present[rows])
        if not len(at):
            continue
        vals = col.values[rows[at]]
        key = w.key(col.key)
        if vals.dtype.kind == "i" and 11 + len(key) <= _SHORT:
            kinds.append(_INT)
            vals = vals.astype(np.int64)
        elif vals.dtype.kind == "f" and 9 + len(key) <= _SHORT:
            kinds.append(_REAL)
            vals = vals.astype(np.float64)
        else:
            kinds.append(_OTHER)
            vals = w.cell_annotations(col.key, vals)
        keys.append(key)
        at_of.append(at)
        vals_of.append(vals)
    if not kinds:
        return [b""] * n
    return _Layout(n, keys, kinds, at_of, vals_of).rows()


class _Layout:
    """The batch's cells in one buffer: row after row, a row's cells in column order."""

    def __init__(self, n: int, keys: list[bytes], kinds: list[int],
                 at_of: list[np.ndarray], vals_of: list[np.ndarray]) -> None:
        kind = self.kind = np.asarray(kinds)
        count = np.fromiter(map(len, at_of), dtype=np.int64, count=len(at_of))
        col = np.repeat(np.arange(len(kinds)), count)  # each cell's column
        row = np.concatenate(at_of)
        klen = lengths(keys)
        size = np.zeros(len(row), dtype=np.int64)
        cell_kind = kind[col]
        # Ints: frame (2) + field (1) + varint + key; reals: frame + field + 8 + key.
        self.ints = np.flatnonzero(cell_kind == _INT)
        int_vals = np.concatenate([v for v, k in zip(vals_of, kinds, strict=True)
                                   if k == _INT]) if len(self.ints) else np.zeros(0, np.int64)
        self.m, self.vl = varint_matrix(int_vals)
        size[self.ints] = 3 + self.vl + klen[col[self.ints]]
        self.reals = np.flatnonzero(cell_kind == _REAL)
        self.real_vals = np.concatenate([v for v, k in zip(vals_of, kinds, strict=True)
                                         if k == _REAL]) if len(self.reals) else \
            np.zeros(0, np.float64)
        size[self.reals] = 11 + klen[col[self.reals]]
        self.others = np.flatnonzero(cell_kind == _OTHER)
        self.other_vals: list[bytes] = [b for v, k in zip(vals_of, kinds, strict=True)
                                        if k == _OTHER for b in v.tolist()]
        size[self.others] = lengths(self.other_vals)
        # Cells by row, each row's in column order (columns come in order: a stable sort).
        by_row = np.argsort(row, kind="stable")
        ends = np.cumsum(size[by_row])
        self.off = np.empty(len(row), dtype=np.int64)
        self.off[by_row] = ends - size[by_row]
        self.row_end = np.cumsum(np.bincount(row, weights=size, minlength=n).astype(np.int64))
        self.buf = np.zeros(int(ends[-1]) if len(ends) else 0, dtype=np.uint8)
        self.keys, self.count = keys, count
        self.col, self.klen = col, klen

    def _keys(self, kind: np.ndarray, start: np.ndarray) -> None:
        """The key bytes of the cells of the columns where ``kind`` (in cell order), each
        from ``start``: a column at a time (one key each)."""
        at = 0
        for c in np.flatnonzero(kind).tolist():
            k, n = self.keys[c], int(self.count[c])
            span = start[at:at + n, None] + np.arange(len(k))[None, :]
            self.buf[span] = np.frombuffer(k, dtype=np.uint8)
            at += n

    def rows(self) -> list[bytes]:
        buf = self.buf
        if len(self.ints):
            off, vl = self.off[self.ints], self.vl
            buf[off] = ANN[0]
            buf[off + 1] = 1 + vl + self.klen[self.col[self.ints]]
            buf[off + 2] = _INT_FIELD
            span = np.arange(int(vl.max()))
            mask = span[None, :] < vl[:, None]
            buf[((off + 3)[:, None] + span[None, :])[mask]] = self.m[:, :len(span)][mask]
            self._keys(self.kind == _INT, off + 3 + vl)
        if len(self.reals):
            off = self.off[self.reals]
            buf[off] = ANN[0]
            buf[off + 1] = 9 + self.klen[self.col[self.reals]]
            buf[off + 2] = DOUBLE_FIELD[0]
            eight = self.real_vals.astype("<f8").view(np.uint8).reshape(-1, 8)
            buf[(off + 3)[:, None] + np.arange(8)[None, :]] = eight
            self._keys(self.kind == _REAL, off + 11)
        if len(self.others):
            blob = np.frombuffer(b"".join(self.other_vals), dtype=np.uint8)
            size = lengths(self.other_vals)
            first = np.cumsum(size) - size
            buf[np.repeat(self.off[self.others] - first, size) + np.arange(len(blob))] = blob
        whole = buf.tobytes()
        ends = self.row_end.tolist()
        return [whole[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]
