"""Bus bandwidth against message size as an SVG string (matplotlib, imported when drawn).

Input: one point per collective (``bytes``, ``busbw_gbps``, ``kind``) as
:func:`traceforge.analyzers.communication.table.comm` gives them, and the link ceiling
(GB/s) drawn as a horizontal line, the way nccl-tests' sweeps are read: latency-bound on
the left, approaching the link on the right. Renderers never compute: every number
arrives final.
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd

from traceforge.errors import UsageError
from traceforge.render.text import display

#: One colour per collective kind (matplotlib's tab10 values).
COLORS = {"all_reduce": "#1f77b4", "all_gather": "#ff7f0e", "reduce_scatter": "#2ca02c",
          "all_to_all": "#d62728", "broadcast": "#9467bd", "reduce": "#8c564b",
          "send_recv": "#e377c2"}


def _binary(v: float) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if v >= 2**shift:
            return f"{v / 2**shift:g} {unit}"
    return f"{v:g} B"


def busbw_svg(points: pd.DataFrame, ceiling_gbps: float | None, ceiling_label: str = "",
              *, width_in: float = 7.5, height_in: float = 3.6) -> str:
    """Log-log scatter of busbw (GB/s) against message size (bytes), one colour per kind,
    with the ceiling as a dashed line."""
    try:
        import matplotlib
        import matplotlib.ticker
    except ImportError:
        raise UsageError("charts need matplotlib: pip install 'traceforge[charts]'") from None
    from matplotlib.figure import Figure

    rc: Any = {"svg.hashsalt": "traceforge", "svg.fonttype": "none", "font.size": 8.0,
               "text.parse_math": False,
               "axes.spines.top": False, "axes.spines.right": False}
    pts = points[(points["bytes"] > 0) & (points["busbw_gbps"] > 0)]
    with matplotlib.rc_context(rc):
        fig = Figure(figsize=(width_in, height_in), layout="constrained")
        ax = fig.add_subplot()
        for kind, g in pts.groupby("kind", sort=True):
            ax.scatter(g["bytes"].astype(float), g["busbw_gbps"].astype(float), s=12,
                       alpha=0.7, color=COLORS.get(str(kind), "#17becf"), label=display(kind, 60))
        if ceiling_gbps:
            ax.axhline(ceiling_gbps, color="#444444", linestyle="--", linewidth=1,
                       label=f"ceiling {ceiling_gbps:g} GB/s {ceiling_label}".rstrip())
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
            lambda v, _pos: _binary(v)))
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes, nccl-tests' S)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        if ax.get_legend_handles_labels()[0]:  # no sized collective and no ceiling: none
            ax.legend(loc="lower right", frameon=False, fontsize=7)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]
