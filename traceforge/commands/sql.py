"""``traceforge sql TRACE "SELECT ..."``: DuckDB over the trace's tables."""

from __future__ import annotations

import click

from traceforge.commands.options import (
    emit_frame,
    format_option,
    load_trace,
    resolve_steps,
    steps_from_option,
    trace_argument,
)

#: Rows a table or Markdown shows by default (DuckDB's own shell shows 40).
MAX_ROWS = 1000


@click.command("sql")
@trace_argument
@click.argument("query")
@steps_from_option
@format_option
@click.option("--max-rows", type=click.IntRange(min=1), default=MAX_ROWS, show_default=True,
              help="Rows a table or Markdown shows (the first; a note says how many there "
                   "are). JSON and CSV hold every row.")
@click.option("--allow-files", is_flag=True,
              help="Let the query read and write files (read_csv, COPY ... TO, ATTACH); off "
                   "by default: a query sees only the trace's tables. Never writes an input.")
def command(trace: str, query: str, steps_from: str | None, fmt: str, max_rows: int,
            allow_files: bool) -> None:
    """Run a SQL QUERY (DuckDB) over the tables events, activity and steps.

    \b
    events    row, name, kind, cat, ts, dur, pid, tid, device, stream, corr, ext,
              graph, rank (times in ns; one row per event)
    activity  one row per GPU kernel/memcpy/memset: row, name, kind, cls, family,
              device, stream, rank, ts, end, corr, graph, replay, launch_*, op_row,
              op_name, annotation, step
    steps     step, host_ts, host_end, ts, end (host range and GPU window of each step)

    The query is sandboxed: no files, URLs, ATTACH, COPY or extension installs unless
    --allow-files is given (and even then COPY never targets the trace).

    Example: traceforge sql t.json "SELECT name, sum(dur)/1e3 AS us FROM events
    WHERE kind = 'kernel' GROUP BY name ORDER BY us DESC LIMIT 5"
    """
    from traceforge.analyzers.timeline.query import sql

    rule, _ = resolve_steps(steps_from, None)
    from traceforge.formats import resolve

    df = sql(load_trace(trace, rule), query, allow_files=allow_files,
             inputs=[resolve(trace)])
    notes: tuple[str, ...] = ()
    if fmt in ("table", "md") and len(df) > max_rows:
        # A table is read by people: a million rows' cells would be held and laid out
        # at once (200k rows: 8 s and 650 MB). JSON and CSV stream every row.
        notes = (f"the first {max_rows:,} of {len(df):,} rows (--max-rows N; --format csv "
                 "or json for every row)",)
        df = df.head(max_rows)
    emit_frame(df, fmt, title=f"SQL on {trace}", notes=notes,
               schema=False)  # the query's columns
