"""The roofline chart as an SVG string (matplotlib, imported only when a chart is drawn).

Input is :func:`traceforge.analyzers.costs.roofline.chart_data`: log-log axes of arithmetic
intensity (FLOP/byte) against achieved TFLOP/s, one roof per dtype (the memory slope up to
the ridge point, then the flat compute peak; dashed for measured ceilings), one point per
op with an area proportional to its GPU time. Renderers never compute: every number
arrives final.

matplotlib is an optional dependency (``pip install 'traceforge[charts]'``); without it
:func:`roofline_svg` raises :class:`~traceforge.errors.UsageError` with that hint.
"""

from __future__ import annotations

import io
from typing import Any

from traceforge.errors import UsageError
from traceforge.render.text import display, shorten

#: One colour per dtype key, stable across charts (matplotlib's tab10 values).
COLORS = {"bf16": "#1f77b4", "fp16": "#ff7f0e", "fp8": "#2ca02c", "fp4": "#d62728",
          "tf32": "#9467bd", "fp32": "#8c564b", "fp32_tensor": "#8c564b", "fp64": "#e377c2",
          "fp64_tensor": "#e377c2", "int8": "#7f7f7f"}
_OTHER = "#17becf"
#: Legend names of the ceiling keys that are not tensor-core rates.
_NAMES = {"fp32": "fp32 non-tensor", "fp64": "fp64 non-tensor", "fp32_tensor": "fp32 matrix",
          "fp64_tensor": "fp64 tensor"}


def _color(dtype: str) -> str:
    return COLORS.get(dtype, _OTHER)


def roofline_svg(data: dict[str, Any], *, title: str = "", width_in: float = 7.5,
                 height_in: float = 4.8, label_top: int = 6) -> str:
    """Draw ``data`` (see module docstring) and return a self-contained ``<svg>`` string.

    The ``label_top`` ops with the most GPU time get their name next to their point.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("roofline charts need matplotlib: pip install 'traceforge[charts]'") \
            from None
    import matplotlib

    points = list(data.get("points") or [])
    ceilings = list(data.get("ceilings") or [])
    xs = [p["intensity"] for p in points if p["intensity"] > 0]
    ridges = [c["ridge"] for c in ceilings if c.get("ridge")]
    lo = min([*xs, *ridges, 1.0]) / 4
    hi = max([*xs, *ridges, 10.0]) * 4
    # Fixed hash salt and no date: the same data gives byte-identical SVG (diffable reports).
    with matplotlib.rc_context({"svg.hashsalt": "traceforge", "svg.fonttype": "none",
                                "text.parse_math": False}):
        fig = Figure(figsize=(width_in, height_in))
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ax.set_yscale("log")
        for c in ceilings:
            col = _color(str(c["dtype"]))
            for peak, bw, style, tag in ((c.get("peak_tflops"), c.get("hbm_tb_s"), "-",
                                          "datasheet"),
                                         (c.get("measured_tflops"), c.get("measured_tb_s"), "--",
                                          "measured")):
                if not peak or not bw:
                    continue
                ridge = peak / bw
                xr = [lo, ridge, hi]
                yr = [bw * lo, peak, peak]
                ax.plot(xr, yr, style, color=col, linewidth=1.4,
                        label=f"{_NAMES.get(str(c['dtype']), c['dtype'])} {tag}: "
                              f"{peak:,.0f} TFLOP/s, {bw:.3g} TB/s")
                if tag == "datasheet":
                    ax.axvline(ridge, color=col, linewidth=0.6, linestyle=":")
        total = sum(p["time_us"] for p in points) or 1.0
        for p in points:
            if p["intensity"] <= 0 or p["tflops_per_s"] <= 0:
                continue
            area = 20 + 900 * p["time_us"] / total
            ax.scatter([p["intensity"]], [p["tflops_per_s"]], s=area, alpha=0.6,
                       color=_color(str(p["dtype"])), edgecolors="black", linewidths=0.4)
        for p in sorted(points, key=lambda p: -p["time_us"])[:label_top]:
            if p["intensity"] > 0 and p["tflops_per_s"] > 0:
                ax.annotate(shorten(display(str(p["label"]).removeprefix("aten::")), 40),
                            (p["intensity"], p["tflops_per_s"]), fontsize=7,
                            xytext=(4, 4), textcoords="offset points")
        ax.set_xlim(lo, hi)
        ys = [p["tflops_per_s"] for p in points if p["tflops_per_s"] > 0]
        peaks = [c.get("peak_tflops") or 0 for c in ceilings] + \
            [c.get("measured_tflops") or 0 for c in ceilings]
        ymax = max([*ys, *peaks, 1.0]) * 2
        ymin = min([*ys, ymax / 1e4]) / 2
        ax.set_ylim(ymin, ymax)
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        ax.set_ylabel("achieved TFLOP/s")
        name = data.get("device") or "unknown device (no ceilings)"
        ax.set_title(display(title or f"Roofline: {name}", 120), fontsize=10)
        ax.grid(True, which="major", linewidth=0.3)
        if ceilings and any(c.get("peak_tflops") for c in ceilings):
            ax.legend(fontsize=7, loc="lower right")
        bo = data.get("bytes_only") or {}
        foot = []
        if bo.get("ops"):
            foot.append(f"{bo['ops']} data-movement ops ({bo['time_us']:,.0f} us) have no "
                        "FLOPs and are not drawn")
        if data.get("unmodelled_us"):
            foot.append(f"unmodelled GPU time: {data['unmodelled_us']:,.0f} us")
        if foot:
            fig.text(0.01, 0.01, "; ".join(foot), fontsize=7)
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg

