"""The critical path as Chrome-trace events, for Perfetto.

One "critical path" process per rank holds a track of the path's segments (each slice
named by what ran, its args the kind, category and step), and flow arrows (``ph: s/f``)
follow the path where it moves from one thread or stream of the trace to another.
Consecutive pieces of one step that touch (each starts where the one before ends) and ran
on the same thread or stream with the same kind are drawn as one slice (named by its
heaviest piece, ``+N more``; args ``pieces`` and ``last_order``), so a step's track
stays a readable size; a step still drawn in more than :data:`MAX_DRAWN_PER_STEP` slices
has its touching pieces of one thread merged whatever their kinds (``mixed``, with the
time per kind as args), so its size is bounded by its hops between threads. The full
path, piece by piece, is ``traceforge critical-path`` / ``tf.critical_path``. Everything
comes from :func:`traceforge.analyzers.critical_path.path_tracks`; nothing is measured
here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path import PathTrack
from traceforge.render.slice_table import SliceTable, column, labelled, texts

#: Chrome ``pid`` of the path track of rank 0 (+ rank for others): next to the analysis
#: tracks of ``render.annotate`` (1_900_000_000 + rank), inside int32.
PATH_PID = 1_950_000_000
PATH_TID = 1
CAT = "critical_path"
#: Slices a step's path is drawn in, at most, before its runs of one thread are drawn as
#: one slice whatever their kinds (:func:`drawn_pieces`).
MAX_DRAWN_PER_STEP = 10_000


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
    m, kinds = drawn_pieces(track.segments)
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


def drawn_pieces(seg: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``seg`` as its slices are drawn: :func:`merged_pieces`, and where that leaves a
    step more than :data:`MAX_DRAWN_PER_STEP` slices (a path that alternates two kinds
    on one stream: a million tiny kernels and the idle time between them), that step's
    runs of one thread merged whatever their kinds (``kind`` ``mixed`` where a run holds
    several, its time per kind in ``<kind>_ns`` columns, the kinds listed second)."""
    m = merged_pieces(seg)
    per_step = m["step"].value_counts()
    over = per_step.index[per_step > MAX_DRAWN_PER_STEP]
    if not len(over):
        return m, []
    wide = merged_pieces(seg[seg["step"].isin(over)], by_kind=False)
    kinds = [c[:-3] for c in wide.columns if c.endswith("_ns") and c not in m.columns]
    out = pd.concat([m[~m["step"].isin(over)].assign(**{f"{k}_ns": 0 for k in kinds}), wide],
                    ignore_index=True)
    return out.sort_values(["step", "order"], kind="stable").reset_index(drop=True), kinds


def merged_pieces(seg: pd.DataFrame, by_kind: bool = True) -> pd.DataFrame:
    """``seg`` (one rank's path pieces, by step and order) with each run of touching pieces
    of one step, thread and kind as one row: ``ts`` of the first, ``dur`` to the end of
    the last, ``name``/``category``/``row`` of the heaviest, ``order`` of the first,
    ``last_order`` and ``pieces``. A run of one piece is that piece unchanged.
    ``by_kind=False``: runs of one step and thread whatever their kinds; a run of several
    kinds is of kind ``mixed``, and ``<kind>_ns`` columns hold each run's time per kind
    (0 where it has none)."""
    if seg.empty:
        empty: pd.DataFrame = seg.assign(pieces=np.ones(0, dtype=np.int64),
                                         last_order=seg["order"])
        return empty
    s = seg.sort_values(["step", "order"], kind="stable").reset_index(drop=True)
    ts, dur = s["ts"].to_numpy(np.int64), s["dur"].to_numpy(np.int64)
    kind = s["kind"].astype(str).to_numpy()
    same = np.ones(len(s), dtype=bool)
    same[0] = False
    for col in ("step", "pid", "tid"):
        v = s[col].to_numpy()
        same[1:] &= v[1:] == v[:-1]
    if by_kind:
        same[1:] &= kind[1:] == kind[:-1]
    same[1:] &= s["order"].to_numpy()[1:] == s["order"].to_numpy()[:-1] + 1
    same[1:] &= ts[1:] == ts[:-1] + dur[:-1]
    run = np.cumsum(~same) - 1
    first = np.flatnonzero(~same)
    last = np.r_[first[1:], len(s)] - 1
    # Heaviest piece of each run (the first of equals): its name labels the slice.
    order = np.lexsort((np.arange(len(s)), -dur, run))
    heavy = order[np.r_[0, np.flatnonzero(np.diff(run[order])) + 1]]
    out: pd.DataFrame = s.iloc[first].reset_index(drop=True)
    for col in ("name", "category", "row"):
        out[col] = s[col].take(heavy).array  # (categoricals stay categorical)
    out["dur"] = ts[last] + dur[last] - ts[first]
    out["last_order"] = s["order"].to_numpy()[last]
    out["pieces"] = last - first + 1
    if not by_kind:
        changed = np.zeros(len(s), dtype=np.int64)
        changed[1:] = same[1:] & (kind[1:] != kind[:-1])
        mixed = np.add.reduceat(changed, first) > 0
        out["kind"] = np.where(mixed, "mixed", kind[heavy]).astype(object)
        for k in sorted(set(kind[np.repeat(mixed, last - first + 1)].tolist())):
            out[f"{k}_ns"] = np.where(mixed, np.bincount(run, weights=np.where(
                kind == k, dur, 0), minlength=len(first)), 0).astype(np.int64)
    return out
