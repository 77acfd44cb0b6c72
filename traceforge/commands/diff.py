"""``traceforge diff A B``: what changed between two runs of the same workload."""

from __future__ import annotations

import math

import click

from traceforge.analyzers.runs.diff import diff
from traceforge.commands import values
from traceforge.commands.options import (
    emit,
    format_option,
    load_trace,
    resolve_steps,
    steps_from_option,
)
from traceforge.commands.tables import Table, emit_tables, table_options
from traceforge.errors import UsageError
from traceforge.render.diff import SECTIONS, diff_doc, render_diff


@click.command("diff")
@click.argument("a", type=click.Path(dir_okay=True, path_type=str))
@click.argument("b", type=click.Path(dir_okay=True, path_type=str))
@click.option("-n", "limit", type=values.COUNT, default=15, show_default=True,
              help="Rows per table (0: all).")
@click.option("--fail-if-slower", "fail_pct", type=click.FloatRange(min=0), default=None,
              metavar="PCT",
              help="CI gate: exit 1 when B's median step time is slower than A's by more "
                   "than PCT % and by more than the step-to-step noise of both runs.")
@steps_from_option
@click.option("--include-outliers", is_flag=True,
              help="Keep outlier steps in the step time and kernels per step.")
@table_options
@format_option
def command(a: str, b: str, limit: int, fail_pct: float | None, steps_from: str | None,
            include_outliers: bool, table: str | None, out_dir: str | None,
            fmt: str) -> None:
    """Compare two runs (eager vs compiled, FA2 vs SDPA, before vs after), any formats.

    Times and counts are per step; the speedups say what they divide: step-time speedup
    (mean step A / B), GPU-time speedup, span ratio (whole traces). Tables: summary,
    by_class, by_family, replacements, only_a, only_b, ops.
    """
    if fail_pct is not None and not math.isfinite(fail_pct):
        raise UsageError(f"--fail-if-slower {fail_pct}: give a finite percentage")
    rule, _ = resolve_steps(steps_from, None)
    ta, tb = load_trace(a, rule), load_trace(b, rule)
    d = diff(ta, tb, include_outliers=include_outliers)
    n = None if limit <= 0 else limit
    if fmt in ("table", "md") and table is None and out_dir is None:
        emit(render_diff(d, fmt, a, b, n))
    else:
        emit_tables([Table(key, getattr(d, key) if n is None or key == "summary"
                           else getattr(d, key).head(n), title)
                     for key, title, _ in SECTIONS], fmt, table=table, out_dir=out_dir,
                    doc=diff_doc(d))
    if fail_pct is not None:
        from traceforge.analyzers.runs.regression import gate
        from traceforge.render.regression import render_gate

        g = gate(ta, tb, fail_pct)
        # The verdict goes to stderr so that stdout stays the diff in --format.
        click.echo(render_gate(g), err=True, nl=False)
        if g.decision.slower:
            raise SystemExit(1)
