"""The C library's calls that Python's standard library lacks, where the platform has
them: Linux's ``sync_file_range`` (an output file handed to the disk as it grows:
:mod:`traceforge.outputs`) and glibc's ``mallopt`` (how the CLI's process keeps the
memory it frees: :func:`traceforge.cli.keep_freed_memory`). Each is looked up once,
through ctypes, imported only then."""

from __future__ import annotations

import os
import sys
from typing import Any

_found: dict[str, Any] = {}


def function(name: str, *args: str) -> Any:
    """The C library's function ``name``, taking the ctypes types named ``args``
    (``"c_int"``, ``"c_int64"``, ...) and returning an int; None where there is none
    (not Linux, not found)."""
    if name not in _found:
        _found[name] = _looked_up(name, args)
    return _found[name]


def _looked_up(name: str, args: tuple[str, ...]) -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        fn = getattr(ctypes.CDLL(None, use_errno=True), name)
        fn.argtypes = [getattr(ctypes, a) for a in args]
    except (OSError, AttributeError, ImportError):
        return None
    fn.restype = ctypes.c_int
    return fn


def is_glibc() -> bool:
    """Whether the C library is GNU's (its ``mallopt`` parameters are glibc's own)."""
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError, AttributeError):
        return False
