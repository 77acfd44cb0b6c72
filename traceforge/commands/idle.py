"""``traceforge idle TRACE|DIR``: where the GPU is idle, and why."""

from __future__ import annotations

from functools import partial

import click

from traceforge.analyzers.kernel_names import short_name
from traceforge.analyzers.rank_summaries import idle_reduce, idle_summary
from traceforge.commands import values
from traceforge.commands.engine import Engine, engine_options, run_paths
from traceforge.commands.options import (
    emit,
    format_option,
    resolve_steps,
    step_options,
    traces_argument,
)
from traceforge.render import render_frame
from traceforge.render.frame import to_json_bytes


@click.command("idle")
@traces_argument
@click.option("-n", "limit", type=values.COUNT, default=10, show_default=True,
              help="Largest gaps to list (0: all).")
@click.option("--min-gap-us", type=values.DURATION, default=0.0, show_default=True,
              help="List only gaps at least this long (all gaps still count in the summary).")
@click.option("--per-stream", is_flag=True, help="Also analyze each stream on its own.")
@step_options
@format_option
@engine_options
def command(traces: tuple[str, ...], limit: int, min_gap_us: float, per_stream: bool,
            steps_from: str | None, steps_text: str | None, step_list: tuple[int, ...],
            fmt: str, engine: Engine) -> None:
    """GPU idle time per device (and stream) by cause, gap histogram and largest gaps.

    TRACES: one trace, several trace files of one run, or a directory of them (each rank
    analysed where it is read; the largest gaps of all ranks are listed).

    Causes: graph_internal (between the nodes of one CUDA/HIP graph replay), sync,
    host_bound, launch_latency, other.
    """
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    fn = partial(idle_summary, limit=limit, min_gap_ns=int(min_gap_us * 1e3),
                 per_stream=per_stream, steps=steps)
    ranks = engine.ranks(run_paths(traces), fn, steps_from=rule)
    r = idle_reduce([(x.rank, x.value) for x in ranks], limit=limit)
    top = r.gaps
    if fmt == "json":
        emit(to_json_bytes({"steps_from": r.step_source, "span_ns": r.span_ns,
                            "summary": r.summary, "histogram": r.histogram, "gaps": top,
                            "notes": list(r.notes)}).decode())
        return
    notes = tuple(n for x in ranks for n in x.notes) + r.notes
    if r.span_ns == 0:
        notes += ("No GPU activity in this trace: nothing to report.",)
    if fmt == "csv":
        emit(render_frame(top, fmt))
        return
    # Tables show short kernel names (JSON and CSV keep the full ones).
    show = top.assign(ts_us=top["ts"] / 1e3, dur_us=top["dur"] / 1e3,
                      next_name=top["next_name"].map(_short))
    show = show[[*(["rank"] if r.multi else []), "device", "stream", "step", "ts_us", "dur_us",
                 "cause", "cpu_op", "annotation", "next_name"]]
    summary = r.summary.assign(idle_us=r.summary["idle_ns"] / 1e3).drop(columns="idle_ns")
    emit(render_frame(summary, fmt, title=f"GPU idle by cause (% of recorded step windows; "
                                          f"steps from {r.step_source}): {' '.join(traces)}"))
    emit(render_frame(r.histogram, fmt, title="Gap lengths"))
    emit(render_frame(show, fmt, title="Largest gaps", notes=notes))


def _short(name: object) -> object:
    return short_name(name) if isinstance(name, str) else name
