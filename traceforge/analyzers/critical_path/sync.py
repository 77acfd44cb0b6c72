"""What GPU work waited for and what blocking host calls waited for: the edges into an
activity's start (launch, stream, event, graph: the candidate that ended last binds) and
the edges from awaited GPU work into a blocking call's end.

These need the trace's CUDA sync records (which stream or event a call waited on); where
the trace lacks them the awaited work is inferred, and the notes say so.
"""

from __future__ import annotations

import re
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.edges import EVENT, SYNC_WAIT, Edges
from traceforge.analyzers.critical_path.streams import last_on_streams
from traceforge.analyzers.timeline.activity import BLOCKING_SYNC_APIS
from traceforge.model import Trace, distinct

DEVICE_SYNC = frozenset({"cudaDeviceSynchronize", "cuCtxSynchronize", "hipDeviceSynchronize"})
STREAM_SYNC = frozenset({"cudaStreamSynchronize", "cuStreamSynchronize",
                         "hipStreamSynchronize"})
EVENT_SYNC = frozenset({"cudaEventSynchronize", "cuEventSynchronize", "hipEventSynchronize"})
#: Blocking copies: they wait for the copy they launch (which waits for its stream).
BLOCKING_COPY = BLOCKING_SYNC_APIS - DEVICE_SYNC - STREAM_SYNC - EVENT_SYNC
STREAM_WAIT = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent", "hipStreamWaitEvent"})
EVENT_RECORD = re.compile(r"^(cuda|cu|hip)EventRecord")

_NONE = np.iinfo(np.int64).min


def _sync_rows(trace: Trace) -> pd.DataFrame:
    """The GPU-side sync records (Kineto ``cuda_sync``, nsys SYNCHRONIZATION) by corr,
    with the stream a call waited on and the event record it waited for, where given."""
    ev = trace.events
    s = ev[(ev["kind"] == "sync").to_numpy() & (ev["corr"] >= 0).to_numpy()]
    cols = {"corr": np.int64, "device": np.int64, "stream": np.int64, "wait_stream": np.int64,
            "record_corr": np.int64}
    if s.empty:
        return cast("pd.DataFrame", pd.DataFrame({c: pd.Series([], dtype=t)
                                                  for c, t in cols.items()}))
    args = trace.args(s.index.to_numpy())
    ws = [int(a.get("wait_on_stream", -1) or -1) for a in args]
    rc = [int(a.get("wait_on_cuda_event_record_corr_id", -1) or -1) for a in args]
    out = pd.DataFrame({"corr": s["corr"].to_numpy(), "device": s["device"].to_numpy(),
                        "stream": s["stream"].to_numpy(), "wait_stream": ws,
                        "record_corr": rc}).astype(cols)
    return cast("pd.DataFrame", out.drop_duplicates("corr"))


def bind(cands: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
          ts: np.ndarray, a_start: np.ndarray, ed: Edges) -> None:
    """Edges into activity starts: the candidate that ended last (and not after the start)
    carries the wait; the others keep the order with weight 0."""
    if not cands:
        return
    typ = np.concatenate([np.full(len(c[1]), c[0], np.int8) for c in cands])
    act = np.concatenate([c[1] for c in cands]).astype(np.int64)
    src = np.concatenate([c[2] for c in cands]).astype(np.int64)
    at = np.concatenate([c[3] for c in cands]).astype(np.int64)
    ref = np.concatenate([c[4] for c in cands]).astype(np.int64)
    ok = at <= ts[act]
    typ, act, src, at, ref = typ[ok], act[ok], src[ok], at[ok], ref[ok]
    if len(act) == 0:
        return
    # Ties: the GPU's own order first (stream, then event waits), the launch last.
    prio = np.array([0, 0, 5, 1, 4, 3, 2, 0, 0, 0, 0])[typ]
    order = np.lexsort((prio, at, act))
    last = np.append(act[order][1:] != act[order][:-1], True)
    binding = np.zeros(len(act), dtype=bool)
    binding[order[last]] = True
    w = np.where(binding, ts[act] - at, 0)
    for code in distinct(typ):
        m = typ == code
        ed.add(src[m], a_start[act[m]], w[m], int(code), ref[m])


