"""Hand-written inline SVG charts for the HTML report: no plotting library, no network.

Each function takes final numbers and returns one ``<svg>`` string. Hover text comes from
``<title>`` elements, which browsers show without any script.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd

#: One color per kernel class / activity kind / idle cause, stable across charts.
COLORS: dict[str, str] = {
    "gemm": "#4e79a7", "conv": "#59a14f", "attention": "#f28e2b", "communication": "#e15759",
    "memcpy": "#b07aa1", "memset": "#ff9da7", "elementwise": "#76b7b2", "reduction": "#edc948",
    "norm": "#9c755f", "triton": "#86bcb6", "other": "#bab0ac",
    "host_bound": "#e15759", "launch_latency": "#f28e2b", "sync": "#b07aa1", "busy": "#59a14f",
    "graph_internal": "#edc948",
    "compute": "#4e79a7", "exposed_comm": "#e15759", "memory": "#b07aa1", "idle": "#d3d3d3",
}
_FALLBACK = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1")


def color(key: str, i: int = 0) -> str:
    """The color of a class/cause, or a palette color by position."""
    return COLORS.get(key, _FALLBACK[i % len(_FALLBACK)])


def _e(s: object) -> str:
    return html.escape(str(s), quote=True)


def _num(v: float) -> str:
    if float(v).is_integer() or abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        return f"{v:,.2f}"
    return f"{v:.3g}"


def hbar(labels: Sequence[str], values: Sequence[float], *, unit: str = "",
         colors: Sequence[str] | None = None, width: int = 720, label_w: int = 260) -> str:
    """Horizontal bars, one per label, longest first as given."""
    n = len(labels)
    row = 22
    h = n * row + 8
    vmax = max([float(v) for v in values] + [1e-12])
    # Leave room right of the longest bar for its value and unit.
    plot_w = width - label_w - 70 - 6 * len(unit)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
             f'height="{h}" viewBox="0 0 {width} {h}" role="img">']
    for i, (lab, v) in enumerate(zip(labels, values, strict=True)):
        y = 4 + i * row
        w = max(1.0, plot_w * float(v) / vmax) if float(v) > 0 else 0.0
        c = colors[i] if colors else color(str(lab), i)
        short = str(lab) if len(str(lab)) <= 38 else str(lab)[:36] + "…"
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{_e(short)}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" fill="{c}">'
            f"<title>{_e(lab)}: {_e(_num(float(v)))} {_e(unit)}</title></rect>"
            f'<text x="{label_w + w + 4:.1f}" y="{y + 15}">{_e(_num(float(v)))} {_e(unit)}'
            "</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def vbar(labels: Sequence[str], values: Sequence[float], *, unit: str = "",
         width: int = 720, height: int = 200, fill: str = "#4e79a7") -> str:
    """Vertical bars (a histogram over labelled bins)."""
    n = max(len(labels), 1)
    pad_b, pad_t = 36, 18
    bw = (width - 20) / n
    vmax = max([float(v) for v in values] + [1e-12])
    ph = height - pad_b - pad_t
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img">']
    for i, (lab, v) in enumerate(zip(labels, values, strict=True)):
        bh = ph * float(v) / vmax
        x = 10 + i * bw
        y = pad_t + ph - bh
        parts.append(
            f'<rect x="{x + 4:.1f}" y="{y:.1f}" width="{bw - 8:.1f}" height="{bh:.1f}" '
            f'fill="{fill}"><title>{_e(lab)}: {_e(_num(float(v)))} {_e(unit)}</title></rect>'
            f'<text x="{x + bw / 2:.1f}" y="{height - 20}" text-anchor="middle">{_e(lab)}</text>'
            f'<text x="{x + bw / 2:.1f}" y="{max(y - 4, 12):.1f}" text-anchor="middle">'
            f"{_e(_num(float(v)))}</text>"
        )
    parts.append(f'<text x="{width - 10}" y="{height - 4}" text-anchor="end">{_e(unit)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def stacked(rows: Sequence[tuple[str, Sequence[tuple[str, float]]]], *, width: int = 720,
            label_w: int = 120) -> str:
    """One 100% bar per row, split into named parts (percentages), with a legend."""
    row = 26
    keys: list[str] = []
    for _, parts in rows:
        keys += [k for k, _ in parts if k not in keys]
    h = len(rows) * row + 30
    plot_w = width - label_w - 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
           f'height="{h}" viewBox="0 0 {width} {h}" role="img">']
    for i, (lab, parts) in enumerate(rows):
        y = 4 + i * row
        out.append(f'<text x="{label_w - 6}" y="{y + 16}" text-anchor="end">{_e(lab)}</text>')
        x = float(label_w)
        total = sum(max(0.0, float(v)) for _, v in parts) or 1.0
        for k, v in parts:
            w = plot_w * max(0.0, float(v)) / total
            out.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" '
                       f'fill="{color(k, keys.index(k))}"><title>{_e(lab)} {_e(k)}: '
                       f"{float(v):.1f}%</title></rect>")
            x += w
    ly = len(rows) * row + 20
    lx = float(label_w)
    for i, k in enumerate(keys):
        out.append(f'<rect x="{lx:.0f}" y="{ly - 10}" width="10" height="10" '
                   f'fill="{color(k, i)}"/><text x="{lx + 14:.0f}" y="{ly}">{_e(k)}</text>')
        lx += 24 + 7 * len(k)
    out.append("</svg>")
    return "".join(out)


def timeline(acts: pd.DataFrame, window_ns: int, *, width: int = 960, title: str = "") -> str:
    """A strip of GPU activity per stream (rows ``ts, dur, stream, cls, name``, ns)."""
    streams = sorted(int(s) for s in acts["stream"].unique()) if len(acts) else []
    lane = 18
    left = 80
    h = max(1, len(streams)) * lane + 40
    span = max(int(window_ns), 1)
    pw = width - left - 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart timeline" width="{width}" '
           f'height="{h}" viewBox="0 0 {width} {h}" role="img">']
    if title:
        out.append(f"<title>{_e(title)}</title>")
    lane_of = {s: i for i, s in enumerate(streams)}
    for s, i in lane_of.items():
        out.append(f'<text x="{left - 6}" y="{14 + i * lane}" text-anchor="end">stream {s}'
                   "</text>")
    cols = [acts[c].tolist() for c in ("ts", "dur", "stream", "cls", "name")]
    for ts, dur, stream, cls, name in zip(*cols, strict=True):
        x = left + pw * int(ts) / span
        w = max(0.5, pw * int(dur) / span)
        y = 3 + lane_of[int(stream)] * lane
        out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{lane - 5}" '
                   f'fill="{color(str(cls))}"><title>{_e(name)} ({_e(cls)}) '
                   f"{int(dur) / 1e3:.1f} us</title></rect>")
    ty = h - 8
    for k in range(5):
        x = left + pw * k / 4
        out.append(f'<text x="{x:.0f}" y="{ty}" text-anchor="middle">'
                   f"{span * k / 4 / 1e6:.2f} ms</text>")
    out.append("</svg>")
    return "".join(out)
