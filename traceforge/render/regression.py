"""How the CI gate's verdict is shown: one verdict line, then what grew most."""

from __future__ import annotations

from traceforge.analyzers.runs.regression import GateReport
from traceforge.render.frame import render_frame


def render_gate(r: GateReport) -> str:
    """The verdict line and, when B is slower, the classes and kernels that grew most."""
    text = f"traceforge gate: {r.decision.reason}\n"
    if not r.decision.slower:
        return text
    for df, title in ((r.classes, "Kernel classes that grew most (us per step)"),
                      (r.kernels, "Kernels that grew most (us per step)")):
        if not df.empty:
            text += render_frame(df, "table", title=title, digits=1)
    return text
