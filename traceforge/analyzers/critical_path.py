"""Critical path of each step across CPU threads, GPU streams and ranks (networkx).

The graph (one ``networkx.DiGraph`` per step) has a node at the start and at the end of
every host range (ops, runtime/driver calls, annotations, python frames) and of every GPU
activity; edges say what had to happen before what, weighted by the time it took:

* **host**: the ranges of a thread are serialized in nesting order (as HTA does): one edge
  from each start/end to the next on the thread, its time that of the innermost range
  around it (no range: the thread was idle, or busy in something not profiled). The
  autograd backward thread is serialized with the thread that called ``backward()``,
  which waits for it (HTA PR#270 does the same); other threads are independent.
* **work**: an activity's start to its end, weighted by its duration.
* **launch / stream / event / graph**: what an activity's start waited for. Candidates:
  its launch call's start; the end of the previous activity on its stream; the end of the
  work a stream wait (``cudaStreamWaitEvent``) made it wait for; inside a CUDA/HIP graph
  replay, the latest end of the replay's work on other streams. The candidate that ended
  last is what the activity waited for: its edge carries the delay (launch delay, stream
  gap, ...); the others get weight 0 (they only keep the order for what-ifs).
* **sync**: a blocking call (device/stream/event synchronize, a blocking copy) returns a
  short *tail* after both it began and the GPU work it covers ended: both edges into its
  end carry that tail, so the path goes through the GPU work when the call waited.
* **collective**: across ranks, a collective cannot end on any rank before the last rank
  started it: an edge from every rank's start to every rank's end, weighted by the time
  from the last start to that rank's end. Ranks are put on one clock by ``meta.base_ns``.

Every node then satisfies *time = max over in-edges (source time + weight)*, so the
longest path into a step's end (``nx.dag_longest_path``) has exactly the length of the
step's window (the GPU window of :mod:`traceforge.analyzers.timeline`, from the step's
first GPU activity to the next step's) and runs through the work that set it. Each rank
gets the path into its own window end; the step's critical path is that of the rank
whose window ends last. What-ifs (``gemm=2``: GEMMs twice as fast) divide the work edges
of those kernels and take the longest path again, on the graph: nothing is extrapolated.

A thread's chain between boundaries that nothing else connects to is one edge in the
graph (most op boundaries: the graph is a third of the size, the path the same); the
path's time is split back into the ranges it ran in when it is labeled.

Where the trace lacks what an edge needs (no CUDA sync events: which stream or event a
call waited for; no launch calls), the edge is inferred or left out, and ``notes`` say so.
"""

from __future__ import annotations

import pickle
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import networkx as nx
import numpy as np
import pandas as pd

from traceforge.analyzers import steps as st
from traceforge.analyzers.activity import BLOCKING_SYNC_APIS, LAUNCH_APIS
from traceforge.analyzers.breakdown import rank_of
from traceforge.analyzers.collectives import comm_kernels, match
from traceforge.analyzers.kernel_names import CLASSES
from traceforge.analyzers.stacks import innermost
from traceforge.analyzers.timeline import timeline
from traceforge.errors import AnalysisError, UsageError
from traceforge.model import Tables, Trace, name_mask

HOST_KINDS = ("cpu_op", "runtime", "driver", "user_annotation", "python")
DEVICE_SYNC = frozenset({"cudaDeviceSynchronize", "cuCtxSynchronize", "hipDeviceSynchronize"})
STREAM_SYNC = frozenset({"cudaStreamSynchronize", "cuStreamSynchronize",
                         "hipStreamSynchronize"})
EVENT_SYNC = frozenset({"cudaEventSynchronize", "cuEventSynchronize", "hipEventSynchronize"})
#: Blocking copies: they wait for the copy they launch (which waits for its stream).
BLOCKING_COPY = BLOCKING_SYNC_APIS - DEVICE_SYNC - STREAM_SYNC - EVENT_SYNC
STREAM_WAIT = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent", "hipStreamWaitEvent"})
EVENT_RECORD = re.compile(r"^(cuda|cu|hip)EventRecord")

#: Edge types, in the order of their codes in :attr:`CriticalPath.edges` ``type``.
EDGE_TYPES = ("host", "sync_span", "work", "launch", "stream", "event", "graph",
              "sync_wait", "collective", "window_start", "window_end")
(HOST, SYNC_SPAN, WORK, LAUNCH, STREAM, EVENT, GRAPH, SYNC_WAIT, COLLECTIVE,
 START, END) = range(len(EDGE_TYPES))

#: Kinds of path segments.
SEGMENT_KINDS = ("cpu_op", "runtime", "kernel", "memcpy", "memset", "sync", "idle")
#: Columns of :attr:`CriticalPath.segments` (ts/dur: ns in the segment's rank's clock).
SEGMENT_COLUMNS = ("step", "for_rank", "order", "rank", "kind", "name", "category", "ts",
                   "dur", "row", "pid", "tid")
#: Categories besides the kernel classes of :mod:`traceforge.analyzers.kernel_names`.
HOST_CATEGORIES = ("cpu op", "runtime", "launch overhead", "sync wait", "idle")
STEP_COLUMNS = ("step", "rank", "critical", "length_ns", "ts", "end", "ranks_crossed", "nodes",
                "edges")
WHAT_IF_COLUMNS = ("step", "rank", "critical", "scenario", "length_ns", "new_length_ns",
                   "saved_ns", "saved_pct")

_NONE = np.iinfo(np.int64).min


# -- results -------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class CriticalPath(Tables):
    """The critical paths of the steps (see the module docstring).

    Every rank's step has a path into its own window end (which may cross into other
    ranks at collectives); ``critical`` marks, per step, the rank whose window ends last:
    its path is the step's. Frames with ``for_rank`` hold every rank's path;
    :func:`critical_only` keeps the steps' critical ones.

    ``steps``: one row per step and rank (STEP_COLUMNS): ``length_ns`` of the path (= the
    rank's window), the window ``ts``/``end`` in that rank's clock, how many ranks the path
    runs on, the step graph's size. ``segments``: each path in order (SEGMENT_COLUMNS):
    pieces on one ``rank`` with kind, name and category; ``ts``/``dur`` in ns since that
    rank's trace start, as in ``Trace.events``; ``row`` the event's row label (-1 for
    gaps); ``pid``/``tid`` its track (host thread, or the GPU row and stream).
    ``by_category``: step, for_rank, category, ns, pct. ``top``: the ops and kernels on
    the path with their share. ``what_if``: one row per step, rank and scenario.
    ``graphs``: step -> the step's DiGraph (int nodes; S = -1 the earliest window start,
    -2 - i rank i's window end; ``weight`` in ns); ``nodes``/``edges``: step -> its nodes
    (node, rank, ts, row, what) and edges (u, v, weight, type, rank, ref) as DataFrames
    (``ref``: the activity's position in ``timeline(trace).activity`` for GPU edges, the
    host range's for sync edges, the first chain piece for host edges).
    ``notes``: what could not be built, in plain words.
    """

    steps: pd.DataFrame
    segments: pd.DataFrame
    by_category: pd.DataFrame
    top: pd.DataFrame
    what_if: pd.DataFrame
    graphs: dict[int, nx.DiGraph] = field(default_factory=dict, repr=False)
    nodes: dict[int, pd.DataFrame] = field(default_factory=dict, repr=False)
    edges: dict[int, pd.DataFrame] = field(default_factory=dict, repr=False)
    notes: tuple[str, ...] = ()
    step_source: str = ""


