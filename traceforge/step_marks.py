"""The step ranges and marks ``traceforge capture`` writes into a trace and the step reader
recognizes: plain strings, in a leaf module with no imports, so the capture wrapper running
inside the profiled process loads nothing else (no pandas, no numpy)."""

from __future__ import annotations

#: Names ``traceforge capture --backend nsys|rocprof`` gives its NVTX/roctx step ranges,
#: and the marks it leaves inside a range that readers should not count as a step: the
#: warm-up steps of the capture schedule (the torch backend leaves them out of its trace
#: too) and the last range when it is the program's tail after its last step. The writer
#: (capture) and the reader (analyzers/timeline/steps.py) share them here.
CAPTURE_STEP_RANGE = "step {n}"
WARMUP_STEP_MARK = "traceforge: step {n} warm-up"
UNFINISHED_STEP_MARK = "traceforge: step {n} unfinished"
