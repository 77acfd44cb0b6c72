"""``traceforge scaling RUN [RUN ...]``: efficiency per GPU count and where the loss went."""

from __future__ import annotations

from pathlib import Path

import click

from traceforge.commands.engine import Engine, engine_options
from traceforge.commands.options import (
    check_report,
    format_option,
    report_option,
    resolve_steps,
    steps_from_option,
)
from traceforge.commands.output import wrote
from traceforge.commands.tables import check_table, emit_tables, table_options


@click.command("scaling")
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--strong", is_flag=True,
              help="Strong scaling (fixed global batch) [default: weak, a fixed per-GPU "
                   "batch as in DDP].")
@click.option("--batch", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Samples per GPU per step (with --strong: per step of the whole run) "
                   "for samples/s [default: the sweep's --batch].")
@click.option("--tokens-per-step", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Tokens per GPU per step (with --strong: of the whole run) for tokens/s.")
@table_options
@report_option("charts")
@click.option("--chart", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="STEM", help="Also write the charts as STEM.png and STEM.svg.")
@steps_from_option
@format_option
@engine_options
def command(runs: tuple[str, ...], strong: bool, batch: float | None,
            tokens_per_step: float | None, table: str | None, out_dir: str | None,
            report: Path | None, chart: Path | None, steps_from: str | None, fmt: str,
            engine: Engine) -> None:
    """Scaling of one run per GPU count against the smallest: step time, throughput,
    speedup, efficiency, the loss terms per rank, and a fitted serial fraction.

    RUN: a folder of rank traces, a capture output folder, a `capture --nproc` sweep
    folder (all its counts), or one trace file (a multi-process nsys report is split).
    Tables: runs, losses, ranks, fit (CSV: --table NAME, or -o DIR for all).

    \b
      traceforge scaling runs/n1 runs/n2 runs/n4 runs/n8
      traceforge scaling sweep/ --batch 8 --report scaling.md
      traceforge scaling sweep/ --format csv -o scaling/
    """
    from traceforge.analyzers.runs.scaling import RankedRun, scaling_reduce, scaling_summary
    from traceforge.commands.runs import run_files
    from traceforge.render.scaling import (
        TABLE_NAMES,
        scaling_chart,
        scaling_document,
        scaling_report,
        scaling_tables,
    )

    check_report(report, out_dir)
    check_table(table, TABLE_NAMES)
    rule, _ = resolve_steps(steps_from, None)
    named = run_files(runs)
    # Every rank of every run is one task of the same pool or cluster.
    ranked = engine.step_runs([r.files for r in named], scaling_summary, steps_from=rule,
                              source=lambda v: v.step_source)
    r = scaling_reduce([RankedRun(n.label, tuple(x.value for x in rs), n.facts)
                        for n, rs in zip(named, ranked, strict=True)],
                       weak=not strong, batch=batch, tokens_per_step=tokens_per_step)
    emit_tables(scaling_tables(r), fmt, table=table, out_dir=out_dir, doc=scaling_document(r))
    written = []
    if chart is not None:
        written += scaling_chart(r, chart)
    if report is not None:
        written += scaling_report(r, report)
    for p in written:
        wrote(p)
    if report is not None:
        from traceforge.render.figures import NO_CHARTS, charts_available

        if not charts_available():
            click.echo(f"traceforge: {report} has no chart: {NO_CHARTS}", err=True)
