"""Writing matplotlib figures (PNG and SVG) and small self-contained report pages.

matplotlib is an optional dependency (``pip install 'traceforge[charts]'``), imported only
by the functions that draw; a missing one is a one-line UsageError naming the extra.
Figures are built on ``matplotlib.figure.Figure`` directly (no pyplot global state, no
display backend), and SVGs are written reproducibly (fixed hash salt, no date).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from traceforge.errors import UsageError
from traceforge.outputs import replacing, write
from traceforge.render.frame import render_frame
from traceforge.render.text import plain, plain_lines

#: Chart file formats written side by side.
CHART_FORMATS: tuple[str, ...] = ("png", "svg")
#: What a report says in a chart's place when matplotlib is missing.
NO_CHARTS = "charts need matplotlib: pip install 'traceforge[charts]' adds them"


def charts_available() -> bool:
    """Whether matplotlib can be imported (a report without it is written without charts)."""
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        return False
    return True


def new_figure(width: float, height: float, cols: int = 1,
               widths: Sequence[float] | None = None) -> tuple[Any, Any]:
    """A figure and its axes (an array when ``cols`` > 1, ``widths`` their ratios),
    without pyplot."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("charts need matplotlib: pip install 'traceforge[charts]'") from None
    matplotlib.rcParams["svg.hashsalt"] = "traceforge"
    matplotlib.rcParams["text.parse_math"] = False  # labels from traces are plain text
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, cols, width_ratios=list(widths) if widths else None)
    return fig, axes


def save_figure(fig: Any, stem: Path) -> list[Path]:
    """Write ``fig`` as ``STEM.png`` and ``STEM.svg``; returns the paths."""
    out = []
    stem.parent.mkdir(parents=True, exist_ok=True)
    for ext in CHART_FORMATS:
        p = stem.with_name(f"{stem.name}.{ext}")
        meta = {"Date": None} if ext == "svg" else {}
        try:
            with replacing(p) as tmp:
                fig.savefig(tmp, format=ext, dpi=120, metadata=meta)
        except OSError as e:
            raise UsageError(f"{p}: cannot write ({e.strerror or e})") from None
        out.append(p)
    return out


def svg_string(fig: Any) -> str:
    """``fig`` as an ``<svg>`` element to embed in an HTML page (reproducible: fixed hash
    salt, set by :func:`new_figure`, and no date)."""
    import io

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def svg_inline(path: Path) -> str:
    """An SVG file's ``<svg>`` element, to embed in an HTML page."""
    text = path.read_text()
    start = text.find("<svg")
    return text[start:] if start >= 0 else ""


def md_section(title: str, df: pd.DataFrame, *, digits: int = 2,
               notes: Sequence[str] = ()) -> str:
    """One Markdown table (``render_frame``) under a heading, or "(none)"."""
    if df.empty:
        return f"### {title}\n\n_(none)_\n"
    return render_frame(df, "md", title=title, digits=digits, notes=tuple(notes))


def html_page(title: str, body: str) -> str:
    """A small self-contained HTML page around ``body``."""
    style = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
             "table{border-collapse:collapse;margin:.5em 0 1.5em}"
             "td,th{border:1px solid #ccc;padding:2px 8px}td.n{text-align:right}"
             "th{background:#f3f3f3}.note{color:#666}svg{max-width:100%;height:auto}")
    head = html.escape(plain(title))
    return plain_lines(f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>"
                       f"{head}</title><style>{style}</style></head><body>\n"
                       f"<h1>{head}</h1>\n{body}\n</body></html>\n")


def html_section(title: str, df: pd.DataFrame, *, digits: int = 2,
                 notes: Sequence[str] = ()) -> str:
    """One HTML table (the report's own table renderer) under a heading."""
    from traceforge.render.html import table

    text = f"<h2>{html.escape(plain(title))}</h2>\n{table(df, digits=digits)}\n"
    return text + "".join(f'<p class="note">{html.escape(plain(n))}</p>\n' for n in notes)


def drop_empty(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without the columns that hold no value at all (NaN or "" throughout)."""
    keep = [c for c in df.columns if not (df[c].dtype.kind == "f" and df[c].isna().all())
            and not (df[c].dtype == object and len(df) and df[c].isin(["", None]).all())]
    out: pd.DataFrame = df[keep]
    return out


def write_text(path: Path, text: str) -> None:
    """Write a report (whole or not at all), or one line saying why it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path, text)
    except OSError as e:
        raise UsageError(f"{path}: cannot write ({e.strerror or e})") from None
