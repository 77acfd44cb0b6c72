"""One rank's part of the graph (:class:`RankGraph`, built by :func:`rank_graph`): its
nodes and edges in local ids, and only the labels a path needs.

It is what a rank sends to the driver in a many-rank run, so it is pickled narrowed and
compressed; and it is a derived table of the trace, built once per cached trace.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
import pandas as pd

from traceforge.analyzers.communication.collectives import comm_kernels
from traceforge.analyzers.critical_path.edges import GRAPH, LAUNCH, STREAM, WORK, Edges
from traceforge.analyzers.critical_path.host import Chain, contract, host_chain, host_table
from traceforge.analyzers.critical_path.streams import last_on_streams, stream_table
from traceforge.analyzers.critical_path.sync import bind, event_candidates, sync_edges
from traceforge.analyzers.profiling.notes import step_notes
from traceforge.analyzers.timeline.core import select_windows, timeline
from traceforge.analyzers.timing.breakdown import rank_of
from traceforge.errors import AnalysisError
from traceforge.model import Trace


@dataclass(eq=False)
class RankGraph:
    """One rank's part of the graph (:func:`rank_graph`): everything the cross-rank steps
    need of the rank, and no event table, so it is what a rank sends to the driver in a
    many-rank run. Node ids (local): host range i has 2i (start) and 2i + 1 (end);
    activity j has 2H + 2j and 2H + 2j + 1.

    ``host``/``acts``: the host ranges and activities behind the nodes, with only the
    columns the path is labelled from; ``comm``: its communication kernels for matching
    collectives (:func:`~traceforge.analyzers.communication.collectives.comm_kernels`);
    ``windows``: the selected steps' GPU windows, or the error selecting them raised
    (raised where the one-process analysis raises it)."""

    rank: int
    path: str
    base_ns: int
    step_source: str
    windows: pd.DataFrame | AnalysisError
    comm: pd.DataFrame
    host: pd.DataFrame
    acts: pd.DataFrame
    node_ts: np.ndarray
    u: np.ndarray
    v: np.ndarray
    w: np.ndarray
    t: np.ndarray
    ref: np.ndarray
    ref2: np.ndarray
    notes: list[str]
    act_pid: np.ndarray
    chain: Chain

    @property
    def n_host(self) -> int:
        return len(self.host)

    # A rank's graph is O(its events): it crosses the network in the narrowest integer
    # types that hold its values, compressed (a third of its plain pickle); it unpickles
    # exactly as it was.
    def __getstate__(self) -> bytes:
        state = {k: _narrow(v) for k, v in vars(self).items()}
        state["chain"] = {k: _narrow(v) for k, v in vars(self.chain).items()}
        return _compress(pickle.dumps(state, protocol=5))

    def __setstate__(self, blob: bytes) -> None:
        state = pickle.loads(_decompress(blob))
        state["chain"] = Chain(**{k: _widen(v) for k, v in state["chain"].items()})
        self.__dict__.update({k: _widen(v) for k, v in state.items()})


def _compress(raw: bytes) -> bytes:
    """zstd through pyarrow (a dependency already) when it has the codec: for the 46 MB
    state of a 288 MB trace's graph, 0.07 s and 15 MB against zlib level 1's 0.29 s and
    15 MB, and 2.7x faster to read back. A tag byte says which; zlib without the codec."""
    codec = _zstd()
    if codec is not None:
        body = codec.compress(raw, asbytes=True)
        return b"Z" + len(raw).to_bytes(8, "little") + cast(bytes, body)
    return b"z" + zlib.compress(raw, 1)


def _zstd() -> Any | None:
    """pyarrow's zstd codec; None where pyarrow was built without it."""
    import pyarrow as pa

    return pa.Codec("zstd", compression_level=3) if pa.Codec.is_available("zstd") else None


def _decompress(blob: bytes) -> bytes:
    if blob[:1] == b"Z":
        import pyarrow as pa

        size = int.from_bytes(blob[1:9], "little")
        return cast(bytes, pa.Codec("zstd").decompress(memoryview(blob)[9:], decompressed_size=size,
                                                      asbytes=True))
    return zlib.decompress(blob[1:])


