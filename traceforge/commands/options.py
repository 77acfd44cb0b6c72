"""Options and output helpers shared by every command."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from traceforge.render import FORMATS

F = TypeVar("F", bound=Callable[..., Any])


def format_option(f: F) -> F:
    """``--format table|csv|json|md`` (default table)."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="Output format. JSON and CSV keep full precision for scripts.",
    )(f)


def trace_argument(f: F) -> F:
    """A trace file argument (existence is checked by the reader, for a one-line error)."""
    return click.argument("trace", type=click.Path(dir_okay=True, path_type=str))(f)


def emit(text: str) -> None:
    """Write command output to stdout."""
    click.echo(text, nl=not text.endswith("\n"))


def step_option(f: F) -> F:
    """``--step N`` (repeatable): restrict the analysis to those profiler steps."""
    return click.option(
        "--step",
        "steps",
        type=int,
        multiple=True,
        help="Only these ProfilerStep numbers (repeatable); GPU work counts in the step "
        "that launched it.",
    )(f)
