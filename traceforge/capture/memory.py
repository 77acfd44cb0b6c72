"""``capture --memory-snapshot``: the CUDA caching allocator's history over the recorded
steps, written as a snapshot pickle beside the trace (``NAME.MODE.memory.pickle``).

History recording (``torch.cuda.memory._record_memory_history``, Python stacks of every
allocation) starts when the profiler's window starts (after ``WAIT + WARMUP`` steps) and the
snapshot is dumped (``_dump_snapshot``) when the window ends, or when the run stops inside
it; ``traceforge memory NAME.MODE.memory.pickle`` reads it as data. It costs step time
while recording (each allocation records its stack): README has the measured cost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from traceforge.capture.options import Steps

#: Trace entries the allocator keeps (a ring buffer): ~100 MB of snapshot at most.
MAX_ENTRIES = 200_000


class MemorySnapshot:
    """Starts and dumps the allocator history around the recorded window."""

    def __init__(self, path: Path, notes: list[str]) -> None:
        self.path, self.notes = path, notes
        self.recording = False
        self.written = False

    def _memory(self) -> Any | None:
        try:
            import torch
        except ImportError:
            return None
        tc: Any = torch.cuda
        if not tc.is_available():
            if "no CUDA device: no memory snapshot" not in self.notes:
                self.notes.append("no CUDA device: no memory snapshot")
            return None
        return tc.memory

    def on_step(self, finished: int, steps: Steps) -> None:
        """After ``finished`` steps: start at the window's first step, dump after its last."""
        start = steps.wait + steps.warmup
        if finished == start and not self.recording and not self.written:
            mem = self._memory()
            if mem is not None:
                mem._record_memory_history(max_entries=MAX_ENTRIES)
                self.recording = True
        elif finished == start + steps.active and self.recording:
            self.finish()

    def finish(self) -> None:
        """Dump what was recorded (once) and stop recording."""
        if not self.recording:
            return
        mem = self._memory()
        self.recording = False
        if mem is None:
            return
        try:
            mem._dump_snapshot(str(self.path))
            self.written = True
        except (OSError, RuntimeError) as e:
            self.notes.append(f"memory snapshot not written: {e}")
        finally:
            mem._record_memory_history(enabled=None)
