"""Capture: run a program under a profiler in a named mode, and write a trace that knows how
it was made (a top-level ``traceforge`` key, plus a run summary JSON beside it).

This layer only runs programs and writes files; it never imports analyzers. torch is
imported inside the functions that need it, so ``import traceforge`` works without it.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from traceforge.capture.options import BACKEND_NAMES, MODES, CaptureOptions, Steps
from traceforge.capture.session import Run, capture
from traceforge.capture.steps import step


class _CallableModule(types.ModuleType):
    """``traceforge.capture`` names both this package and the :func:`capture` context manager.

    Once the package is imported, Python binds ``traceforge.capture`` to the package, which
    would hide the function from ``with traceforge.capture(...)``; calling the package
    therefore calls the function.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return capture(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["BACKEND_NAMES", "MODES", "CaptureOptions", "Run", "Steps", "capture",
           "step"]
