"""Renderers: turn analysis results (DataFrames) into text for people or programs.

``FORMATS`` lists what ``--format`` accepts on every command; :func:`render_frame` is the
one entry point the CLI uses for tables. Renderers never compute: numbers arrive final.
"""

from __future__ import annotations

from traceforge.render.frame import FORMATS, render_frame

__all__ = ["FORMATS", "render_frame"]
