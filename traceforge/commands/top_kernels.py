"""``traceforge top-kernels TRACE|DIR``: the kernels that take the GPU's time."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import click

from traceforge.analyzers.timing.kernels import (
    BY,
    TOP_KERNEL_COLUMNS,
    merge_kernel_totals,
    run_kernel_totals,
    top_kernels_of,
)
from traceforge.commands import values
from traceforge.commands.engine import Engine, engine_options, run_paths
from traceforge.commands.options import (
    emit,
    format_option,
    load_trace,
    resolve_steps,
    step_options,
    traces_argument,
)
from traceforge.model import GPU_KINDS
from traceforge.render import render_frame


@click.command("top-kernels")
@traces_argument
@click.option("-n", "limit", type=values.COUNT, default=20, show_default=True,
              help="Rows to show (0: all).")
@click.option("--by", type=click.Choice(BY), default="name", show_default=True,
              help="Group by kernel name, family (nvjet_sm90, triton_tem_fused, ...) or class.")
@click.option("--include-memory", is_flag=True, help="Also count memcpy and memset activity.")
@step_options
@format_option
@engine_options
def command(
    traces: tuple[str, ...], limit: int, by: str, include_memory: bool, steps_from: str | None,
    steps_text: str | None, step_list: tuple[int, ...], fmt: str, engine: Engine
) -> None:
    """Kernels by total GPU time, with class, family, calls and avg/min/max.

    TRACES: one trace, or several trace files of one run or a directory of them: the
    kernels of all ranks counted together (each rank's totals computed where it is read).
    Without --steps every kernel in the trace counts (as in nsys stats); with it, the
    kernels those steps launched.
    """
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    # Only GPU rows are needed (plus step ranges, launch calls and ops for --steps).
    kinds = set(GPU_KINDS)
    if steps:
        kinds |= {"user_annotation", "cpu_op", "runtime", "driver", "gpu_annotation"}
    fn = partial(run_kernel_totals, include_memory=include_memory, steps=steps)
    if len(traces) == 1 and not Path(traces[0]).is_dir():
        # One file is one trace, whatever processes it holds (as nsys stats counts them).
        t = load_trace(traces[0], rule, kinds=kinds)
        totals, notes, what = fn(t), tuple(t.meta.notes), traces[0]
    else:
        ranks = engine.ranks(run_paths(traces), fn, steps_from=rule, kinds=kinds)
        totals = merge_kernel_totals([x.value for x in ranks])
        notes = tuple(dict.fromkeys(n for x in ranks for n in x.notes))
        notes += (f"{len(ranks)} ranks: the kernels of all of them counted together.",)
        what = f"{len(ranks)} ranks of {' '.join(traces)}"
    df = top_kernels_of(totals, None if limit <= 0 else limit, by=by)
    if fmt in ("table", "md"):
        df = df[list(TOP_KERNEL_COLUMNS)]
        if by != "name":
            df = df.drop(columns=["name"])
    if totals["class"].isin(("memcpy", "memset")).all():
        notes += ("No GPU kernels in this trace (CPU-only or GPU activity not recorded).",)
    emit(render_frame(df, fmt, title=f"Top kernels by {by}: {what}", notes=notes))
