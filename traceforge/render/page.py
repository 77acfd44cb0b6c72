"""The page builder: HTML tables, small self-contained HTML pages and Markdown sections, and
the one writer of a tables-and-chart report page (``compare --report``, ``scaling
--report``). The full ``report`` page (:mod:`traceforge.render.html`) builds on its
:func:`table`.

Imports only :mod:`traceforge.render.frame` and :mod:`traceforge.render.tables` (and
errors): figures, the report pages and the verbs' renderers sit above it."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from traceforge.errors import UsageError
from traceforge.render.frame import render_frame
from traceforge.render.tables import Table


def escape(s: object) -> str:
    """``str(s)`` escaped for HTML text and attribute values."""
    return html.escape(str(s), quote=True)


def _cell(v: Any, digits: int) -> tuple[str, bool]:
    if hasattr(v, "item"):
        v = v.item()
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "", True
    if isinstance(v, bool):
        return str(v), False
    if isinstance(v, float):
        return (f"{v:,.{digits}f}" if abs(v) < 1e15 else f"{v:.3e}"), True
    if isinstance(v, int):
        return f"{v:,}", True
    return escape(v), False


def table(df: pd.DataFrame, *, digits: int = 2, limit: int | None = None) -> str:
    """A sortable HTML table of ``df`` (numbers right-aligned, NaN blank)."""
    if df.empty:
        return '<p class="note">(none)</p>'
    shown = df if limit is None else df.head(limit)
    head = "".join(f"<th>{escape(c)}</th>" for c in shown.columns)
    rows = []
    for row in shown.itertuples(index=False, name=None):
        cells = []
        for v in row:
            text, num = _cell(v, digits)
            cells.append(f'<td class="n">{text}</td>' if num else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = (f'<p class="note">{len(df) - len(shown)} more rows not shown.</p>'
            if len(shown) < len(df) else "")
    return (f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
            f"</tbody></table>{more}")


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
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>"
            f"{html.escape(title)}</title><style>{style}</style></head><body>\n"
            f"<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")


def html_section(title: str, df: pd.DataFrame, *, digits: int = 2,
                 notes: Sequence[str] = ()) -> str:
    """One HTML table (:func:`table`) under a heading."""
    text = f"<h2>{html.escape(title)}</h2>\n{table(df, digits=digits)}\n"
    return text + "".join(f'<p class="note">{html.escape(n)}</p>\n' for n in notes)


def svg_inline(path: Path) -> str:
    """An SVG file's ``<svg>`` element, to embed in an HTML page."""
    text = path.read_text()
    start = text.find("<svg")
    return text[start:] if start >= 0 else ""


def write_text(path: Path, text: str) -> None:
    """Write a report, or one line saying why it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as e:
        raise UsageError(f"{path}: cannot write ({e.strerror or e})") from None


def write_tables_page(path: Path, title: str, tables: Sequence[Table],
                      chart: Sequence[Path], alt: str) -> None:
    """``tables`` under ``title`` as HTML (``.html``: the chart's SVG inline) or Markdown
    (else: the chart's PNG linked, ``alt`` its text); ``chart`` is (PNG, SVG)."""
    if path.suffix == ".html":
        body = svg_inline(chart[1]) + "".join(
            html_section(t.title, t.frame, digits=t.digits, notes=t.notes) for t in tables)
        text = html_page(title, body)
    else:
        text = f"# {title}\n\n![{alt}]({html.escape(chart[0].name)})\n\n" + "\n".join(
            md_section(t.title, t.frame, digits=t.digits, notes=t.notes) for t in tables)
    write_text(path, text)
