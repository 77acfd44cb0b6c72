"""Several runs side by side -- H100 vs MI300, H200 vs MI350, eager vs compiled -- row by row.

:func:`compare` lines runs up by *vendor-neutral* class and family
(:mod:`traceforge.analyzers.runs.vendor`), so cuBLAS's ``sm90_xmma`` kernels and hipBLASLt's
``Cijk`` kernels are one ``library_gemm`` row and FlashAttention and AOTriton's
``attn_fwd`` one ``fused_attention`` row, each naming the library per run.

Every time is **per step and per GPU**: the GPU activity a run's steps launched
(:meth:`traceforge.analyzers.timeline.core.Timeline.in_steps`), durations summed (concurrent
kernels both count, as in ``diff``), divided by the rank's number of steps (1 without
steps) and averaged over the run's ranks. Step time is the slowest rank's
(:func:`traceforge.analyzers.timeline.core.step_time_ns`); busy and idle come from
:func:`~traceforge.analyzers.timeline.core.busy_table`, host wait and launch delay from
:func:`~traceforge.analyzers.timing.launch.launch_overhead`. Speedups divide the baseline's time
by the run's (above 1: faster than the baseline).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.communication.runs import comm_by_run
from traceforge.analyzers.memory import PEAK_COLUMNS, peak_columns
from traceforge.analyzers.runs.inputs import RunInput, TraceRun, as_runs
from traceforge.analyzers.runs.vendor import (
    HEADLINE_CLASSES,
    NEUTRAL_CLASSES,
    neutral_columns,
    vendor_of,
)
from traceforge.analyzers.timeline.core import (
    busy_table,
    kernels_per_step,
    step_time_ns,
    timeline,
)
from traceforge.analyzers.timing.launch import launch_overhead
from traceforge.errors import UsageError
from traceforge.model import Tables, Trace

#: Columns of :attr:`Comparison.runs`.
RUN_COLUMNS = ("run", "vendor", "device", "gpus", "steps", "step_ms", "speedup", "gpu_ms",
               "kernels", "busy_pct", "idle_ms", "host_wait_ms", "launch_latency_us",
               "queue_us",
               *("latency_ms", "latency_from", "hz", "samples_per_s", "tokens_per_s",
                 "overhead_pct"), *PEAK_COLUMNS, "latency_speedup")
#: Columns of :attr:`Comparison.by_class` (long: one row per class and run).
CLASS_COLUMNS = ("class", "run", "ms", "calls", "share_pct", "speedup")
#: Columns of :attr:`Comparison.by_family` (long: one row per neutral family and run).
FAMILY_COLUMNS = ("class", "family", "run", "library", "ms", "calls", "speedup")


@dataclass(frozen=True)
class Comparison(Tables):
    """:func:`compare`'s result; times in ms per step per GPU, counts per step per GPU.

    ``runs``: one row per run (RUN_COLUMNS): vendor, device, ranks, steps, step time and
    its speedup against the baseline, GPU time, kernels, busy %, idle, host wait, launch
    delay, and from capture summaries (when the run has them) the run's step time
    (``latency_ms``, :func:`traceforge.step_time.run_step_time`, labelled by
    ``latency_from``), Hz, samples/s, tokens/s, profiler overhead, peak GiB and latency
    speedup.
    ``by_class`` / ``by_family``: long tables (CLASS_COLUMNS / FAMILY_COLUMNS; ``calls``:
    kernels, copies and memsets per step per GPU; ``share_pct``: of the run's GPU time); every
    run has a row for every class or family any run has (0 where it has none), and the
    headline classes are always there. :meth:`wide` pivots them for display.
    """

    runs: pd.DataFrame
    by_class: pd.DataFrame
    by_family: pd.DataFrame
    baseline: str
    labels: tuple[str, ...]
    notes: tuple[str, ...] = ()
    step_sources: dict[str, str] = field(default_factory=dict)
    #: Collective busbw per kind and run, NCCL and RCCL lined up
    #: (:func:`~traceforge.analyzers.communication.runs.comm_by_run`).
    comm: pd.DataFrame = field(default_factory=pd.DataFrame)

    def wide(self, table: str = "by_class", value: str = "ms") -> pd.DataFrame:
        """``by_class`` or ``by_family`` with one column per run of ``value``, plus the
        speedup columns ``RUN vs BASELINE`` when ``value`` is ``ms``."""
        long: pd.DataFrame = getattr(self, table)
        keys = ["class"] if table == "by_class" else ["class", "family"]
        p = long.pivot_table(index=keys, columns="run", values=value, aggfunc="sum",
                             sort=False).reindex(columns=list(self.labels))
        p.columns = [f"{c} {value}" for c in p.columns]
        if value == "ms":
            base = long[long["run"] == self.baseline].set_index(keys)["ms"]
            for lab in self.labels:
                if lab == self.baseline:
                    continue
                mine = long[long["run"] == lab].set_index(keys)["ms"]
                p[f"{lab} vs {self.baseline}"] = _ratio(base.reindex(p.index).to_numpy(),
                                                        mine.reindex(p.index).to_numpy())
        out = p.reset_index()
        return cast("pd.DataFrame", out)


def _ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b where both are above 0, else NaN."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ok = (a > 0) & (b > 0)
    return np.where(ok, a / np.where(ok, b, 1.0), np.nan)


def _rank_rows(t: Trace, vendor: str) -> pd.DataFrame:
    """The rank's in-step activity as per-step rows: neutral class/family, library, time."""
    tl = timeline(t)
    acts = tl.in_steps()
    n = max(1, len(tl.steps.ranges))
    nc = neutral_columns(acts, vendor)
    return cast("pd.DataFrame", pd.DataFrame({
        "class": nc["ncls"].to_numpy(), "family": nc["nfamily"].to_numpy(),
        "library": nc["library"].to_numpy(),
        "ms": (acts["end"] - acts["ts"]).to_numpy(dtype=float) / 1e6 / n,
        "calls": np.full(len(acts), 1.0 / n),
    }))


def _run_facts(run: TraceRun, vendor: str) -> dict[str, object]:
    steps, step_ns, gpu, kern, busy, idle, wait, delay = [], [], [], [], [], [], [], []
    queue: list[float] = []
    for t in run.traces:
        tl = timeline(t)
        st = step_time_ns(tl)
        if st is not None:
            step_ns.append(st)
        n = max(1, len(tl.steps.ranges))
        steps.append(len(tl.steps.ranges))
        a = tl.in_steps()
        gpu.append(float((a["end"] - a["ts"]).sum()) / 1e6 / n)
        kern.append(float(kernels_per_step(tl)))
        if a.empty:
            continue
        b = busy_table(tl)
        nwin = max(1, len(tl.windows))
        busy.append(float(b["busy_pct"].iloc[-1]))
        idle.append(float(b["idle_ns"].iloc[-1]) / 1e6 / nwin)
        lo = launch_overhead(t).steps
        wait.append(float(lo["host_wait_ns"].mean()) / 1e6)
        d = lo["median_launch_latency_us"].dropna()
        if len(d):
            delay.append(float(d.median()))
        q = lo["median_queue_us"].dropna()
        if len(q):
            queue.append(float(q.median()))
    devices = sorted({d.name for t in run.traces for d in t.meta.devices})
    ws = max((t.meta.world_size or 0 for t in run.traces), default=0)
    fact_dev = run.facts.get("device")

    def mean(xs: list[float]) -> float:
        return float(np.mean(xs)) if xs else float("nan")

    def fact(key: str) -> float:
        v = run.fact(key)
        return float("nan") if v is None else v

    return {
        "run": run.label, "vendor": vendor or "?",
        "device": ", ".join(devices) or (str(fact_dev) if fact_dev else ""),
        "gpus": int(run.fact("gpus") or ws or len(run.traces)),
        "steps": min(steps) if steps else 0,
        "step_ms": max(step_ns) / 1e6 if step_ns else float("nan"),
        "gpu_ms": mean(gpu), "kernels": int(round(mean(kern))) if kern else 0,
        "busy_pct": mean(busy),
        "idle_ms": mean(idle), "host_wait_ms": mean(wait), "launch_latency_us": mean(delay),
        "queue_us": mean(queue),
        # The run's step time group (traceforge.step_time.run_step_time via the run).
        "latency_ms": fact("latency_ms"), "latency_from": run.text("latency_from") or "",
        "hz": fact("hz"), "samples_per_s": fact("samples_per_s"),
        "tokens_per_s": fact("tokens_per_s"), "overhead_pct": fact("overhead_pct"),
        **peak_columns(run.traces, None if run.fact("peak_gib") is None
                       else fact("peak_gib") * 2**30),
    }


def _pick_baseline(labels: list[str], baseline: str | int | None) -> str:
    if baseline is None:
        return labels[0]
    if isinstance(baseline, int):
        if not 0 <= baseline < len(labels):
            raise UsageError(f"baseline {baseline}: there are {len(labels)} runs")
        return labels[baseline]
    if baseline not in labels:
        raise UsageError(f"--baseline {baseline!r}: no such run (runs: {', '.join(labels)})")
    return baseline


def compare(runs: Sequence[RunInput] | RunInput, *, baseline: str | int | None = None
            ) -> Comparison:
    """Line ``runs`` up row by row against ``baseline`` (a label or index; default the
    first run). A run is a :class:`~traceforge.analyzers.runs.inputs.TraceRun`, a trace, or a
    list of rank traces; a flat list of traces is one run per trace."""
    rs = as_runs(runs)
    labels = [r.label for r in rs]
    base = _pick_baseline(labels, baseline)
    facts, parts, sources = [], [], {}
    notes: list[str] = []
    for r in rs:
        vendor = next((v for v in (vendor_of(t) for t in r.traces) if v), "")
        facts.append(_run_facts(r, vendor))
        per_rank = [_rank_rows(t, vendor).assign(rank=i) for i, t in enumerate(r.traces)]
        rows = pd.concat(per_rank, ignore_index=True)
        rows["ms"] /= len(r.traces)
        rows["calls"] /= len(r.traces)
        parts.append(rows.assign(run=r.label))
        sources[r.label] = ", ".join(sorted({timeline(t).step_source for t in r.traces}))
        for t in r.traces:
            notes += [f"{r.label}: {n}" for n in timeline(t).notes]
    run_df = pd.DataFrame(facts)
    bi = labels.index(base)
    run_df["speedup"] = _ratio(np.full(len(rs), run_df["step_ms"].iloc[bi]),
                               run_df["step_ms"].to_numpy())
    run_df["latency_speedup"] = _ratio(np.full(len(rs), run_df["latency_ms"].iloc[bi]),
                                       run_df["latency_ms"].to_numpy())
    all_rows = pd.concat(parts, ignore_index=True)
    by_class = _by_class(all_rows, labels, base)
    by_family = _by_family(all_rows, labels, base)
    present = by_class[by_class["ms"] > 0].groupby("class")["run"].apply(set)
    for cls, have in present.items():
        if len(labels) > 1 and len(have) < len(labels):
            notes.append(f"{cls}: only in {', '.join(sorted(have))}")
    return Comparison(cast("pd.DataFrame", run_df[list(RUN_COLUMNS)]), by_class, by_family,
                      base, tuple(labels), tuple(notes), sources,
                      comm_by_run([(r.label, r.traces) for r in rs]))


def _by_class(rows: pd.DataFrame, labels: list[str], base: str) -> pd.DataFrame:
    g = rows.groupby(["class", "run"])[["ms", "calls"]].sum()
    have = set(rows["class"].unique().tolist()) | set(HEADLINE_CLASSES)
    order = [c for c in NEUTRAL_CLASSES if c in have] + sorted(have - set(NEUTRAL_CLASSES))
    idx = pd.MultiIndex.from_product([order, labels], names=["class", "run"])
    out = g.reindex(idx, fill_value=0.0).reset_index()
    totals = out.groupby("run")["ms"].transform("sum").to_numpy(dtype=float)
    ms = out["ms"].to_numpy(dtype=float)
    out["share_pct"] = np.where(totals > 0, 100.0 * ms / np.where(totals > 0, totals, 1), 0.0)
    b = out[out["run"] == base].set_index("class")["ms"]
    out["speedup"] = _ratio(b.reindex(out["class"]).to_numpy(), ms)
    return cast("pd.DataFrame", out[list(CLASS_COLUMNS)])


def _by_family(rows: pd.DataFrame, labels: list[str], base: str) -> pd.DataFrame:
    keys = ["class", "family"]
    g = rows.groupby([*keys, "run"])[["ms", "calls"]].sum()
    # The libraries a run used for a family, largest time first.
    lib_t = rows.groupby([*keys, "run", "library"])["ms"].sum().reset_index()
    lib_t = lib_t.sort_values(["ms", "library"], ascending=[False, True])
    libs = lib_t.groupby([*keys, "run"])["library"].agg(
        lambda s: ", ".join(x for x in dict.fromkeys(s) if x))
    fams = rows[keys].drop_duplicates()
    rank = {c: i for i, c in enumerate(NEUTRAL_CLASSES)}
    tot = rows.groupby(keys)["ms"].sum()
    fams = fams.assign(_o=[rank.get(c, len(rank)) for c in fams["class"]],
                       _t=[-tot[(c, f)] for c, f in fams.itertuples(index=False, name=None)])
    fams = fams.sort_values(["_o", "_t", "family"])
    idx = pd.MultiIndex.from_tuples(
        [(c, f, r) for c, f in fams[keys].itertuples(index=False, name=None) for r in labels],
        names=[*keys, "run"])
    out = g.reindex(idx, fill_value=0.0)
    out["library"] = libs.reindex(idx).fillna("")
    out = out.reset_index()
    b = out[out["run"] == base].set_index(keys)["ms"]
    out["speedup"] = _ratio(b.reindex(pd.MultiIndex.from_frame(out[keys])).to_numpy(),
                            out["ms"].to_numpy())
    return cast("pd.DataFrame", out[list(FAMILY_COLUMNS)])


__all__ = ["Comparison", "compare"]
