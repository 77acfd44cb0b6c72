"""The result (:class:`CriticalPath`) and the functions that compute it: from traces
(:func:`critical_path`) or from the ranks' graphs (:func:`critical_path_of`), with the
tables derived from the paths (by category, top ops and kernels, the critical rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.edges import EDGE_TYPES
from traceforge.analyzers.critical_path.labels import run_labels
from traceforge.analyzers.critical_path.rank import RankGraph, rank_graph
from traceforge.analyzers.critical_path.run_graph import RunGraph, join_ranks
from traceforge.analyzers.critical_path.step import S_NODE, StepGraph, t_node
from traceforge.analyzers.critical_path.step_paths import LazyGraphs, StepTables, step_paths
from traceforge.analyzers.critical_path.totals import PathPieces
from traceforge.analyzers.critical_path.what_if import check_keys, parse_what_if
from traceforge.errors import AnalysisError
from traceforge.model import Tables, Trace

if TYPE_CHECKING:
    import networkx as nx

STEP_COLUMNS = ("step", "rank", "critical", "length_ns", "ts", "end", "ranks_crossed", "nodes",
                "edges")
WHAT_IF_COLUMNS = ("step", "rank", "critical", "scenario", "length_ns", "new_length_ns",
                   "saved_ns", "saved_pct")


@dataclass(frozen=True, eq=False)
class CriticalPath(Tables):
    """The critical paths of the steps (see the package docstring).

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
    pieces: PathPieces = field(repr=False)
    by_category: pd.DataFrame
    top: pd.DataFrame
    what_if: pd.DataFrame
    graphs: Mapping[int, nx.DiGraph] = field(default_factory=dict, repr=False)
    nodes: Mapping[int, pd.DataFrame] = field(default_factory=dict, repr=False)
    edges: Mapping[int, pd.DataFrame] = field(default_factory=dict, repr=False)
    notes: tuple[str, ...] = ()
    step_source: str = ""

    @cached_property
    def segments(self) -> pd.DataFrame:
        """Each path in order, one row a piece (made when first read: ~1M rows for a
        large trace, which the text output does not show)."""
        return self.pieces.frame()


def _windows(run: RunGraph) -> tuple[list[int], list[list[pd.DataFrame]], list[str]]:
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
    run = join_ranks(list(ranks))
    if all(r.acts.empty for r in run.ranks):
        raise AnalysisError(f"{ranks[0].path or 'trace'}: no GPU activity, so no GPU "
                            "window to find a critical path in")
    absent = check_keys(run, factors) if factors else []
    numbers, wins, notes = _windows(run)
    notes = run.notes + notes + absent
    scenarios = [(f"{k}={v:g}", {k: v}) for k, v in factors.items()]
    if len(factors) > 1:
        scenarios.append((" ".join(f"{k}={v:g}" for k, v in factors.items()), dict(factors)))
    lab = run_labels(run)
    done = step_paths(run, lab, numbers, wins, scenarios)
    rows = [x for d in done for x in d.rows]
    wi_rows = [x for d in done for x in d.what_if]
    pieces = PathPieces([p for d in done for p in d.pieces], lab)
    notes += [x for d in done for x in d.notes]
    rank_ids = np.array([r.rank for r in run.ranks], dtype=np.int64)
    lazy = LazyGraphs(run, numbers, wins)
    sources = sorted({r.step_source for r in run.ranks})
    return CriticalPath(
        steps=pd.DataFrame(rows, columns=list(STEP_COLUMNS)),
        pieces=pieces,
        by_category=pieces.by_category(),
        top=pieces.top(top_n),
        what_if=pd.DataFrame(wi_rows, columns=list(WHAT_IF_COLUMNS)),
        graphs=StepTables(lazy, _digraph),
        nodes=StepTables(lazy, partial(_node_table, run)),
        edges=StepTables(lazy, partial(_edge_table, rank_ids)),
        notes=tuple(dict.fromkeys(notes)), step_source=", ".join(sources))


def _digraph(sp: StepGraph) -> nx.DiGraph:
    return sp.graph


def _edge_table(rank_ids: np.ndarray, sp: StepGraph) -> pd.DataFrame:
    return cast("pd.DataFrame", pd.DataFrame({
        "u": sp.u, "v": sp.v, "weight": sp.w, "type": np.array(EDGE_TYPES, dtype=object)[sp.t],
        "rank": rank_ids[sp.erank], "ref": sp.ref}))


def _node_table(run: RunGraph, sp: StepGraph) -> pd.DataFrame:
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
    ends = pd.DataFrame({"node": [S_NODE, *(t_node(i) for i in range(k))],
                         "rank": [-1, *ranks.tolist()], "ts": [sp.lo, *sp.w1.tolist()],
                         "row": -1, "what": ["window start", *(["window end"] * k)]})
    return cast("pd.DataFrame", pd.concat([ends, tab], ignore_index=True))


def critical_only(result: CriticalPath, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` (segments, by_category, top, what_if) that belong to each
    step's critical path: that of the rank whose window ends last."""
    crit = result.steps.loc[result.steps["critical"], ["step", "rank"]]
    key = pd.MultiIndex.from_frame(crit.rename(columns={"rank": "for_rank"}))
    col = "for_rank" if "for_rank" in frame.columns else "rank"
    have = pd.MultiIndex.from_arrays([frame["step"], frame[col]])
    return cast("pd.DataFrame", frame[have.isin(key)].reset_index(drop=True))
