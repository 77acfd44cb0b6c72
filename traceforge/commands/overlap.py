"""``traceforge overlap TRACE|DIR``: is communication hidden behind compute?"""

from __future__ import annotations

import click

from traceforge.analyzers.overlap import overlap
from traceforge.commands.options import emit, format_option
from traceforge.formats.run import load_run
from traceforge.render import render_frame
from traceforge.render.frame import to_json_bytes


@click.command("overlap")
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=str))
@format_option
def command(traces: tuple[str, ...], fmt: str) -> None:
    """Compute/communication overlap per rank and cross-rank collective skew.

    TRACES: one trace, several trace files of one run, or a directory of them.
    """
    ts = load_run(traces[0] if len(traces) == 1 else list(traces))
    r = overlap(ts)
    if fmt == "json":
        emit(to_json_bytes({"ranks": r.ranks, "skew": r.skew, "notes": list(r.notes)}).decode())
        return
    notes = r.notes
    if r.ranks.empty:
        notes += ("No GPU activity in these traces: nothing to report.",)
    elif (r.ranks["comm_kernels"] == 0).all():
        notes += ("No communication kernels (NCCL/RCCL) in the step windows.",)
    emit(render_frame(r.ranks, fmt, title="Compute/communication overlap per rank",
                      notes=notes))
    if not r.skew.empty and fmt != "csv":
        emit(render_frame(r.skew, fmt, title="Collective start skew (stragglers start last)"))
