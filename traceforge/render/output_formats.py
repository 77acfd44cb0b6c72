"""What ``--format`` accepts on every command (a leaf: the options read it without loading
the renderers, :mod:`traceforge.render.frame` renders each)."""

from __future__ import annotations

#: What ``--format`` accepts.
FORMATS: tuple[str, ...] = ("table", "csv", "json", "md")
