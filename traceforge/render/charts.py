"""The HTML report's charts, drawn with matplotlib and inlined as SVG.

Each function takes final numbers and returns one ``<svg>`` element. matplotlib is an
optional dependency (``pip install 'traceforge[charts]'``), imported inside the functions
that draw; without it they raise :class:`~traceforge.errors.UsageError` with that hint,
and the report prints the hint in the chart's place (its tables are all there). Output
is reproducible: a fixed SVG hash salt and no date, so the same run gives the same
bytes; text stays text (``svg.fonttype: none``) to keep pages small.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any, cast

import pandas as pd

from traceforge.errors import UsageError
from traceforge.render.text import display, shorten

#: One color per kernel class / activity kind / idle cause, stable across charts.
COLORS: dict[str, str] = {
    "gemm": "#4e79a7", "conv": "#59a14f", "attention": "#f28e2b", "communication": "#e15759",
    "memcpy": "#b07aa1", "memset": "#ff9da7", "elementwise": "#76b7b2", "reduction": "#edc948",
    "norm": "#9c755f", "triton": "#86bcb6", "other": "#bab0ac",
    "host_bound": "#e15759", "launch_latency": "#f28e2b", "sync": "#b07aa1", "busy": "#59a14f",
    "graph_internal": "#edc948",
    "compute": "#4e79a7", "exposed_comm": "#e15759", "memory": "#b07aa1", "idle": "#d3d3d3",
    "cpu op": "#a0cbe8", "runtime": "#ffbe7d", "launch overhead": "#f28e2b",
    "sync wait": "#b07aa1",
}
_FALLBACK = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1")
#: Matplotlib settings of every chart: reproducible bytes, text as text, small type.
#: Labels from traces are plain text: ``$`` never starts mathtext (names are escaped too).
_RC = {"svg.hashsalt": "traceforge", "svg.fonttype": "none", "font.size": 8.0,
       "text.parse_math": False,
       "axes.spines.top": False, "axes.spines.right": False}
_WIDTH = 9.0  # inches: the report's column


def color(key: str, i: int = 0) -> str:
    """The color of a class/cause, or a palette color by position."""
    return COLORS.get(key, _FALLBACK[i % len(_FALLBACK)])


def _style() -> Any:
    """matplotlib's settings for one chart (a context manager), or the UsageError that
    says how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise UsageError("charts need matplotlib: pip install 'traceforge[charts]'") from None
    return matplotlib.rc_context(cast(Any, _RC))


def _figure(height: float, width: float = _WIDTH) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    with _style():
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    start = text.find("<svg")
    return '<div class="chart">' + (text[start:] if start >= 0 else text) + "</div>"


def _num(v: float) -> str:
    if float(v).is_integer() or abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        return f"{v:,.2f}"
    return f"{v:.3g}"


def _short(label: str, n: int = 44) -> str:
    return shorten(display(label), n)


def hbar(labels: Sequence[str], values: Sequence[float], *, unit: str = "",
         colors: Sequence[str] | None = None) -> str:
    """Horizontal bars, one per label, top to bottom as given, each with its value."""
    with _style():
        fig, ax = _figure(0.6 + 0.24 * len(labels))
        y = list(range(len(labels)))
        cols = list(colors) if colors else [color(str(x), i) for i, x in enumerate(labels)]
        bars = ax.barh(y, [float(v) for v in values], color=cols, height=0.75)
        ax.bar_label(bars, [f"{_num(float(v))} {unit}".rstrip() for v in values], padding=3)
        ax.set_yticks(y, [_short(str(x)) for x in labels])
        ax.invert_yaxis()
        ax.margins(x=0.16)
        ax.set_xlabel(unit)
        ax.tick_params(axis="y", length=0)
        return _svg(fig)


def paired(labels: Sequence[str], a: Sequence[float], b: Sequence[float], *,
           names: tuple[str, str], unit: str = "") -> str:
    """Two bars per label (run A above run B), top to bottom as given, with a legend."""
    with _style():
        fig, ax = _figure(0.8 + 0.36 * len(labels))
        y = list(range(len(labels)))
        for vals, name, col, dy in ((a, names[0], "#bab0ac", -0.2),
                                    (b, names[1], color("gemm"), 0.2)):
            bars = ax.barh([i + dy for i in y], [float(v) for v in vals], height=0.4,
                           color=col, label=_short(name))
            ax.bar_label(bars, [_num(float(v)) if float(v) else "" for v in vals], padding=3,
                         fontsize=7)
        ax.set_yticks(y, [_short(str(x)) for x in labels])
        ax.invert_yaxis()
        ax.margins(x=0.12)
        ax.set_xlabel(unit)
        ax.tick_params(axis="y", length=0)
        ax.legend(loc="lower right", frameon=False)
        return _svg(fig)


