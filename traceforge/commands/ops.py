"""``traceforge ops TRACE``: framework operators by the GPU time of their kernels."""

from __future__ import annotations

import click

from traceforge.analyzers.timing.ops import ops, why_no_ops
from traceforge.commands import values
from traceforge.commands.options import (
    emit,
    emit_frame,
    format_option,
    load_trace,
    resolve_steps,
    step_options,
    trace_argument,
)


@click.command("ops")
@trace_argument
@click.option("-n", "limit", type=values.COUNT, default=20, show_default=True,
              help="Rows to show (0: all).")
@click.option("--kernels-only", is_flag=True, help="Leave memcpy/memset time out of self GPU time.")
@step_options
@format_option
def command(trace: str, limit: int, kernels_only: bool, steps_from: str | None,
            steps_text: str | None, step_list: tuple[int, ...], fmt: str) -> None:
    """Operators by self GPU time, with %, calls and GFLOPs (from shapes when needed)."""
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    t = load_trace(trace, rule)
    df = ops(t, None if limit <= 0 else limit, include_memory=not kernels_only, steps=steps)
    notes: tuple[str, ...] = ()
    if df.empty:
        if fmt in ("table", "md"):  # for people: why, not an empty table
            emit(f"No operators in {trace}: {why_no_ops(t)}")
            return
        notes = (why_no_ops(t),)
    elif fmt in ("table", "md"):
        df = df.rename(
            columns={"op": "Operation", "self_gpu_us": "Self GPU (us)", "pct": "Self GPU %",
                     "calls": "Calls", "kernels": "Kernels", "gflops": "GFLOPs",
                     "tflops_per_s": "TFLOP/s"}
        )
    emit_frame(df, fmt, title=f"Top operations by self GPU time: {trace}", notes=notes)
