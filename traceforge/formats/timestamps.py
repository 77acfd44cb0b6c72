"""Timestamps far outside the rest of a trace: what a reader does with them.

A damaged or hand-edited trace may hold a few events at ``ts = -1`` (or 0, or 2**60) while
the rest lie in epoch microseconds: a time far outside the bulk of the trace. Such events
are kept (a heuristic never removes recorded data, and every analysis handles any int64
time), but the trace gets a note that counts them and says how far out they lie, since a
span, idle gap or step measured across them means nothing. "Far" is more than a day, and
more than 1000 times the middle half of the event starts, from the median start: no real
profile is that lopsided.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from traceforge.model import Trace

#: The least distance from the median start that counts as far (ns): one day.
MIN_FAR_NS = 86_400 * 10**9
#: Far is also more than this many times the interquartile range of the starts.
IQR_FACTOR = 1000


def far_mask(ts: np.ndarray) -> np.ndarray:
    """Which starts lie far from the rest (see the module docstring)."""
    if len(ts) < 4:
        return np.zeros(len(ts), dtype=bool)
    q25, med, q75 = (float(v) for v in np.percentile(ts, [25, 50, 75]))
    limit = max(float(MIN_FAR_NS), IQR_FACTOR * (q75 - q25))
    return np.asarray(np.abs(ts.astype(np.float64) - med) > limit)


def noted(trace: Trace) -> Trace:
    """``trace`` with a note counting its events far outside the rest, if any."""
    ts = trace.events["ts"].to_numpy()
    far = far_mask(ts)
    n = int(far.sum())
    if n == 0:
        return trace
    med = float(np.median(ts))
    worst = float(np.max(np.abs(ts[far].astype(np.float64) - med))) / 1e9
    note = (f"{n} of {len(ts)} events start far outside the rest of the trace (up to "
            f"{worst:,.0f} s from its median start; a damaged timestamp?): they are kept, "
            "so spans and gaps that reach them are not the run's")
    return trace.with_meta(replace(trace.meta, notes=(*trace.meta.notes, note)))