def event_candidates(trace: Trace, h: pd.DataFrame, acts: pd.DataFrame, s: pd.DataFrame,
                      hidx: np.ndarray, cands: list[tuple[int, np.ndarray, np.ndarray,
                                                          np.ndarray, np.ndarray]],
                      notes: list[str]) -> None:
    """Stream waits: the next activity the waiting call's thread launched (on the waiting
    stream, when the trace says which) starts after the recorded work ended. The recorded
    work is the last activity launched on the recorded stream before the record call
    (Kineto CUDA sync events name both); without them, the work on any other stream of the
    device launched before the wait call that ended last before the waiter started."""
    waits = h[h["name"].isin(STREAM_WAIT) & (h["kind"] != "cpu_op")]
    if waits.empty or not len(acts):
        return
    sync = _sync_rows(trace)
    w = waits[["ts", "code", "corr"]].reset_index(names="hid").merge(
        sync.rename(columns={"stream": "wstream", "device": "wdevice"}), on="corr",
        how="left")
    w = w.fillna({"wstream": -1, "wdevice": -1, "wait_stream": -1, "record_corr": -1})
    w = w.astype(dict.fromkeys(("wstream", "wdevice", "wait_stream", "record_corr"), np.int64))
    launched = pd.DataFrame({"act": np.arange(len(acts)), "code": -1,
                             "stream": acts["stream"].to_numpy(),
                             "lts": acts["launch_ts"].to_numpy()})
    launched.loc[hidx >= 0, "code"] = h["code"].to_numpy()[hidx[hidx >= 0]]
    launched = launched[launched["code"] >= 0].sort_values("lts")
    w = w.sort_values("ts")
    any_stream = pd.merge_asof(w, launched.drop(columns="stream"), left_on="ts",
                               right_on="lts", by="code", direction="forward",
                               allow_exact_matches=False)
    on_stream = pd.merge_asof(w.assign(stream=w["wstream"]), launched, left_on="ts",
                              right_on="lts", by=["code", "stream"], direction="forward",
                              allow_exact_matches=False)
    waiter = np.where(w["wstream"].to_numpy() >= 0, on_stream["act"].to_numpy(),
                      any_stream["act"].to_numpy())
    w = w.assign(waiter=waiter).dropna(subset=["waiter"]).astype({"waiter": np.int64})
    if w.empty:
        return
    ts, end = acts["ts"].to_numpy(), acts["end"].to_numpy()
    wa = w["waiter"].to_numpy()
    rec = h[h["name"].str.match(EVENT_RECORD) & (h["corr"] >= 0)]
    rec_ts = pd.Series(rec["ts"].to_numpy(), index=rec["corr"].to_numpy())
    rec_ts = rec_ts[~rec_ts.index.duplicated()]
    known = (w["wait_stream"].to_numpy() >= 0) & w["record_corr"].isin(rec_ts.index).to_numpy()
    t_rec = rec_ts.reindex(w["record_corr"].to_numpy()).to_numpy()
    q = pd.DataFrame({
        "qid": np.arange(len(w)),
        "device": acts["device"].to_numpy()[wa],
        "stream": np.where(known, w["wait_stream"].to_numpy(), -1),
        "not_stream": acts["stream"].to_numpy()[wa],
        "t_launch": np.where(known, np.nan_to_num(t_rec, nan=0).astype(np.int64),
                             w["ts"].to_numpy()),
        "t_end": ts[wa]})
    got = last_on_streams(s, q)
    k = got["qid"].to_numpy()
    nh = len(h)
    src = got["act"].to_numpy()
    cands.append((EVENT, wa[k], 2 * nh + 2 * src + 1, end[src], wa[k]))
    inferred = int((~known).sum())
    if inferred:
        notes.append(f"{inferred} stream waits without CUDA sync events (Kineto "
                     "'cuda_sync'): the waiter is the next launch of the thread, the "
                     "awaited work inferred as the latest work on another stream")


