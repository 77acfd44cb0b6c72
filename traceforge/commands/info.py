"""``traceforge info TRACE``: what is in a trace, at a glance."""

from __future__ import annotations

import click

from traceforge.analyzers.summary import summary
from traceforge.commands.options import emit, format_option, trace_argument
from traceforge.formats import load
from traceforge.render import render_frame
from traceforge.render.frame import to_json_bytes


@click.command("info")
@trace_argument
@format_option
def command(trace: str, fmt: str) -> None:
    """Format, devices, ranks, span, steps, event counts by kind and GPU busy %."""
    s = summary(load(trace))
    if fmt == "json":
        pairs = list(zip(s.facts["field"], s.facts["value"], strict=True))
        facts = {k: v for k, v in pairs if k != "note"}
        notes = [v for k, v in pairs if k == "note"]
        doc = {"facts": facts, "notes": notes, "kinds": s.kinds, "devices": s.devices}
        emit(to_json_bytes(doc).decode())
        return
    out = [render_frame(s.facts, fmt, title=f"Trace: {trace}")]
    out.append(render_frame(s.kinds, fmt, title="Events by kind"))
    if len(s.devices):
        out.append(render_frame(s.devices, fmt, title="Devices"))
    emit("\n".join(out))