# -- what-if specs -------------------------------------------------------------------------
def parse_what_if(specs: Sequence[str] | Mapping[str, float] | None) -> dict[str, float]:
    """``["gemm=2", "nccl=1.5"]`` -> ``{"gemm": 2.0, "nccl": 1.5}`` (factor = speedup)."""
    if specs is None:
        return {}
    if isinstance(specs, Mapping):
        items: list[tuple[str, Any]] = [(str(k), v) for k, v in specs.items()]
    else:
        items = []
        for s in specs:
            for part in str(s).split():
                key, sep, val = part.partition("=")
                if not sep or not key:
                    raise UsageError(f"--what-if {part!r}: want CLASS=FACTOR, e.g. gemm=2")
                items.append((key, val))
    out: dict[str, float] = {}
    for key, val in items:
        try:
            f = float(val)
        except (TypeError, ValueError):
            raise UsageError(f"--what-if {key}={val}: the factor is not a number") from None
        if not np.isfinite(f) or f <= 0:
            raise UsageError(f"--what-if {key}={val}: the factor must be a positive speedup")
        out[key] = f
    return out


# -- per-rank graph ------------------------------------------------------------------------
@dataclass
class _Edges:
    u: list[np.ndarray] = field(default_factory=list)
    v: list[np.ndarray] = field(default_factory=list)
    w: list[np.ndarray] = field(default_factory=list)
    t: list[np.ndarray] = field(default_factory=list)
    ref: list[np.ndarray] = field(default_factory=list)
    ref2: list[np.ndarray] = field(default_factory=list)

    def add(self, u: Any, v: Any, w: Any, t: int, ref: Any, ref2: Any = -1) -> None:
        u = np.asarray(u, dtype=np.int64)
        self.u.append(u)
        self.v.append(np.asarray(v, dtype=np.int64))
        self.w.append(np.asarray(w, dtype=np.int64))
        self.t.append(np.full(len(u), t, dtype=np.int8))
        self.ref.append(np.asarray(ref, dtype=np.int64))
        self.ref2.append(np.broadcast_to(np.asarray(ref2, dtype=np.int64), u.shape))

    def arrays(self) -> tuple[np.ndarray, ...]:
        if not self.u:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z, z.astype(np.int8), z, z
        return (np.concatenate(self.u), np.concatenate(self.v), np.concatenate(self.w),
                np.concatenate(self.t), np.concatenate(self.ref), np.concatenate(self.ref2))


@dataclass(eq=False)
class RankGraph:
    """One rank's part of the graph (:func:`rank_graph`): everything the cross-rank steps
    need of the rank, and no event table, so it is what a rank sends to the driver in a
    many-rank run. Node ids (local): host range i has 2i (start) and 2i + 1 (end);
    activity j has 2H + 2j and 2H + 2j + 1.

    ``host``/``acts``: the host ranges and activities behind the nodes, with only the
    columns the path is labelled from; ``comm``: its communication kernels for matching
    collectives (:func:`~traceforge.analyzers.collectives.comm_kernels`); ``windows``: the
    selected steps' GPU windows, or the error selecting them raised (raised where the
    one-process analysis raises it)."""

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
    chain: _Chain

    @property
    def n_host(self) -> int:
        return len(self.host)

    # A rank's graph is O(its events): it crosses the network in the narrowest integer
    # types that hold its values, compressed (a third of its plain pickle); it unpickles
    # exactly as it was.
    def __getstate__(self) -> bytes:
        state = {k: _narrow(v) for k, v in vars(self).items()}
        state["chain"] = {k: _narrow(v) for k, v in vars(self.chain).items()}
        return zlib.compress(pickle.dumps(state, protocol=5), 1)

    def __setstate__(self, blob: bytes) -> None:
        state = pickle.loads(zlib.decompress(blob))
        state["chain"] = _Chain(**{k: _widen(v) for k, v in state["chain"].items()})
        self.__dict__.update({k: _widen(v) for k, v in state.items()})


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


def _step_ranges(trace: Trace) -> np.ndarray:
    """Rows that are step ranges (ProfilerStep#N, capture's 'step N', a --steps-from
    match): they hold the step, they are not work in it."""
    ev = trace.events
    pat = f"{st.PROFILER_STEP}|{st.CAPTURE_STEP}"
    rule = trace.steps_from
    if rule is not None and rule != st.NO_STEPS:
        pat += f"|{rule}"
    kinds = ev["kind"].isin(("cpu_op", "user_annotation")).to_numpy()
    return np.asarray(kinds & name_mask(ev["name"], pat))


#: Ranges the autograd engine runs on its device threads (one per GPU).
AUTOGRAD = "autograd::engine::evaluate_function"


def _sorted_categories(col: pd.Series) -> pd.Categorical:
    """A categorical column's values with only the categories in use, sorted."""
    c = pd.Categorical(col).remove_unused_categories()
    out: pd.Categorical = c.reorder_categories(sorted(c.categories, key=str))
    return out


def _merge_backward(code: np.ndarray, pid: np.ndarray, tid: np.ndarray,
                    autograd: np.ndarray, is_op: np.ndarray, notes: list[str]) -> np.ndarray:
    """Serialize the autograd device threads with their process's main thread.

    ``loss.backward()`` hands the backward pass to an autograd thread and blocks until it
    is done, a dependency no profiler records: without it the main thread would look idle
    for the whole backward pass. As HTA does (PR#270), the backward thread's ranges join
    the main thread's chain (the thread whose tid is the pid, else the one with most ops).
    """
    if not np.any(autograd):
        return code
    out = code.copy()
    for p in np.unique(pid[autograd]):
        in_p = pid == p
        if np.any(in_p & (tid == p)):
            main_tid = int(p)
        else:
            ops = in_p & is_op & ~np.isin(code, code[in_p & autograd])
            if not ops.any():
                continue
            main_tid = int(pd.Series(tid[ops]).value_counts().index[0])
        main = int(code[in_p & (tid == main_tid)][0])
        bw = in_p & np.isin(code, code[in_p & autograd]) & (code != main)
        if not bw.any():
            continue
        moved = sorted({int(t) for t in tid[bw]})
        out[bw] = main
        notes.append(f"backward thread(s) {moved} of process {int(p)} serialized with its "
                     f"main thread {main_tid}, which waits for the backward pass")
    return np.asarray(out)


