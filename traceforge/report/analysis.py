"""One run's analyses gathered for a report: every analyzer over every rank, once.

``analyze(traces)`` is pure: it calls the analyzers on each rank's trace and keeps their
tables, each with a ``rank`` column, so that a two-rank run shows both ranks in every
section. Each trace's timeline is built once (the analyzers share it through
:func:`traceforge.analyzers.timeline.core.timeline`). The renderers format these tables;
:mod:`traceforge.report.findings` turns them into advice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd

from traceforge.analyzers.communication.table import CommReport, ceiling_line, comm
from traceforge.analyzers.names.kernel_names import attention_text, classify
from traceforge.analyzers.runs.vendor import NEUTRAL_CLASSES, neutral_codes, vendor_of
from traceforge.analyzers.timeline.core import outlier_steps, timeline
from traceforge.analyzers.timing.breakdown import breakdown, rank_of
from traceforge.analyzers.timing.idle import idle_gaps
from traceforge.analyzers.timing.kernels import top_kernels
from traceforge.analyzers.timing.launch import launch_overhead
from traceforge.analyzers.timing.ops import ops
from traceforge.analyzers.timing.overlap import overlap
from traceforge.analyzers.timing.stalls import host_copies, sync_calls
from traceforge.analyzers.timing.summary import summary
from traceforge.errors import TraceforgeError
from traceforge.forks import beside, cores
from traceforge.frames import object_frame
from traceforge.model import Tables, Trace
from traceforge.report import critical_path as path_tables
from traceforge.report import memory as memory_tables
from traceforge.report import roofline as roofline_tables
from traceforge.report.critical_path import PathTables
from traceforge.report.memory import MemoryTables
from traceforge.report.roofline import RooflineTables
from traceforge.step_time import run_step_time, summary_of

#: Most GPU activities drawn in the one-step timeline strip (the HTML stays small).
TIMELINE_MAX = 4000

#: Matrix-product ops the GEMM throughput table lists (their roofline rows).
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
            "aten::linear", "aten::_scaled_mm", "aten::addbmm")

T = TypeVar("T")


@dataclass(frozen=True)
class RunAnalysis(Tables):
    """The tables of one run (one or more ranks); every table has a ``rank`` column.

    Frames are empty (and the name is in ``unavailable`` with the reason) when an analysis
    could not run on this input. ``facts`` holds the run card's numbers, each computed
    once from the tables below: ``busy_pct`` is the mean of the ranks' busy % (the same
    number as ``overview``'s column), ``step_ms`` the mean of their step times,
    ``hfu_min_pct`` / ``hfu_max_pct`` the range of the per-step hardware FLOPs utilization
    over steps and ranks (``roofline.mfu``). ``critical_path`` covers the last step.
    """

    label: str
    paths: tuple[str, ...]
    overview: pd.DataFrame  # one row per rank
    devices: pd.DataFrame
    by_class: pd.DataFrame
    by_neutral: pd.DataFrame  # GPU time by vendor-neutral class and family
    top_kernels: pd.DataFrame
    ops: pd.DataFrame
    idle_summary: pd.DataFrame  # device level
    idle_gaps: pd.DataFrame  # the longest gaps
    idle_histogram: pd.DataFrame
    breakdown: pd.DataFrame
    overlap: pd.DataFrame
    skew: pd.DataFrame  # per rank: how often its collectives started last (several ranks)
    launch: pd.DataFrame  # per step
    copies: pd.DataFrame  # host<->device copies inside steps
    syncs: pd.DataFrame  # synchronizing API calls inside steps
    gemm: pd.DataFrame  # GEMM ops' roofline rows: achieved TFLOP/s, % of bound
    timeline: pd.DataFrame  # one step of rank 0: ts (ns from window start), dur, ...
    timeline_step: int
    device_name: str
    facts: dict[str, float] = field(default_factory=dict)
    roofline: RooflineTables = field(default_factory=RooflineTables)
    critical_path: PathTables = field(default_factory=PathTables)
    run_info: dict[str, Any] = field(default_factory=dict)  # latency, memory from capture
    memory: MemoryTables = field(default_factory=MemoryTables)  # from memory events
    notes: tuple[str, ...] = ()
    #: Rank 0's outlier steps (traceforge.analyzers.timeline.core.outlier_steps) and their
    #: step times against the median: (step, ms) pairs and the median ms.
    outliers: tuple[tuple[int, float], ...] = ()
    median_step_ms: float | None = None
    first_step: int | None = None
    unavailable: dict[str, str] = field(default_factory=dict)
    #: Collective bandwidth (``traceforge comm``): the kind x size table, one point per
    #: collective (bytes, busbw_gbps, kind) for the chart, the ceiling (GB/s, its name)
    #: and the ceiling line, findings and notes.
    comm: pd.DataFrame = field(default_factory=pd.DataFrame)
    comm_points: pd.DataFrame = field(default_factory=pd.DataFrame)
    comm_ceiling: tuple[float, str] | None = None
    comm_notes: tuple[str, ...] = ()

    @property
    def ranks(self) -> int:
        return int(self.facts.get("ranks", 1))


def _empty(cols: Sequence[str]) -> pd.DataFrame:
    df: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
    return df


def _try(name: str, fn: Callable[[], T], default: T, missing: dict[str, str]) -> T:
    """Run one analysis; an input it cannot handle leaves its section empty, with why."""
    try:
        return fn()
    except (TraceforgeError, ImportError) as e:
        missing[name] = str(e)
        return default


def run_label(traces: Sequence[Trace]) -> str:
    """A run's name: the capture mode when traceforge captured it, else the file stem."""
    tf = traces[0].meta.extra.get("traceforge")
    if isinstance(tf, dict):
        mode = tf.get("mode")
        if isinstance(mode, dict) and mode.get("mode"):
            return str(mode["mode"])
    name = traces[0].meta.path.rsplit("/", 1)[-1] or "trace"
    for suffix in (".gz", ".json", ".trace", ".pt", ".sqlite", ".csv"):
        name = name.removesuffix(suffix)
    if len(traces) > 1:
        for r in (f"_rank{rank_of(traces[0])}", f"rank{rank_of(traces[0])}"):
            name = name.replace(r, "")
        name = f"{name.strip('_.-') or 'run'} ({len(traces)} ranks)"
    return name


