"""Options and loading helpers shared by every command."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from traceforge.render import FORMATS

if TYPE_CHECKING:
    import pandas as pd

    from traceforge.analyzers.costs.devices import MeasuredPeaks
    from traceforge.model import Trace

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def format_option(f: F) -> F:
    """``--format table|csv|json|md`` (default table) and ``--width N``."""
    from traceforge.commands.values import WIDTH, set_width

    f = click.option("--width", type=WIDTH, default=None, metavar="N", expose_value=False,
                     callback=set_width, is_eager=True,
                     help="Fit tables in N columns [default: the terminal's width; "
                     "unlimited when output is piped or redirected; also TRACEFORGE_WIDTH].")(f)
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


def traces_argument(f: F) -> F:
    """One trace, several trace files of one run, or a directory of them."""
    return click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=str))(f)


def emit(text: str) -> None:
    """Write command output to stdout, control characters from trace data escaped (see
    :mod:`traceforge.render.text`)."""
    from traceforge.render.text import plain_lines

    click.echo(plain_lines(text), nl=not text.endswith("\n"))


def emit_pieces(pieces: Iterable[str | bytes]) -> None:
    """:func:`emit` of a text made in pieces (UTF-8 bytes or str, each whole characters),
    each written as it comes: the JSON or CSV of a table of millions of rows is never
    held as one text."""
    from traceforge.render.text import plain_lines

    last = ""
    try:
        for piece in pieces:
            text = piece.decode() if isinstance(piece, bytes) else piece
            if text:
                click.echo(plain_lines(text), nl=False)
                last = text
        if not last.endswith("\n"):
            click.echo("")
    except BrokenPipeError:
        # The reader went away (``| head``): nothing more to say, and nothing wrong. What
        # is left in the buffer goes nowhere (Python's documented way: stdout on
        # /dev/null), so no flush at exit complains either.
        with contextlib.suppress(OSError, ValueError):  # (a stream without a file)
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, sys.stdout.fileno())
            finally:
                os.close(devnull)
        raise SystemExit(0) from None


def emit_json(obj: Any) -> None:
    """Print ``obj`` as the verbs' JSON (:func:`traceforge.render.frame.json_pieces`: its
    frames a slice of rows at a time)."""
    from traceforge.render.frame import json_pieces

    emit_pieces(json_pieces(obj))


def emit_frame(df: pd.DataFrame, fmt: str, **kw: Any) -> None:
    """Print ``df`` in ``fmt`` (:func:`traceforge.render.frame.frame_pieces`, whose
    keywords it takes: JSON and CSV a slice of rows at a time)."""
    from traceforge.render.frame import frame_pieces

    emit_pieces(frame_pieces(df, fmt, **kw))


def say(text: str) -> None:
    """One line (or a few) for people on stderr, control characters escaped."""
    from traceforge.render.text import plain_lines

    click.echo(plain_lines(text), err=True)


def report_option(holds: str) -> Callable[[F], F]:
    """``--report FILE``: also write a Markdown or HTML report (``holds``: what besides the
    tables, e.g. "charts"), beside ``-o DIR``'s table files."""
    return click.option(
        "--report",
        "report",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        metavar="FILE",
        help=f"Also write a report with the tables and {holds}: FILE.md or FILE.html.",
    )


def check_report(report: Path | None, out_dir: str | None) -> None:
    """Before the work: ``--report`` is .md or .html, and ``-o DIR`` named like a report
    (the report's option before --report) is refused rather than made a folder."""
    from traceforge.errors import UsageError

    if report is not None and report.suffix not in (".md", ".html"):
        raise UsageError(f"--report {report}: the report is .md or .html")
    if out_dir is not None and Path(out_dir).suffix in (".md", ".html"):
        raise UsageError(f"-o {out_dir}: -o is a folder for the table files; write the "
                         f"report with --report {out_dir}")


