"""``traceforge memory TRACE|SNAPSHOT``: where the GPU memory goes, per device, step and op."""

from __future__ import annotations

import click

from traceforge.analyzers.memory import memory
from traceforge.analyzers.timeline.steps import NO_STEPS, host_steps
from traceforge.commands import values
from traceforge.commands.options import format_option, load_trace, resolve_steps, step_options
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
@click.argument("trace", type=click.Path(dir_okay=True, path_type=str))
@click.option("-n", "limit", type=values.COUNT, default=20, show_default=True,
              help="Rows of the op, live-allocation and segment tables per device (0: all).")
@step_options
@table_options
@format_option
def command(trace: str, limit: int, steps_from: str | None, steps_text: str | None,
            step_list: tuple[int, ...], table: str | None, out_dir: str | None,
            fmt: str) -> None:
    """Peak allocated and reserved memory per device and when; per step start, peak, end
    and growth; the ops that allocate most and what is live at the peak; OOM events.

    TRACE: a trace with memory events (`traceforge capture --memory`, torch.profiler
    profile_memory=True; nsys --cuda-memory-usage=true; rocprofv3
    --memory-allocation-trace), or a PyTorch memory snapshot pickle
    (torch.cuda.memory._dump_snapshot, `capture --memory-snapshot`), read as data only.

    Tables: devices, steps, ops, live, oom, oom_live (a snapshot: devices, segments,
    blocks, peaks).
    """
    top = limit if limit > 0 else 10**9
    if _is_snapshot(trace):
        _snapshot(trace, top, table, out_dir, fmt)
        return
    rule, _ = resolve_steps(steps_from, steps_text, step_list)
    if rule in (None, NO_STEPS):
        t = load_trace(trace, rule, kinds=KINDS)
        if rule is None and host_steps(t).empty:
            t = load_trace(trace, rule, kinds=(*KINDS, "cpu_op"))
    else:
        t = load_trace(trace, rule, kinds=(*KINDS, "cpu_op"))
    rep = memory(t, top=top)
    if rep.empty:
        raise TraceFormatError(trace, rep.notes[0])
    where = f" ({rep.source})" if rep.source else ""
    emit_tables(
        [Table("devices", rep.devices, f"Memory per device{where}: {trace}", rep.notes),
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
