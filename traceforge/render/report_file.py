"""A :class:`~traceforge.report.document.Report` as one HTML document or Markdown, and the
file it is written to (:func:`write_report`, the notebook API's and ``report``'s writer)."""

from __future__ import annotations

from pathlib import Path

from traceforge import output_file
from traceforge.errors import UsageError
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


def report_format(output: str | Path) -> str:
    """``html`` or ``md`` from the report file's suffix, or a UsageError."""
    fmt = SUFFIXES.get(Path(output).suffix.lower())
    if fmt is None:
        raise UsageError(f"{output}: name the report .html or .md")
    return fmt


def write_report(report: Report, output: str | Path, *, title: str = "traceforge report"
                 ) -> Path:
    """Write ``report`` (from :func:`traceforge.report`) to ``output``: ``.html``
    (self-contained, charts inline) or ``.md``. The file is replaced only once the whole
    document is rendered. Returns the path written."""
    out = Path(output)
    fmt = report_format(str(output))
    output_file.check(out)
    output_file.write(out, render_report(report, fmt, title=title))
    return out


__all__ = ["SUFFIXES", "render_report", "report_format", "write_report"]