def _capture_notes(t: Trace) -> list[str]:
    """What ``traceforge capture``'s mode changed (from the trace's own record) and which
    attention kernels ran, by SDPA backend (from the kernel names)."""
    ev = t.events
    k = ev.loc[ev["kind"] == "kernel", "name"].astype(str).value_counts()
    out = [f"attention kernels: {attention_text(dict(zip(k.index, k.to_numpy(), strict=True)))}"]
    tf = t.meta.extra.get("traceforge")
    mode = tf.get("mode") if isinstance(tf, dict) else None
    if isinstance(mode, dict) and mode.get("actions"):
        out.insert(0, f"captured in mode {mode.get('mode')}, which changed: "
                      + "; ".join(map(str, mode["actions"])))
    return out


def _run_info(traces: Sequence[Trace]) -> dict[str, Any]:
    """The run's step time and profiler overhead (:func:`traceforge.step_time.run_step_time`,
    the slowest rank's) and peak memory, from the capture summaries the traces carry."""
    info: dict[str, Any] = {}
    times = [st for st in (run_step_time(summary_of(t.meta.extra)) for t in traces)
             if st is not None]
    if times:
        st = max(times, key=lambda x: x.seconds)
        info.update({"latency_ms": st.ms, "source": st.label,
                     "profiled_ms": st.profiled_s * 1e3 if st.profiled_s is not None else None,
                     "overhead_pct": st.overhead_pct, "overhead_large": st.overhead_large,
                     "samples_per_s": st.samples_per_s, "tokens_per_s": st.tokens_per_s})
    tf = summary_of(traces[0].meta.extra) or {}
    steps = tf.get("steps") or {}
    peak = [int(x) for x in steps.get("peak_memory_bytes") or [] if x]
    if peak:
        info["memory_gib"] = max(peak) / 2**30
    return info


def _outliers(trace: Trace) -> dict[str, Any]:
    """The run's outlier steps (rank 0), for the outlier finding and qualifications."""
    tl = timeline(trace)
    r = tl.steps.ranges
    if r.empty:
        return {}
    dur = dict(zip(r["step"].tolist(), ((r["end"] - r["ts"]) / 1e6).tolist(), strict=True))
    return {"outliers": tuple((s, float(dur[s])) for s in outlier_steps(tl)),
            "median_step_ms": float(np.median(list(dur.values()))),
            "first_step": int(min(dur))}


