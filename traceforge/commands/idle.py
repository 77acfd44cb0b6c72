"""``traceforge idle TRACE``: where the GPU is idle, and why."""

from __future__ import annotations

from typing import cast

import click
import pandas as pd

from traceforge.analyzers.idle import idle_gaps
from traceforge.analyzers.kernel_names import short_name
from traceforge.commands import values
from traceforge.commands.options import (
    emit,
    format_option,
    load_ranks,
    resolve_steps,
    step_options,
    trace_argument,
)
from traceforge.render import render_frame
from traceforge.render.frame import to_json_bytes


@click.command("idle")
@trace_argument
@click.option("-n", "limit", type=values.COUNT, default=10, show_default=True,
              help="Largest gaps to list (0: all).")
@click.option("--min-gap-us", type=values.DURATION, default=0.0, show_default=True,
              help="List only gaps at least this long (all gaps still count in the summary).")
@click.option("--per-stream", is_flag=True, help="Also analyze each stream on its own.")
@step_options
@format_option
def command(trace: str, limit: int, min_gap_us: float, per_stream: bool, steps_from: str | None,
            steps_text: str | None, step_list: tuple[int, ...], fmt: str) -> None:
    """GPU idle time per device (and stream) by cause, gap histogram and largest gaps.

    Causes: graph_internal (between the nodes of one CUDA/HIP graph replay), sync,
    host_bound, launch_latency, other.
    """
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    ranks = load_ranks([trace], rule)
    reps = [idle_gaps(t, min_gap_ns=int(min_gap_us * 1e3), per_stream=per_stream, steps=steps)
            for t in ranks]
    multi = len(ranks) > 1

    def tag(frames: list[pd.DataFrame]) -> pd.DataFrame:
        if not multi:
            return frames[0]
        parts = [f.assign(rank=t.meta.rank) for t, f in zip(ranks, frames, strict=True)]
        return cast("pd.DataFrame", pd.concat(parts, ignore_index=True))

    gaps = tag([r.gaps for r in reps]).sort_values("dur", ascending=False, kind="stable")
    top = gaps if limit <= 0 else gaps.head(limit)
    summary, hist = tag([r.summary for r in reps]), tag([r.histogram for r in reps])
    source = reps[0].step_source
    if fmt == "json":
        emit(to_json_bytes({"steps_from": source, "span_ns": sum(r.span_ns for r in reps),
                            "summary": summary, "histogram": hist, "gaps": top,
                            "notes": [n for r in reps for n in r.notes]}).decode())
        return
    notes = tuple(n for t in ranks for n in t.meta.notes) + tuple(n for r in reps for n in r.notes)
    if all(r.span_ns == 0 for r in reps):
        notes += ("No GPU activity in this trace: nothing to report.",)
    if fmt == "csv":
        emit(render_frame(top, fmt))
        return
    # Tables show short kernel names (JSON and CSV keep the full ones).
    show = top.assign(ts_us=top["ts"] / 1e3, dur_us=top["dur"] / 1e3,
                      next_name=top["next_name"].map(_short))
    show = show[[*(["rank"] if multi else []), "device", "stream", "step", "ts_us", "dur_us",
                 "cause", "cpu_op", "annotation", "next_name"]]
    summary = summary.assign(idle_us=summary["idle_ns"] / 1e3).drop(columns="idle_ns")
    emit(render_frame(summary, fmt, title=f"GPU idle by cause (% of recorded step windows; "
                                          f"steps from {source}): {trace}"))
    emit(render_frame(hist, fmt, title="Gap lengths"))
    emit(render_frame(show, fmt, title="Largest gaps", notes=notes))


def _short(name: object) -> object:
    return short_name(name) if isinstance(name, str) else name
