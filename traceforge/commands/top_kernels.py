"""``traceforge top-kernels TRACE|DIR``: the kernels that take the GPU's time."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import click

from traceforge.analyzers.timing.kernels import (
    BY,
    TOP_KERNEL_COLUMNS,
    merge_kernel_totals,
    run_kernel_totals,
    top_kernels_of,
)
from traceforge.commands import values
from traceforge.commands.engine import Engine, engine_options, run_paths
from traceforge.commands.options import (
    derived_with_file,
    emit_frame,
    format_option,
    load_trace,
    resolve_steps,
    step_options,
    traces_argument,
)
from traceforge.errors import UsageError
from traceforge.formats.multirank import rank_from_name
from traceforge.model import GPU_KINDS

#: The counter columns ``--counters`` adds (means over each kernel's profiled launches).
COUNTER_COLUMNS = ("matched", "sm_pct", "dram_pct", "occupancy_pct", "tensor_pct")
COUNTER_LABELS = {"matched": "profiled", "sm_pct": "SM %", "dram_pct": "DRAM %",
                  "occupancy_pct": "occupancy %", "tensor_pct": "tensor %"}


@click.command("top-kernels")
@traces_argument
@click.option("-n", "limit", type=values.COUNT, default=20, show_default=True,
              help="Rows to show (0: all).")
@click.option("--by", type=click.Choice(BY), default="name", show_default=True,
              help="Group by kernel name, family (nvjet_sm90, triton_tem_fused, ...) or class.")
@click.option("--include-memory", is_flag=True, help="Also count memcpy and memset activity.")
@click.option("--counters", "counters_path", default=None, metavar="FILE",
              help="Hardware counters (ncu --csv --page raw/details export, .ncu-rep, "
                   "rocprofv3 counter_collection.csv) of the same program: adds SM %, DRAM "
                   "%, occupancy and tensor-pipe % per kernel (one trace, --by name).")
@click.option("--launch-skip", "launch_skip", type=values.COUNT, default=0, show_default=True,
              help="With --counters: trace launches of each kernel before the first "
                   "profiled one (ncu --launch-skip).")
@step_options
@format_option
@engine_options
def command(
    traces: tuple[str, ...], limit: int, by: str, include_memory: bool,
    counters_path: str | None, launch_skip: int, steps_from: str | None,
    steps_text: str | None, step_list: tuple[int, ...], fmt: str, engine: Engine
) -> None:
    """Kernels by total GPU time, with class, family, calls and avg/min/max.

    TRACES: one trace, or several trace files of one run or a directory of them: the
    kernels of all ranks counted together (each rank's totals computed where it is read).
    Without --steps every kernel in the trace counts (as in nsys stats); with it, the
    kernels those steps launched.
    """
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    if counters_path and (by != "name" or len(traces) != 1 or Path(traces[0]).is_dir()):
        raise UsageError("--counters: give one trace file and --by name")
    # Only GPU rows are needed (plus step ranges, launch calls and ops for --steps).
    kinds = set(GPU_KINDS)
    if steps:
        kinds |= {"user_annotation", "cpu_op", "runtime", "driver", "gpu_annotation"}
    fn = partial(run_kernel_totals, include_memory=include_memory, steps=steps)
    if len(traces) == 1 and not Path(traces[0]).is_dir():
        # One file is one trace, whatever processes it holds (as nsys stats counts them).
        t = load_trace(traces[0], rule, kinds=kinds)
        totals, notes, what = fn(t), tuple(t.meta.notes), traces[0]
    else:
        # Kernels add up whatever ranks the files state: files that state none (several
        # single-GPU runs in one folder) are counted together too, numbered in order.
        ranks = engine.ranks(run_paths(traces), fn, steps_from=rule, kinds=kinds,
                             numbered=True)
        totals = merge_kernel_totals([x.value for x in ranks])
        notes = tuple(dict.fromkeys(n for x in ranks for n in x.notes))
        unranked = [x.path for x in ranks if x.facts.get("world_size") is None
                    and rank_from_name(x.path) is None]
        if len(unranked) == len(ranks):
            notes += (f"{len(ranks)} traces that state no rank: the kernels of all of them "
                      "counted together (to line runs up side by side: traceforge "
                      "compare).",)
            what = f"{len(ranks)} traces of {' '.join(traces)}"
        else:
            notes += (f"{len(ranks)} ranks: the kernels of all of them counted together.",)
            what = f"{len(ranks)} ranks of {' '.join(traces)}"
    df = top_kernels_of(totals, None if limit <= 0 else limit, by=by)
    extra: list[str] = []
    if counters_path:
        # Imported only here: a plain top-kernels run does not load the counters' modules.
        from traceforge.analyzers.counters.measured import Measured, measured_kernels
        from traceforge.formats.counter_files import read_counters

        def join() -> Measured:
            c = read_counters(counters_path)
            return measured_kernels(t, c.launches, counter_notes=c.notes, skip=launch_skip)

        m = derived_with_file(t, f"top_kernels.counters|skip={launch_skip}", counters_path,
                              join)
        df = df.merge(m.table[["full_name", *COUNTER_COLUMNS]], on="full_name", how="left")
        df["matched"] = df["matched"].fillna(0).astype("int64")
        extra = list(COUNTER_COLUMNS)
        notes += tuple(n for n in m.notes if not n.startswith("durations under ncu")
                       and not n.startswith("device peaks"))
    if fmt in ("table", "md"):
        df = df[[*TOP_KERNEL_COLUMNS, *extra]].rename(columns=COUNTER_LABELS)
        if by != "name":
            df = df.drop(columns=["name"])
    if totals["class"].isin(("memcpy", "memset")).all():
        notes += ("No GPU kernels in this trace (CPU-only or GPU activity not recorded).",)
    emit_frame(df, fmt, title=f"Top kernels by {by}: {what}", notes=notes)
