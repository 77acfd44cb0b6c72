"""Where the trace cache lives, whether it is on, and how large it may grow.

Read from the environment each time (``TRACEFORGE_CACHE``, ``TRACEFORGE_NO_CACHE``,
``TRACEFORGE_CACHE_SIZE``), so a test or a notebook that changes them is heard at once.
Light on purpose: the CLI's size options and memory guard parse sizes with
:func:`parse_size` without importing the cache itself.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
from pathlib import Path

#: Default cap on the cache directory; least recently used entries go first.
DEFAULT_MAX_BYTES = 5 * 10**9
#: The file name ending of a trace's entry.
SUFFIX = ".arrow"

log = logging.getLogger("traceforge")
_noted: set[str] = set()


def note_once(what: str, msg: str) -> None:
    """Warn ``msg`` on the ``traceforge`` logger the first time ``what`` comes up in this
    process (cache trouble is never an error: the command runs without the cache)."""
    if what not in _noted:
        _noted.add(what)
        log.warning("traceforge: note: %s", msg)


def cache_dir() -> Path:
    """``$TRACEFORGE_CACHE``, else the platform's user cache directory + ``traceforge``.

    Written out here rather than adding platformdirs for three lines: XDG on Linux and
    other Unixes, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows.
    """
    env = os.environ.get("TRACEFORGE_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "traceforge"


def entry_file(real: Path) -> Path:
    """Where the entry of the trace at its real path ``real`` lives (whether or not it
    does yet): one file per source path, named by its hash."""
    return cache_dir() / (hashlib.sha1(str(real).encode()).hexdigest()[:24] + SUFFIX)


def enabled(cache: bool | None = None) -> bool:
    """Whether loads use the cache: ``cache`` when given, else not ``TRACEFORGE_NO_CACHE``."""
    if cache is not None:
        return cache
    return os.environ.get("TRACEFORGE_NO_CACHE", "").strip().lower() in ("", "0", "false", "no")


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def parse_size(text: str) -> int:
    """``"5GB"``, ``"500MiB"``, ``"0"`` or plain bytes -> bytes; ValueError otherwise."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 5GB, 500MB, 0)")
    unit = (m.group(2) or "").lower().removesuffix("b")
    return int(float(m.group(1)) * _UNITS[unit])


def max_bytes() -> int:
    """The size cap: ``$TRACEFORGE_CACHE_SIZE`` (a size such as ``5GB``), default 5 GB."""
    env = os.environ.get("TRACEFORGE_CACHE_SIZE")
    if env:
        try:
            return parse_size(env)
        except ValueError:
            note_once("size", f"ignoring TRACEFORGE_CACHE_SIZE={env!r} (examples: 5GB, 500MB)")
    return DEFAULT_MAX_BYTES