def _ranked(frames: Sequence[tuple[int, pd.DataFrame]]) -> pd.DataFrame:
    """Frames of several ranks as one, with ``rank`` as the first column."""
    parts = [f.assign(rank=r) for r, f in frames if len(f)]
    if not parts:
        cols = ["rank", *(frames[0][1].columns if frames else [])]
        return _empty([c for i, c in enumerate(cols) if c not in cols[:i]])
    out = pd.concat(parts, ignore_index=True)
    return cast("pd.DataFrame", out[["rank", *[c for c in out.columns if c != "rank"]]])


def _strip(trace: Trace, rank: int) -> tuple[pd.DataFrame, int]:
    """One step's GPU activity (the last: warm-up effects are most likely gone)."""
    cols = ["ts", "dur", "stream", "cls", "name"]
    tl = timeline(trace)
    acts, windows = tl.activity, tl.windows
    if acts.empty or windows.empty:
        return _empty(cols), -1
    w = windows.iloc[-1]
    lo, hi = int(w["ts"]), int(w["end"])
    a = acts[(acts["ts"] >= lo) & (acts["ts"] < hi)]
    if len(a) > TIMELINE_MAX:
        a = a.nlargest(TIMELINE_MAX, "end").sort_values("ts")
    out = pd.DataFrame({
        "ts": a["ts"].to_numpy() - lo, "dur": (a["end"] - a["ts"]).to_numpy(),
        "stream": a["stream"].to_numpy(), "cls": a["cls"].astype(str).to_numpy(),
        "name": [classify(n).short for n in a["name"]],
    })
    out.attrs["window_ns"] = hi - lo
    out.attrs["rank"] = rank
    return out, int(w["step"])


def _neutral(trace: Trace) -> pd.DataFrame:
    """GPU time of the whole trace (as the class table) by vendor-neutral class and family,
    with the library that ran it: an NVIDIA and an AMD run's tables share their rows."""
    cols = ["class", "family", "library", "calls", "total_us", "pct"]
    acts = timeline(trace).activity
    if acts.empty:
        return _empty(cols)
    # Counted and summed per distinct (class, family, name) first, as arrays, then grouped
    # as before: at 10M activities two groupbys on three string columns took ~13 s.
    code, mapped = neutral_codes(acts, vendor_of(trace))
    # (Whole ns: float sums exact below 2**53 ns.)
    ns = np.bincount(code, weights=(acts["end"] - acts["ts"]).to_numpy(), minlength=len(mapped))
    x = object_frame({"class": np.array([m.cls for m in mapped], dtype=object),
                      "family": np.array([m.family for m in mapped], dtype=object),
                      "library": np.array([m.library for m in mapped], dtype=object),
                      "n": np.bincount(code, minlength=len(mapped)),
                      "dur": ns.astype(np.int64)})
    g = x.groupby(["class", "family"]).agg(calls=("n", "sum"), ns=("dur", "sum"))
    lib = x.groupby(["class", "family", "library"])["dur"].sum().reset_index().sort_values(
        ["dur", "library"], ascending=[False, True], kind="stable")
    libs = lib.groupby(["class", "family"], sort=False)["library"].agg(
        lambda v: ", ".join(n for n in dict.fromkeys(v) if n))
    out = g.reset_index()
    out["library"] = libs.reindex(pd.MultiIndex.from_frame(out[["class", "family"]])).fillna(
        "").to_numpy()
    total = float(out["ns"].sum())
    out["total_us"] = out["ns"] / 1e3
    out["pct"] = 100.0 * out["ns"] / total if total else 0.0
    order = {c: i for i, c in enumerate(NEUTRAL_CLASSES)}
    out = out.assign(_o=[order.get(c, len(order)) for c in out["class"]]).sort_values(
        ["_o", "ns", "family"], ascending=[True, False, True], kind="stable")
    return cast("pd.DataFrame", out[cols].reset_index(drop=True))


