"""A batch of a trace's rows' whole args as columns (their source's, then the ids, then
the analysis' tags), in the order a dict of them gets its keys, for writers that encode a
column at a time (:meth:`~traceforge.render.pftrace_packets.PacketEncoder.
column_annotations`): the SQLite readers' args, whose columns an nsys export's 4.2M rows
would otherwise turn into a dict each.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from traceforge.model import ArgColumn


def row_columns(own: Sequence[ArgColumn], ids: Sequence[tuple[str, np.ndarray]],
                tags: Sequence[ArgColumn], n: int) -> tuple[list[ArgColumn], np.ndarray]:
    """The columns of ``n`` rows' args, and which rows they give exactly.

    ``own``: the rows' source args (:meth:`~traceforge.model.Trace.arg_columns`); ``ids``:
    (key, int64 per row) set on a row where >= 0; ``tags``: columns set after them. A
    dict built so (``a[key] = v``) keeps a key it already has in its place, so a row where
    an id or a tag would set a key the row already holds is not given by the columns
    (False in the mask: build its dict)."""
    have: dict[str, np.ndarray] = {}
    ok = np.ones(n, dtype=bool)

    def add(key: str, present: np.ndarray, after: bool) -> None:
        nonlocal ok
        held = have.get(key)
        if held is None:
            have[key] = present
            return
        if after:
            ok &= ~(held & present)
        have[key] = held | present

    everyone = np.ones(n, dtype=bool)
    for c in own:
        add(c.key, everyone if c.present is None else c.present, False)
    cols = list(own)
    for key, v in ids:
        has = v >= 0
        add(key, has, True)
        cols.append(ArgColumn(key, v.astype(np.int64), has))
    for c in tags:
        add(c.key, everyone if c.present is None else c.present, True)
        cols.append(c)
    return cols, ok
