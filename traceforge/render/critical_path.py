"""The critical path as Chrome-trace events, for Perfetto.

One "critical path" process per rank holds a track of the path's segments (each slice
named by what ran, its args the kind, category and step), and flow arrows (``ph: s/f``)
follow the path where it moves from one thread or stream of the trace to another.
Consecutive pieces of one step that touch (each starts where the one before ends) and ran
on the same thread or stream with the same kind are drawn as one slice (named by its
heaviest piece, ``+N more``; args ``pieces`` and ``last_order``), so a step's track
stays a readable size; a step still drawn in more than
:data:`~traceforge.analyzers.critical_path.handoff.MAX_DRAWN_PER_STEP` slices has its
touching pieces of one thread merged whatever their kinds (``mixed``, with the time per
kind as args), so its size is bounded by its hops between threads. The full path, piece
by piece, is ``traceforge critical-path`` / ``tf.critical_path``. Everything comes from
:func:`traceforge.analyzers.critical_path.path_tracks` (which merges the pieces, in the
process that works the path out); nothing is measured here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traceforge.analyzers.critical_path import PathTrack
from traceforge.render.slice_table import SliceTable, column, labelled, texts

#: Chrome ``pid`` of the path track of rank 0 (+ rank for others): next to the analysis
#: tracks of ``render.annotate`` (1_900_000_000 + rank), inside int32.
PATH_PID = 1_950_000_000
PATH_TID = 1
CAT = "critical_path"


def _us(ns: int) -> float:
    return ns / 1000.0


def chrome_events(track: PathTrack, *, flow_id_base: int = 0) -> list[dict[str, Any]]:
    """Metadata, one slice per path segment on the rank's path track, and a flow arrow
    for every hop of the path between two tracks of the trace (ids from
    ``flow_id_base``)."""
    table, ev = chrome_parts(track, flow_id_base=flow_id_base)
    return ev[:3] + table.events() + ev[3:]


def chrome_parts(track: PathTrack, *, flow_id_base: int = 0
                 ) -> tuple[SliceTable, list[dict[str, Any]]]:
    """:func:`chrome_events` in two parts: the path's slices as a table, and the other
    events (the track's names, then the flow arrows) as dicts."""
    pid = PATH_PID + track.rank
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
         "args": {"name": f"critical path (rank {track.rank})"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
         "args": {"sort_index": -2}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": PATH_TID,
         "args": {"name": "critical path"}},
    ]
    m, kinds = track.drawn, track.kinds
    n = len(m)
    pieces = m["pieces"].to_numpy(np.int64)
    row = m["row"].to_numpy(np.int64)
    codes, names = labelled(texts(m["name"].tolist()))
    many = pieces > 1
    merged = np.flatnonzero(many)
    if len(merged):
        # A run is named by its heaviest piece and how many more it holds.
        label = [f"{names[c]} +{k - 1} more"
                 for c, k in zip(codes[merged].tolist(), pieces[merged].tolist(), strict=True)]
        more, more_names = labelled(label)
        codes[merged] = more + len(names)
        names = names + more_names
    args = [column("kind", texts(m["kind"].tolist())),
            column("category", texts(m["category"].tolist())),
            column("step", m["step"].to_numpy(np.int64)),
            column("order", m["order"].to_numpy(np.int64)),
            column("pieces", pieces, many),
            column("last_order", m["last_order"].to_numpy(np.int64), many),
            column("row", row, ~many & (row >= 0))]
    for k in kinds:
        ns = m[f"{k}_ns"].to_numpy(np.int64)
        args.append(column(f"{k}_ns", ns, ns > 0))
    table = SliceTable(CAT, np.full(n, pid, dtype=np.int64), np.full(n, PATH_TID, dtype=np.int64),
                       m["ts"].to_numpy(np.int64), m["dur"].to_numpy(np.int64), codes, names,
                       args)
    for f in track.flows.to_dict("records"):
        fid = flow_id_base + int(f["id"])
        # A flow binds to the slice open at its time: start it just before the end of
        # the slice it leaves, end it at the start of the one it enters.
        ev.append({"ph": "s", "id": fid, "cat": CAT, "name": CAT, "pid": int(f["from_pid"]),
                   "tid": int(f["from_tid"]), "ts": _us(int(f["from_ts"]) - 1)})
        ev.append({"ph": "f", "bp": "e", "id": fid, "cat": CAT, "name": CAT,
                   "pid": int(f["to_pid"]), "tid": int(f["to_tid"]),
                   "ts": _us(int(f["to_ts"]))})
    return table, ev
