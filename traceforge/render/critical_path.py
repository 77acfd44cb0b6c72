"""The critical path as Chrome-trace events, for Perfetto.

One "critical path" process per rank holds a track of the path's segments (each slice
named by what ran, its args the kind, category and step), and flow arrows (``ph: s/f``)
follow the path where it moves from one thread or stream of the trace to another.
Everything comes from :func:`traceforge.analyzers.critical_path.path_tracks`; nothing is
measured here.
"""

from __future__ import annotations

from typing import Any

from traceforge.analyzers.critical_path import PathTrack

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
    pid = PATH_PID + track.rank
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
         "args": {"name": f"critical path (rank {track.rank})"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
         "args": {"sort_index": -2}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": PATH_TID,
         "args": {"name": "critical path"}},
    ]
    for s in track.segments.to_dict("records"):
        args: dict[str, Any] = {"kind": str(s["kind"]), "category": str(s["category"]),
                                "step": int(s["step"]), "order": int(s["order"])}
        if int(s["row"]) >= 0:
            args["row"] = int(s["row"])
        ev.append({"ph": "X", "cat": CAT, "name": str(s["name"]), "pid": pid,
                   "tid": PATH_TID, "ts": _us(int(s["ts"])), "dur": _us(int(s["dur"])),
                   "args": args})
    for f in track.flows.to_dict("records"):
        fid = flow_id_base + int(f["id"])
        # A flow binds to the slice open at its time: start it just before the end of
        # the slice it leaves, end it at the start of the one it enters.
        ev.append({"ph": "s", "id": fid, "cat": CAT, "name": CAT, "pid": int(f["from_pid"]),
                   "tid": int(f["from_tid"]), "ts": _us(int(f["from_ts"]) - 1)})
        ev.append({"ph": "f", "bp": "e", "id": fid, "cat": CAT, "name": CAT,
                   "pid": int(f["to_pid"]), "tid": int(f["to_tid"]),
                   "ts": _us(int(f["to_ts"]))})
    return ev
