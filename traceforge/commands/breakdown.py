"""``traceforge breakdown TRACE|DIR``: where each step's GPU time went."""

from __future__ import annotations

from functools import partial

import click

from traceforge.analyzers.runs.rank_summaries import breakdown_reduce, breakdown_summary
from traceforge.commands.engine import Engine, engine_options, run_paths
from traceforge.commands.options import (
    emit_frame,
    emit_json,
    format_option,
    resolve_steps,
    step_options,
    traces_argument,
)


@click.command("breakdown")
@traces_argument
@step_options
@format_option
@engine_options
def command(traces: tuple[str, ...], steps_from: str | None, steps_text: str | None,
            step_list: tuple[int, ...], fmt: str, engine: Engine) -> None:
    """Compute, exposed communication, memcpy/memset, idle and unrecorded time per rank
    and step (percentages of the recorded window).

    TRACES: one trace, several trace files of one run, or a directory of them. Step -1 is
    the total over the steps of a rank.
    """
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    ranks = engine.step_runs([run_paths(traces)], partial(breakdown_summary, steps=steps),
                             steps_from=rule, source=lambda v: v.step_source)[0]
    df, source = breakdown_reduce([x.value for x in ranks])
    if fmt == "json":
        emit_json({"steps_from": source, "breakdown": df})
        return
    notes: tuple[str, ...] = ()
    if df.empty:
        notes = ("No GPU activity in these traces: nothing to report.",)
    emit_frame(df, fmt, title=f"Temporal breakdown per rank and step (steps from "
                              f"{source})", notes=notes)
