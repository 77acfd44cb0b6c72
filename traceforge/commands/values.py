"""Types of numeric option values: counts and finite ranges, checked by click.

``click.FloatRange`` lets ``nan`` through (every comparison with nan is false) and ``inf``
through an open upper end, and a plain ``int`` takes ``-5`` rows; these types refuse them
with click's one-line usage error (exit 2).
"""

from __future__ import annotations

import math
from typing import Any

import click

#: Row counts: 0 means "all rows" where a verb says so; negative counts mean nothing.
COUNT = click.IntRange(min=0)


class FiniteFloat(click.FloatRange):
    """A float in ``[min, max]`` that is neither nan nor infinite."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if isinstance(rv, float) and not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


#: Durations and thresholds (us, s): finite, >= 0, and at most 1e12 (11.6 days in us), so
#: that converting to int64 ns never overflows.
DURATION = FiniteFloat(min=0.0, max=1e12)
#: Percentages.
PERCENT = FiniteFloat(min=0.0, max=100.0)


def check_size(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Callback for a size option such as ``5GB`` or ``500MB`` (the cache cap): checked by
    the cache's parser, passed on as written."""
    if value is None:
        return None
    from traceforge.formats.cache_settings import parse_size

    try:
        parse_size(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return value


#: Amounts that must be above zero (FLOPs, parameters, tokens): finite.
POSITIVE = FiniteFloat(min=0.0, min_open=True)
#: A device index.
INDEX = click.IntRange(min=0)
#: Repetitions: at least one.
REPEATS = click.IntRange(min=1)

#: Table widths (``--width``): narrower than this holds no table.
WIDTH = click.IntRange(min=20)


def set_width(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """Callback of ``--width N``: tables fit N columns for the rest of the command (via
    ``TRACEFORGE_WIDTH``, restored when the command ends: the CLI also runs in-process)."""
    if value is None:
        return None
    import os

    old = os.environ.get("TRACEFORGE_WIDTH")
    os.environ["TRACEFORGE_WIDTH"] = str(value)

    def restore() -> None:
        if old is None:
            os.environ.pop("TRACEFORGE_WIDTH", None)
        else:
            os.environ["TRACEFORGE_WIDTH"] = old

    ctx.call_on_close(restore)
    return value
