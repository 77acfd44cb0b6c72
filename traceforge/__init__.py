"""traceforge: trace analysis for GPU machine-learning workloads.

    import traceforge as tf
    t = tf.load("trace.pt.trace.json.gz")
    tf.top_kernels(t)       # pandas DataFrame
    tf.ops(t)

Every analysis is a plain function ``Trace -> DataFrame`` (or a small result of frames).
"""

from __future__ import annotations

from traceforge.analyzers.breakdown import breakdown
from traceforge.analyzers.diff import TraceDiff, diff
from traceforge.analyzers.idle import IdleReport, idle_gaps
from traceforge.analyzers.kernel_names import classify, short_name
from traceforge.analyzers.kernels import kernel_table, top_kernels
from traceforge.analyzers.launch import LaunchReport, gpu_activity, launch_overhead
from traceforge.analyzers.ops import ops
from traceforge.analyzers.overlap import OverlapReport, overlap
from traceforge.capture import capture, step
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
from traceforge.perfetto_ui import open_in_perfetto

__version__ = "0.1.0"

__all__ = [
    "AnalysisError",
    "CaptureError",
    "Device",
    "IdleReport",
    "LaunchReport",
    "OverlapReport",
    "Trace",
    "TraceFormatError",
    "TraceDiff",
    "TraceMeta",
    "TraceforgeError",
    "UsageError",
    "breakdown",
    "capture",
    "classify",
    "diff",
    "gpu_activity",
    "idle_gaps",
    "kernel_table",
    "launch_overhead",
    "load",
    "load_run",
    "open_in_perfetto",
    "ops",
    "overlap",
    "short_name",
    "step",
    "top_kernels",
]
