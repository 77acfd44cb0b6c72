"""``traceforge cache info|clear``: the columnar cache of parsed traces."""

from __future__ import annotations

from datetime import datetime

import click
import pandas as pd

from traceforge.commands.options import emit, emit_frame, emit_json, format_option
from traceforge.formats import cache as store


@click.group("cache")
def command() -> None:
    """Where parsed traces are cached, how much space they take, and clearing them.

    The first command on a trace stores its parsed table in $TRACEFORGE_CACHE; later
    commands read it instead of parsing. Entries follow their file: an edited or
    replaced trace is parsed again. Use `traceforge --no-cache` to bypass it.
    """


@command.command("info")
@format_option
def info(fmt: str) -> None:
    """The cache directory, its size and cap, and one row per cached trace."""
    entries = store.entries()
    total = sum(e.size for e in entries)
    cap = store.max_bytes()
    df = pd.DataFrame({
        "source": [e.source or e.path.name for e in entries],
        "events": [e.rows for e in entries],
        "MB": [round(e.size / 1e6, 1) for e in entries],
        "last used": [datetime.fromtimestamp(e.used_ns / 1e9).strftime("%Y-%m-%d %H:%M")
                      for e in entries],
        "state": ["ok" if e.valid else "damaged (rebuilt on next use)" for e in entries],
    })
    enabled = store.enabled()
    if fmt == "json":
        doc = {"directory": str(store.cache_dir()), "enabled": enabled, "entries": len(entries),
               "bytes": total, "max_bytes": cap, "traces": df}
        emit_json(doc)
        return
    title = (f"Trace cache {store.cache_dir()}: {len(entries)} entries, "
             f"{total / 1e6:,.1f} MB of {cap / 1e9:,.1f} GB")
    notes: tuple[str, ...] = () if enabled else ("Disabled by TRACEFORGE_NO_CACHE / --no-cache.",)
    emit_frame(df, fmt, title=title, notes=notes, digits=1)


@command.command("clear")
def clear() -> None:
    """Remove every cached trace (traces themselves are never touched)."""
    n, b = store.clear()
    emit(f"Removed {n} cache entr{'y' if n == 1 else 'ies'} ({b / 1e6:,.1f} MB) from "
         f"{store.cache_dir()}.")