def vbar(labels: Sequence[str], values: Sequence[float], *, unit: str = "") -> str:
    """Vertical bars over labelled bins (a histogram), each with its value."""
    with _style():
        fig, ax = _figure(2.4)
        x = list(range(len(labels)))
        bars = ax.bar(x, [float(v) for v in values], color=color("gemm"))
        ax.bar_label(bars, [_num(float(v)) for v in values], padding=2)
        ax.set_xticks(x, [_short(str(b)) for b in labels])
        ax.set_ylabel(unit)
        ax.margins(y=0.15)
        return _svg(fig)


def stacked(rows: Sequence[tuple[str, Sequence[tuple[str, float]]]], *,
            unit: str = "%") -> str:
    """One bar per row split into named parts (percentages: the bars reach 100), with a
    legend of the parts."""
    keys: list[str] = []
    for _, parts in rows:
        keys += [k for k, _ in parts if k not in keys]
    with _style():
        fig, ax = _figure(0.9 + 0.3 * len(rows))
        y = list(range(len(rows)))
        left = [0.0] * len(rows)
        for i, k in enumerate(keys):
            vals = [max(0.0, float(dict(parts).get(k, 0.0))) for _, parts in rows]
            ax.barh(y, vals, left=left, color=color(k, i), label=_short(k), height=0.7)
            left = [a + b for a, b in zip(left, vals, strict=True)]
        ax.set_yticks(y, [_short(str(lab), 30) for lab, _ in rows])
        ax.invert_yaxis()
        ax.set_xlim(0, max([100.0, *left]))
        ax.set_xlabel(unit)
        ax.tick_params(axis="y", length=0)
        fig.legend(loc="outside lower center", ncols=min(len(keys), 7), frameon=False)
        return _svg(fig)


def timeline(acts: pd.DataFrame, window_ns: int, *, title: str = "") -> str:
    """A strip of GPU activity per stream (rows ``ts, dur, stream, cls``, ns from the
    window start), colored by class, with a legend of the classes."""
    streams = sorted(int(s) for s in acts["stream"].unique()) if len(acts) else []
    lane = {s: i for i, s in enumerate(streams)}
    with _style():
        fig, ax = _figure(0.9 + 0.3 * max(1, len(streams)))
        classes = sorted(set(acts["cls"].astype(str))) if len(acts) else []
        for i, c in enumerate(classes):
            a = acts[acts["cls"].astype(str) == c]
            for s, g in a.groupby("stream", sort=True):
                spans = list(zip((g["ts"] / 1e6).tolist(), (g["dur"] / 1e6).tolist(),
                                 strict=True))
                ax.broken_barh(spans, (lane[int(str(s))] - 0.4, 0.8), color=color(c, i),
                               label=_short(c) if int(str(s)) == min(int(x) for x in a["stream"])
                               else None)
        ax.set_yticks(list(lane.values()), [f"stream {s}" for s in lane])
        ax.invert_yaxis()
        ax.set_xlim(0, max(int(window_ns), 1) / 1e6)
        ax.set_xlabel("ms from the step's GPU window start")
        if title:
            ax.set_title(_short(title, 120), loc="left")
        if classes:
            fig.legend(loc="outside lower center", ncols=min(len(classes), 8), frameon=False)
        return _svg(fig)


def memory(series: pd.DataFrame, steps: pd.DataFrame, *, title: str = "") -> str:
    """Allocated (solid) and reserved (dashed) memory over time per device (rows
    ``device, ts, allocated_bytes, reserved_bytes``, ns), a dotted line at each step's
    start (``steps``: ts), and each device's peak allocated marked and labelled."""
    with _style():
        fig, ax = _figure(3.2)
        for i, (dev, g) in enumerate(series.groupby("device", sort=True)):
            x = (g["ts"] / 1e6).tolist()
            c = color("", i)
            ax.step(x, (g["allocated_bytes"] / 2**30).tolist(), where="post", color=c,
                    label=f"{dev} allocated")
            if g["reserved_bytes"].notna().any():
                ax.step(x, (g["reserved_bytes"] / 2**30).tolist(), where="post", color=c,
                        linestyle="--", linewidth=0.9, label=f"{dev} reserved")
            k = int(g["allocated_bytes"].to_numpy().argmax())
            px, py = x[k], float(g["allocated_bytes"].iloc[k]) / 2**30
            ax.plot([px], [py], marker="o", color=c)
            ax.annotate(f"peak {_num(py)} GiB", (px, py), textcoords="offset points",
                        xytext=(4, 4), color=c)
        for t in steps["ts"].tolist() if len(steps) else []:
            ax.axvline(float(t) / 1e6, color="#999999", linestyle=":", linewidth=0.8)
        ax.set_xlabel("ms since the trace start (dotted: step starts)")
        ax.set_ylabel("GiB")
        if title:
            ax.set_title(title, loc="left")
        fig.legend(loc="outside lower center", ncols=4, frameon=False)
        return _svg(fig)