@dataclass(frozen=True)
class _Narrowed:
    """An int64 array, or a frame's int64 ``columns``, stored in a narrower type."""

    value: Any
    columns: tuple[str, ...] = ()


def _small(a: np.ndarray) -> np.ndarray:
    if not len(a):
        return a
    lo, hi = int(a.min()), int(a.max())
    for t in (np.int8, np.int16, np.int32):
        if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max:
            return a.astype(t)
    return a


def _narrow(v: Any) -> Any:
    if isinstance(v, np.ndarray) and v.dtype == np.int64:
        return _Narrowed(_small(v))
    if isinstance(v, pd.DataFrame):
        cols = tuple(str(c) for c in v.columns if v[c].dtype == np.int64)
        if cols:
            return _Narrowed(v.assign(**{c: _small(v[c].to_numpy()) for c in cols}), cols)
    return v


def _widen(v: Any) -> Any:
    if not isinstance(v, _Narrowed):
        return v
    if isinstance(v.value, pd.DataFrame):
        return v.value.astype(dict.fromkeys(v.columns, np.int64))
    return v.value.astype(np.int64)


#: Columns of :attr:`RankGraph.host` and :attr:`RankGraph.acts` (the labels of a path).
HOST_LABELS = ("row", "name", "kind", "pid", "tid", "sync")
ACT_LABELS = ("row", "name", "kind", "cls", "family", "stream", "launch_row", "launch_name",
              "launch_tid")


