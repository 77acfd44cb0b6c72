"""traceforge: trace analysis for GPU machine-learning workloads.

    import traceforge as tf
    t = tf.load("trace.pt.trace.json.gz")
    tf.top_kernels(t)       # pandas DataFrame
    tf.ops(t)

Every analysis is a plain function ``Trace -> DataFrame`` (or a small result of frames).
Names are imported on first use, so ``import traceforge`` (and every CLI verb) pays only
for the modules it touches.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from traceforge.version import __version__ as __version__

#: Public name -> module that defines it (``module:name`` where the function there is
#: named otherwise: the notebook names mirror the CLI verbs).
_EXPORTS: dict[str, str] = {
    # The CLI's tables, names and units (traceforge/notebook.py); the analyzers beneath
    # are tf.idle_gaps and traceforge.analyzers.timing.summary.summary.
    "idle": "traceforge.notebook",
    "info": "traceforge.notebook",
    "IdleTables": "traceforge.notebook",
    "launch": "traceforge.analyzers.timing.launch:launch_overhead",
    # The report package itself: calling it builds a Report (traceforge/report/__init__.py).
    "report": "traceforge.report:",
    "Report": "traceforge.report.document",
    "write_report": "traceforge.commands.report",
    "Summary": "traceforge.analyzers.timing.summary",
    "AnalysisError": "traceforge.errors",
    "CaptureError": "traceforge.errors",
    "TraceFormatError": "traceforge.errors",
    "TraceforgeError": "traceforge.errors",
    "UsageError": "traceforge.errors",
    "Device": "traceforge.model",
    "Trace": "traceforge.model",
    "TraceMeta": "traceforge.model",
    "load": "traceforge.formats",
    "load_run": "traceforge.formats.run",
    "map_ranks": "traceforge.engine",
    "classify": "traceforge.analyzers.names.kernel_names",
    "display_names": "traceforge.analyzers.names.kernel_names",
    "short_name": "traceforge.analyzers.names.kernel_names",
    "kernel_table": "traceforge.analyzers.timing.kernels",
    "launch_config": "traceforge.analyzers.timing.kernels",
    "top_kernels": "traceforge.analyzers.timing.kernels",
    "ops": "traceforge.analyzers.timing.ops",
    "select_steps": "traceforge.analyzers.timeline.core",
    "sql": "traceforge.analyzers.timeline.query",
    "Timeline": "traceforge.analyzers.timeline.core",
    "timeline": "traceforge.analyzers.timeline.core",
    "IdleReport": "traceforge.analyzers.timing.idle",
    "idle_gaps": "traceforge.analyzers.timing.idle",
    "OverlapReport": "traceforge.analyzers.timing.overlap",
    "overlap": "traceforge.analyzers.timing.overlap",
    "breakdown": "traceforge.analyzers.timing.breakdown",
    "LaunchReport": "traceforge.analyzers.timing.launch",
    "gpu_activity": "traceforge.analyzers.timeline.activity",
    "launch_overhead": "traceforge.analyzers.timing.launch",
    "comm": "traceforge.analyzers.communication.table",
    "CommReport": "traceforge.analyzers.communication.table",
    "CriticalPath": "traceforge.analyzers.critical_path",
    "critical_path": "traceforge.analyzers.critical_path",
    "TraceDiff": "traceforge.analyzers.runs.diff",
    "diff": "traceforge.analyzers.runs.diff",
    "TraceRun": "traceforge.analyzers.runs.inputs",
    "load_runs": "traceforge.commands.runs",
    "ScalingReport": "traceforge.analyzers.runs.scaling",
    "scaling": "traceforge.analyzers.runs.scaling",
    "Comparison": "traceforge.analyzers.runs.compare",
    "compare": "traceforge.analyzers.runs.compare",
    "gate": "traceforge.analyzers.runs.regression",
    "capture": "traceforge.capture",
    "step": "traceforge.capture",
    "run_step_time": "traceforge.step_time",
    "StepTime": "traceforge.step_time",
    "kernels_per_step": "traceforge.analyzers.timeline.core:kernels_per_step_of",
    "open_in_perfetto": "traceforge.ui.perfetto",
    "DevicePeaks": "traceforge.analyzers.costs.devices",
    "device_peaks": "traceforge.analyzers.costs.devices",
    "load_peaks": "traceforge.analyzers.costs.devices",
    "RooflineReport": "traceforge.analyzers.costs.roofline",
    "roofline": "traceforge.analyzers.costs.roofline",
    "MFUReport": "traceforge.analyzers.costs.mfu",
    "mfu": "traceforge.analyzers.costs.mfu",
    "MemoryReport": "traceforge.analyzers.memory",
    "memory": "traceforge.analyzers.memory",
    "SnapshotReport": "traceforge.analyzers.memory",
    "memory_snapshot": "traceforge.commands.memory",
    "read_counters": "traceforge.formats.counter_files",
    "measured_kernels": "traceforge.analyzers.counters.measured",
}

__all__ = [
    "AnalysisError",
    "CaptureError",
    "CommReport",
    "Comparison",
    "CriticalPath",
    "Device",
    "DevicePeaks",
    "IdleReport",
    "IdleTables",
    "LaunchReport",
    "MFUReport",
    "MemoryReport",
    "OverlapReport",
    "Report",
    "RooflineReport",
    "ScalingReport",
    "SnapshotReport",
    "StepTime",
    "Summary",
    "Timeline",
    "Trace",
    "TraceDiff",
    "TraceFormatError",
    "TraceMeta",
    "TraceRun",
    "TraceforgeError",
    "UsageError",
    "breakdown",
    "capture",
    "classify",
    "comm",
    "compare",
    "critical_path",
    "device_peaks",
    "diff",
    "display_names",
    "gate",
    "gpu_activity",
    "idle",
    "idle_gaps",
    "info",
    "kernel_table",
    "kernels_per_step",
    "launch",
    "launch_config",
    "launch_overhead",
    "load",
    "load_peaks",
    "load_run",
    "load_runs",
    "map_ranks",
    "measured_kernels",
    "memory",
    "memory_snapshot",
    "mfu",
    "open_in_perfetto",
    "ops",
    "overlap",
    "read_counters",
    "report",
    "roofline",
    "run_step_time",
    "scaling",
    "select_steps",
    "short_name",
    "sql",
    "step",
    "timeline",
    "top_kernels",
    "write_report",
]

if TYPE_CHECKING:
    from traceforge import report as report
    from traceforge.analyzers.communication.table import CommReport, comm
    from traceforge.analyzers.costs.devices import DevicePeaks, device_peaks, load_peaks
    from traceforge.analyzers.costs.mfu import MFUReport, mfu
    from traceforge.analyzers.costs.roofline import RooflineReport, roofline
    from traceforge.analyzers.counters.measured import measured_kernels
    from traceforge.analyzers.critical_path import CriticalPath, critical_path
    from traceforge.analyzers.memory import MemoryReport, SnapshotReport, memory
    from traceforge.analyzers.names.kernel_names import classify, display_names, short_name
    from traceforge.analyzers.runs.compare import Comparison, compare
    from traceforge.analyzers.runs.diff import TraceDiff, diff
    from traceforge.analyzers.runs.inputs import TraceRun
    from traceforge.analyzers.runs.regression import gate
    from traceforge.analyzers.runs.scaling import ScalingReport, scaling
    from traceforge.analyzers.timeline.activity import gpu_activity
    from traceforge.analyzers.timeline.core import Timeline, select_steps, timeline
    from traceforge.analyzers.timeline.core import kernels_per_step_of as kernels_per_step
    from traceforge.analyzers.timeline.query import sql
    from traceforge.analyzers.timing.breakdown import breakdown
    from traceforge.analyzers.timing.idle import IdleReport, idle_gaps
    from traceforge.analyzers.timing.kernels import kernel_table, launch_config, top_kernels
    from traceforge.analyzers.timing.launch import LaunchReport, launch_overhead
    from traceforge.analyzers.timing.launch import launch_overhead as launch
    from traceforge.analyzers.timing.ops import ops
    from traceforge.analyzers.timing.overlap import OverlapReport, overlap
    from traceforge.analyzers.timing.summary import Summary
    from traceforge.capture import capture, step
    from traceforge.commands.memory import memory_snapshot
    from traceforge.commands.report import write_report
    from traceforge.commands.runs import load_runs
    from traceforge.engine import map_ranks
    from traceforge.errors import (
        AnalysisError,
        CaptureError,
        TraceforgeError,
        TraceFormatError,
        UsageError,
    )
    from traceforge.formats import load
    from traceforge.formats.counter_files import read_counters
    from traceforge.formats.run import load_run
    from traceforge.model import Device, Trace, TraceMeta
    from traceforge.notebook import IdleTables, idle, info
    from traceforge.report.document import Report
    from traceforge.step_time import StepTime, run_step_time
    from traceforge.ui.perfetto import open_in_perfetto


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'traceforge' has no attribute {name!r}")
    module, colon, attr = module.partition(":")
    mod = importlib.import_module(module)
    # "pkg:" names the module itself (traceforge.report, a callable package).
    value = mod if colon and not attr else getattr(mod, attr or name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    # Only the public API (and the version), not this module's own imports.
    return sorted([*__all__, "__version__"])
