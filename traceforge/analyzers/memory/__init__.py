"""Memory: where the GPU memory goes, per device, per step, per op, per run.

Owns the analysis of ``Trace.memory()`` (the allocator's events, read by
:mod:`traceforge.formats.memory`) and of PyTorch memory snapshots (read as plain data by
:mod:`traceforge.formats.snapshot`, handed in as a dict): peaks and when, per-step
start/peak/end/growth, the ops that allocate, what is live at the peak, reserved minus
allocated, OOM events, the series for charts and counter tracks, and a run's peak memory
beside its step time.

May import: :mod:`traceforge.model`, :mod:`traceforge.errors`, analyzers' ``names`` and
``timeline`` (steps, stacks); never formats, report or render. ``runs`` imports it (a run's
peak memory beside its step time).
"""

from traceforge.analyzers.memory.analysis import (
    PEAK_COLUMNS,
    MemoryReport,
    memory,
    peak_columns,
    run_peak_memory,
    series,
)
from traceforge.analyzers.memory.snapshot import SnapshotReport, snapshot

__all__ = ["PEAK_COLUMNS", "MemoryReport", "SnapshotReport", "memory", "peak_columns",
           "run_peak_memory", "series", "snapshot"]
