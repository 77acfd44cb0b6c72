"""``traceforge annotate TRACE -o OUT.json|OUT.pftrace``: the trace with the analysis on it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from traceforge import output_file as destination
from traceforge.commands import values
from traceforge.commands.options import load_trace, say, steps_from_option, trace_argument
from traceforge.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from traceforge.render.chrome_json import ChromeSource
    from traceforge.report.annotations import Annotations


@click.command("annotate")
@trace_argument
@click.option("-o", "--output", required=True, type=click.Path(path_type=str),
              help="OUT.json, OUT.json.gz (Chrome JSON) or OUT.pftrace (Perfetto protobuf).")
@click.option("-n", "top_n", type=values.COUNT, default=10, show_default=True,
              help="How many of the heaviest kernels to mark.")
@click.option("--min-gap-us", type=values.DURATION, default=1.0, show_default=True,
              help="Draw idle gaps at least this long.")
@click.option("--counters", "counters_path", type=click.Path(dir_okay=False, path_type=str),
              help="Hardware counters (ncu --csv --page raw export, .ncu-rep, rocprofv3 "
                   "counter_collection.csv): each matched kernel gets its launch's counters "
                   "as ncu_* args.")
@click.option("--steps", "steps_text", metavar="N|N-M|N,M",
              help="Annotate only these steps (the trace cut to their time range, as "
                   "`open --steps`): a smaller output for a big trace.")
@click.option("--window", "window_text", metavar="START:END",
              help="Annotate only this time range since the trace start (e.g. 100ms:250ms).")
@steps_from_option
def command(trace: str, output: str, top_n: int, min_gap_us: float,
            counters_path: str | None, steps_text: str | None, window_text: str | None,
            steps_from: str | None) -> None:
    """Write TRACE with idle gaps by cause, step windows, overlap counters, kernel classes,
    the top-N kernels, each kernel's roofline rates (achieved TFLOP/s, % of bound) and
    each step's critical path (a track, and flow arrows between tracks) on it, for the
    Perfetto UI."""
    from dataclasses import replace

    from traceforge.analyzers.timeline.steps import parse_spec
    from traceforge.render.annotate import annotated_source, source_but_path
    from traceforge.render.critical_path import CAT as PATH_CAT
    from traceforge.render.document import output_kind, write_document
    from traceforge.report.annotations import annotation_data
    from traceforge.ui import perfetto as ui

    steps = parse_spec(steps_text) if steps_text else None
    if steps_text and steps is None:
        raise UsageError("--steps none: annotate the whole trace by leaving --steps out")
    window = ui.parse_window(window_text) if window_text else None
    if steps and window:
        raise UsageError("give --steps or --window, not both")
    out = Path(output)
    output_kind(out)  # an unknown suffix fails before the analysis
    destination.refuse_input(out, [trace])
    destination.check(out)  # before the analysis: a bad destination is found in a moment
    t = ui.trimmed(load_trace(trace, steps_from), steps=steps, window=window)
    from traceforge.commands.progress import phase

    counters: pd.DataFrame | None = None
    counter_notes: tuple[str, ...] = ()
    if counters_path:
        from traceforge.analyzers.counters.measured import measured_kernels
        from traceforge.formats.counter_files import read_counters

        c = read_counters(counters_path)
        m = measured_kernels(t, c.launches, counter_notes=c.notes)
        counters = m.per_launch.set_index("row")
        counter_notes = tuple(n for n in m.notes if not n.startswith(
            ("device peaks", "durations under ncu")))
    # What is drawn but the critical path is built while the path is worked out.
    early: list[ChromeSource] = []

    def draw(a: Annotations) -> None:
        early.append(source_but_path(t, a if counters is None else replace(a, counters=counters)))

    with phase("analysing (idle gaps, steps, roofline, critical path)"):
        ann = annotation_data(t, top_n=top_n, min_gap_ns=int(min_gap_us * 1000),
                              meanwhile=draw)
    if counters is not None:
        ann = replace(ann, counters=counters, notes=(*ann.notes, *counter_notes))
    rated = int(ann.rates["pct_of_bound"].notna().sum()) if len(ann.rates) else 0
    pieces = sum(p.pieces for p in ann.path)
    done = (f"{len(ann.gaps)} idle gaps, {len(ann.windows)} steps, top {len(ann.top)} kernels "
            f"marked, {rated} activities with % of bound, critical path in {pieces} pieces")
    notes = ann.notes
    with phase(f"writing {output}"):
        doc = annotated_source(t, ann, early.pop() if early else None)
        drawn = sum(tb.n for tb in doc.tables if tb.cat == PATH_CAT)
        # What the write reads is in ``doc`` now (the trace's rows and the drawn tables):
        # the analysis' tables, and the trace's derived ones, go before it.
        del ann
        t.forget_derived()
        destination.stream(out, lambda f: write_document(doc, out, f))
    destination.wrote(output, f"{done} (drawn as {drawn} {'slice' if drawn == 1 else 'slices'})")
    for n in notes:
        say(f"note: {n}")
