"""What a folder given as a run holds: the trace files at its top level, nothing else.

Profilers and traceforge's own capture leave companions beside traces: run summaries
(``*.summary.json``), latency tables (``latency*.json``), TraceLens's
``execution_details.json``, rocprof's statistics and system-info files, READMEs. Those are
skipped with a note by name; files whose names say no trace format (``.txt``, ``.md``,
``.py``, ...) are skipped with a note too; subfolders are never walked into, because a
folder of folders is usually several unrelated runs (a fixtures tree), and merging them
gives one trace spanning months. A rocprofv3 output tree, whose layout the rocprof reader
knows, is the one folder read as a whole (``traceforge.formats.rocprof.output_files``).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from traceforge.errors import TraceFormatError

#: Names that look like a trace format. Anything else at a run's top level is skipped.
TRACE_SUFFIXES: tuple[str, ...] = (
    ".json", ".json.gz", ".sqlite", ".sqlite.gz", ".nsys-rep", ".qdrep", ".db", ".csv",
    ".pftrace", ".perfetto-trace",
)

#: Known companions of traces (glob on the lower-cased name -> what the file is).
NON_TRACES: tuple[tuple[str, str], ...] = (
    ("*.summary.json", "a traceforge capture summary"),
    ("latency*.json", "a latency table (give it to report --latency)"),
    ("execution_details.json", "TraceLens execution details"),
    ("*stats.csv", "a profiler statistics table"),
    ("*.stats.csv", "a profiler statistics table"),
    ("agent_info.csv", "rocprofv3 agent info"),
    ("*kernel_names.csv", "a kernel name list"),
    ("*counter_collection.csv", "rocprofv3 counter collection"),
    ("*.sysinfo.txt", "rocprof system info"),
    ("readme*", "a README"),
    ("provenance*", "a provenance note"),
)

#: Traces that a folder read as a run leaves out (each still loads when named).
LEFT_OUT: tuple[tuple[str, str], ...] = (
    ("*.failed.pt.trace.json*", "the trace of a failed capture"),
)


def _match(name: str, table: tuple[tuple[str, str], ...]) -> str | None:
    low = name.lower()
    return next((what for pattern, what in table if fnmatch.fnmatchcase(low, pattern)), None)


def non_trace(name: str) -> str | None:
    """What a known non-trace file is (by its name), or None."""
    return _match(name, NON_TRACES)


@dataclass(frozen=True)
class Folder:
    """The top level of a folder: trace candidates, and a note per skipped entry."""

    files: tuple[Path, ...]
    skipped: tuple[str, ...]  # "name (why)"

    def note(self) -> str | None:
        """One line about what was skipped, for ``meta.notes``; None when nothing was."""
        if not self.skipped:
            return None
        return f"not read in this folder: {'; '.join(self.skipped)}"


def scan(d: Path) -> Folder:
    """Sort the entries at the top level of ``d`` into trace candidates and skipped ones."""
    from traceforge.formats import rocprof

    try:
        entries = sorted(d.iterdir())
    except OSError as e:
        raise TraceFormatError(d, f"cannot list the folder ({e.strerror})") from None
    files: list[Path] = []
    skipped: list[str] = []
    for p in entries:
        if p.name.startswith("."):
            continue
        if p.is_dir():
            skipped.append(f"{p.name}/ (subfolders are not read)")
            continue
        what = _match(p.name, LEFT_OUT) or non_trace(p.name)
        if what is None and not p.name.lower().endswith(TRACE_SUFFIXES):
            what = "not a trace file by its name"
        if what is None and p.suffix.lower() == ".csv" and not rocprof.is_trace_csv(p):
            what = "a CSV without per-event columns"
        if what is not None:
            skipped.append(f"{p.name} ({what})")
        else:
            files.append(p)
    return Folder(tuple(files), tuple(skipped))
