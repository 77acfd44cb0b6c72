"""``traceforge breakdown TRACE|DIR``: where each step's GPU time went."""

from __future__ import annotations

import click

from traceforge.analyzers.breakdown import breakdown
from traceforge.commands.options import emit, format_option
from traceforge.formats.run import load_run
from traceforge.render import render_frame


@click.command("breakdown")
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=str))
@format_option
def command(traces: tuple[str, ...], fmt: str) -> None:
    """Compute, exposed communication, memcpy/memset and idle per rank and step.

    TRACES: one trace, several trace files of one run, or a directory of them. Step -1 is
    the total over the steps of a rank.
    """
    ts = load_run(traces[0] if len(traces) == 1 else list(traces))
    df = breakdown(ts)
    notes: tuple[str, ...] = ()
    if df.empty:
        notes = ("No GPU activity in these traces: nothing to report.",)
    emit(render_frame(df, fmt, title="Temporal breakdown per rank and step", notes=notes))
