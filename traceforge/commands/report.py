"""``traceforge report TRACE... -o report.html|report.md``: findings, tables and plots."""

from __future__ import annotations

from pathlib import Path

import click

from traceforge.commands import values
from traceforge.commands.options import step_options
from traceforge.errors import UsageError
from traceforge.model import Trace
from traceforge.output_file import check, refuse_input, wrote
from traceforge.render.report_file import report_format, write_report


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


def _load_all(paths: tuple[str, ...], steps_from: str | None,
              steps: list[int] | None = None) -> list[Trace | list[Trace]]:
    """A directory (or a file holding several processes) is one run; single files are
    grouped into runs by the report (the ranks of one run, else one run each). ``steps``:
    only those steps of each trace (:func:`~traceforge.analyzers.timeline.core.select_steps`)."""
    from traceforge.analyzers.timeline.core import select_steps
    from traceforge.commands.options import load_ranks

    runs: list[Trace | list[Trace]] = []
    for p in paths:
        ranks = load_ranks([p], steps_from)
        if steps is not None:
            ranks = [select_steps(t, steps) for t in ranks]
        runs.append(ranks if Path(p).is_dir() or len(ranks) > 1 else ranks[0])
    return runs


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
@click.option("--counters", "counters_path", type=click.Path(dir_okay=False, path_type=str),
              help="Hardware counters (ncu --csv --page raw export, .ncu-rep, rocprofv3 "
                   "counter_collection.csv) of the first run: adds a measured roofline chart.")
@click.option("--flops-from", "flops_from", default=None, metavar="EAGER_TRACE",
              help="An eager trace of the same model: its ops' FLOPs per step stand for "
                   "those of runs that record none (compiled), as in `mfu --flops-from`.")
@step_options
def command(traces: tuple[str, ...], output: str, title: str, latency_path: str | None,
            top: int, counters_path: str | None, flops_from: str | None,
            steps_from: str | None, steps_text: str | None, step_list: tuple[int, ...]
            ) -> None:
    """Write one report over TRACES: several files of one distributed run become one run
    with its ranks; otherwise each file (or directory) is a run and they are compared."""
    from traceforge.commands.options import resolve_steps
    from traceforge.report.document import build_report

    out = Path(output)
    report_format(output)  # like the destination below: a bad name fails before the analysis
    refuse_input(out, traces, "one of the input traces:")
    check(out)  # before the analysis: a bad destination is found in a moment
    from traceforge.commands.options import load_trace
    from traceforge.commands.progress import phase

    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    measured = _latency_file(latency_path) if latency_path else None
    eager = load_trace(flops_from, None) if flops_from else None
    loaded = _load_all(traces, rule, steps)
    with phase(f"analysing {len(loaded)} run(s) for the report"):
        rep = build_report(*loaded, top=top, measured=measured, flops_from=eager)
        if counters_path:
            from traceforge.formats.counter_files import read_counters
            from traceforge.report.document import with_counters

            first = loaded[0]
            c = read_counters(counters_path)
            rep = with_counters(rep, first if isinstance(first, Trace) else first[0],
                                c.launches, c.notes)
    with phase(f"writing {output}"):
        write_report(rep, out, title=title)
    wrote(output, f"{len(rep.runs)} run(s), {len(rep.findings)} finding(s)")
