"""Args given as shapes (:class:`~traceforge.args_provider.ArgShapes`) encoded as debug
annotations, each row's joined: byte for byte what
:meth:`~traceforge.render.pftrace_packets.PacketEncoder.annotations` gives for the row's
args dict, ids set in it.

Rows of one *variant* (a shape, with the same ids set) have the same cells: each an arg
whose annotation is the shape's own (a text value), or an int slot (the row's value). In
a batch most slots hold one value in every row of a variant (a kernel's ``device``,
``registers per thread``), so only the slots whose values differ are encoded per row;
the rest of a variant's cells are joined once into the pieces between them. A row is
then its variant's pieces and, between them, the framing and value of each of its
varying slots (the key's bytes begin the piece after).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from traceforge.render.pftrace_fields import int_heads
from traceforge.render.pftrace_varints import lengths
from traceforge.render.slice_table import objects

if TYPE_CHECKING:
    from traceforge.model import ArgShapes
    from traceforge.render.pftrace_packets import PacketEncoder


def shape_annotations(w: PacketEncoder, shapes: ArgShapes,
                      ids: Sequence[tuple[str, np.ndarray]] = ()) -> list[bytes]:
    """The args of the rows of ``shapes`` that have a shape, each row's annotations
    joined (what ``w.annotations`` gives for its args dict). ``ids``: (key, int64 per row)
    set on each row where >= 0 after its own args, as a dict's ``a[key] = v`` does (in
    its place where the row has the key, else after the others, in order)."""
    has = np.flatnonzero(shapes.code >= 0)
    code = shapes.code[has]
    if not len(code):
        return []
    cells = _Cells(w, shapes, code, ids, has)
    return cells.joined()


#: Shapes whose cells an encoder keeps (beyond it, they are worked out again).
_SHAPES_KEPT = 1 << 14


def _shape_cells(w: PacketEncoder, names: dict[str, int], args: dict[str, Any],
                 slots: Sequence[int]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """One shape's cells: each arg's key number (``names``, numbering new keys), whether
    it is a slot, the annotation of each that is not (b"" at the slots), and each key's
    place."""
    keys = list(args)
    key = np.asarray([names.setdefault(k, len(names)) for k in keys], dtype=np.int64)
    is_slot = np.zeros(len(keys), dtype=bool)
    is_slot[list(slots)] = True
    ann = np.full(len(keys), b"", dtype=object)
    const = np.flatnonzero(~is_slot).tolist()
    vals = list(args.values())
    if const:
        ann[const] = objects(w.annotations([keys[i] for i in const], [vals[i] for i in const]))
    return key, is_slot, ann, {k: i for i, k in enumerate(keys)}


class _Cells:
    """Every row's cells in output order (``slot``, ``key``, ``value``; ``cell``: the
    shape's cell, -1 for an id added after the row's args) and each row's variant."""

    def __init__(self, w: PacketEncoder, shapes: ArgShapes, code: np.ndarray,
                 ids: Sequence[tuple[str, np.ndarray]], has: np.ndarray) -> None:
        self.w = w
        # Each shape's cells (key numbers, which are slots, the others' annotations),
        # worked out the first time the encoder meets it: a shape's args are one object
        # in every batch (arg_shapes keeps them by mask), kept here with its cells.
        names = w.shape_keys
        met = w.shape_cells
        if len(met) > _SHAPES_KEPT:
            met.clear()
        cells: list[tuple[Any, ...]] = []
        for args, slots in zip(shapes.args, shapes.slots, strict=True):
            got = met.get(id(args))
            if got is None or got[0] is not args:
                got = met[id(args)] = (args, *_shape_cells(w, names, args, slots))
            cells.append(got)
        for k, _ in ids:
            names.setdefault(k, len(names))
        self.keys = list(names)
        first = np.zeros(len(cells) + 1, dtype=np.int64)
        first[1:] = np.cumsum([len(c[1]) for c in cells])
        key: np.ndarray = np.concatenate([np.zeros(0, np.int64), *(c[1] for c in cells)])
        is_slot = np.concatenate([np.zeros(0, bool), *(c[2] for c in cells)])
        #: The annotation of each of the shapes' cells that is no slot (b"" at slots).
        self.cell_ann = np.concatenate([np.zeros(0, object), *(c[3] for c in cells)])
        # The rows' own cells, row after row.
        count = (first[1:] - first[:-1])[code]
        start = np.cumsum(count) - count
        total = int(count.sum())
        row = np.repeat(np.arange(len(code)), count)
        cell = first[code][row] + np.arange(total) - start[row]
        slot = is_slot[cell]
        value = np.zeros(total, dtype=np.int64)
        value[slot] = shapes.values
        k_of = key[cell]
        # The ids: in a row's cell where its shape has the key, else after its cells. A
        # row's variant: its shape and which ids it sets.
        variant = code.copy()
        added: list[tuple[int, np.ndarray, np.ndarray]] = []
        more = np.zeros(len(code), dtype=np.int64)
        for k, column in ids:
            v = column[has]
            on = v >= 0
            variant = variant * 2 + on
            where = np.asarray([c[4].get(k, -1) for c in cells], dtype=np.int64)
            at = where[code] if len(where) else np.zeros(0, dtype=np.int64)
            mine = np.flatnonzero(on & (at >= 0))
            c = start[mine] + at[mine]
            slot[c], value[c] = True, v[mine]
            new = np.flatnonzero(on & (at < 0))
            if len(new):
                added.append((names[k], new, v[new]))
                more[new] += 1
        # The cells in output order: each row's own, then its added ids.
        self.size = count + more
        self.out = np.cumsum(self.size) - self.size
        n = int(self.size.sum())
        self.slot = np.zeros(n, dtype=bool)
        self.key = np.zeros(n, dtype=np.int64)
        self.value = np.zeros(n, dtype=np.int64)
        self.cell = np.full(n, -1, dtype=np.int64)
        pos = self.out[row] + np.arange(total) - start[row]
        self.slot[pos], self.key[pos], self.value[pos], self.cell[pos] = slot, k_of, value, cell
        placed = count.copy()
        for j, new, v in added:
            p = self.out[new] + placed[new]
            placed[new] += 1
            self.slot[p], self.key[p], self.value[p] = True, j, v
        _, self.rep, self.variant = np.unique(variant, return_index=True,
                                              return_inverse=True)

    def joined(self) -> list[bytes]:
        """Each row's annotations, joined (see the module's doc)."""
        w, size, out = self.w, self.size, self.out
        kb = objects([w.key(k) for k in self.keys])
        klen = lengths(kb)
        # The variants' cells (their first rows'), and which slots vary in the batch.
        vsize = size[self.rep]
        voff = np.cumsum(vsize) - vsize
        cells = int(vsize.sum())
        tpl = np.repeat(out[self.rep] - voff, vsize) + np.arange(cells)
        t_slot, t_key, t_val = self.slot[tpl], self.key[tpl], self.value[tpl]
        row = np.repeat(np.arange(len(size)), size)
        g = voff[self.variant][row] + np.arange(len(row)) - out[row]
        s = np.flatnonzero(self.slot)
        vary = np.bincount(g[s], weights=self.value[s] != t_val[g[s]], minlength=cells) > 0
        # Each variant's pieces: what lies between its varying slots, joined.
        t_bytes = np.full(cells, b"", dtype=object)
        fixed = np.flatnonzero(~t_slot)
        t_bytes[fixed] = self.cell_ann[self.cell[tpl[fixed]]]
        fold = np.flatnonzero(t_slot & ~vary)
        if len(fold):
            heads, _ = int_heads(t_val[fold], klen[t_key[fold]])
            t_bytes[fold] = objects(list(map(bytes.__add__, heads.tolist(),
                                             kb[t_key[fold]].tolist())))
        between: list[bytes] = []
        nvary = np.zeros(len(vsize), dtype=np.int64)
        t_list, vary_list, key_list = t_bytes.tolist(), vary.tolist(), t_key.tolist()
        kbl = kb.tolist()
        for v, (lo, hi) in enumerate(zip(voff.tolist(), (voff + vsize).tolist(),
                                         strict=True)):
            cur: list[bytes] = []
            for c in range(lo, hi):
                if vary_list[c]:
                    between.append(b"".join(cur))
                    cur = [kbl[key_list[c]]]
                    nvary[v] += 1
                else:
                    cur.append(t_list[c])
            between.append(b"".join(cur))
        # Each row: its variant's pieces with its varying slots' heads between them.
        per = nvary[self.variant]
        npieces = 2 * per + 1
        first = np.cumsum(npieces) - npieces
        pieces = np.empty(int(npieces.sum()), dtype=object)
        plen = np.zeros(len(pieces), dtype=np.int64)
        fixed_b = objects(between)
        boff = np.cumsum(nvary + 1) - (nvary + 1)
        nb = per + 1
        step = np.arange(int(nb.sum())) - np.repeat(np.cumsum(nb) - nb, nb)
        at = np.repeat(first, nb) + 2 * step
        which = np.repeat(boff[self.variant], nb) + step
        pieces[at], plen[at] = fixed_b[which], lengths(fixed_b)[which]
        vc = np.flatnonzero(self.slot & vary[g])
        if len(vc):
            heads, whole = int_heads(self.value[vc], klen[self.key[vc]])
            step = np.arange(len(vc)) - np.repeat(np.cumsum(per) - per, per)
            at = np.repeat(first, per) + 2 * step + 1
            pieces[at], plen[at] = heads, whole - klen[self.key[vc]]
        edge = np.concatenate([[0], np.cumsum(plen)])
        data = b"".join(pieces.tolist())
        return [data[x:y] for x, y in zip(edge[first].tolist(),
                                          edge[first + npieces].tolist(), strict=True)]
