"""Progress on stderr for long work: reading traces, many-rank runs, reports, annotations.

Shown only where a person watches: when stderr is a terminal, and never with ``--quiet``
(``TRACEFORGE_QUIET=1``); piped or redirected, a verb writes exactly what it wrote before.
``TRACEFORGE_PROGRESS=1`` shows it anyway (a terminal emulator that is not a tty, tests).
One rich display per phase, updated at phase and file boundaries only -- never per event,
so it costs nothing in the readers' and analyzers' loops. A display is transient: it is
gone from the terminal when its phase ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator

#: Set (to 1) by ``traceforge --quiet``: no progress, whatever stderr is.
QUIET_ENV = "TRACEFORGE_QUIET"
#: Set to 1 to show progress on a stderr that is not a terminal.
FORCE_ENV = "TRACEFORGE_PROGRESS"

#: What a phase's body calls as units of its work finish: (done, total).
Advance = Callable[[int, int], None]


def _noop(done: int, total: int) -> None:
    return None


def enabled() -> bool:
    """Whether progress is shown: stderr is a terminal (or forced) and not --quiet."""
    if os.environ.get(QUIET_ENV):
        return False
    if os.environ.get(FORCE_ENV) == "1":
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def phase(text: str) -> Iterator[Advance]:
    """A spinner on stderr saying ``text`` while the body runs; the body may call the
    yielded function with (done, total) to show a count (files of a run)."""
    if not enabled():
        yield _noop
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(file=sys.stderr, force_terminal=True if os.environ.get(FORCE_ENV)
                      == "1" else None)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task(f"traceforge: {text}", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


def size_text(path: str) -> str:
    """``path (288 MB)`` for a file, else the path."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return path
    return f"{path} ({size / 1e6:,.0f} MB)" if size >= 1e6 else path


__all__ = ["QUIET_ENV", "Advance", "enabled", "phase", "size_text"]
