"""The flow events of a Chrome trace document as columns (:class:`FlowTable`): the trace's
own flows, or one ``ac2g`` flow from each launch call to the first GPU activity of its
correlation id (an nsys export's 1.2M launches). The JSON writer makes them dicts a batch
at a time, the Perfetto writer binds them to slices as columns."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from traceforge.model import GPU_KINDS, Trace, first_rows, pair_rows
from traceforge.render.pftrace_layout import FlowPoints

_LAUNCH_KINDS = ("runtime", "driver")


def us(ns: np.ndarray) -> list[float]:
    """Integer ns as the us a Chrome trace writes."""
    # ns / 1000 as a double prints as at most three decimals (shortest round-trip repr),
    # and the Kineto reader's us_to_ns turns it back into the same integer ns.
    out: list[float] = (ns.astype(np.float64) / 1000.0).tolist()
    return out


@dataclass(frozen=True)
class FlowTable:
    """The flow events of a :class:`~traceforge.render.chrome_json.ChromeSource` as
    columns, in document order (one per point): ``ph`` (``s``/``t``/``f``), ``id``,
    ``pid``, ``tid``, ``ts`` (us, as written) and ``cat`` (the name too); an ``f`` binds
    to its enclosing slice (``bp: e``). The JSON writer makes them dicts a batch at a
    time; the Perfetto writer binds them to slices as columns
    (:class:`~traceforge.render.pftrace_layout.FlowPoints`)."""

    ph: list[str]
    id: list[Any]
    pid: list[Any]
    tid: list[Any]
    ts: list[float]
    cat: list[str]

    def __len__(self) -> int:
        return len(self.ph)

    def dicts(self, lo: int = 0, hi: int | None = None) -> list[dict[str, Any]]:
        """Points ``lo:hi`` as the events a Chrome trace writes."""
        out: list[dict[str, Any]] = []
        for ph, fid, pid, tid, ts, cat in zip(self.ph[lo:hi], self.id[lo:hi], self.pid[lo:hi],
                                              self.tid[lo:hi], self.ts[lo:hi], self.cat[lo:hi],
                                              strict=True):
            e: dict[str, Any] = {"ph": ph, "id": fid, "pid": pid, "tid": tid, "ts": ts,
                                 "cat": cat, "name": cat}
            if ph == "f":
                e["bp"] = "e"
            out.append(e)
        return out

    def points(self) -> FlowPoints:
        """The points as the Perfetto layout binds them (times in whole ns, as
        :func:`~traceforge.render.pftrace_layout.ns` takes them one by one)."""
        ts = np.rint(np.asarray(self.ts, dtype=np.float64) * 1000.0).astype(np.int64)
        return FlowPoints(self.pid, self.tid, ts, self.cat, self.id,
                          np.asarray(self.ph, dtype=object) == "f")


def flow_events(trace: Trace) -> FlowTable:
    """The trace's own flows when it has launch flows, else ``ac2g`` pairs from ``corr``
    (after the trace's own)."""
    fl = trace.flows
    ph: list[str] = []
    ids: list[Any] = []
    pids: list[Any] = []
    tids: list[Any] = []
    ts: list[float] = []
    cats: list[str] = []
    if not fl.empty:
        ph, ids = fl["ph"].astype(str).tolist(), fl["id"].tolist()
        pids, tids = fl["pid"].tolist(), fl["tid"].tolist()
        ts, cats = us(fl["ts"].to_numpy()), fl["cat"].astype(str).tolist()
        if (fl["cat"].astype(str) == "ac2g").any():
            return FlowTable(ph, ids, pids, tids, ts, cats)
    ev = trace.events
    corr = ev["corr"].to_numpy()
    gpu = np.flatnonzero(ev["kind"].isin(GPU_KINDS).to_numpy() & (corr >= 0))
    launch = np.flatnonzero(ev["kind"].isin(_LAUNCH_KINDS).to_numpy() & (corr >= 0))
    if len(gpu) and len(launch):
        # One flow per launch with GPU work; a graph launch fans out to many kernels, so
        # the flow ends at the first of them (as Kineto does): the GPU rows by time (the
        # sort pandas' sort_values makes), the first of each corr, and the first launch
        # of each corr (row positions; an nsys export has millions).
        times = ev["ts"].to_numpy()
        by_time = gpu[np.argsort(times[gpu], kind="quicksort")]
        first = by_time[first_rows(np.zeros(len(by_time), np.int64), corr[by_time])]
        lq = launch[first_rows(np.zeros(len(launch), np.int64), corr[launch])]
        at = pair_rows(np.zeros(len(lq), np.int64), corr[lq],
                       np.zeros(len(first), np.int64), corr[first])
        first, lrow = first[at >= 0], lq[at[at >= 0]]
        if len(first):
            n = len(first)
            ids_of = corr[first].tolist()

            def pairs(a: list[Any], b: list[Any]) -> list[Any]:
                return list(chain.from_iterable(zip(a, b, strict=True)))

            ph += ["s", "f"] * n
            ids += pairs(ids_of, ids_of)
            pid, tid = ev["pid"], ev["tid"]
            pids += pairs(pid.take(lrow).tolist(), pid.take(first).tolist())
            tids += pairs(tid.take(lrow).tolist(), tid.take(first).tolist())
            ts += pairs(us(times[lrow]), us(times[first]))
            cats += ["ac2g"] * (2 * n)
    return FlowTable(ph, ids, pids, tids, ts, cats)
