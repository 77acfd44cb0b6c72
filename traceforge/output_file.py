"""Writing a command's output file: one line naming the path when it cannot be written.

Every verb that writes a file (convert, annotate, report, ``-o DIR``) checks the
destination before the work (a missing folder is found before a long analysis, not after)
and writes through :func:`write`, which replaces the file whole or not at all (a temporary
file beside it, renamed over it: :mod:`traceforge.outputs`), so a missing parent folder,
a folder given as the file, or a permission problem is ``traceforge: error: PATH: cannot
write (why)``, exit 2, never a traceback. :func:`refuse_input` keeps an output off its
inputs, hard links included. Each file written is named on stderr (:func:`wrote`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from traceforge import outputs
from traceforge.errors import UsageError


def _fail(path: str | Path, why: str) -> UsageError:
    return UsageError(f"{path}: cannot write ({why})")


def check(path: str | Path) -> Path:
    """``path`` as a Path, or a UsageError when it can be seen now that it cannot be written."""
    p = Path(path)
    if p.is_dir():
        raise _fail(p, "is a directory")
    parent = p.parent
    if not parent.exists():
        raise _fail(p, f"no such directory {parent}")
    if not parent.is_dir():
        raise _fail(p, f"{parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _fail(p, f"permission denied in {parent}")
    return p


def wrote(path: str | Path, detail: str = "") -> None:
    """Say on stderr that a file was written (every file a verb writes is named there, so
    stdout stays the verb's answer and a script sees every file it got)."""
    import click

    click.echo(f"traceforge: wrote {path}" + (f" ({detail})" if detail else ""), err=True)


def write(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path``, replacing it whole or not at all
    (:mod:`traceforge.outputs`); a UsageError naming it when that fails."""
    p = check(path)
    try:
        outputs.write(p, data)
    except OSError as e:
        raise _fail(p, e.strerror or type(e).__name__) from None
    return p


def stream(path: str | Path, fill: Callable[[BinaryIO], None]) -> Path:
    """Like :func:`write`, for output made a piece at a time: ``fill`` writes into the
    open temporary file, which then replaces ``path`` whole (or is removed on failure)."""
    p = check(path)
    try:
        with outputs.replacing(p) as tmp, outputs.opened(tmp) as f:
            fill(f)
    except OSError as e:
        raise _fail(p, e.strerror or type(e).__name__) from None
    return p


def refuse_input(path: str | Path, inputs: Sequence[str | Path], what: str = "the input trace"
                 ) -> None:
    """A UsageError when writing ``path`` would overwrite one of ``inputs``: the same path
    once resolved, or the same file by device and inode (a hard link, a bind mount)."""
    out = Path(path)
    for src in inputs:
        same = out.resolve() == Path(src).resolve()
        if not same and out.exists() and Path(src).exists():
            try:
                same = os.path.samefile(out, src)
            except OSError:
                same = False
        if same:
            raise UsageError(f"{path}: is {what} {src}; name another output")