def steps_from_option(f: F) -> F:
    """``--steps-from REGEX``: take steps from ranges with matching names."""
    return click.option(
        "--steps-from",
        "steps_from",
        metavar="REGEX",
        default=None,
        help="Take steps from the host ranges (NVTX ranges, record_function annotations, "
        "ops) whose names match REGEX, e.g. policy_inference or train_step "
        "[default: ProfilerStep#N, then traceforge capture's 'step N' ranges].",
    )(f)


def step_options(f: F) -> F:
    """``--steps-from REGEX``, ``--steps none|N|N-M|N,M`` and the older ``--step N``."""
    f = click.option(
        "--step",
        "step_list",
        type=click.IntRange(min=0),
        multiple=True,
        hidden=True,
        help="Only this step (repeatable); same as --steps N.",
    )(f)
    f = click.option(
        "--steps",
        "steps_text",
        metavar="none|N|N-M|N,M",
        default=None,
        help="Only these steps; 'none' analyses the whole trace as one window, from its "
        "first to its last GPU activity. GPU work counts in the step that launched it.",
    )(f)
    return steps_from_option(f)


def resolve_steps(
    steps_from: str | None, steps_text: str | None, step_list: Sequence[int] = ()
) -> tuple[str | None, list[int] | None]:
    """(the trace's ``steps_from`` rule, the step numbers selected or None for all)."""
    from traceforge.analyzers.timeline.steps import NO_STEPS, check_rule, parse_spec
    from traceforge.errors import UsageError

    check_rule(steps_from)
    selected = list(step_list) or None
    if steps_text is not None:
        spec = parse_spec(steps_text)
        if spec is None:
            if steps_from is not None or selected:
                raise UsageError("--steps none analyses the whole trace: leave out "
                                 "--steps-from and --step")
            return NO_STEPS, None
        selected = sorted(set(spec) | set(selected or []))
    return steps_from, selected


def load_trace(path: str, steps_from: str | None, **kw: Any) -> Trace:
    """One trace, with its steps taken as asked."""
    from traceforge.commands.progress import phase, size_text
    from traceforge.formats import load

    with phase(f"reading {size_text(path)}"):
        return load(path, **kw).with_steps(steps_from)


def load_ranks(paths: Sequence[str], steps_from: str | None) -> list[Trace]:
    """The rank traces of one run (a file, files or a directory; a multi-process nsys
    report is split per process), each with its steps taken as asked."""
    from traceforge.commands.progress import phase, size_text
    from traceforge.formats.multirank import load_run

    with phase(f"reading {size_text(paths[0]) if len(paths) == 1 else f'{len(paths)} files'}"):
        ts = load_run(paths[0] if len(paths) == 1 else list(paths))
    return [t.with_steps(steps_from) for t in ts]


def device_options(f: F) -> F:
    """``--device NAME`` and ``--peaks FILE``, shared by roofline and mfu."""
    f = click.option("--peaks", "peaks_path", default=None, metavar="FILE",
                     help="Measured ceilings from `traceforge calibrate`: adds % of measured.")(f)
    return click.option("--device", "device", default=None, metavar="NAME",
                        help="Device key or name (h100-sxm, mi300x, 'NVIDIA B200', ...) "
                             "instead of the trace's metadata.")(f)


def derived_with_file(trace: Trace, what: str, path: str, make: Callable[[], T]) -> T:
    """``make()`` as a derived table of ``trace`` keyed by ``what`` and by the file it
    reads as the parse cache keys a trace (real path, size, mtime, inode), so a warm run
    reads neither the file nor works it out again; computed every time when the file
    cannot be looked at (``make`` then names it and its problem)."""
    p = Path(path)
    try:
        st = p.stat()
        key = f"{what}|{p.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"
    except OSError:
        return make()
    return trace.derived(key, make)


def read_peaks(path: str | None) -> MeasuredPeaks | None:
    """``--peaks FILE`` read (None when not given)."""
    from traceforge.analyzers.costs.devices import load_peaks

    return load_peaks(path) if path else None
