"""``traceforge info TRACE``: what is in a trace, at a glance."""

from __future__ import annotations

import click

from traceforge.analyzers.timing.summary import summary
from traceforge.commands.options import (
    emit_json,
    format_option,
    load_ranks,
    resolve_steps,
    steps_from_option,
    trace_argument,
)
from traceforge.commands.tables import Table, emit_tables, table_options


@click.command("info")
@trace_argument
@steps_from_option
@click.option("--include-outliers", is_flag=True,
              help="Keep outlier steps in the step time and kernels per step.")
@table_options
@format_option
def command(trace: str, steps_from: str | None, include_outliers: bool, table: str | None,
            out_dir: str | None, fmt: str) -> None:
    """Format, devices, ranks, span, steps (and where they came from), event counts by
    kind and GPU busy % (of the steps' GPU windows); with a capture summary, the run's
    unprofiled step time and the profiler's overhead. Tables: facts, kinds, devices."""
    rule, _ = resolve_steps(steps_from, None)
    ranks = load_ranks([trace], rule)
    sums = [summary(t, include_outliers) for t in ranks]
    if fmt == "json" and table is None and out_dir is None:
        docs = [{"facts": s.facts, "notes": list(s.notes), "kinds": s.kinds,
                 "devices": s.devices, **({"ranges": s.ranges} if len(s.ranges) else {})}
                for s in sums]
        emit_json(docs[0] if len(docs) == 1 else {"ranks": docs})
        return
    tables = []
    for t, s in zip(ranks, sums, strict=True):
        who = f" (rank {t.meta.rank})" if len(ranks) > 1 else ""
        sfx = f"_rank{t.meta.rank}" if len(ranks) > 1 else ""
        # Notes under the table (wrapped at the width), not as cells cut to fit it; CSV
        # keeps them as rows.
        below = fmt in ("table", "md")
        tables += [Table(f"facts{sfx}", s.facts_frame(notes=not below), f"Trace: {trace}{who}",
                         notes=s.notes if below else ()),
                   Table(f"kinds{sfx}", s.kinds, "Events by kind")]
        if len(s.devices) or fmt == "csv":
            tables.append(Table(f"devices{sfx}", s.devices, "Devices (busy % of step windows)"))
        if len(s.ranges):
            tables.append(Table(f"ranges{sfx}", s.ranges, "Host ranges that could "
                                "mark steps (--steps-from NAME)"))
    emit_tables(tables, fmt, table=table, out_dir=out_dir)