def sync_edges(trace: Trace, h: pd.DataFrame, acts: pd.DataFrame, s: pd.DataFrame,
                kept: np.ndarray, ed: Edges, notes: list[str]) -> pd.Series:
    """Blocking calls: an edge from the GPU work each waited for to its end, carrying the
    tail (the time from when both the call began and the work ended to its return).
    Returns the tail of each call that waited, by host range, for its span edge."""
    kind = h["sync"].to_numpy()
    sid = np.flatnonzero((kind != "") & kept)
    if len(sid) == 0:
        return pd.Series([], dtype=np.int64)
    nh = len(h)
    sync = _sync_rows(trace)
    info = h.iloc[sid][["ts", "end", "corr", "sync", "row"]].assign(hid=sid).merge(
        sync, on="corr", how="left")
    info = info.fillna({"device": -1, "stream": -1, "wait_stream": -1, "record_corr": -1})
    info = info.astype(dict.fromkeys(("device", "stream", "wait_stream", "record_corr"), np.int64))
    cover = np.full(len(info), -1, dtype=np.int64)
    # Blocking copies wait for their own copy.
    copy = info["sync"].to_numpy() == "copy"
    if copy.any():
        by_launch = pd.Series(np.arange(len(acts)), index=acts["launch_row"].to_numpy())
        by_launch = by_launch[~by_launch.index.duplicated(keep="last")]
        cover[copy] = by_launch.reindex(info["row"].to_numpy()[copy]).fillna(-1).to_numpy()
    rec = h[h["name"].str.match(EVENT_RECORD) & (h["corr"] >= 0)]
    rec_ts = pd.Series(rec["ts"].to_numpy(), index=rec["corr"].to_numpy())
    rec_ts = rec_ts[~rec_ts.index.duplicated()]
    kinds = info["sync"].to_numpy()
    ev_known = (kinds == "event") & (info["wait_stream"].to_numpy() >= 0) & info[
        "record_corr"].isin(rec_ts.index).to_numpy()
    st_known = (kinds == "stream") & (info["stream"].to_numpy() >= 0)
    stream = np.where(ev_known, info["wait_stream"].to_numpy(),
                      np.where(st_known, info["stream"].to_numpy(), -1))
    t_launch = np.where(ev_known, rec_ts.reindex(info["record_corr"].to_numpy())
                        .fillna(0).to_numpy().astype(np.int64), info["ts"].to_numpy())
    todo = np.flatnonzero(~copy)
    q = pd.DataFrame({"qid": todo, "device": info["device"].to_numpy()[todo],
                      "stream": stream[todo], "not_stream": -2,
                      "t_launch": t_launch[todo], "t_end": info["end"].to_numpy()[todo]})
    got = last_on_streams(s, q)
    cover[got["qid"].to_numpy()] = got["act"].to_numpy()
    guessed = int((((kinds == "event") & ~ev_known) | ((kinds == "stream") & ~st_known)).sum())
    if guessed:
        notes.append(f"{guessed} stream/event synchronize calls without CUDA sync events: "
                     "the awaited work inferred as the last work launched before the call")
    ok = cover >= 0
    end_a = acts["end"].to_numpy()
    cov_end = np.where(ok, end_a[np.clip(cover, 0, None)] if len(acts) else 0, _NONE)
    sts, sen = info["ts"].to_numpy(), info["end"].to_numpy()
    ok &= cov_end <= sen
    tail = sen - np.maximum(sts, np.where(ok, cov_end, sts))
    hid = info["hid"].to_numpy()
    c = cover[ok]
    ed.add(2 * nh + 2 * c + 1, 2 * hid[ok] + 1, tail[ok], SYNC_WAIT, hid[ok])
    missed = int((~ok & ~copy).sum())
    if missed and len(acts):
        notes.append(f"{missed} blocking sync calls with no GPU work found that they "
                     "waited for: their whole time counts as sync wait")
    return cast("pd.Series", pd.Series(tail[ok], index=hid[ok]))
