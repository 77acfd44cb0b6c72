"""Writing a command's output file: one line naming the path when it cannot be written.

Every verb that writes a file (convert, annotate, report) names it on stderr
(:func:`wrote`) and checks the destination before
the work (a missing folder is found before a long analysis, not after) and writes through
:func:`write`, so a missing parent folder, a folder given as the file, or a permission
problem is ``traceforge: error: PATH: cannot write (why)``, exit 2, never a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

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
    """Write ``data`` (text as UTF-8) to ``path``; a UsageError naming it when that fails."""
    p = check(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        p.write_bytes(raw)
    except OSError as e:
        raise _fail(p, e.strerror or type(e).__name__) from None
    return p
