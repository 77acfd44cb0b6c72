"""``traceforge top-kernels TRACE``: the kernels that take the GPU's time."""

from __future__ import annotations

import click

from traceforge.analyzers.kernels import BY, TOP_KERNEL_COLUMNS, top_kernels
from traceforge.commands import values
from traceforge.commands.options import (
    emit,
    format_option,
    load_trace,
    resolve_steps,
    step_options,
    trace_argument,
)
from traceforge.model import GPU_KINDS
from traceforge.render import render_frame


@click.command("top-kernels")
@trace_argument
@click.option("-n", "limit", type=values.COUNT, default=20, show_default=True,
              help="Rows to show (0: all).")
@click.option("--by", type=click.Choice(BY), default="name", show_default=True,
              help="Group by kernel name, family (nvjet_sm90, triton_tem_fused, ...) or class.")
@click.option("--include-memory", is_flag=True, help="Also count memcpy and memset activity.")
@step_options
@format_option
def command(
    trace: str, limit: int, by: str, include_memory: bool, steps_from: str | None,
    steps_text: str | None, step_list: tuple[int, ...], fmt: str
) -> None:
    """Kernels by total GPU time, with class, family, calls and avg/min/max.

    Without --steps every kernel in the trace counts (as in nsys stats); with it, the
    kernels those steps launched.
    """
    from traceforge.analyzers.timeline import select_steps

    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    # Only GPU rows are needed (plus step ranges, launch calls and ops for --steps).
    kinds = set(GPU_KINDS)
    if steps:
        kinds |= {"user_annotation", "cpu_op", "runtime", "driver", "gpu_annotation"}
    t = load_trace(trace, rule, kinds=kinds)
    if steps:
        t = select_steps(t, steps)
    df = top_kernels(t, None if limit <= 0 else limit, by=by, include_memory=include_memory)
    if fmt in ("table", "md"):
        df = df[list(TOP_KERNEL_COLUMNS)]
        if by != "name":
            df = df.drop(columns=["name"])
    notes = tuple(t.meta.notes)
    if t.kernels().empty:
        notes += ("No GPU kernels in this trace (CPU-only or GPU activity not recorded).",)
    emit(render_frame(df, fmt, title=f"Top kernels by {by}: {trace}", notes=notes))
