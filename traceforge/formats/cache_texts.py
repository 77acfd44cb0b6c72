"""Texts kept in the cache directory beside the trace entries: a text that is a pure
function of its inputs (a report chart's SVG from its data), kept under a hash of the
inputs, its name, the code and matplotlib's version, so a later report with the same
data skips drawing (and importing matplotlib). The files are derived-table files
(:class:`~traceforge.formats.derived.DiskStore`), evicted with the rest of the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any

from traceforge.formats import derived
from traceforge.formats.cache_files import SUFFIX
from traceforge.formats.cache_settings import cache_dir, enabled
from traceforge.formats.derived import DiskStore


def text_store(name: str, inputs: Any) -> DiskStore | None:
    """Where the text ``name`` made from ``inputs`` is kept. None where it is not kept:
    no cache, no matplotlib (a chart is then refused with its one line, and a stored one
    is shown only where one could be drawn), or inputs the file format does not hold."""
    from importlib import metadata, util

    if not enabled() or util.find_spec("matplotlib") is None:
        return None
    try:
        blob = derived.encode("", inputs)
        mpl = metadata.version("matplotlib")
    except (derived.Unstorable, TypeError, ValueError, metadata.PackageNotFoundError):
        return None
    digest = hashlib.sha1(blob + f"|{name}|{mpl}".encode()).hexdigest()[:24]
    return DiskStore(cache_dir() / f"text-{digest}{SUFFIX}", name, None)


def stored_text(store: DiskStore) -> str | None:
    """The text kept in ``store`` (:func:`text_store`), or None."""
    got = store.get("text")
    return got if isinstance(got, str) else None


def keep_text(store: DiskStore, text: str) -> None:
    """Keep ``text`` in ``store`` (:func:`text_store`); a cache that cannot be written is
    passed over."""
    with contextlib.suppress(OSError):
        store.entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        store.put("text", text)
