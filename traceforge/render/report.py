"""A :class:`~traceforge.report.document.Report` as one HTML document or Markdown."""

from __future__ import annotations

from traceforge.report.document import Report
from traceforge.version import __version__

#: Output formats by file suffix.
SUFFIXES = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def render_report(rep: Report, fmt: str, *, title: str = "traceforge report") -> str:
    """``fmt`` "html" (self-contained, charts inline) or "md" (the same tables)."""
    comparison = rep.comparison if len(rep.comparison) else None
    if fmt == "html":
        from traceforge.render.html import render_html

        return render_html(list(rep.runs), list(rep.findings), comparison=comparison,
                           title=title, version=__version__, diffs=rep.diffs,
                           scaling=rep.scaling)
    from traceforge.render.markdown import render_markdown

    return render_markdown(list(rep.runs), list(rep.findings), comparison=comparison,
                           title=title, diffs=rep.diffs, scaling=rep.scaling)


__all__ = ["SUFFIXES", "render_report"]
