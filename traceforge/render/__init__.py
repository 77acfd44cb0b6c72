"""Renderers: turn analysis results (DataFrames) into text for people or programs.

``FORMATS`` lists what ``--format`` accepts on every command; :func:`render_frame` is the
one entry point the CLI uses for tables. Renderers never compute: numbers arrive final.
``render_frame`` is imported on first use, so a command that only needs ``FORMATS`` for
its options (``capture``, whose process runs the user's program) loads no pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traceforge.render.output_formats import FORMATS

if TYPE_CHECKING:
    from traceforge.render.frame import render_frame


def __getattr__(name: str) -> Any:
    if name == "render_frame":
        from traceforge.render.frame import render_frame

        return render_frame
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FORMATS", "render_frame"]
