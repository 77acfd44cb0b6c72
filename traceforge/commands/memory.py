"""``traceforge memory TRACE|SNAPSHOT``: where the GPU memory goes, per device, step and op."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import click
import pandas as pd

from traceforge.analyzers.memory import MemoryReport, memory
from traceforge.analyzers.timeline.steps import NO_STEPS, host_steps
from traceforge.commands import values
from traceforge.commands.engine import Engine, engine_options, run_paths
from traceforge.commands.options import (
    format_option,
    load_trace,
    resolve_steps,
    step_options,
    traces_argument,
)
from traceforge.commands.tables import Table, emit_tables, table_options
from traceforge.errors import TraceFormatError
from traceforge.formats import resolve
from traceforge.formats.snapshot import sniff
from traceforge.formats.source import read_head
from traceforge.memory_snapshots import memory_snapshot

#: What the memory analysis reads besides the memory table: step ranges and Python frames
#: for stacks. Each event's op comes with the memory table (kept beside the cache entry),
#: so the op rows are read only where steps may be ops (old Kineto traces file
#: ``ProfilerStep#N`` as one; a --steps-from regex may name one).
KINDS = ("user_annotation", "python")


def _is_snapshot(path: str) -> bool:
    p = resolve(path)
    if not p.is_file():
        return False
    try:
        head = read_head(p, 4)
    except OSError:
        return False
    return sniff(p, head)


@click.command("memory")
@traces_argument
@click.option("-n", "limit", type=values.COUNT, default=20, show_default=True,
              help="Rows of the op, live-allocation and segment tables per device (0: all).")
@step_options
@table_options
@format_option
@engine_options
def command(traces: tuple[str, ...], limit: int, steps_from: str | None,
            steps_text: str | None, step_list: tuple[int, ...], table: str | None,
            out_dir: str | None, fmt: str, engine: Engine) -> None:
    """Peak allocated and reserved memory per device and when; per step start, peak, end
    and growth; the ops that allocate most and what is live at the peak; OOM events.

    TRACES: a trace with memory events (`traceforge capture --memory`, torch.profiler
    profile_memory=True; nsys --cuda-memory-usage=true; rocprofv3
    --memory-allocation-trace), or a PyTorch memory snapshot pickle
    (torch.cuda.memory._dump_snapshot, `capture --memory-snapshot`), read as data only;
    or several rank traces of one run, or a directory of them (each rank analysed where
    it is read; every table gets a rank column).

    Tables: devices, steps, ops, live, oom, oom_live (a snapshot: devices, segments,
    blocks, peaks).
    """
    top = limit if limit > 0 else 10**9
    rule, _ = resolve_steps(steps_from, steps_text, step_list)
    if len(traces) > 1 or Path(traces[0]).is_dir():
        _ranks(traces, rule, top, table, out_dir, fmt, engine)
        return
    trace = traces[0]
    if _is_snapshot(trace):
        _snapshot(trace, top, table, out_dir, fmt)
        return
    if rule in (None, NO_STEPS):
        t = load_trace(trace, rule, kinds=KINDS)
        if rule is None and host_steps(t).empty:
            t = load_trace(trace, rule, kinds=(*KINDS, "cpu_op"))
    else:
        t = load_trace(trace, rule, kinds=(*KINDS, "cpu_op"))
    _emit(memory(t, top=top), trace, table, out_dir, fmt)


def _emit(rep: MemoryReport, what: str, table: str | None, out_dir: str | None,
          fmt: str) -> None:
    if rep.empty:
        raise TraceFormatError(what, rep.notes[0])
    where = f" ({rep.source})" if rep.source else ""
    emit_tables(
        [Table("devices", rep.devices, f"Memory per device{where}: {what}", rep.notes),
         Table("steps", rep.steps, f"Allocated memory per step (steps from {rep.steps_from})"),
         Table("ops", rep.ops, "Ops that allocate most (innermost op on the allocating "
               "thread; live = still allocated at the device's peak)"),
         Table("live", rep.live, "Allocations live at the peak, largest first"),
         Table("oom", rep.oom, "Out-of-memory events"),
         Table("oom_live", rep.oom_live, "Live memory by op at each out-of-memory event")],
        fmt, table=table, out_dir=out_dir,
        doc={"source": rep.source, "steps_from": rep.steps_from, "notes": list(rep.notes),
             "devices": rep.devices, "steps": rep.steps, "ops": rep.ops, "live": rep.live,
             "oom": rep.oom, "oom_live": rep.oom_live})


def _ranks(traces: tuple[str, ...], rule: str | None, top: int, table: str | None,
           out_dir: str | None, fmt: str, engine: Engine) -> None:
    """Every rank of one run through the engine (cache, workers), tables side by side."""
    kinds = KINDS if rule in (None, NO_STEPS) else (*KINDS, "cpu_op")
    ranks = engine.ranks(run_paths(traces), partial(memory, top=top), steps_from=rule,
                         kinds=kinds, numbered=True)
    if rule is None and any(r.value.steps_from.startswith("none") for r in ranks):
        # Old Kineto traces file ProfilerStep#N as an op: read with the ops.
        ranks = engine.ranks(run_paths(traces), partial(memory, top=top), steps_from=rule,
                             kinds=(*KINDS, "cpu_op"), numbered=True)
    have = [r for r in ranks if not r.value.empty]
    if not have:
        raise TraceFormatError(traces[0], ranks[0].value.notes[0])
    notes = tuple(dict.fromkeys(
        [*(f"rank {r.rank}: {n}" for r in have for n in r.value.notes),
         *(f"rank {r.rank} ({r.path}): no memory events" for r in ranks if r.value.empty)]))

    def cat(name: str) -> pd.DataFrame:
        frames: list[pd.DataFrame] = [getattr(r.value, name) for r in have]
        parts = [f.assign(rank=r.rank) for r, f in zip(have, frames, strict=True) if not f.empty]
        if not parts:
            return frames[0]
        df = pd.concat(parts, ignore_index=True)
        out: pd.DataFrame = df[["rank", *[c for c in df.columns if c != "rank"]]]
        return out

    first = have[0].value
    rep = MemoryReport(cat("devices"), cat("steps"), cat("ops"), cat("live"), cat("oom"),
                       cat("oom_live"), first.source, first.steps_from, notes)
    _emit(rep, f"{len(ranks)} ranks of {' '.join(traces)}", table, out_dir, fmt)


def _snapshot(path: str, top: int, table: str | None, out_dir: str | None, fmt: str) -> None:
    rep = memory_snapshot(path, top)
    emit_tables(
        [Table("devices", rep.devices, f"Memory snapshot per device: {path}", rep.notes),
         Table("segments", rep.segments, "Largest segments (cudaMalloc'd by the allocator)"),
         Table("blocks", rep.blocks, "Largest allocated blocks and where they were allocated"),
         Table("peaks", rep.peaks, "Peak active memory in the recorded history")],
        fmt, table=table, out_dir=out_dir,
        doc={"notes": list(rep.notes), "devices": rep.devices, "segments": rep.segments,
             "blocks": rep.blocks, "peaks": rep.peaks})