def _host_table(trace: Trace, acts: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    ev = trace.events
    sel = ev["kind"].isin(HOST_KINDS).to_numpy() & (ev["dur"].to_numpy() > 0)
    sel &= ~_step_ranges(trace)
    h = ev[sel]
    # Names and kinds stay categorical (sorted categories, as the labels want them): tests
    # run on the few categories, not on ~1M strings per trace.
    name = _sorted_categories(h["name"])
    kind = _sorted_categories(h["kind"])
    api = kind.isin(["runtime", "driver"])
    sync = np.full(len(h), "", dtype=object)
    sync[api & name.isin(list(DEVICE_SYNC))] = "device"
    sync[api & name.isin(list(STREAM_SYNC))] = "stream"
    sync[api & name.isin(list(EVENT_SYNC))] = "event"
    # A copy call blocks when it is a synchronous API, or when it returned only after its
    # copy ended (cudaMemcpyAsync to pageable memory).
    copies = acts[acts["kind"].isin(("memcpy", "memset")) & (acts["launch_row"] >= 0)]
    blocked = copies.loc[(copies["launch_end"] >= copies["end"])
                         | copies["launch_name"].isin(BLOCKING_COPY), "launch_row"]
    sync[api & h.index.isin(blocked.to_numpy()) & (sync == "")] = "copy"
    pid, tid = h["pid"].to_numpy(), h["tid"].to_numpy()
    # One code per (pid, tid), numbered in order of appearance. Not MultiIndex.factorize:
    # on no rows pandas 2.1 raises "Cannot infer number of levels from empty list".
    code = (pd.DataFrame({"p": pid, "t": tid}).groupby(["p", "t"], sort=False, dropna=False)
            .ngroup().to_numpy().astype(np.int64))
    autograd = name_mask(h["name"], "^" + re.escape(AUTOGRAD))
    code = _merge_backward(code, pid, tid, autograd, kind.isin(["cpu_op"]), notes)
    out = pd.DataFrame({"row": h.index.to_numpy(), "name": name, "kind": kind, "pid": pid,
                        "tid": tid, "ts": h["ts"].to_numpy(),
                        "end": (h["ts"] + h["dur"]).to_numpy(), "code": code, "sync": sync,
                        "corr": h["corr"].to_numpy()})
    return cast("pd.DataFrame", out)


@dataclass
class _Chain:
    """Each thread's range boundaries in nesting order: piece i runs from node ``u[i]`` to
    node ``v[i]`` (the next boundary) and its time belongs to range ``ref[i]`` (the
    innermost around it; -1: none). ``span``: the piece is a blocking call's whole span."""

    u: np.ndarray
    v: np.ndarray
    w: np.ndarray
    ref: np.ndarray
    span: np.ndarray


def _chain(h: pd.DataFrame) -> tuple[_Chain, np.ndarray]:
    """Host pieces: each thread's range boundaries in nesting order, one piece to the next.
    Ranges nested in a blocking sync call are left out (the driver calls beneath it), so
    the call is one piece, its span. Also returns which ranges kept their start boundary."""
    n = len(h)
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return _Chain(z, z, z, z, z.astype(bool)), np.zeros(0, dtype=bool)
    idx = np.arange(n, dtype=np.int64)
    ts, end, code = h["ts"].to_numpy(), h["end"].to_numpy(), h["code"].to_numpy()
    is_sync = (h["sync"].to_numpy() != "").astype(np.int64)
    node = np.concatenate([2 * idx, 2 * idx + 1])
    t = np.concatenate([ts, end])
    c = np.concatenate([code, code])
    start = np.concatenate([np.ones(n, np.int64), np.zeros(n, np.int64)])
    # Equal times: ends before starts; a parent starts before its child (longer first),
    # and a child ends before its parent (the later starter first).
    tie = np.concatenate([ts - end, -ts])
    order = np.lexsort((node, tie, start, t, c))
    node, t, c, start = node[order], t[order], c[order], start[order]
    delta = np.where(start == 1, 1, -1) * np.concatenate([is_sync, is_sync])[order]
    after = np.cumsum(delta)
    before = after - delta
    keep = np.where(delta > 0, before, after) == 0
    node, t, c = node[keep], t[keep], c[keep]
    kept_start = np.zeros(n, dtype=bool)
    kept_start[node[node % 2 == 0] // 2] = True
    same = c[1:] == c[:-1]
    u, v = node[:-1][same], node[1:][same]
    w = (t[1:] - t[:-1])[same]
    # Each segment's time belongs to the innermost kept range around its start.
    r = np.flatnonzero(kept_start)
    hit = innermost(code[r], ts[r], end[r], c[:-1][same], t[:-1][same])
    ref = np.where(hit >= 0, r[np.clip(hit, 0, None)], -1)
    span = (u % 2 == 0) & (v == u + 1) & (is_sync[u // 2] == 1)
    return _Chain(u, v, w, ref, span), kept_start


def _contract(ch: _Chain, anchors: np.ndarray, ed: _Edges) -> None:
    """Host edges: the chain pieces, with runs between boundaries that nothing else
    connects to (most op boundaries) merged into one edge; ``ref``/``ref2`` give the run
    of pieces, which label the path's time. The longest path is unchanged, and the graph
    is a third of the size. Spans of blocking calls stay single edges (ref: the call)."""
    keep = ~ch.span
    pu, pv, pw = ch.u[keep], ch.v[keep], ch.w[keep]
    piece = np.flatnonzero(keep)
    n = len(pu)
    if n:
        new = np.ones(n, dtype=bool)
        new[1:] = (pu[1:] != pv[:-1]) | np.isin(pu[1:], anchors)
        first = np.flatnonzero(new)
        last = np.append(first[1:] - 1, n - 1)
        ed.add(pu[first], pv[last], np.add.reduceat(pw, first), HOST, piece[first],
               piece[last] + 1)
    sp = np.flatnonzero(ch.span)
    ed.add(ch.u[sp], ch.v[sp], ch.w[sp], SYNC_SPAN, ch.u[sp] // 2)


def _stream_table(acts: pd.DataFrame) -> pd.DataFrame:
    """Activities by stream in issue order, with a monotone launch key and end."""
    lkey = np.where(acts["launch_ts"].to_numpy() >= 0, acts["launch_ts"].to_numpy(),
                    acts["ts"].to_numpy())
    s = pd.DataFrame({"act": np.arange(len(acts), dtype=np.int64),
                      "device": acts["device"].to_numpy(), "stream": acts["stream"].to_numpy(),
                      "ts": acts["ts"].to_numpy(), "end": acts["end"].to_numpy(),
                      "replay": acts["replay"].to_numpy(), "lkey": lkey})
    s = s.sort_values(["device", "stream", "ts"], kind="stable").reset_index(drop=True)
    g = s.groupby(["device", "stream"], sort=False)
    # A stream runs in launch order, so "launched before t" and "ended by t" are prefixes.
    s["lkey"] = g["lkey"].cummax()
    s["endc"] = g["end"].cummax()
    s["pos"] = g.cumcount().astype(np.int64)
    return cast("pd.DataFrame", s)


def _no_answer() -> pd.DataFrame:
    return cast("pd.DataFrame", pd.DataFrame({"qid": [], "act": [], "end": []}, dtype=np.int64))


def _last_on_streams(s: pd.DataFrame, q: pd.DataFrame) -> pd.DataFrame:
    """For each query (qid, device, stream, not_stream, t_launch, t_end), the activity that
    ended last among those on the matching streams (device/stream -1: any) launched before
    ``t_launch`` and ended by ``t_end``. Returns qid, act, end (one row per answered qid)."""
    if q.empty or s.empty:
        return _no_answer()
    pairs = s[["device", "stream"]].drop_duplicates()
    x = q.merge(pairs.rename(columns={"device": "d", "stream": "s"}), how="cross")
    ok = ((x["device"] < 0) | (x["device"] == x["d"])) & ((x["stream"] < 0) |
                                                         (x["stream"] == x["s"]))
    x = x[ok.to_numpy() & (x["s"] != x["not_stream"]).to_numpy()]
    x = x.drop(columns=["device", "stream"]).rename(columns={"d": "device", "s": "stream"})
    if x.empty:
        return _no_answer()
    x = x.reset_index(drop=True)
    x["k"] = np.arange(len(x))
    by = ["device", "stream"]
    a = pd.merge_asof(x.sort_values("t_launch"), s[[*by, "lkey", "pos"]].sort_values("lkey"),
                      left_on="t_launch", right_on="lkey", by=by, direction="backward",
                      allow_exact_matches=False)
    b = pd.merge_asof(x.sort_values("t_end"), s[[*by, "endc", "pos"]].sort_values("endc"),
                      left_on="t_end", right_on="endc", by=by, direction="backward")
    p1 = a.set_index("k")["pos"].reindex(x["k"]).to_numpy()
    p2 = b.set_index("k")["pos"].reindex(x["k"]).to_numpy()
    pos = np.fmin(p1, p2)
    pos = np.where(np.isnan(p1) | np.isnan(p2), np.nan, pos)
    x["pos"] = pos
    x = x.dropna(subset=["pos"]).astype({"pos": np.int64})
    x = x.merge(s[[*by, "pos", "act", "end"]], on=[*by, "pos"])
    if "replay" in q.columns:
        x = x.merge(s[["act", "replay"]].rename(columns={"replay": "src_replay"}), on="act")
        x = x[x["src_replay"] == x["replay"]]
    x = x.sort_values(["qid", "end"], kind="stable").drop_duplicates("qid", keep="last")
    return cast("pd.DataFrame", x[["qid", "act", "end"]].astype(np.int64))


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


def rank_graph(trace: Trace, *, index: int = 0, steps: Sequence[int] | None = None
               ) -> RankGraph:
    """One rank's :class:`RankGraph` (``index``: its place in the run, the rank when the
    trace does not say; ``steps``: the step numbers to analyse, all when None). The
    summary of a many-rank run; reduce with :func:`critical_path_of`.

    The graph covers the whole trace whatever the steps (a derived table of the trace:
    built once, and read back by later runs on a cached trace); the steps only choose
    the windows."""
    tl = timeline(trace)
    try:
        windows: pd.DataFrame | AnalysisError = tl.select(steps)
    except AnalysisError as e:
        windows = e
    whole = trace.derived("critical_path.rank_graph", lambda: _whole_graph(trace))
    return replace(whole, rank=rank_of(trace, index), windows=windows)


def _whole_graph(trace: Trace) -> RankGraph:
    tl = timeline(trace)
    rank, windows = -1, tl.windows
    acts = tl.activity
    notes: list[str] = []
    h = _host_table(trace, acts, notes)
    nh, na = len(h), len(acts)
    node_ts = np.concatenate([np.column_stack([h["ts"], h["end"]]).ravel(),
                              np.column_stack([acts["ts"], acts["end"]]).ravel()]
                             ).astype(np.int64)
    ed = _Edges()
    chain, kept = _chain(h)
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

    s = _stream_table(acts)
    same = (s["device"].to_numpy()[1:] == s["device"].to_numpy()[:-1]) & (
        s["stream"].to_numpy()[1:] == s["stream"].to_numpy()[:-1])
    nxt, prv = s["act"].to_numpy()[1:][same], s["act"].to_numpy()[:-1][same]
    overlap = end[prv] > ts[nxt]
    cands.append((STREAM, nxt[~overlap], a_end[prv[~overlap]], end[prv[~overlap]],
                  nxt[~overlap]))
    # A start recorded before its predecessor's end (clock jitter of a few hundred ns):
    # the wait is the predecessor's own run, from its start.
    cands.append((WORK, nxt[overlap], a_start[prv[overlap]], ts[prv[overlap]], prv[overlap]))

    _event_candidates(trace, h, acts, s, hidx, cands, notes)
    rep = np.flatnonzero(acts["replay"].to_numpy() >= 0)
    if len(rep):
        q = pd.DataFrame({"qid": rep, "device": acts["device"].to_numpy()[rep], "stream": -1,
                          "not_stream": acts["stream"].to_numpy()[rep],
                          "t_launch": np.iinfo(np.int64).max, "t_end": ts[rep],
                          "replay": acts["replay"].to_numpy()[rep]})
        got = _last_on_streams(s, q)
        k, src = got["qid"].to_numpy(), got["act"].to_numpy()
        cands.append((GRAPH, k, a_end[src], end[src], k))
    _bind(cands, ts, a_start, ed)
    tail = _sync_edges(trace, h, acts, s, kept, ed, notes)
    # A call that waited for GPU work: its span carries only the tail, like the GPU edge,
    # so the path goes through the work it waited for.
    waited = chain.span & np.isin(chain.u // 2, tail.index.to_numpy())
    chain.w[waited] = tail.reindex(chain.u[waited] // 2).to_numpy()
    other = np.concatenate([*ed.u, *ed.v]) if ed.u else np.zeros(0, np.int64)
    anchors = np.unique(np.concatenate([other, chain.u[chain.span], chain.v[chain.span]]))
    _contract(chain, anchors, ed)
    u, v, w, t, ref, ref2 = ed.arrays()
    ev = trace.events
    act_pid = ev["pid"].to_numpy()[ev.index.get_indexer(pd.Index(acts["row"].to_numpy()))]
    return RankGraph(rank, trace.meta.path, int(trace.meta.base_ns), tl.step_source, windows,
                     comm_kernels(trace, acts, 0), _labels(h, HOST_LABELS),
                     _labels(acts, ACT_LABELS), node_ts, u, v, w, t, ref, ref2, notes,
                     act_pid, chain)


def _bind(cands: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
          ts: np.ndarray, a_start: np.ndarray, ed: _Edges) -> None:
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
    for code in np.unique(typ):
        m = typ == code
        ed.add(src[m], a_start[act[m]], w[m], int(code), ref[m])


def _event_candidates(trace: Trace, h: pd.DataFrame, acts: pd.DataFrame, s: pd.DataFrame,
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
    got = _last_on_streams(s, q)
    k = got["qid"].to_numpy()
    nh = len(h)
    src = got["act"].to_numpy()
    cands.append((EVENT, wa[k], 2 * nh + 2 * src + 1, end[src], wa[k]))
    inferred = int((~known).sum())
    if inferred:
        notes.append(f"{inferred} stream waits without CUDA sync events (Kineto "
                     "'cuda_sync'): the waiter is the next launch of the thread, the "
                     "awaited work inferred as the latest work on another stream")


def _sync_edges(trace: Trace, h: pd.DataFrame, acts: pd.DataFrame, s: pd.DataFrame,
                kept: np.ndarray, ed: _Edges, notes: list[str]) -> pd.Series:
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
    got = _last_on_streams(s, q)
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


# -- the run graph -------------------------------------------------------------------------
@dataclass(eq=False)
class _Run:
    ranks: list[RankGraph]
    base: np.ndarray  # first global node id of each rank
    offset: np.ndarray  # ns to add to a rank's ts for the common clock
    node_ts: np.ndarray  # global clock
    node_rank: np.ndarray  # index into ranks
    u: np.ndarray
    v: np.ndarray
    w: np.ndarray
    t: np.ndarray
    ref: np.ndarray
    ref2: np.ndarray  # host edges: end of the run of chain pieces (ref: its start)
    erank: np.ndarray  # index into ranks of the edge's ref
    notes: list[str]


def _run(ranks: list[RankGraph]) -> _Run:
    bases = np.array([r.base_ns for r in ranks], dtype=np.int64)
    offset = bases - bases.min() if len(ranks) > 1 else np.zeros(len(ranks), np.int64)
    sizes = np.array([len(r.node_ts) for r in ranks], dtype=np.int64)
    base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    node_ts = np.concatenate([r.node_ts + offset[i] for i, r in enumerate(ranks)])
    node_rank = np.repeat(np.arange(len(ranks)), sizes)
    us, vs, ws, tt, refs, refs2, er = [], [], [], [], [], [], []
    for i, r in enumerate(ranks):
        us.append(r.u + base[i])
        vs.append(r.v + base[i])
        ws.append(r.w)
        tt.append(r.t)
        refs.append(r.ref)
        refs2.append(r.ref2)
        er.append(np.full(len(r.u), i, dtype=np.int64))
    notes = [f"rank {r.rank}: {n}" for r in ranks for n in r.notes] if len(ranks) > 1 else \
        list(ranks[0].notes)
    run = _Run(ranks, base, offset, node_ts, node_rank.astype(np.int64),
               np.concatenate(us), np.concatenate(vs), np.concatenate(ws),
               np.concatenate(tt), np.concatenate(refs), np.concatenate(refs2),
               np.concatenate(er), notes)
    if len(ranks) > 1:
        _collective_edges(run)
    return run


def _collective_edges(run: _Run) -> None:
    """Across ranks: each member's start -> every member's end, weighted by the time from
    the last start to that end; these replace the members' own work edges."""
    tables = [r.comm.assign(rank=i) for i, r in enumerate(run.ranks)]
    col = match(tables)
    run.notes += list(col.notes)
    m = col.members
    comm = sum(len(t) for t in tables)
    if m.empty:
        if comm:
            run.notes.append("communication kernels could not be matched across ranks: "
                             "collectives are single-rank work edges")
        return
    ri, ai = m["rank"].to_numpy(), m["act"].to_numpy()
    nh = np.array([r.n_host for r in run.ranks], dtype=np.int64)
    start = run.base[ri] + 2 * nh[ri] + 2 * ai
    g = pd.DataFrame({"inst": m["instance"].to_numpy(), "rank": ri, "act": ai,
                      "s": start, "e": start + 1, "ts": run.node_ts[start],
                      "end": run.node_ts[start + 1]})
    p = g.merge(g[["inst", "s", "ts"]].rename(columns={"s": "qs", "ts": "qts"}), on="inst")
    skew = p["qts"] > p["end"]
    if skew.any():
        run.notes.append(f"{int(skew.sum())} collective pairs where one rank started after "
                         "another had ended (clocks of different hosts?): those edges left out")
    p = p[~skew]
    last = p.groupby(["inst", "rank"])["qts"].transform("max")
    tail = (p["end"] - last).to_numpy()
    # Drop the members' own work edges, then add the cross-rank ones.
    own = np.zeros(len(run.u), dtype=bool)
    key = pd.MultiIndex.from_arrays([g["rank"], g["act"]])
    w_idx = np.flatnonzero(run.t == WORK)
    hit = pd.MultiIndex.from_arrays([run.erank[w_idx], run.ref[w_idx]]).isin(key)
    # only the members' own duration edges (start -> end), not overlap-substitute edges
    is_dur = run.v[w_idx] == run.u[w_idx] + 1
    own[w_idx[hit & is_dur]] = True
    keep = ~own
    run.u = np.concatenate([run.u[keep], p["qs"].to_numpy()])
    run.v = np.concatenate([run.v[keep], p["e"].to_numpy()])
    run.w = np.concatenate([run.w[keep], tail])
    run.t = np.concatenate([run.t[keep], np.full(len(p), COLLECTIVE, np.int8)])
    run.ref = np.concatenate([run.ref[keep], p["act"].to_numpy()])
    run.ref2 = np.concatenate([run.ref2[keep], np.full(len(p), -1, np.int64)])
    run.erank = np.concatenate([run.erank[keep], p["rank"].to_numpy()])


# -- one step ------------------------------------------------------------------------------
#: Node ids of the window's start (shared) and of each rank's window end (-2 - rank index).
S_NODE = -1


def _t_node(ri: int) -> int:
    return -2 - ri


@dataclass(eq=False)
class _Step:
    """The graph of one step: every rank's nodes from the earliest window start (``lo``)
    to the latest window end; ``w0``/``w1`` each rank's window in the common clock."""

    step: int
    w0: np.ndarray
    w1: np.ndarray
    lo: int
    nodes: np.ndarray
    u: np.ndarray
    v: np.ndarray
    w: np.ndarray
    t: np.ndarray
    ref: np.ndarray
    ref2: np.ndarray
    erank: np.ndarray
    graph: nx.DiGraph
    notes: list[str]
    topo: list[int] | None = None

    @property
    def shift(self) -> int:
        """Added to node ids to index arrays (S and the T nodes are negative)."""
        return 2 + len(self.w0)

    def order(self) -> list[int]:
        """A topological order of the graph, computed once for every path and what-if."""
        if self.topo is None:
            self.topo = list(nx.topological_sort(self.graph))
        return self.topo


def _step_graph(run: _Run, step: int, wins: list[pd.DataFrame]) -> _Step:
    w0s = np.array([int(w["ts"].iloc[0]) for w in wins], dtype=np.int64) + run.offset
    w1s = np.array([int(w["end"].iloc[0]) for w in wins], dtype=np.int64) + run.offset
    lo, hi = int(w0s.min()), int(w1s.max())
    notes: list[str] = []
    ts = run.node_ts
    inside = (ts >= lo) & (ts <= hi)
    # The nodes that set each rank's window end: its activity starts/ends at that time.
    # A window without GPU work ends where its host range does: the last event before
    # that leads to it (or the window's start, when the rank has none), through idle time.
    used = np.zeros(len(ts), dtype=bool)
    used[run.u] = True
    used[run.v] = True
    ends: list[np.ndarray] = []
    for ri, r in enumerate(run.ranks):
        a0 = run.base[ri] + 2 * r.n_host
        a1 = a0 + 2 * len(r.acts)
        e = np.arange(a0, a1)[ts[a0:a1] == w1s[ri]]
        if len(e) == 0:
            rn = np.arange(run.base[ri], a1)
            rn = rn[(ts[rn] <= w1s[ri]) & (ts[rn] >= lo) & used[rn]]
            e = rn[[int(np.argmax(ts[rn]))]] if len(rn) else np.array([S_NODE])
        ends.append(e)
    sel = inside[run.v]
    u, v, w, t, ref, ref2, erk = (a[sel] for a in (run.u, run.v, run.w, run.t, run.ref,
                                                   run.ref2, run.erank))
    before = ~inside[u]
    # Edges from before the window start at the window's start, with what is left of them.
    w = np.where(before, np.maximum(0, ts[u] + w - lo), w)
    u = np.where(before, S_NODE, u)
    # One edge per node pair, the longest: a DiGraph keeps one.
    order = np.lexsort((w, v, u))
    u, v, w, t, ref, ref2, erk = (a[order] for a in (u, v, w, t, ref, ref2, erk))
    last = np.append((u[1:] != u[:-1]) | (v[1:] != v[:-1]), True)[:len(u)]
    u, v, w, t, ref, ref2, erk = (a[last] for a in (u, v, w, t, ref, ref2, erk))
    nodes = np.flatnonzero(inside & used)
    # Nodes nothing leads to (a thread's first range, a kernel whose launch is not in the
    # trace): the window's start leads to them, as idle time.
    orphan = nodes[~np.isin(nodes, v)]
    te = np.concatenate(ends) if ends else np.zeros(0, np.int64)
    tr = np.concatenate([np.full(len(e), ri) for ri, e in enumerate(ends)]).astype(np.int64)
    te_ts = np.where(te >= 0, ts[np.clip(te, 0, None)], lo)
    u = np.concatenate([u, np.full(len(orphan), S_NODE), te])
    v = np.concatenate([v, orphan, -2 - tr])
    w = np.concatenate([w, ts[orphan] - lo, w1s[tr] - te_ts])
    t = np.concatenate([t, np.full(len(orphan), START, np.int8),
                        np.full(len(te), END, np.int8)])
    ref = np.concatenate([ref, np.full(len(orphan) + len(te), -1)])
    ref2 = np.concatenate([ref2, np.full(len(orphan) + len(te), -1)])
    erk = np.concatenate([erk, run.node_rank[orphan], tr])
    g = nx.DiGraph()
    g.add_node(S_NODE)
    g.add_nodes_from(_t_node(ri) for ri in range(len(run.ranks)))
    g.add_weighted_edges_from(zip(u.tolist(), v.tolist(), w.tolist(), strict=True))
    return _Step(step, w0s, w1s, lo, nodes, u, v, w, t, ref, ref2, erk, g, notes)


def _longest_into(sp: _Step, ri: int, changed: Mapping[tuple[int, int], int] | None = None
                  ) -> list[int]:
    """The longest path into rank ``ri``'s window end, with some edge weights changed.

    ``nx.dag_longest_path`` finds the longest path of the whole graph; while it runs, the
    edges into this rank's end weigh more than all weights together, so that path ends
    there. The step graph and its topological order are shared by every rank and what-if.
    """
    g = sp.graph
    t = _t_node(ri)
    big = int(sp.w.sum()) + 1
    into = list(g.pred[t])
    old = {k: g.edges[k]["weight"] for k in changed or {}}
    try:
        for k, w in (changed or {}).items():
            g.edges[k]["weight"] = w
        for x in into:
            g.edges[x, t]["weight"] = big
        path = [int(x) for x in nx.dag_longest_path(g, weight="weight", topo_order=sp.order())]
    finally:
        for x in into:
            g.edges[x, t]["weight"] = 0
        for k, w in old.items():
            g.edges[k]["weight"] = w
    if not path or path[-1] != t:
        path.append(t)
    if path[0] != S_NODE:
        path.insert(0, S_NODE)
    return path


def _edge_index(sp: _Step, path: Sequence[int]) -> np.ndarray:
    """Row of each consecutive path pair in the step's edge arrays (-1: not an edge)."""
    p = np.asarray(path, dtype=np.int64) + sp.shift
    n = int(max(sp.u.max(initial=0), sp.v.max(initial=0))) + 1 + sp.shift
    key = (sp.u + sp.shift) * n + (sp.v + sp.shift)
    order = np.argsort(key, kind="stable")
    q = p[:-1] * n + p[1:]
    if not len(order):
        return np.full(len(q), -1, dtype=np.int64)
    i = np.clip(np.searchsorted(key[order], q), 0, len(order) - 1)
    return np.where(key[order][i] == q, order[i], -1)


def _expand(run: _Run, sp: _Step, e: np.ndarray) -> tuple[np.ndarray, ...]:
    """The path's edges ``e`` with each host edge split back into its chain pieces, each
    with the range its time belongs to: v, w, type, ref, rank index."""
    v, w, t, ref, ref2, erk = (a[e] for a in (sp.v, sp.w, sp.t, sp.ref, sp.ref2, sp.erank))
    host = t == HOST
    n = np.where(host, ref2 - ref, 1)
    pos = np.repeat(np.arange(len(e)), n)
    k = np.arange(len(pos)) - np.repeat(np.cumsum(n) - n, n)
    v, w, t, ref, erk = v[pos], w[pos], t[pos], ref[pos], erk[pos]
    piece = ref + k
    for ri, r in enumerate(run.ranks):
        m = np.flatnonzero((t == HOST) & (erk == ri))
        if len(m):
            p = piece[m]
            v[m] = r.chain.v[p] + run.base[ri]
            ref[m] = r.chain.ref[p]
            # Whole pieces: those before the window start are cut off by the caller.
            w[m] = r.chain.w[p]
    return v, w, t, ref, erk


def _segments(run: _Run, sp: _Step, path: Sequence[int], ri_end: int) -> pd.DataFrame:
    """The path's edges as named pieces of time, from rank ``ri_end``'s window start."""
    e = _edge_index(sp, path)
    e = e[e >= 0]
    e = e[sp.w[e] > 0]
    v, w, t, ref, erk = _expand(run, sp, e)
    vt = np.where(v >= 0, run.node_ts[np.clip(v, 0, None)], sp.w1[np.clip(-2 - v, 0, None)])
    # What lies before this rank's window start belongs to its previous step.
    start = np.maximum(vt - w, sp.w0[ri_end])
    keep = vt > start
    v, w, t, ref, erk, vt, start = (a[keep] for a in (v, w, t, ref, erk, vt, start))
    w = vt - start
    n = len(v)
    kind = np.full(n, "idle", dtype=object)
    name = np.full(n, "", dtype=object)
    cat = np.full(n, "idle", dtype=object)
    row = np.full(n, -1, dtype=np.int64)
    pid = np.full(n, -1, dtype=np.int64)
    tid = np.full(n, -1, dtype=np.int64)
    rank = np.zeros(n, dtype=np.int64)
    ts = np.zeros(n, dtype=np.int64)
    for ri, r in enumerate(run.ranks):
        m = np.flatnonzero(erk == ri)
        if not len(m):
            continue
        rank[m] = r.rank
        ts[m] = start[m] - run.offset[ri]
        h, a, nh = r.host, r.acts, r.n_host
        local = np.where(v[m] >= 0, v[m] - run.base[ri], -1)
        on_host = (local >= 0) & (local < 2 * nh)
        hv = np.clip(local // 2, 0, max(nh - 1, 0))
        av = np.clip((local - 2 * nh) // 2, 0, max(len(a) - 1, 0))
        # The track: the host thread of a host node, else the activity's stream.
        if nh:
            pid[m] = np.where(on_host, h["pid"].to_numpy()[hv], -1)
            tid[m] = np.where(on_host, h["tid"].to_numpy()[hv], -1)
        if len(a):
            on_gpu = local >= 2 * nh
            pid[m] = np.where(on_gpu, r.act_pid[av], pid[m])
            tid[m] = np.where(on_gpu, a["stream"].to_numpy()[av], tid[m])
        tm = t[m]
        host_edge = np.isin(tm, (HOST, SYNC_SPAN, SYNC_WAIT))
        if host_edge.any() and nh:
            k = m[host_edge]
            rf = np.where(tm[host_edge] == SYNC_WAIT, hv[host_edge], ref[k])
            has = rf >= 0
            hr = np.clip(rf, 0, nh - 1)
            hk, hn = h["kind"].to_numpy()[hr], h["name"].to_numpy()[hr]
            hs = h["sync"].to_numpy()[hr]
            api = np.isin(hk, ("runtime", "driver"))
            launch = api & np.isin(hn, list(LAUNCH_APIS))
            row[k] = np.where(has, h["row"].to_numpy()[hr], -1)
            kind[k] = np.select([~has, hs != "", api], ["idle", "sync", "runtime"], "cpu_op")
            name[k] = np.where(has, hn, "host idle")
            cat[k] = np.select([~has, hs != "", launch, api],
                               ["idle", "sync wait", "launch overhead", "runtime"], "cpu op")
        name[m[(tm == START) | (tm == END)]] = "nothing recorded"
        gpu = ~host_edge & (tm != START) & (tm != END)
        if not gpu.any() or not len(a):
            continue
        k = m[gpu]
        ar = np.clip(ref[k], 0, len(a) - 1)
        tk = tm[gpu]
        work = np.isin(tk, (WORK, COLLECTIVE))
        kind[k] = np.select([work, tk == LAUNCH, tk == EVENT],
                            [a["kind"].to_numpy()[ar], "runtime", "sync"], "idle")
        name[k] = np.select([work, tk == LAUNCH, tk == EVENT, tk == STREAM],
                            [a["name"].to_numpy()[ar], a["launch_name"].to_numpy()[ar],
                             "stream wait", "gpu idle"], "graph dependency")
        cat[k] = np.select([work, tk == LAUNCH, tk == EVENT],
                           [a["cls"].to_numpy()[ar], "launch overhead", "sync wait"], "idle")
        row[k] = np.select([work, tk == LAUNCH], [a["row"].to_numpy()[ar],
                                                  a["launch_row"].to_numpy()[ar]], -1)
        # A launch delay runs from the call, on the host thread, to the activity's start.
        lk = k[tk == LAUNCH]
        if len(lk) and nh:
            la = np.clip(ref[lk], 0, len(a) - 1)
            li = pd.Index(h["row"].to_numpy()).get_indexer(a["launch_row"].to_numpy()[la])
            pid[lk] = np.where(li >= 0, h["pid"].to_numpy()[np.clip(li, 0, None)], -1)
            tid[lk] = a["launch_tid"].to_numpy()[la]
    out = pd.DataFrame({"step": sp.step, "for_rank": run.ranks[ri_end].rank, "rank": rank,
                        "kind": kind, "name": name, "category": cat, "ts": ts, "dur": w,
                        "row": row, "pid": pid, "tid": tid})
    # Consecutive pieces of one thing (a parent op around its children's gaps) are one.
    if len(out) > 1:
        key = ["rank", "kind", "name", "category", "row", "pid", "tid"]
        same = np.ones(len(out), dtype=bool)
        same[0] = False
        for c in key:
            col = out[c].to_numpy()
            same[1:] &= col[1:] == col[:-1]
        same[1:] &= out["ts"].to_numpy()[1:] == (out["ts"] + out["dur"]).to_numpy()[:-1]
        agg: dict[str, str] = dict.fromkeys(["step", "for_rank", *key, "ts"], "first")
        agg["dur"] = "sum"
        out = out.groupby(np.cumsum(~same), sort=False).agg(agg)
    out = out.reset_index(drop=True)
    out["order"] = np.arange(len(out), dtype=np.int64)
    return cast("pd.DataFrame", out[list(SEGMENT_COLUMNS)])


# -- what-ifs ------------------------------------------------------------------------------
def _check_keys(run: _Run, factors: Mapping[str, float]) -> None:
    fams = sorted({str(f) for r in run.ranks for f in pd.unique(r.acts["family"])})
    for k in factors:
        if k not in CLASSES and k not in fams:
            raise UsageError(f"--what-if {k}: not a kernel class ({', '.join(CLASSES)}) "
                             f"or a kernel family of these traces ({', '.join(fams) or 'none'})")


def _factor(run: _Run, sp: _Step, factors: Mapping[str, float]) -> np.ndarray:
    """Per step edge: the speedup of its kernel (its family's if given, else its class's),
    1 for every other edge."""
    f = np.ones(len(sp.u))
    work = np.flatnonzero(np.isin(sp.t, (WORK, COLLECTIVE)))
    for ri, r in enumerate(run.ranks):
        k = work[sp.erank[work] == ri]
        if not len(k):
            continue
        a = np.clip(sp.ref[k], 0, None)
        by_cls = np.array([factors.get(str(c), 1.0) for c in r.acts["cls"].to_numpy()[a]])
        by_fam = np.array([factors.get(str(x), np.nan) for x in r.acts["family"].to_numpy()[a]])
        f[k] = np.where(np.isnan(by_fam), by_cls, by_fam)
    return f


def _what_if_length(sp: _Step, ri: int, f: np.ndarray) -> int:
    """Rank ``ri``'s step length with the work edges divided by ``f``: the longest path
    into its window end, from its (unchanged) window start."""
    w = np.where(f != 1, np.rint(sp.w / f), sp.w).astype(np.int64)
    k = np.flatnonzero(w != sp.w)
    changed = dict(zip(zip(sp.u[k].tolist(), sp.v[k].tolist(), strict=True), w[k].tolist(),
                       strict=True))
    e = _edge_index(sp, _longest_into(sp, ri, changed))
    return int(w[e[e >= 0]].sum()) - int(sp.w0[ri] - sp.lo)


# -- public API ----------------------------------------------------------------------------
def _windows(run: _Run) -> tuple[list[int], list[list[pd.DataFrame]], list[str]]:
    notes: list[str] = []
    sel = []
    for r in run.ranks:
        if isinstance(r.windows, AnalysisError):
            raise r.windows
        sel.append(r.windows)
    common = set(sel[0]["step"].tolist())
    for s_ in sel[1:]:
        common &= set(s_["step"].tolist())
    every: set[int] = set().union(*(set(s_["step"].tolist()) for s_ in sel))
    if every - common:
        notes.append(f"steps {sorted(every - common)} are not on every rank: left out")
    numbers = sorted(common)
    return numbers, [[s_[s_["step"] == n] for s_ in sel] for n in numbers], notes


def critical_path(traces: Trace | Sequence[Trace], *, steps: Sequence[int] | None = None,
                  what_if: Sequence[str] | Mapping[str, float] | None = None,
                  top_n: int = 10) -> CriticalPath:
    """The critical path of each step of one trace, or of the rank traces of one run.

    Each rank's step gets the path into its own window end, which may cross into other
    ranks at collectives; the step's path (``critical``) is that of the rank whose window
    ends last. ``steps``: step numbers (all when None). ``what_if``: speedups by kernel
    class or family (``{"gemm": 2}`` or ``["gemm=2", "nccl=1.5"]``), each tried alone and,
    when there are several, all together.
    """
    ts_ = [traces] if isinstance(traces, Trace) else list(traces)
    if not ts_:
        raise AnalysisError("critical path: no traces")
    factors = parse_what_if(what_if)
    return critical_path_of([rank_graph(t, index=i, steps=steps) for i, t in enumerate(ts_)],
                            what_if=factors, top_n=top_n)


def critical_path_of(ranks: Sequence[RankGraph], *,
                     what_if: Sequence[str] | Mapping[str, float] | None = None,
                     top_n: int = 10) -> CriticalPath:
    """:func:`critical_path` from the ranks' graphs (:func:`rank_graph`, in rank order),
    as the engine computes them where the files are."""
    if not ranks:
        raise AnalysisError("critical path: no traces")
    factors = parse_what_if(what_if)
    run = _run(list(ranks))
    if all(r.acts.empty for r in run.ranks):
        raise AnalysisError(f"{ranks[0].path or 'trace'}: no GPU activity, so no GPU "
                            "window to find a critical path in")
    if factors:
        _check_keys(run, factors)
    numbers, wins, notes = _windows(run)
    notes = run.notes + notes
    scenarios = [(f"{k}={v:g}", {k: v}) for k, v in factors.items()]
    if len(factors) > 1:
        scenarios.append((" ".join(f"{k}={v:g}" for k, v in factors.items()), dict(factors)))
    rows: list[dict[str, Any]] = []
    wi_rows: list[dict[str, Any]] = []
    segs: list[pd.DataFrame] = []
    graphs: dict[int, nx.DiGraph] = {}
    node_tabs: dict[int, pd.DataFrame] = {}
    edge_tabs: dict[int, pd.DataFrame] = {}
    rank_ids = np.array([r.rank for r in run.ranks], dtype=np.int64)
    for n, w in zip(numbers, wins, strict=True):
        sp = _step_graph(run, n, w)
        notes += sp.notes
        last = int(np.argmax(sp.w1))
        for ri, r in enumerate(run.ranks):
            if r.acts.empty:
                continue
            seg = _segments(run, sp, _longest_into(sp, ri), ri)
            length = int(seg["dur"].sum())
            window = int(sp.w1[ri] - sp.w0[ri])
            if length != window:
                notes.append(f"step {n}, rank {r.rank}: path {length} ns != window {window} "
                             "ns (timestamps that contradict the dependencies)")
            segs.append(seg)
            rows.append({"step": n, "rank": r.rank, "critical": ri == last,
                         "length_ns": length, "ts": int(sp.w0[ri] - run.offset[ri]),
                         "end": int(sp.w1[ri] - run.offset[ri]),
                         "ranks_crossed": int(seg["rank"].nunique()),
                         "nodes": sp.graph.number_of_nodes(),
                         "edges": sp.graph.number_of_edges()})
            for label, fac in scenarios:
                new = _what_if_length(sp, ri, _factor(run, sp, fac))
                wi_rows.append({"step": n, "rank": r.rank, "critical": ri == last,
                                "scenario": label, "length_ns": length, "new_length_ns": new,
                                "saved_ns": length - new,
                                "saved_pct": 100.0 * (length - new) / length if length else 0.0})
        graphs[n] = sp.graph
        node_tabs[n] = _node_table(run, sp)
        edge_tabs[n] = pd.DataFrame({"u": sp.u, "v": sp.v, "weight": sp.w,
                                     "type": np.array(EDGE_TYPES, dtype=object)[sp.t],
                                     "rank": rank_ids[sp.erank], "ref": sp.ref})
    segments = (pd.concat(segs, ignore_index=True) if segs
                else pd.DataFrame(columns=list(SEGMENT_COLUMNS)))
    sources = sorted({r.step_source for r in run.ranks})
    return CriticalPath(
        steps=pd.DataFrame(rows, columns=list(STEP_COLUMNS)),
        segments=segments,
        by_category=_by_category(segments),
        top=_top(segments, top_n),
        what_if=pd.DataFrame(wi_rows, columns=list(WHAT_IF_COLUMNS)),
        graphs=graphs, nodes=node_tabs, edges=edge_tabs,
        notes=tuple(dict.fromkeys(notes)), step_source=", ".join(sources))


def _node_table(run: _Run, sp: _Step) -> pd.DataFrame:
    nd = sp.nodes
    ri = run.node_rank[nd]
    local = nd - run.base[ri]
    what = np.empty(len(nd), dtype=object)
    row = np.full(len(nd), -1, dtype=np.int64)
    for i, r in enumerate(run.ranks):
        m = ri == i
        lv = local[m]
        host = lv < 2 * r.n_host
        hr = r.host["row"].to_numpy()
        ar = r.acts["row"].to_numpy()
        hrow = hr[np.clip(lv // 2, 0, len(hr) - 1)] if len(hr) else np.full(len(lv), -1)
        arow = (ar[np.clip((lv - 2 * r.n_host) // 2, 0, len(ar) - 1)] if len(ar)
                else np.full(len(lv), -1))
        row[m] = np.where(host, hrow, arow)
        what[m] = np.where(host, np.where(lv % 2 == 0, "host start", "host end"),
                           np.where(lv % 2 == 0, "gpu start", "gpu end"))
    ranks = np.array([r.rank for r in run.ranks], dtype=np.int64)
    tab = pd.DataFrame({"node": nd, "rank": ranks[ri], "ts": run.node_ts[nd], "row": row,
                        "what": what})
    k = len(run.ranks)
    ends = pd.DataFrame({"node": [S_NODE, *(_t_node(i) for i in range(k))],
                         "rank": [-1, *ranks.tolist()], "ts": [sp.lo, *sp.w1.tolist()],
                         "row": -1, "what": ["window start", *(["window end"] * k)]})
    return cast("pd.DataFrame", pd.concat([ends, tab], ignore_index=True))


def _by_category(seg: pd.DataFrame) -> pd.DataFrame:
    cols = ["step", "for_rank", "category", "ns", "pct"]
    if seg.empty:
        return cast("pd.DataFrame", pd.DataFrame(columns=cols))
    g = seg.groupby(["step", "for_rank", "category"], sort=False)["dur"].sum().reset_index(
        name="ns")
    tot = g.groupby(["step", "for_rank"])["ns"].transform("sum")
    g["pct"] = np.where(tot > 0, 100.0 * g["ns"] / tot, 0.0)
    g = g.sort_values(["step", "for_rank", "ns"], ascending=[True, True, False], kind="stable")
    return cast("pd.DataFrame", g[cols].reset_index(drop=True))


def _top(seg: pd.DataFrame, n: int) -> pd.DataFrame:
    cols = ["step", "for_rank", "kind", "name", "category", "ns", "pct", "count"]
    work = seg[seg["kind"].isin(("cpu_op", "kernel", "memcpy", "memset"))]
    if work.empty:
        return cast("pd.DataFrame", pd.DataFrame(columns=cols))
    keys = ["step", "for_rank"]
    tot = seg.groupby(keys)["dur"].sum()
    # count: the events (an op interrupted by its children is one event, several pieces)
    g = work.groupby([*keys, "kind", "name", "category"], sort=False).agg(
        ns=("dur", "sum"), count=("row", "nunique")).reset_index()
    g["pct"] = 100.0 * g["ns"] / tot.reindex(pd.MultiIndex.from_frame(g[keys])).to_numpy()
    g = g.sort_values([*keys, "ns"], ascending=[True, True, False], kind="stable")
    g = g.groupby(keys, sort=False).head(n)
    return cast("pd.DataFrame", g[cols].reset_index(drop=True))


def critical_only(result: CriticalPath, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` (segments, by_category, top, what_if) that belong to each
    step's critical path: that of the rank whose window ends last."""
    crit = result.steps.loc[result.steps["critical"], ["step", "rank"]]
    key = pd.MultiIndex.from_frame(crit.rename(columns={"rank": "for_rank"}))
    col = "for_rank" if "for_rank" in frame.columns else "rank"
    have = pd.MultiIndex.from_arrays([frame["step"], frame[col]])
    return cast("pd.DataFrame", frame[have.isin(key)].reset_index(drop=True))


# -- handoff to annotate and report ---------------------------------------------------------
@dataclass(frozen=True)
class PathTrack:
    """What ``annotate`` draws on one rank's trace: the pieces of each step's critical
    path that ran on that rank (``segments``, in its clock) and the hops between tracks
    (``flows``: id, from_pid, from_tid, from_ts, to_pid, to_tid, to_ts) where the path
    moves from one thread or stream to another."""

    rank: int
    segments: pd.DataFrame
    flows: pd.DataFrame


def path_tracks(result: CriticalPath) -> list[PathTrack]:
    """Each rank's share of the steps' critical paths, for a track and flow arrows."""
    seg = critical_only(result, result.segments)
    out = []
    for rank, s in seg.groupby("rank", sort=True):
        s = s.sort_values(["step", "order"], kind="stable").reset_index(drop=True)
        # Hops inside this rank's share: consecutive pieces of one path on two tracks.
        nxt = s.shift(-1)
        hop = (((s["pid"] != nxt["pid"]) | (s["tid"] != nxt["tid"]))
               & (s["step"] == nxt["step"]) & (nxt["order"] == s["order"] + 1))
        i = np.flatnonzero(hop.to_numpy())
        flows = pd.DataFrame({
            "id": np.arange(len(i), dtype=np.int64),
            "from_pid": s["pid"].to_numpy()[i], "from_tid": s["tid"].to_numpy()[i],
            "from_ts": (s["ts"] + s["dur"]).to_numpy()[i],
            "to_pid": s["pid"].to_numpy()[i + 1], "to_tid": s["tid"].to_numpy()[i + 1],
            "to_ts": s["ts"].to_numpy()[i + 1]})
        out.append(PathTrack(int(cast(Any, rank)), s, flows))
    return out


@dataclass(frozen=True)
class ReportData:
    """What the HTML report shows of the critical paths: ``bar``, the mean time per step
    by category (category, ns, pct); ``by_step`` the same per step; ``what_if`` the
    what-if table; ``top`` the ops and kernels on the paths. Critical paths only."""

    bar: pd.DataFrame
    by_step: pd.DataFrame
    what_if: pd.DataFrame
    top: pd.DataFrame
    notes: tuple[str, ...]


def report_data(result: CriticalPath) -> ReportData:
    """The category bar (mean over the steps) and the what-if table for the report."""
    bc = critical_only(result, result.by_category)
    if bc.empty:
        bar = pd.DataFrame(columns=["category", "ns", "pct"])
    else:
        nsteps = max(int(bc["step"].nunique()), 1)
        bar = (bc.groupby("category", sort=False)["ns"].sum() / nsteps).reset_index()
        total = float(bar["ns"].sum())
        bar["pct"] = 100.0 * bar["ns"] / total if total else 0.0
        bar = bar.sort_values("ns", ascending=False, kind="stable").reset_index(drop=True)
    return ReportData(cast("pd.DataFrame", bar), bc, critical_only(result, result.what_if),
                      critical_only(result, result.top), result.notes)
