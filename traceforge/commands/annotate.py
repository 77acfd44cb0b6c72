"""``traceforge annotate TRACE -o OUT.json|OUT.pftrace``: the trace with the analysis on it."""

from __future__ import annotations

import gzip
from pathlib import Path

import click

from traceforge.commands import output as destination
from traceforge.commands import values
from traceforge.commands.options import trace_argument
from traceforge.errors import UsageError


@click.command("annotate")
@trace_argument
@click.option("-o", "--output", required=True, type=click.Path(path_type=str),
              help="OUT.json, OUT.json.gz (Chrome JSON) or OUT.pftrace (Perfetto protobuf).")
@click.option("-n", "top_n", type=values.COUNT, default=10, show_default=True,
              help="How many of the heaviest kernels to mark.")
@click.option("--min-gap-us", type=values.DURATION, default=1.0, show_default=True,
              help="Draw idle gaps at least this long.")
def command(trace: str, output: str, top_n: int, min_gap_us: float) -> None:
    """Write TRACE with idle gaps by cause, step windows, overlap counters, kernel classes
    and the top-N kernels on it, for the Perfetto UI."""
    from traceforge.analyzers.analysis import annotation_data
    from traceforge.formats import load
    from traceforge.render.annotate import annotated_document
    from traceforge.render.chrome_json import dumps_chrome

    out = Path(output)
    name = out.name.lower()
    if not name.endswith((".json", ".json.gz", ".pftrace")):
        raise UsageError(f"{output}: name the output .json, .json.gz or .pftrace")
    if out.resolve() == Path(trace).resolve():
        raise UsageError(f"{output}: is the input trace; name another output")
    destination.check(out)  # before the analysis: a bad destination is found in a moment
    t = load(trace)
    ann = annotation_data(t, top_n=top_n, min_gap_ns=int(min_gap_us * 1000))
    doc = annotated_document(t, ann)
    if name.endswith(".pftrace"):
        from traceforge.render.perfetto import chrome_to_pftrace

        data = chrome_to_pftrace(doc)
    else:
        data = dumps_chrome(doc)
        if name.endswith(".gz"):
            data = gzip.compress(data, compresslevel=6)
    destination.write(out, data)
    click.echo(f"wrote {output}: {len(ann.gaps)} idle gaps, {len(ann.windows)} steps, "
               f"top {len(ann.top)} kernels marked")
