"""``traceforge ops TRACE``: framework operators by the GPU time of their kernels."""

from __future__ import annotations

import click

from traceforge.analyzers.ops import ops
from traceforge.analyzers.steps import select_steps
from traceforge.commands import values
from traceforge.commands.options import emit, format_option, step_option, trace_argument
from traceforge.formats import load
from traceforge.render import render_frame


@click.command("ops")
@trace_argument
@click.option("-n", "limit", type=values.COUNT, default=20, show_default=True,
              help="Rows to show (0: all).")
@click.option("--kernels-only", is_flag=True, help="Leave memcpy/memset time out of self GPU time.")
@step_option
@format_option
def command(trace: str, limit: int, kernels_only: bool, steps: tuple[int, ...], fmt: str) -> None:
    """Operators by self GPU time, with %, calls and GFLOPs (from shapes when needed)."""
    t = load(trace)
    if steps:
        t = select_steps(t, steps)
    df = ops(t, None if limit <= 0 else limit, include_memory=not kernels_only)
    notes: tuple[str, ...] = ()
    if df.empty:
        notes = ("No GPU time could be attributed to host operators (no cpu_op events with "
                 "External ids, or no GPU activity).",)
    elif fmt in ("table", "md"):
        df = df.rename(
            columns={"op": "Operation", "self_gpu_us": "Self GPU (us)", "pct": "Self GPU %",
                     "calls": "Calls", "kernels": "Kernels", "gflops": "GFLOPs",
                     "tflops_per_s": "TFLOP/s"}
        )
    emit(render_frame(df, fmt, title=f"Top operations by self GPU time: {trace}", notes=notes))