@contextlib.contextmanager
def _path_ahead(ts: Sequence[Trace]) -> Iterator[Callable[[], PathTables]]:
    """Work out the run's critical path beside the other analyses; yields the call that
    returns it (an error is raised there, where the report reads it).

    On a first report of a large trace the critical path (the rank's graph, the last
    step's path and its what-ifs: ~1.1 s for 288 MB) is as long as the other analyses
    together, and both are mostly Python and pandas work. A forked child
    (:mod:`traceforge.forks`) runs it on another core: a first report of that trace took
    1.89 s wall against 2.42 s with a thread, which the GIL slows (medians of 4
    alternating runs on 2 cores), with the same pages-once peak memory (~0.7 GiB).
    The child computes exactly what the report would here; when it cannot start, fails or
    dies, the path is worked out here instead. Where forking is unsafe (not Linux, not
    the main thread, a pool's worker) a thread runs it; one core, or no GPU work: here.
    Each trace's timeline is built first, so that the child or thread only reads it.
    """
    busy = False
    if cores() >= 2:
        for t in ts:
            with contextlib.suppress(TraceforgeError):
                busy |= not timeline(t).activity.empty
    if not busy:
        yield lambda: path_tables.gather(ts)
        return
    with beside(partial(path_tables.gather, ts), (TraceforgeError, ImportError)) as path:
        yield path


def analyze(traces: Trace | Sequence[Trace], *, label: str | None = None, top: int = 15,
            flops_from: Trace | None = None) -> RunAnalysis:
    """Run every analyzer over one run (its ranks' traces, sorted by rank) once;
    ``flops_from``: FLOPs per step for the FLOPs utilization of runs without op shapes."""
    ts = [traces] if isinstance(traces, Trace) else list(traces)
    if len(ts) == 1 and flops_from is None:
        # One trace: a derived table of it (a later report on the cached trace reads the
        # whole analysis back; its critical-path child is not started then).
        return ts[0].derived(f"report.analyze|{label!r}|{top}",
                             lambda: _analyze_all(ts, label, top, None))
    return _analyze_all(ts, label, top, flops_from)


def _analyze_all(ts: list[Trace], label: str | None, top: int, flops_from: Trace | None
                 ) -> RunAnalysis:
    with _path_ahead(ts) as path_of:
        return _analyze(ts, label, top, path_of, flops_from)


def _rank_tables(t: Trace, r: int, top: int, notes: list[str],
                 add: Callable[[str, int, pd.DataFrame], None], miss: dict[str, str]) -> None:
    """One rank's tables for the report (``add``), its notes added to ``notes``. Its own
    frame: each analysis's per-row tables (the launch report's per kernel, the idle gaps)
    are freed once summarised, not held while the later analyses run."""
    s = summary(t)
    for n in s.notes:
        if n not in notes:
            notes.append(n)
    add("overview", r, pd.DataFrame([_overview_row(s.facts)]))
    add("devices", r, s.devices)
    add("by_class", r, top_kernels(t, by="class", include_memory=True))
    add("by_neutral", r, _neutral(t))
    add("top_kernels", r, top_kernels(t, top))
    add("ops", r, _try("ops", partial(ops, t), _empty(["op"]), miss))
    idle = _try("idle", partial(idle_gaps, t, min_gap_ns=1000, limit=max(top, 0)),
                None, miss)
    if idle is not None:
        add("idle_summary", r, idle.summary[idle.summary["stream"] == -1])
        add("idle_gaps", r, idle.gaps.nlargest(top, "dur"))
        add("idle_histogram", r, idle.histogram[idle.histogram["stream"] == -1])
    del idle
    if not timeline(t).activity.empty:  # CPU-only traces: no launches to judge
        lo = _try("launch", partial(launch_overhead, t, store=False), None, miss)
        if lo is not None:
            add("launch", r, lo.steps)
    add("copies", r, host_copies(t))
    add("syncs", r, sync_calls(t))


