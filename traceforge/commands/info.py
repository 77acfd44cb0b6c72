"""``traceforge info TRACE``: what is in a trace, at a glance."""

from __future__ import annotations

import click

from traceforge.analyzers.summary import summary
from traceforge.commands.options import (
    emit,
    format_option,
    load_ranks,
    resolve_steps,
    steps_from_option,
    trace_argument,
)
from traceforge.render import render_frame
from traceforge.render.frame import to_json_bytes


@click.command("info")
@trace_argument
@steps_from_option
@format_option
def command(trace: str, steps_from: str | None, fmt: str) -> None:
    """Format, devices, ranks, span, steps (and where they came from), event counts by
    kind and GPU busy % (of the steps' GPU windows)."""
    rule, _ = resolve_steps(steps_from, None)
    ranks = load_ranks([trace], rule)
    sums = [summary(t) for t in ranks]
    if fmt == "json":
        docs = [{"facts": s.facts, "notes": list(s.notes), "kinds": s.kinds,
                 "devices": s.devices} for s in sums]
        emit(to_json_bytes(docs[0] if len(docs) == 1 else {"ranks": docs}).decode())
        return
    out = []
    for t, s in zip(ranks, sums, strict=True):
        who = f" (rank {t.meta.rank})" if len(ranks) > 1 else ""
        out.append(render_frame(s.facts_frame(), fmt, title=f"Trace: {trace}{who}"))
        out.append(render_frame(s.kinds, fmt, title="Events by kind"))
        if len(s.devices):
            out.append(render_frame(s.devices, fmt, title="Devices (busy % of step windows)"))
    emit("\n".join(out))
