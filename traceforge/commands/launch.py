"""``traceforge launch TRACE``: launch overhead, and whether the run is launch-bound."""

from __future__ import annotations

from typing import cast

import click
import pandas as pd

from traceforge.analyzers.names.kernel_names import short_name
from traceforge.analyzers.profiling.notes import step_notes
from traceforge.analyzers.timing.launch import launch_overhead
from traceforge.commands import values
from traceforge.commands.options import (
    format_option,
    load_ranks,
    resolve_steps,
    step_options,
    trace_argument,
)
from traceforge.commands.tables import Table, emit_tables, table_options


@click.command("launch")
@trace_argument
@click.option("-n", "limit", type=values.COUNT, default=10, show_default=True,
              help="Kernels with the longest launch delay to list (0: all).")
@click.option("--bound-pct", type=values.PERCENT, default=50.0, show_default=True,
              help="Call a step launch-bound when the GPU waits on the CPU more than this %.")
@step_options
@table_options
@format_option
def command(trace: str, limit: int, bound_pct: float, steps_from: str | None,
            steps_text: str | None, step_list: tuple[int, ...], table: str | None,
            out_dir: str | None, fmt: str) -> None:
    """Per step: kernels, launches, GPU time waiting on the CPU, short kernels, verdict.

    Tables: steps, kernels (the longest launch delays).
    """
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    ranks = load_ranks([trace], rule)
    reps = [launch_overhead(t, bound_pct=bound_pct, steps=steps) for t in ranks]
    multi = len(ranks) > 1

    def tag(frames: list[pd.DataFrame]) -> pd.DataFrame:
        if not multi:
            return frames[0]
        parts = [f.assign(rank=t.meta.rank) for t, f in zip(ranks, frames, strict=True)]
        return cast("pd.DataFrame", pd.concat(parts, ignore_index=True))

    per_step = tag([r.steps for r in reps])
    k = tag([r.kernels for r in reps]).sort_values("launch_delay_ns", ascending=False,
                                                   kind="stable")
    k = k if limit <= 0 else k.head(limit)
    source = reps[0].step_source
    notes: tuple[str, ...] = tuple(dict.fromkeys(n for t in ranks for n in step_notes(t)))
    notes += ("queue time: the kernel waited behind earlier GPU work on its stream; launch "
              "latency: the GPU waited for the launch to arrive (only this is host wait)",)
    if all(r.kernels.empty for r in reps):
        notes = ("No GPU activity in this trace: nothing to report.",)
    if fmt in ("table", "md"):
        k = k.drop(columns=["replay"]).assign(name=k["name"].map(short_name))
        # busy_ns is window x busy %: the terminal keeps room for queue time and latency.
        per_step = per_step.drop(columns=["busy_ns"])
    emit_tables(
        [Table("steps", per_step, f"Launch overhead per step (steps from {source}): {trace}",
               notes),
         Table("kernels", k, "Longest launch delays")],
        fmt, table=table, out_dir=out_dir,
        doc={"steps_from": source, "steps": per_step, "kernels": k})
