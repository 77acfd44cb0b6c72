"""``traceforge compare RUN RUN [...]``: runs side by side by vendor-neutral class and family."""

from __future__ import annotations

from pathlib import Path

import click

from traceforge.commands.options import (
    check_report,
    format_option,
    report_option,
    resolve_steps,
    steps_from_option,
)
from traceforge.commands.output import wrote
from traceforge.commands.tables import check_table, emit_tables, table_options


@click.command("compare")
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--baseline", default=None, metavar="NAME",
              help="The run others are compared with (a label) [default: the first].")
@click.option("--labels", default=None, metavar="A,B,...",
              help="Labels for the runs, comma-separated [default: their names, else "
                   "their folders' names].")
@table_options
@report_option("a chart")
@click.option("--chart", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="STEM", help="Also write the chart as STEM.png and STEM.svg.")
@steps_from_option
@format_option
def command(runs: tuple[str, ...], baseline: str | None, labels: str | None,
            table: str | None, out_dir: str | None, report: Path | None, chart: Path | None,
            steps_from: str | None, fmt: str) -> None:
    """Line runs up row by row -- an NVIDIA and an AMD run of the same model, several
    machines' captures, eager vs compiled -- by vendor-neutral kernel class and family
    (cuBLAS vs hipBLASLt GEMMs, FlashAttention vs AOTriton/CK attention, NCCL vs RCCL),
    with kernel counts, launch overhead, idle time and capture summaries.

    RUN: a trace file, a folder of rank traces, or a capture output folder. Tables: runs,
    classes, families, counts, comm (table and md line the runs up in columns; JSON and CSV
    have one row per run; CSV: --table NAME, or -o DIR for all).

    \b
      traceforge compare h100/model.json.gz mi300/model.json.gz --report compare.html
      traceforge compare runs/h200 runs/mi350 --baseline h200
    """
    from traceforge.analyzers.runs.compare import compare
    from traceforge.commands.runs import load_runs
    from traceforge.errors import UsageError
    from traceforge.render.compare import (
        TABLE_NAMES,
        compare_chart,
        compare_document,
        compare_report,
        compare_tables,
    )

    if len(runs) < 2:
        raise UsageError("compare needs at least two runs")
    check_report(report, out_dir)
    check_table(table, TABLE_NAMES)
    names = [x.strip() for x in labels.split(",")] if labels is not None else None
    rule, _ = resolve_steps(steps_from, None)
    c = compare(load_runs(runs, steps_from=rule, labels=names), baseline=baseline)
    emit_tables(compare_tables(c, wide=fmt in ("table", "md")), fmt, table=table,
                out_dir=out_dir, doc=compare_document(c))
    written = []
    if chart is not None:
        written += compare_chart(c, chart)
    if report is not None:
        written += compare_report(c, report)
    for p in written:
        wrote(p)
    if report is not None:
        from traceforge.render.figures import NO_CHARTS, charts_available

        if not charts_available():
            click.echo(f"traceforge: {report} has no chart: {NO_CHARTS}", err=True)
