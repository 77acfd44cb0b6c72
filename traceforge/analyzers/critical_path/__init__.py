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
step's window (the GPU window of :mod:`traceforge.analyzers.timeline.core`, from the step's
first GPU activity to the next step's) and runs through the work that set it. Each rank
gets the path into its own window end; the step's critical path is that of the rank
whose window ends last. What-ifs (``gemm=2``: GEMMs twice as fast) divide the work edges
of those kernels and take the longest path again, on the graph: nothing is extrapolated.

A thread's chain between boundaries that nothing else connects to is one edge in the
graph (most op boundaries: the graph is a third of the size, the path the same); the
path's time is split back into the ranges it ran in when it is labeled.

Where the trace lacks what an edge needs (no CUDA sync events: which stream or event a
call waited for; no launch calls), the edge is inferred or left out, and ``notes`` say so.

The code is split by noun: :mod:`.edges` (edge types), :mod:`.host` (host ranges and
their chains), :mod:`.streams` (what ran on a stream before a moment), :mod:`.sync`
(what GPU work and blocking calls waited for), :mod:`.rank` (one rank's graph),
:mod:`.run` (the ranks on one clock, with collectives), :mod:`.step` (a step's graph and
its longest paths), :mod:`.segments` (a path as named pieces of time), :mod:`.labels`
(the names pieces get, as codes built once per run), :mod:`.step_paths` (every step's
paths and what-ifs, on forked workers, one per core, for a large trace), :mod:`.totals`
(time by category and top ops summed from the pieces), :mod:`.what_if`, :mod:`.result`
(:class:`CriticalPath` and the functions that compute it) and :mod:`.handoff` (what
annotate and the report take). This module re-exports the public
names; private helpers are looked up (and patched) in the module that defines them.
"""

from __future__ import annotations

from traceforge.analyzers.critical_path.edges import (
    COLLECTIVE,
    EDGE_TYPES,
    END,
    EVENT,
    GRAPH,
    HOST,
    LAUNCH,
    START,
    STREAM,
    SYNC_SPAN,
    SYNC_WAIT,
    WORK,
)
from traceforge.analyzers.critical_path.handoff import (
    PathTrack,
    ReportData,
    path_tracks,
    report_data,
)
from traceforge.analyzers.critical_path.host import AUTOGRAD, HOST_KINDS
from traceforge.analyzers.critical_path.rank import (
    ACT_LABELS,
    HOST_LABELS,
    RankGraph,
    rank_graph,
)
from traceforge.analyzers.critical_path.result import (
    STEP_COLUMNS,
    WHAT_IF_COLUMNS,
    CriticalPath,
    critical_only,
    critical_path,
    critical_path_of,
)
from traceforge.analyzers.critical_path.segments import (
    HOST_CATEGORIES,
    SEGMENT_COLUMNS,
    SEGMENT_KINDS,
)
from traceforge.analyzers.critical_path.step import S_NODE
from traceforge.analyzers.critical_path.sync import (
    BLOCKING_COPY,
    DEVICE_SYNC,
    EVENT_RECORD,
    EVENT_SYNC,
    STREAM_SYNC,
    STREAM_WAIT,
)
from traceforge.analyzers.critical_path.what_if import parse_what_if

__all__ = [
    "ACT_LABELS", "AUTOGRAD", "BLOCKING_COPY", "COLLECTIVE", "DEVICE_SYNC", "EDGE_TYPES",
    "END", "EVENT", "EVENT_RECORD", "EVENT_SYNC", "GRAPH", "HOST", "HOST_CATEGORIES",
    "HOST_KINDS", "HOST_LABELS", "LAUNCH", "SEGMENT_COLUMNS", "SEGMENT_KINDS", "START",
    "STEP_COLUMNS", "STREAM", "STREAM_SYNC", "STREAM_WAIT", "SYNC_SPAN", "SYNC_WAIT",
    "S_NODE", "WHAT_IF_COLUMNS", "WORK", "CriticalPath", "PathTrack", "RankGraph",
    "ReportData", "critical_only", "critical_path", "critical_path_of", "parse_what_if",
    "path_tracks", "rank_graph", "report_data",
]
