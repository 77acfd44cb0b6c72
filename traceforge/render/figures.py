"""Writing matplotlib figures (PNG and SVG files, or an SVG element for a page).

matplotlib is an optional dependency (``pip install 'traceforge[charts]'``), imported only
by the functions that draw; a missing one is a one-line UsageError naming the extra.
Figures are built on ``matplotlib.figure.Figure`` directly (no pyplot global state, no
display backend), and SVGs are written reproducibly (fixed hash salt, no date).
Pages that embed them are built by :mod:`traceforge.render.page`; nothing here imports a page.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from traceforge.errors import UsageError
from traceforge.outputs import replacing

T = TypeVar("T")

#: Chart file formats written side by side.
CHART_FORMATS: tuple[str, ...] = ("png", "svg")
#: What a report says in a chart's place when matplotlib is missing.
NO_CHARTS = "charts need matplotlib: pip install 'traceforge[charts]' adds them"


def charts_available() -> bool:
    """Whether matplotlib can be imported (a report without it is written without charts)."""
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        return False
    return True


def new_figure(width: float, height: float, cols: int = 1,
               widths: Sequence[float] | None = None) -> tuple[Any, Any]:
    """A figure and its axes (an array when ``cols`` > 1, ``widths`` their ratios),
    without pyplot."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("charts need matplotlib: pip install 'traceforge[charts]'") from None
    matplotlib.rcParams["svg.hashsalt"] = "traceforge"
    matplotlib.rcParams["text.parse_math"] = False  # labels from traces are plain text
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, cols, width_ratios=list(widths) if widths else None)
    return fig, axes


def save_figure(fig: Any, stem: Path) -> list[Path]:
    """Write ``fig`` as ``STEM.png`` and ``STEM.svg``; returns the paths."""
    out = []
    stem.parent.mkdir(parents=True, exist_ok=True)
    for ext in CHART_FORMATS:
        p = stem.with_name(f"{stem.name}.{ext}")
        meta = {"Date": None} if ext == "svg" else {}
        try:
            with replacing(p) as tmp:
                fig.savefig(tmp, format=ext, dpi=120, metadata=meta)
        except OSError as e:
            raise UsageError(f"{p}: cannot write ({e.strerror or e})") from None
        out.append(p)
    return out


def svg_string(fig: Any) -> str:
    """``fig`` as an ``<svg>`` element to embed in an HTML page (reproducible: fixed hash
    salt, set by :func:`new_figure`, and no date)."""
    import io

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def draw_all(makes: Sequence[Callable[[], T]]) -> list[T]:
    """``[make() for make in makes]`` (charts to draw), on the available cores where there
    are several: matplotlib is imported and warmed here first, so the forked children
    share it instead of each importing it, and each process takes the next chart not yet
    taken (charts cost 0.07-0.5 s each: :func:`traceforge.forks.taking_map`). Where a
    child cannot start, fails or dies, the charts are drawn here: the texts never depend
    on where they were drawn (:func:`svg_string` is reproducible)."""
    from traceforge.forks import ForkError, can_fork, cores, taking_map

    n = min(cores(), len(makes)) if len(makes) > 1 and can_fork() else 1
    if n > 1 and charts_available():
        # A small figure drawn before the fork: matplotlib's imports, fonts and layout
        # caches warmed once, here, and shared, not paid again in every child.
        fig, ax = new_figure(1, 1)
        ax.set_title("warm")
        svg_string(fig)
        with contextlib.suppress(ForkError, OSError):
            return taking_map(lambda i: makes[i](), len(makes), n)
    return [make() for make in makes]
