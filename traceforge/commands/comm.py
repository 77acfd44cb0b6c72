"""``traceforge comm TRACE|DIR|FILES...``: bandwidth of every collective, against the link
and against nccl-tests."""

from __future__ import annotations

import click

from traceforge.analyzers.communication.instances import comm_summary
from traceforge.analyzers.communication.links import measured_busbw
from traceforge.analyzers.communication.table import CommReport, ceiling_line, comm_report
from traceforge.analyzers.runs.rank_summaries import TIMELINE_KINDS
from traceforge.commands.engine import Engine, engine_options, run_paths
from traceforge.commands.options import format_option, traces_argument
from traceforge.commands.tables import Table, emit_tables, table_options


def link_option(f: click.decorators.FC) -> click.decorators.FC:
    """``--link-gbps`` and ``--peaks``: the ceiling collectives are held against."""
    f = click.option("--peaks", "peaks_path", default=None, metavar="FILE",
                     help="Peaks file with an all-reduce busbw measured by `traceforge "
                     "calibrate --comm`: the ceiling instead of the datasheet link.")(f)
    return click.option("--link-gbps", "link_gbps", default=None,
                        type=click.FloatRange(min=0, min_open=True),
                        metavar="GB/S", help="Ceiling in GB/s per direction (overrides "
                        "the device's link and --peaks), e.g. 50 for a 400 Gb/s NIC "
                        "per GPU.")(f)


@click.command("comm")
@traces_argument
@link_option
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1),
              help="How many of the slowest collectives to list.")
@table_options
@format_option
@engine_options
def command(traces: tuple[str, ...], link_gbps: float | None, peaks_path: str | None,
            top: int, table: str | None, out_dir: str | None, fmt: str,
            engine: Engine) -> None:
    """Bandwidth of every collective (NCCL/RCCL), as nccl-tests reports it.

    TRACES: one rank's trace (kernel time only), several rank traces of one run, or a
    directory of them (collectives matched across ranks: synchronized time, from the last
    rank's start to the end, and the wait for the slowest rank). busbw = size / time x
    nccl-tests' factor (all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all
    (n-1)/n on the total size; broadcast, reduce, send/recv 1), in GB/s (1e9 bytes/s),
    against the link's per-direction ceiling. Tables: by_size, slowest, histogram,
    ranks.
    """
    measured = measured_busbw(peaks_path)
    ranks = engine.ranks(run_paths(traces), comm_summary, steps_from=None,
                         kinds=TIMELINE_KINDS)
    r = comm_report([x.value for x in ranks], link_gbps=link_gbps, measured_gbps=measured,
                    top=top)
    emit_tables(tables(r, full=fmt in ("json", "csv")), fmt, table=table, out_dir=out_dir,
                doc=document(r))


def tables(r: CommReport, *, full: bool = True) -> list[Table]:
    """The verb's tables; ``full``: every column (JSON, CSV), else without the columns the
    size label and the ceiling line already say (a terminal's width)."""
    n = r.run.ranks
    basis = ("synchronized time (last rank's start to the end)" if r.run.matched
             else "kernel time")
    notes = (ceiling_line(r), *r.findings, *r.notes)
    if r.run.instances.empty:
        notes = ("No communication kernels (NCCL/RCCL) in these traces: nothing to report.",
                 *r.notes)
    by_size, hist = r.table, r.histogram
    if not full:
        by_size = by_size.drop(columns=["min_bytes", "ceiling_gbps"])
        hist = hist.drop(columns=["min_bytes"])
    return [
        Table("by_size", by_size, f"Collectives by kind and message size ({n} rank"
                                  f"{'s' if n != 1 else ''}; busbw on {basis})", notes),
        Table("slowest", r.slowest, "Slowest collectives (mean kernel time over the ranks; "
                                    "last_rank started last)"),
        Table("histogram", hist, "Message sizes (log2 buckets)"),
        *([Table("ranks", r.by_rank, "Per rank: collective kernel time, the part spent "
                 "waiting for the slowest rank, how often it was the last to start")]
          if r.run.matched or not full else []),
    ]


def document(r: CommReport) -> dict[str, object]:
    """The JSON document: every table, the ceilings, findings and notes."""
    return {"by_size": r.table, "slowest": r.slowest, "histogram": r.histogram,
            "ranks": r.by_rank,
            "ceilings": {g: {"gbps": c.gbps, "link": c.link, "source": c.source}
                         for g, c in r.run.ceilings.items()},
            "findings": list(r.findings), "notes": list(r.notes)}


__all__ = ["command", "link_option", "tables"]
