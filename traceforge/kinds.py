"""The kinds of rows a trace's table holds: what the ``kind`` column may say.

Defined here, with no heavy imports, so that a reader's column passes (run in a process
forked before pandas is imported, :mod:`traceforge.formats.prefetch`) can use them;
:mod:`traceforge.model` re-exports them.
"""

from __future__ import annotations

#: Every value the ``kind`` column may hold.
KINDS: tuple[str, ...] = (
    "kernel",  # GPU kernel execution
    "memcpy",  # GPU copy (HtoD, DtoH, DtoD, PtoP)
    "memset",  # GPU memset
    "runtime",  # CUDA/HIP runtime API call on the host
    "driver",  # CUDA driver API call on the host (cuLaunchKernel, ...)
    "cpu_op",  # framework operator (aten::mm, ...)
    "user_annotation",  # record_function / NVTX / roctx range on the host
    "gpu_annotation",  # the GPU-side projection of a user annotation
    "python",  # python_function stack frames
    "sync",  # synchronization seen by the profiler (stream/event/device sync)
    "other",  # anything else kept for completeness (spans, instants, overhead)
)

#: GPU activity kinds: the events that occupy a device.
GPU_KINDS: tuple[str, ...] = ("kernel", "memcpy", "memset")
