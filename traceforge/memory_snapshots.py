"""A PyTorch memory snapshot file read and analysed in one call: the notebook API's
``memory_snapshot`` and the ``memory`` verb's snapshot mode (reading is formats', the
analysis analyzers.memory's)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from traceforge.analyzers.memory import SnapshotReport


def memory_snapshot(path: str | Path, top: int = 20) -> SnapshotReport:
    """A PyTorch memory snapshot pickle (``torch.cuda.memory._dump_snapshot``) analysed:
    segments, largest blocks, largest free block, the active-memory timeline. The file is
    read as plain data (anything else is refused, never run)."""
    from traceforge.analyzers.memory import snapshot
    from traceforge.formats import resolve
    from traceforge.formats.snapshot import read

    return snapshot(read(Path(resolve(str(path)))), top=top)
