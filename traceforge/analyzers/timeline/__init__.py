"""The shared timeline model: what every time analysis reads.

Owns the profiler-step windows (``steps``), GPU activity with its launch call and issuing
op (``activity``), interval arithmetic (``intervals``), the op stacks (``stacks``), the
per-trace cached :class:`~traceforge.analyzers.timeline.core.Timeline` (``core``) and SQL
over a trace's tables (``query``). May import ``names`` (kernel classes), the model and
errors; nothing above it.
"""
