"""``traceforge launch TRACE``: launch overhead, and whether the run is launch-bound."""

from __future__ import annotations

import click

from traceforge.analyzers.launch import launch_overhead
from traceforge.commands import values
from traceforge.commands.options import emit, format_option, trace_argument
from traceforge.formats import load
from traceforge.render import render_frame
from traceforge.render.frame import to_json_bytes


@click.command("launch")
@trace_argument
@click.option("-n", "limit", type=values.COUNT, default=10, show_default=True,
              help="Kernels with the longest launch delay to list (0: all).")
@click.option("--bound-pct", type=values.PERCENT, default=50.0, show_default=True,
              help="Call a step launch-bound when the GPU waits on the CPU more than this %.")
@format_option
def command(trace: str, limit: int, bound_pct: float, fmt: str) -> None:
    """Per step: kernels, launches, GPU time waiting on the CPU, short kernels, verdict."""
    t = load(trace)
    r = launch_overhead(t, bound_pct=bound_pct)
    k = r.kernels.sort_values("launch_delay_ns", ascending=False, kind="stable")
    k = k if limit <= 0 else k.head(limit)
    if fmt == "json":
        emit(to_json_bytes({"steps": r.steps, "kernels": k}).decode())
        return
    notes: tuple[str, ...] = ()
    if r.kernels.empty:
        notes = ("No GPU activity in this trace: nothing to report.",)
    emit(render_frame(r.steps, fmt, title=f"Launch overhead per step: {trace}", notes=notes))
    if fmt != "csv":
        emit(render_frame(k.drop(columns=["replay"]), fmt, title="Longest launch delays"))
