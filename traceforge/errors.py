"""The one exception tree of traceforge.

    TraceforgeError                 base: every error traceforge raises on purpose
    ├── TraceFormatError            an input file is missing, unreadable or not a trace we know
    ├── AnalysisError               an analysis cannot run on this input (e.g. mixed runs)
    ├── CaptureError                a profiler run could not be started or written
    └── UsageError                  options that contradict each other

Only ``traceforge.cli`` maps these to exit codes (2 for input/usage problems, 1 otherwise).
Messages are one line and name the file they are about, so the CLI can print them as is.
Every error pickles (``__reduce__``): readers run in worker processes for multi-file runs,
and an error that cannot be rebuilt in the parent would surface as ``BrokenProcessPool``.
"""

from __future__ import annotations

from pathlib import Path


class TraceforgeError(Exception):
    """Base class of every error traceforge raises on purpose."""

    exit_code = 1


class TraceFormatError(TraceforgeError):
    """An input file is missing, unreadable, truncated or not a supported trace."""

    exit_code = 2

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        # One line, whatever the library under a reader said (SQL text, parser context).
        self.problem = " ".join(problem.split())
        super().__init__(f"{self.path}: {self.problem}")

    def __reduce__(self) -> tuple[type[TraceFormatError], tuple[str, str]]:
        # Exception pickles as cls(*self.args), and args holds the joined message only.
        return type(self), (self.path, self.problem)


class AnalysisError(TraceforgeError):
    """An analysis cannot run on the given traces."""

    exit_code = 2


class CaptureError(TraceforgeError):
    """A profiler run could not be started, or its trace could not be written."""

    exit_code = 2


class UsageError(TraceforgeError):
    """Options or arguments that contradict each other."""

    exit_code = 2


#: Signals that asked this process to end (the CLI's SIGTERM handler records them): code
#: that turns a failed operation into an error line (a SQLite query the signal aborted)
#: checks it, so that the run exits as terminated instead.
TERMINATED: list[int] = []


def exit_if_terminated() -> None:
    """Raise SystemExit(128 + signal) when a terminating signal has arrived."""
    if TERMINATED:
        raise SystemExit(128 + TERMINATED[0])
