"""``traceforge idle TRACE``: where the GPU is idle, and why."""

from __future__ import annotations

import click

from traceforge.analyzers.idle import idle_gaps
from traceforge.analyzers.kernel_names import short_name
from traceforge.commands import values
from traceforge.commands.options import emit, format_option, trace_argument
from traceforge.formats import load
from traceforge.render import render_frame
from traceforge.render.frame import to_json_bytes


@click.command("idle")
@trace_argument
@click.option("-n", "limit", type=values.COUNT, default=10, show_default=True,
              help="Largest gaps to list (0: all).")
@click.option("--min-gap-us", type=values.DURATION, default=0.0, show_default=True,
              help="List only gaps at least this long (all gaps still count in the summary).")
@click.option("--per-stream", is_flag=True, help="Also analyze each stream on its own.")
@format_option
def command(trace: str, limit: int, min_gap_us: float, per_stream: bool, fmt: str) -> None:
    """GPU idle time per device (and stream) by cause, gap histogram and largest gaps."""
    t = load(trace)
    r = idle_gaps(t, min_gap_ns=int(min_gap_us * 1e3), per_stream=per_stream)
    top = r.gaps.sort_values("dur", ascending=False, kind="stable")
    top = top if limit <= 0 else top.head(limit)
    if fmt == "json":
        emit(to_json_bytes({"span_ns": r.span_ns, "summary": r.summary,
                            "histogram": r.histogram, "gaps": top}).decode())
        return
    notes = tuple(t.meta.notes)
    if t.gpu().empty:
        notes += ("No GPU activity in this trace: nothing to report.",)
    if fmt == "csv":
        emit(render_frame(top, fmt))
        return
    # Tables show short kernel names (JSON and CSV keep the full ones).
    show = top.assign(ts_us=top["ts"] / 1e3, dur_us=top["dur"] / 1e3,
                      next_name=top["next_name"].map(_short))[
        ["device", "stream", "step", "ts_us", "dur_us", "cause", "cpu_op", "annotation",
         "next_name"]]
    summary = r.summary.assign(idle_us=r.summary["idle_ns"] / 1e3).drop(columns="idle_ns")
    emit(render_frame(summary, fmt, title=f"GPU idle by cause (% of step windows): {trace}"))
    emit(render_frame(r.histogram, fmt, title="Gap lengths"))
    emit(render_frame(show, fmt, title="Largest gaps", notes=notes))


def _short(name: object) -> object:
    return short_name(name) if isinstance(name, str) else name
