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
from traceforge.outputs import write
from traceforge.render.figures import NO_CHARTS
from traceforge.render.frame import human, is_ns_column, render_frame, spelled
from traceforge.render.schema import ns_name
from traceforge.render.tables import Table
from traceforge.render.text import plain, plain_lines, shorten

#: The longest text shown in a tooltip (a cell's full name beyond the table's cap).
TOOLTIP_CAP = 4000

_NUM = ' class="n"'
_UNITS = (("_us", "us"), ("_ms", "ms"), ("_pct", "%"), ("_bytes", "bytes"), ("pct", "%"))


def escape(s: object) -> str:
    """``s`` as plain text (control characters escaped) escaped for HTML text and
    attribute values."""
    return html.escape(plain(s), quote=True)


def _exact(v: Any, name: str) -> tuple[str, str]:
    """A cell's tooltip (its exact value, with its unit) and sort key."""
    if hasattr(v, "item"):
        v = v.item()
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "", ""
    if isinstance(v, bool) or not isinstance(v, int | float):
        text = plain(v)
        return (text if len(text) <= TOOLTIP_CAP else shorten(text, TOOLTIP_CAP)), ""
    unit = next((u for suffix, u in _UNITS if name == suffix.strip("_") or
                 name.endswith(suffix)), "")
    if is_ns_column(name):
        unit = "ns"
    whole = isinstance(v, int) or (math.isfinite(v) and v.is_integer() and abs(v) < 2**53)
    exact = f"{int(v):,}" if whole else repr(v)
    return f"{exact} {unit}".strip(), repr(v)


def table(df: pd.DataFrame, *, digits: int = 2, limit: int | None = None) -> str:
    """A sortable HTML table of ``df`` with the terminal's headers and units (times in
    us/ms/s, counts whole, names capped), numbers right-aligned, each cell's exact value
    in its tooltip, in a box that scrolls sideways when the table is wider than the page."""
    if df.empty:
        return '<p class="note">(none)</p>'
    shown = df if limit is None else df.head(limit)
    headers, cells = human(shown, digits)
    numeric = [bool(pd.api.types.is_numeric_dtype(shown[c])) for c in shown.columns]
    head = "".join(f'<th{_NUM if num else ""} title="JSON/CSV: {escape(ns_name(str(c)) or c)}">'
                   f"{escape(spelled(h))}</th>"
                   for c, h, num in zip(shown.columns, headers, numeric, strict=True))
    rows = []
    for raw, row in zip(shown.itertuples(index=False, name=None), cells, strict=True):
        out = []
        for c, v, text, num in zip(shown.columns, raw, row, numeric, strict=True):
            tip, key = _exact(v, str(c))
            attrs = (f' title="{escape(tip)}"' if tip and tip != text else "") + \
                (f' data-v="{escape(key)}"' if key else "")
            out.append(f"<td{_NUM if num else ''}{attrs}>{escape(text)}</td>")
        rows.append("<tr>" + "".join(out) + "</tr>")
    more = (f'<p class="note">{len(df) - len(shown)} more rows not shown.</p>'
            if len(shown) < len(df) else "")
    return (f'<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>{more}')


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
    """One HTML table (:func:`table`) under a heading."""
    text = f"<h2>{html.escape(plain(title))}</h2>\n{table(df, digits=digits)}\n"
    return text + "".join(f'<p class="note">{html.escape(plain(n))}</p>\n' for n in notes)


def svg_inline(path: Path) -> str:
    """An SVG file's ``<svg>`` element, to embed in an HTML page."""
    text = path.read_text()
    start = text.find("<svg")
    return text[start:] if start >= 0 else ""


def write_text(path: Path, text: str) -> None:
    """Write a report (whole or not at all), or one line saying why it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path, text)
    except OSError as e:
        raise UsageError(f"{path}: cannot write ({e.strerror or e})") from None


def write_tables_page(path: Path, title: str, tables: Sequence[Table],
                      chart: Sequence[Path], alt: str) -> None:
    """``tables`` under ``title`` as HTML (``.html``: the chart's SVG inline) or Markdown
    (else: the chart's PNG linked, ``alt`` its text); ``chart`` is (PNG, SVG), or empty
    when charts cannot be drawn (then a note says so)."""
    if path.suffix == ".html":
        shown = (svg_inline(chart[1]) if chart
                 else f'<p class="note">{html.escape(NO_CHARTS)}</p>\n')
        body = shown + "".join(
            html_section(t.title, t.frame, digits=t.digits, notes=t.notes) for t in tables)
        text = html_page(title, body)
    else:
        shown = f"![{alt}]({html.escape(chart[0].name)})" if chart else f"_{NO_CHARTS}_"
        text = f"# {plain(title)}\n\n{shown}\n\n" + "\n".join(
            md_section(t.title, t.frame, digits=t.digits, notes=t.notes) for t in tables)
    write_text(path, text)
