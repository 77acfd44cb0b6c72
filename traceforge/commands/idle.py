"""``traceforge idle TRACE|DIR``: where the GPU is idle, and why."""

from __future__ import annotations

from functools import partial

import click

from traceforge.analyzers.names.kernel_names import short_name
from traceforge.analyzers.runs.rank_summaries import idle_reduce, idle_summary
from traceforge.commands import values
from traceforge.commands.engine import Engine, engine_options, run_paths
from traceforge.commands.options import (
    format_option,
    resolve_steps,
    step_options,
    traces_argument,
)
from traceforge.commands.tables import Table, emit_tables, table_options


@click.command("idle")
@traces_argument
@click.option("-n", "limit", type=values.COUNT, default=10, show_default=True,
              help="Largest gaps to list (0: all).")
@click.option("--min-gap-us", type=values.DURATION, default=0.0, show_default=True,
              help="List only gaps at least this long (all gaps still count in the summary).")
@click.option("--per-stream", is_flag=True, help="Also analyze each stream on its own.")
@step_options
@table_options
@format_option
@engine_options
def command(traces: tuple[str, ...], limit: int, min_gap_us: float, per_stream: bool,
            steps_from: str | None, steps_text: str | None, step_list: tuple[int, ...],
            table: str | None, out_dir: str | None, fmt: str,
            engine: Engine) -> None:
    """GPU idle time per device (and stream) by cause, gap histogram and largest gaps.

    TRACES: one trace, several trace files of one run, or a directory of them (each rank
    analysed where it is read; the largest gaps of all ranks are listed).

    Causes: graph_internal (between the nodes of one CUDA/HIP graph replay), sync,
    host_bound, launch_latency, other. Tables: summary, histogram, gaps (CSV: --table
    NAME, or -o DIR for all).
    """
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    fn = partial(idle_summary, limit=limit, min_gap_ns=int(min_gap_us * 1e3),
                 per_stream=per_stream, steps=steps)
    ranks = engine.ranks(run_paths(traces), fn, steps_from=rule)
    r = idle_reduce([(x.rank, x.value) for x in ranks], limit=limit)
    top = r.gaps
    notes = tuple(n for x in ranks for n in x.notes) + r.notes
    if r.span_ns == 0:
        notes += ("No GPU activity in this trace: nothing to report.",)
    if fmt in ("table", "md"):
        # Tables for people show short kernel names (JSON and CSV keep the full ones).
        top = top.assign(next_name=top["next_name"].map(_short))
        top = top[[*(["rank"] if r.multi else []), "device", "stream", "step", "ts", "dur",
                   "cause", "cpu_op", "annotation", "next_name"]]
    emit_tables(
        [Table("summary", r.summary, f"GPU idle by cause (% of recorded step windows; steps "
                                     f"from {r.step_source}): {' '.join(traces)}"),
         Table("histogram", r.histogram, "Gap lengths"),
         Table("gaps", top, "Largest gaps", notes)],
        fmt, table=table, out_dir=out_dir,
        doc={"steps_from": r.step_source, "span_ns": r.span_ns, "summary": r.summary,
             "histogram": r.histogram, "gaps": top, "notes": list(r.notes)})


def _short(name: object) -> object:
    return short_name(name) if isinstance(name, str) else name
