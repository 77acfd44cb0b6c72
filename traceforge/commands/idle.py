"""``traceforge idle TRACE``: where the GPU is idle, and why."""

from __future__ import annotations

from typing import cast

import click
import pandas as pd

from traceforge.analyzers.idle import idle_gaps
from traceforge.analyzers.kernel_names import short_name
from traceforge.commands import values
from traceforge.commands.options import (
    format_option,
    load_ranks,
    resolve_steps,
    step_options,
    trace_argument,
)
from traceforge.commands.tables import Table, emit_tables, table_options


@click.command("idle")
@trace_argument
@click.option("-n", "limit", type=values.COUNT, default=10, show_default=True,
              help="Largest gaps to list (0: all).")
@click.option("--min-gap-us", type=values.DURATION, default=0.0, show_default=True,
              help="List only gaps at least this long (all gaps still count in the summary).")
@click.option("--per-stream", is_flag=True, help="Also analyze each stream on its own.")
@step_options
@table_options
@format_option
def command(trace: str, limit: int, min_gap_us: float, per_stream: bool, steps_from: str | None,
            steps_text: str | None, step_list: tuple[int, ...], table: str | None,
            out_dir: str | None, fmt: str) -> None:
    """GPU idle time per device (and stream) by cause, gap histogram and largest gaps.

    Causes: graph_internal (between the nodes of one CUDA/HIP graph replay), sync,
    host_bound, launch_latency, other. Tables: summary, histogram, gaps (CSV: --table
    NAME, or -o DIR for all).
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
    notes = tuple(n for t in ranks for n in t.meta.notes) + tuple(n for r in reps for n in r.notes)
    if all(r.span_ns == 0 for r in reps):
        notes += ("No GPU activity in this trace: nothing to report.",)
    if fmt in ("table", "md"):
        # Tables for people show short kernel names (JSON and CSV keep the full ones).
        top = top.assign(next_name=top["next_name"].map(_short))
        top = top[[*(["rank"] if multi else []), "device", "stream", "step", "ts", "dur",
                   "cause", "cpu_op", "annotation", "next_name"]]
    emit_tables(
        [Table("summary", summary, f"GPU idle by cause (% of recorded step windows; steps "
                                   f"from {source}): {trace}"),
         Table("histogram", hist, "Gap lengths"),
         Table("gaps", top, "Largest gaps", notes)],
        fmt, table=table, out_dir=out_dir,
        doc={"steps_from": source, "span_ns": sum(r.span_ns for r in reps),
             "summary": summary, "histogram": hist, "gaps": top,
             "notes": [n for r in reps for n in r.notes]})


def _short(name: object) -> object:
    return short_name(name) if isinstance(name, str) else name
