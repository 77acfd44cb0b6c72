"""Work a command leaves running beside it, waited for before the command ends.

The CLI runs each command inside :func:`settling`. Within it, :func:`later` starts work
that need not hold up the command's output on a thread of its own: writing a new cache
entry (Arrow's file writer, outside the GIL) while the command analyses and prints. The
work is waited for when the block ends, before anything reads or lists the cache, and
before this process forks (a child forked while a thread writes would inherit the locks
that thread holds). Outside a block (the library in a notebook or a test), :func:`later`
declines and the caller does the work at once.

Light on purpose: the CLI imports it before it knows the verb.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

#: Threads :func:`later` started inside the innermost :func:`settling` block, each with
#: the tag it was given (None: no block is open, so :func:`later` declines and the caller
#: does the work itself).
_later: list[tuple[threading.Thread, object]] | None = None


@contextlib.contextmanager
def settling() -> Iterator[None]:
    """Work handed to :func:`later` inside the block runs on a thread beside the block's
    own, and is waited for when the block ends. The CLI runs each command in one: a new
    cache entry is written while the command goes on to its analysis and output."""
    global _later
    outer, _later = _later, []
    try:
        yield
    finally:
        settle()
        _later = outer


def later(work: Callable[[], object], tag: object = None) -> bool:
    """Start ``work`` on a thread of its own and return True, inside a :func:`settling`
    block on the main thread; else False (the caller does it now). ``work`` should spend
    its time outside the GIL (file writes, Arrow's writers) and must not raise. ``tag``
    (hashable: the cache entry being written) is what :func:`pending` asks about."""
    if _later is None or threading.current_thread() is not threading.main_thread():
        return False
    t = threading.Thread(target=work, name="traceforge-later")
    t.start()
    _later.append((t, tag))
    return True


def pending(tag: object) -> bool:
    """Whether work tagged ``tag`` was started by :func:`later` and not yet waited for
    (it may have finished: this says it has not been settled)."""
    return _later is not None and any(t == tag for _, t in _later)


def settle() -> None:
    """Wait for the work :func:`later` started (from the main thread; elsewhere nothing)."""
    if _later is None or threading.current_thread() is not threading.main_thread():
        return
    while _later:
        _later[0][0].join()
        _later.pop(0)
