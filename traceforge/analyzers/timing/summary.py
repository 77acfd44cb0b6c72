"""Trace overview: what ``traceforge info`` shows and the report's run card uses."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any, cast

import pandas as pd

from traceforge.analyzers.profiling.notes import step_notes
from traceforge.analyzers.timeline.core import (
    busy_table,
    kernels_per_step,
    outlier_steps,
    step_time_ns,
    timeline,
)
from traceforge.model import Tables, Trace
from traceforge.step_time import run_step_time, summary_of

#: Columns of :attr:`Summary.ranges`.
RANGE_COLUMNS = ["name", "count", "total_ns"]


@dataclass(frozen=True)
class Summary(Tables):
    """Overview of one trace.

    ``facts``: typed values (numbers as numbers, ``steps`` a list of ints, None when
    unknown): path, format, rank, world_size, span_ns, steps, step_source, step_time_ns,
    events, kernels, gpu_busy_pct, versions. Times are integer nanoseconds under the
    names ``traceforge info --format json`` writes (``span_ns``, ``step_time_ns``,
    ``run_step_time_ns``, ``profiled_step_ns``); :meth:`facts_frame` shows them in ms.
    ``notes``: plain-language remarks.
    ``kinds``: kind, events. ``devices``: device, name, sms, memory_gib,
    compute_capability, kernels, busy_pct (the timeline's busy %, inside the steps).
    ``ranges``: in a trace without steps, its host ranges (NVTX ranges, record_function
    annotations) that could mark them -- name, count, total_ns, most frequent first --
    with a note suggesting ``--steps-from``; empty otherwise.
    """

    facts: dict[str, Any]
    notes: tuple[str, ...]
    kinds: pd.DataFrame
    devices: pd.DataFrame
    ranges: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RANGE_COLUMNS))

    def _repr_html_(self) -> str:
        """In Jupyter: the facts table the CLI prints first, then the other tables."""
        base = super()._repr_html_()
        at = base.find("<h4>") if "<h4>" in base else len(base) - len("</div>")
        facts = self.facts_frame().to_html(index=False, border=0)
        return f"{base[:at]}<h4>facts</h4>{facts}{base[at:]}"

    def facts_frame(self, notes: bool = True) -> pd.DataFrame:
        """``facts`` (and, unless ``notes`` is False, the notes) as a two-column (field,
        value) table for people: times in ms, counts with thousands separators."""
        rows: list[tuple[str, str]] = []
        for k, v in self.facts.items():
            label = FACT_LABELS.get(k, k)
            if k == "versions":
                rows += [(f"version {a}", str(b)) for a, b in sorted(v.items())]
            elif k in ("steps", "outlier_steps"):
                rows.append((label, ", ".join(str(s) for s in v) if v else "none"))
            elif v is not None and k.endswith("_ns"):
                rows.append((label, f"{v / 1e6:,.3f}"))
            elif isinstance(v, float):
                rows.append((label, f"{v:,.3f}"))
            elif isinstance(v, int) and not isinstance(v, bool) and k not in ("rank",):
                rows.append((label, f"{v:,}"))
            elif v is not None:
                rows.append((label, str(v)))
        rows += [("note", n) for n in self.notes] if notes else []
        return cast("pd.DataFrame", pd.DataFrame(rows, columns=["field", "value"]))


#: How each fact is labelled in tables (JSON uses the keys); ``*_ns`` facts are shown in ms.
FACT_LABELS = {
    "world_size": "world size",
    "span_ns": "span (ms, first to last event)",
    "step_source": "steps from",
    "step_time_ns": "step time (ms, mean host step)",
    "outlier_steps": "outlier steps (left out of step time)",
    "kernels_per_step": "kernels per step (median)",
    "run_step_time_ns": "run step time (ms)",
    "run_step_time_from": "run step time from",
    "profiled_step_ns": "profiled step (ms, median)",
    "profiler_overhead_pct": "profiler overhead %",
    "samples_per_s": "samples/s",
    "tokens_per_s": "tokens/s",
    "gpu_busy_pct": "GPU busy % (of step windows)",
}


def _ns(v: float) -> int:
    """A time as the integer nanoseconds JSON writes (rounded, the traces' resolution)."""
    return int(round(float(v)))


def summary(trace: Trace, include_outliers: bool = False) -> Summary:
    """Format, devices, ranks, span, steps, events by kind and GPU busy % per device; the
    run's step time, profiler overhead and throughput where the trace carries a capture
    summary; outlier steps (left out of the step time unless ``include_outliers``)."""
    m = trace.meta
    ev = trace.events
    tl = timeline(trace)
    steps = [int(s) for s in tl.steps.ranges["step"]]
    busy = busy_table(tl)
    st = step_time_ns(tl, include_outliers)
    run = run_step_time(summary_of(m.extra))
    facts: dict[str, Any] = {
        "path": m.path,
        "format": m.format,
        "rank": m.rank,
        "world_size": m.world_size,
        "span_ns": int(trace.span_ns),
        "steps": steps,
        "step_source": tl.step_source,
        "step_time_ns": _ns(st) if st is not None and steps else None,
        "outlier_steps": outlier_steps(tl),
        "run_step_time_ns": _ns(run.ms * 1e6) if run else None,
        "run_step_time_from": run.label if run else None,
        "profiled_step_ns": _ns(run.profiled_s * 1e9) if run and run.profiled_s else None,
        "profiler_overhead_pct": run.overhead_pct if run else None,
        "samples_per_s": run.samples_per_s if run else None,
        "tokens_per_s": run.tokens_per_s if run else None,
        "events": len(ev),
        "kernels": int((ev["kind"] == "kernel").sum()),
        "kernels_per_step": kernels_per_step(tl, include_outliers) if steps else None,
        "gpu_busy_pct": float(busy["busy_pct"].iloc[-1]) if len(busy) else None,
        "versions": dict(m.versions),
    }
    notes = list(m.notes) + list(tl.notes) + step_notes(trace, include_outliers)
    if tl.activity.empty and not any("no GPU" in n for n in notes):
        notes.append("no GPU activity in this trace")
    vc = ev["kind"].value_counts()
    kinds = pd.DataFrame({"kind": vc.index.astype(str), "events": vc.to_numpy()})
    kinds = kinds[kinds["events"] > 0].reset_index(drop=True)
    names = {d.id: d for d in m.devices}
    acts = tl.activity
    by_dev = dict(zip(busy["device"].tolist(), busy["busy_pct"].tolist(), strict=True))
    dev_rows = []
    for dev in sorted(set(acts["device"].tolist()) | set(names)):
        d = names.get(int(dev))
        dev_rows.append(
            {
                "device": int(dev),
                "name": d.name if d else "",
                "sms": d.sms if d else None,
                "memory_gib": round(d.memory_bytes / 2**30, 1) if d and d.memory_bytes else None,
                "compute_capability": d.compute_capability if d else None,
                "kernels": int(((acts["device"] == dev) & (acts["kind"] == "kernel")).sum()),
                "busy_pct": float(by_dev.get(int(dev), 0.0)),
            }
        )
    devices = pd.DataFrame(dev_rows, columns=["device", "name", "sms", "memory_gib",
                                              "compute_capability", "kernels", "busy_pct"])
    ranges = step_candidates(trace) if not steps else pd.DataFrame(columns=RANGE_COLUMNS)
    if len(ranges):
        top = str(ranges["name"].iloc[0])
        notes.append(f"no steps found; the host ranges below could mark them: "
                     f"--steps-from {shlex.quote(re.escape(top))} takes each {top!r} as a step")
    return Summary(facts, tuple(notes), kinds, devices, ranges)


def step_candidates(trace: Trace) -> pd.DataFrame:
    """The trace's host ranges (``user_annotation``: NVTX ranges, record_function
    annotations) by name: count and total time, most frequent first (then longest)."""
    ev = trace.events
    ann = ev[(ev["kind"] == "user_annotation") & (ev["dur"] > 0)]
    if ann.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=RANGE_COLUMNS)
        return empty
    g = ann.groupby(ann["name"].astype(str), observed=True)["dur"].agg(["count", "sum"])
    out = pd.DataFrame({"name": g.index.astype(str), "count": g["count"].to_numpy(),
                        "total_ns": g["sum"].to_numpy().astype("int64")})
    out = out.sort_values(["count", "total_ns", "name"], ascending=[False, False, True],
                          kind="stable")
    return cast("pd.DataFrame", out.reset_index(drop=True))
