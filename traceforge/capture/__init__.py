"""Capture: run a program under a profiler in a named mode, and write a trace that knows how
it was made (a top-level ``traceforge`` key, plus a run summary JSON beside it).

This layer only runs programs and writes files; it never imports analyzers. torch is
imported inside the functions that need it, so ``import traceforge`` works without it.
"""

from __future__ import annotations

from traceforge.capture.options import BACKEND_NAMES, MODES, CaptureOptions, Steps
from traceforge.capture.session import Run, capture
from traceforge.capture.steps import step

#: Backend name -> module under traceforge.capture that runs a whole process with it
#: (``torch`` runs in-process through :mod:`traceforge.capture.runner`).
BACKENDS: dict[str, str] = {"torch": "runner", "nsys": "nsys", "rocprof": "rocprof"}

__all__ = ["BACKENDS", "BACKEND_NAMES", "MODES", "CaptureOptions", "Run", "Steps", "capture",
           "step"]
