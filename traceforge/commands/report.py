"""``traceforge report TRACE... -o report.html|report.md``: findings, tables and plots."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from traceforge.commands import output as destination
from traceforge.commands import values
from traceforge.commands.options import steps_from_option
from traceforge.errors import UsageError
from traceforge.model import Trace

SUFFIXES = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def _latency_file(path: str) -> dict[str, dict[str, float | str]]:
    """``latency.json`` as written beside captures: rows of [mode, ms, Hz, peak GiB, ...]."""
    import json

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        rows = doc["rows"]
        return {str(r[0]): {"latency_ms": float(r[1]), "memory_gib": float(r[3]),
                            "source": Path(path).name} for r in rows}
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        raise UsageError(f"{path}: not a latency file with rows of [mode, ms, Hz, GiB] ({e})"
                         ) from None


def _load_all(paths: tuple[str, ...], steps_from: str | None) -> list[list[Trace]]:
    from traceforge.commands.options import load_ranks
    from traceforge.report.run import group_runs

    runs: list[list[Trace]] = []
    files: list[Trace] = []
    for p in paths:
        ranks = load_ranks([p], steps_from)
        if Path(p).is_dir() or len(ranks) > 1:
            runs.append(ranks)  # a directory (or a multi-process report) is one run
        else:
            files += ranks
    return runs + group_runs(files)


@click.command("report")
@click.argument("traces", nargs=-1, required=True,
                type=click.Path(dir_okay=True, path_type=str))
@click.option("-o", "--output", required=True, type=click.Path(path_type=str),
              help="report.html (self-contained, plots inline) or report.md (for PRs).")
@click.option("--title", default="traceforge report", show_default=True)
@click.option("--latency", "latency_path", type=click.Path(dir_okay=False, path_type=str),
              help="latency.json measured outside the profiler (rows [mode, ms, Hz, GiB]); "
                   "runs are matched to its modes by label.")
@click.option("-n", "top", type=values.COUNT, default=15, show_default=True,
              help="Rows in the top-kernel and operator tables.")
@steps_from_option
def command(traces: tuple[str, ...], output: str, title: str, latency_path: str | None,
            top: int, steps_from: str | None) -> None:
    """Write one report over TRACES: several files of one distributed run become one run
    with its ranks; otherwise each file (or directory) is a run and they are compared."""
    from traceforge.analyzers.diff import diff
    from traceforge.commands.options import resolve_steps
    from traceforge.report.findings import findings
    from traceforge.report.run import analyze, compare_runs, scaling_of
    from traceforge.version import __version__

    out = Path(output)
    fmt = SUFFIXES.get(out.suffix.lower())
    if fmt is None:
        raise UsageError(f"{output}: name the report .html or .md")
    if any(out.resolve() == Path(t).resolve() for t in traces):
        raise UsageError(f"{output}: is one of the input traces; name another output")
    destination.check(out)  # before the analysis: a bad destination is found in a moment
    rule, _ = resolve_steps(steps_from, None)
    loaded = _load_all(traces, rule)
    runs = [analyze(r, top=top) for r in loaded]
    if latency_path:
        measured = _latency_file(latency_path)
        runs = [replace(r, run_info={**r.run_info, **measured[r.label]})
                if r.label in measured else r for r in runs]
    found = findings(runs)
    comparison = compare_runs(runs) if len(runs) > 1 else None
    scaled = scaling_of(runs, loaded)  # runs at different GPU counts
    # Each later run against the first (rank 0 of each): what fused, what got faster.
    diffs = [(runs[0].label, r.label, diff(loaded[0][0], tr[0]))
             for r, tr in zip(runs[1:], loaded[1:], strict=True)]
    if fmt == "html":
        from traceforge.render.html import render_html

        text = render_html(runs, found, comparison=comparison, title=title, version=__version__,
                           diffs=diffs, scaling=scaled)
    else:
        from traceforge.render.markdown import render_markdown

        text = render_markdown(runs, found, comparison=comparison, title=title, diffs=diffs,
                               scaling=scaled)
    destination.write(out, text)
    click.echo(f"wrote {output}: {len(runs)} run(s), {len(found)} finding(s)")