def _analyze(ts: list[Trace], label: str | None, top: int,
             path_of: Callable[[], PathTables], flops_from: Trace | None = None
             ) -> RunAnalysis:
    miss: dict[str, str] = {}
    per: dict[str, list[tuple[int, pd.DataFrame]]] = {}

    def add(key: str, rank: int, df: pd.DataFrame) -> None:
        per.setdefault(key, []).append((rank, df))

    notes: list[str] = _capture_notes(ts[0]) if ts else []
    for i, t in enumerate(ts):
        _rank_tables(t, rank_of(t, i), top, notes, add, miss)
    bd = _try("breakdown", lambda: breakdown(ts), _empty(["rank", "step"]), miss)
    roof = _try("roofline", lambda: roofline_tables.gather(ts, flops_from=flops_from),
                RooflineTables(), miss)
    path = (_try("critical_path", path_of, PathTables(), miss)
            if any(not timeline(t).activity.empty for t in ts) else PathTables())
    ovr = _try("overlap", lambda: overlap(ts), None, miss)
    mem = _try("memory", lambda: memory_tables.gather(ts), MemoryTables(), miss)
    cr = _try("comm", lambda: comm(ts), None, miss)

    def table(key: str) -> pd.DataFrame:
        return _ranked(per.get(key, []))

    overview = table("overview")
    strip, tstep = _strip(ts[0], rank_of(ts[0]))
    devices = table("devices")
    dev_name = str(devices["name"].iloc[0]) if len(devices) else ""
    facts = _facts(overview, bd, len(ts))
    hfu = roof.hfu_range()
    if hfu is not None:
        facts["hfu_min_pct"], facts["hfu_max_pct"] = hfu
    return RunAnalysis(
        label=label or run_label(ts),
        paths=tuple(x.meta.path for x in ts),
        overview=overview,
        devices=devices,
        by_class=table("by_class"),
        by_neutral=table("by_neutral"),
        top_kernels=table("top_kernels"),
        ops=_ranked([(r, f.head(top)) for r, f in per.get("ops", [])]),
        idle_summary=table("idle_summary"),
        idle_gaps=table("idle_gaps"),
        idle_histogram=table("idle_histogram"),
        breakdown=bd,
        overlap=ovr.ranks if ovr is not None else _empty(["rank"]),
        skew=ovr.skew if ovr is not None else _empty(["rank"]),
        launch=table("launch"),
        copies=table("copies"),
        syncs=table("syncs"),
        gemm=roofline_tables.gemm_rows(roof, GEMM_OPS),
        timeline=strip,
        timeline_step=tstep,
        device_name=dev_name,
        facts=facts,
        roofline=roof,
        critical_path=path,
        run_info=_run_info(ts),
        memory=mem,
        notes=tuple(notes),
        **_outliers(ts[0]),
        unavailable=miss,
        **_comm_fields(cr),
    )


def _comm_fields(cr: CommReport | None) -> dict[str, Any]:
    """The RunAnalysis fields of the collectives' bandwidth (none without collectives)."""
    if cr is None or cr.run.instances.empty:
        return {}
    inst = cr.run.instances
    ceil = next(iter(cr.run.ceilings.values()), None)
    lines = [ceiling_line(cr), *cr.findings, *cr.notes]
    return {"comm": cr.table, "comm_points": inst[["bytes", "busbw_gbps", "kind"]],
            "comm_ceiling": (ceil.gbps, ceil.link) if ceil else None,
            "comm_notes": tuple(lines)}


def _overview_row(f: dict[str, Any]) -> dict[str, Any]:
    return {"format": f["format"], "steps": len(f["steps"]), "steps_from": f["step_source"],
            "step_time_ms": _ms(f["step_time_ns"]), "gpu_busy_pct": f["gpu_busy_pct"],
            "kernels": f["kernels"], "kernels_per_step": f.get("kernels_per_step"),
            "span_ms": _ms(f["span_ns"])}


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


def _facts(overview: pd.DataFrame, bd: pd.DataFrame, ranks: int) -> dict[str, float]:
    """The run card's numbers, each read from a table of the report (never recomputed)."""
    facts: dict[str, float] = {"ranks": float(ranks)}
    if overview.empty:
        return facts
    facts["span_ms"] = float(overview["span_ms"].max())
    facts["kernels"] = float(overview["kernels"].mean())
    kps = overview["kernels_per_step"].dropna()
    if len(kps):
        # The one kernels per step (timeline.kernels_per_step), mean of ranks, whole.
        facts["kernels_per_step"] = float(round(float(kps.astype(float).mean())))
    facts["steps"] = float(overview["steps"].max())
    st = overview["step_time_ms"].dropna()
    if len(st):
        facts["step_ms"] = float(st.astype(float).mean())
    busy = overview["gpu_busy_pct"].dropna()
    if len(busy):
        facts["busy_pct"] = float(busy.astype(float).mean())
    if len(bd) and "exposed_comm_pct" in bd:
        total = bd[bd["step"] == -1] if (bd["step"] == -1).any() else bd
        facts["exposed_comm_pct"] = float(total["exposed_comm_pct"].astype(float).max())
    return facts
