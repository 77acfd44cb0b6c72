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
    "idle": "traceforge.analyzers.idle:idle_gaps",
    "info": "traceforge.analyzers.summary:summary",
    "launch": "traceforge.analyzers.launch:launch_overhead",
    # The report package itself: calling it builds a Report (traceforge/report/__init__.py).
    "report": "traceforge.report:",
    "Report": "traceforge.report.document",
    "write_report": "traceforge.commands.report",
    "Summary": "traceforge.analyzers.summary",
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
    "classify": "traceforge.analyzers.kernel_names",
    "display_names": "traceforge.analyzers.kernel_names",
    "short_name": "traceforge.analyzers.kernel_names",
    "kernel_table": "traceforge.analyzers.kernels",
    "launch_config": "traceforge.analyzers.kernels",
    "top_kernels": "traceforge.analyzers.kernels",
    "ops": "traceforge.analyzers.ops",
    "select_steps": "traceforge.analyzers.timeline",
    "sql": "traceforge.analyzers.query",
    "Timeline": "traceforge.analyzers.timeline",
    "timeline": "traceforge.analyzers.timeline",
    "IdleReport": "traceforge.analyzers.idle",
    "idle_gaps": "traceforge.analyzers.idle",
    "OverlapReport": "traceforge.analyzers.overlap",
    "overlap": "traceforge.analyzers.overlap",
    "breakdown": "traceforge.analyzers.breakdown",
    "LaunchReport": "traceforge.analyzers.launch",
    "gpu_activity": "traceforge.analyzers.activity",
    "launch_overhead": "traceforge.analyzers.launch",
    "CriticalPath": "traceforge.analyzers.critical_path",
    "critical_path": "traceforge.analyzers.critical_path",
    "TraceDiff": "traceforge.analyzers.diff",
    "diff": "traceforge.analyzers.diff",
    "TraceRun": "traceforge.analyzers.runs",
    "load_runs": "traceforge.commands.runs",
    "ScalingReport": "traceforge.analyzers.scaling",
    "scaling": "traceforge.analyzers.scaling",
    "Comparison": "traceforge.analyzers.compare",
    "compare": "traceforge.analyzers.compare",
    "gate": "traceforge.analyzers.regression",
    "capture": "traceforge.capture",
    "step": "traceforge.capture",
    "run_step_time": "traceforge.step_time",
    "StepTime": "traceforge.step_time",
    "kernels_per_step": "traceforge.analyzers.timeline:kernels_per_step_of",
    "open_in_perfetto": "traceforge.ui.perfetto",
    "DevicePeaks": "traceforge.analyzers.devices",
    "device_peaks": "traceforge.analyzers.devices",
    "load_peaks": "traceforge.analyzers.devices",
    "RooflineReport": "traceforge.analyzers.roofline",
    "roofline": "traceforge.analyzers.roofline",
    "MFUReport": "traceforge.analyzers.mfu",
    "mfu": "traceforge.analyzers.mfu",
}

__all__ = [
    "AnalysisError",
    "CaptureError",
    "Comparison",
    "CriticalPath",
    "Device",
    "DevicePeaks",
    "IdleReport",
    "LaunchReport",
    "MFUReport",
    "OverlapReport",
    "Report",
    "RooflineReport",
    "ScalingReport",
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
    "mfu",
    "open_in_perfetto",
    "ops",
    "overlap",
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
    from traceforge.analyzers.activity import gpu_activity
    from traceforge.analyzers.breakdown import breakdown
    from traceforge.analyzers.compare import Comparison, compare
    from traceforge.analyzers.critical_path import CriticalPath, critical_path
    from traceforge.analyzers.devices import DevicePeaks, device_peaks, load_peaks
    from traceforge.analyzers.diff import TraceDiff, diff
    from traceforge.analyzers.idle import IdleReport, idle_gaps
    from traceforge.analyzers.idle import idle_gaps as idle
    from traceforge.analyzers.kernel_names import classify, display_names, short_name
    from traceforge.analyzers.kernels import kernel_table, launch_config, top_kernels
    from traceforge.analyzers.launch import LaunchReport, launch_overhead
    from traceforge.analyzers.launch import launch_overhead as launch
    from traceforge.analyzers.mfu import MFUReport, mfu
    from traceforge.analyzers.ops import ops
    from traceforge.analyzers.overlap import OverlapReport, overlap
    from traceforge.analyzers.query import sql
    from traceforge.analyzers.regression import gate
    from traceforge.analyzers.roofline import RooflineReport, roofline
    from traceforge.analyzers.runs import TraceRun
    from traceforge.analyzers.scaling import ScalingReport, scaling
    from traceforge.analyzers.summary import Summary
    from traceforge.analyzers.summary import summary as info
    from traceforge.analyzers.timeline import Timeline, select_steps, timeline
    from traceforge.analyzers.timeline import kernels_per_step_of as kernels_per_step
    from traceforge.capture import capture, step
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
    from traceforge.formats.run import load_run
    from traceforge.model import Device, Trace, TraceMeta
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