def _labels(df: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    """``cols`` of ``df``, strings as categoricals: a few distinct names, many rows."""
    out = df[list(cols)].copy()
    for c in cols:
        if out[c].dtype == object or pd.api.types.is_string_dtype(out[c].dtype):
            out[c] = out[c].astype("category")
    return cast("pd.DataFrame", out)


def rank_graph(trace: Trace, *, index: int = 0, steps: Sequence[int] | None = None
               ) -> RankGraph:
    """One rank's :class:`RankGraph` (``index``: its place in the run, the rank when the
    trace does not say; ``steps``: the step numbers to analyse, all when None). The
    summary of a many-rank run; reduce with :func:`critical_path_of`.

    The graph covers the whole trace whatever the steps (a derived table of the trace:
    built once, and read back by later runs on a cached trace); the steps only choose
    the windows."""
    whole = trace.derived("critical_path.rank_graph", lambda: _whole_graph(trace))
    # The steps' windows from the graph's own (a stored graph is read without the
    # timeline: at 10M events that is 1.5 GB not read, and not held while paths run).
    try:
        windows: pd.DataFrame | AnalysisError = select_windows(
            cast("pd.DataFrame", whole.windows), steps, whole.path, whole.step_source)
    except AnalysisError as e:
        windows = e
    return replace(whole, rank=rank_of(trace, index), windows=windows)


def _whole_graph(trace: Trace) -> RankGraph:
    tl = timeline(trace)
    # A copy: a stored timeline's frames are views of one buffer, which a view kept
    # here would keep whole for as long as the graph lives.
    rank, windows = -1, tl.windows.copy()
    acts = tl.activity
    # Outlier steps and profiler overhead (the CPU side of the path is host time).
    notes: list[str] = step_notes(trace)
    h = host_table(trace, acts, notes)
    node_ts = np.concatenate([np.column_stack([h["ts"], h["end"]]).ravel(),
                              np.column_stack([acts["ts"], acts["end"]]).ravel()]
                             ).astype(np.int64)
    chain, kept = host_chain(h)
    # The edges' build in its own frame: its intermediates (candidates, the stream table,
    # anchors: several arrays of the activities' size each) are gone before the labels.
    u, v, w, t, ref, ref2 = _edges(trace, h, acts, chain, kept, notes).arrays()
    ev = trace.events
    act_pid = ev["pid"].to_numpy()[ev.index.get_indexer(pd.Index(acts["row"].to_numpy()))]
    return RankGraph(rank, trace.meta.path, int(trace.meta.base_ns), tl.step_source, windows,
                     comm_kernels(trace, acts, 0), _labels(h, HOST_LABELS),
                     _labels(acts, ACT_LABELS), node_ts, u, v, w, t, ref, ref2, notes,
                     act_pid, chain)


def _edges(trace: Trace, h: pd.DataFrame, acts: pd.DataFrame, chain: Chain,
           kept: np.ndarray, notes: list[str]) -> Edges:
    """Every edge of the rank's graph: work, launch, stream, event, graph and sync edges,
    then the host chain contracted into host edges (its blocking calls' spans weighted
    by the tail they waited for)."""
    nh, na = len(h), len(acts)
    ed = Edges()
    j = np.arange(na, dtype=np.int64)
    a_start, a_end = 2 * nh + 2 * j, 2 * nh + 2 * j + 1
    ts, end = acts["ts"].to_numpy(), acts["end"].to_numpy()
    ed.add(a_start, a_end, end - ts, WORK, j)

    # Launch call of each activity, when the call is a kept host range.
    hidx = pd.Index(h["row"].to_numpy()).get_indexer(acts["launch_row"].to_numpy())
    hidx = np.where((acts["launch_row"].to_numpy() >= 0) & (hidx >= 0), hidx, -1)
    hidx = np.where(hidx >= 0, np.where(kept[np.clip(hidx, 0, None)] if nh else False,
                                        hidx, -1), -1)
    if na and (acts["launch_row"].to_numpy() < 0).all():
        notes.append("no launch calls in the trace: launch edges could not be built")
    cands: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    has = hidx >= 0
    cands.append((LAUNCH, j[has], 2 * hidx[has], h["ts"].to_numpy()[hidx[has]]
                  if nh else np.zeros(0, np.int64), j[has]))

    s = stream_table(acts)
    same = (s["device"].to_numpy()[1:] == s["device"].to_numpy()[:-1]) & (
        s["stream"].to_numpy()[1:] == s["stream"].to_numpy()[:-1])
    nxt, prv = s["act"].to_numpy()[1:][same], s["act"].to_numpy()[:-1][same]
    overlap = end[prv] > ts[nxt]
    cands.append((STREAM, nxt[~overlap], a_end[prv[~overlap]], end[prv[~overlap]],
                  nxt[~overlap]))
    # A start recorded before its predecessor's end (clock jitter of a few hundred ns):
    # the wait is the predecessor's own run, from its start.
    cands.append((WORK, nxt[overlap], a_start[prv[overlap]], ts[prv[overlap]], prv[overlap]))

    event_candidates(trace, h, acts, s, hidx, cands, notes)
    rep = np.flatnonzero(acts["replay"].to_numpy() >= 0)
    if len(rep):
        q = pd.DataFrame({"qid": rep, "device": acts["device"].to_numpy()[rep], "stream": -1,
                          "not_stream": acts["stream"].to_numpy()[rep],
                          "t_launch": np.iinfo(np.int64).max, "t_end": ts[rep],
                          "replay": acts["replay"].to_numpy()[rep]})
        got = last_on_streams(s, q)
        k, src = got["qid"].to_numpy(), got["act"].to_numpy()
        cands.append((GRAPH, k, a_end[src], end[src], k))
    bind(cands, ts, a_start, ed)
    tail = sync_edges(trace, h, acts, s, kept, ed, notes)
    # A call that waited for GPU work: its span carries only the tail, like the GPU edge,
    # so the path goes through the work it waited for.
    waited = chain.span & np.isin(chain.u // 2, tail.index.to_numpy())
    chain.w[waited] = tail.reindex(chain.u[waited] // 2).to_numpy()
    # Nodes other edges touch, as a mark per node id (ids are dense: no sort of the 40M
    # ends of 20M edges, which was this build's largest array at 10M events).
    anchor = np.zeros(2 * (nh + na), dtype=bool)
    for ends in (*ed.u, *ed.v, chain.u[chain.span], chain.v[chain.span]):
        anchor[ends] = True
    contract(chain, anchor, ed)
    return ed
