"""What the profiler did to the run: outlier steps and profiler overhead, in words.

Owns the notes that ``info``, ``launch``, ``idle``, ``critical-path`` and the report print
about outlier steps (:func:`traceforge.analyzers.timeline.core.outlier_steps`, the rule
in :mod:`traceforge.step_time`) and about the overhead a capture summary shows, and
whether host-time findings stand (``notes``). May import the timeline, the model and
:mod:`traceforge.step_time`.
"""
