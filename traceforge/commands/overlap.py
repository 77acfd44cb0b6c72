"""``traceforge overlap TRACE|DIR``: is communication hidden behind compute?"""

from __future__ import annotations

from functools import partial

import click

from traceforge.analyzers.runs.rank_summaries import overlap_reduce, overlap_summary
from traceforge.commands.engine import Engine, engine_options, run_paths
from traceforge.commands.options import (
    format_option,
    resolve_steps,
    step_options,
    traces_argument,
)
from traceforge.commands.tables import Table, emit_tables, table_options


@click.command("overlap")
@traces_argument
@step_options
@table_options
@format_option
@engine_options
def command(traces: tuple[str, ...], steps_from: str | None, steps_text: str | None,
            step_list: tuple[int, ...], table: str | None, out_dir: str | None,
            fmt: str, engine: Engine) -> None:
    """Compute/communication overlap per rank and cross-rank collective skew.

    TRACES: one trace, several trace files of one run, or a directory of them. Tables:
    ranks, skew.
    """
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    ranks = engine.step_runs([run_paths(traces)], partial(overlap_summary, steps=steps),
                             steps_from=rule, source=lambda v: v.step_source or "")[0]
    r = overlap_reduce([x.value for x in ranks])
    notes = r.notes
    if r.ranks.empty:
        notes += ("No GPU activity in these traces: nothing to report.",)
    elif (r.ranks["comm_kernels"] == 0).all():
        notes += ("No communication kernels (NCCL/RCCL) in the step windows.",)
    tables = [Table("ranks", r.ranks, "Compute/communication overlap per rank (steps from "
                                      f"{r.step_source})", notes)]
    if not r.skew.empty or fmt in ("json", "csv") or table or out_dir:
        tables.append(Table("skew", r.skew, "Collective start skew (stragglers start last)"))
    emit_tables(tables, fmt, table=table, out_dir=out_dir,
                doc={"steps_from": r.step_source, "ranks": r.ranks, "skew": r.skew,
                     "notes": list(r.notes)})
