"""``traceforge diff A B``: what changed between two runs of the same workload."""

from __future__ import annotations

import click

from traceforge.analyzers.diff import diff
from traceforge.commands import values
from traceforge.commands.options import (
    emit,
    format_option,
    load_trace,
    resolve_steps,
    steps_from_option,
)
from traceforge.render.diff import render_diff


@click.command("diff")
@click.argument("a", type=click.Path(dir_okay=True, path_type=str))
@click.argument("b", type=click.Path(dir_okay=True, path_type=str))
@click.option("-n", "limit", type=values.COUNT, default=15, show_default=True,
              help="Rows per table (0: all).")
@steps_from_option
@format_option
def command(a: str, b: str, limit: int, steps_from: str | None, fmt: str) -> None:
    """Compare two runs (eager vs compiled, FA2 vs SDPA, before vs after), any formats.

    Times and counts are per step; the speedups say what they divide: step-time speedup
    (mean step A / B), GPU-time speedup, span ratio (whole traces).
    """
    rule, _ = resolve_steps(steps_from, None)
    d = diff(load_trace(a, rule), load_trace(b, rule))
    emit(render_diff(d, fmt, a, b, None if limit <= 0 else limit))
