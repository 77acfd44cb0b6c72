"""A multi-rank run: one trace file per rank, read in parallel and ordered by rank.

Ranks come from each file's ``distributedInfo`` (``meta.rank``), else from the file name
(``rank3``, ``rank-3``, ``rank_3``, ``worker3``: HTA takes the first ``"rank": N`` it finds
and falls back to rank 0, so two rank-less files silently collide there, HTA#107).

A folder is read at its top level only (:mod:`traceforge.formats.folder`): run summaries,
latency tables and other companions are skipped with a note on the first rank's
``meta.notes``, subfolders are never walked into. A rocprofv3 output folder is one trace
of all its processes, split per process like a multi-process nsys report.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from multiprocessing.connection import wait
from pathlib import Path
from typing import TypeVar

from traceforge.errors import AnalysisError, TraceFormatError
from traceforge.forks import POLL_S, Child, ForkError, can_fork
from traceforge.formats import SourceFile, identify, load
from traceforge.formats.folder import scan
from traceforge.model import Trace

T = TypeVar("T")
R = TypeVar("R")

_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)


def rank_from_name(path: str | os.PathLike[str]) -> int | None:
    """The rank a file name states (``worker3_step_12...``, ``rank-0.Apr...``), if any."""
    m = _RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None


def run_files(paths: Sequence[str | Path | SourceFile] | str | Path | SourceFile
              ) -> tuple[list[SourceFile], str | None]:
    """The files of a run (a directory read at its top level, or the files given), each as
    a :class:`~traceforge.formats.SourceFile` for :func:`~traceforge.formats.load` (resolved
    and stat'ed here, once; a rocprofv3 output folder with its reader), and a note on what
    a folder held besides them. Nothing is parsed."""
    if not isinstance(paths, (str, Path, SourceFile)):
        return [identify(x) for x in paths], None
    src = identify(paths, "no such file or directory")
    if not src.is_dir:
        return [src], None
    from traceforge.formats import rocprof  # (for a folder only: a rocprofv3 output's)

    if src.reader is not None or rocprof.sniff(src.path, b""):
        return [replace(src, reader=src.reader or rocprof.__name__.rsplit(".", 1)[-1])], None
    found = scan(src.path)
    if not found.files:
        raise TraceFormatError(src.path, "directory holds no trace files at its top level "
                               f"(subfolders are not read; {found.note() or 'it is empty'})")
    return [identify(f) for f in found.files], found.note()


def rank_traces(path: str | Path | SourceFile, trace: Trace, *, only_file: bool,
                number: int | None = None) -> list[Trace]:
    """The rank traces one file of a run holds, each with its rank set.

    A file holding several processes with GPU work and no rank of its own (an nsys report
    of torchrun, a merged rocpd database, a rocprofv3 folder) is split into one trace per
    process, ranks as the reader numbered them. Otherwise the rank is the file's
    ``distributedInfo`` rank, else the one its name states, else 0 when it is the run's
    ``only_file``, else ``number`` (its place among the files, for verbs that count
    several traces together whatever their ranks); a rank-less file among several is
    otherwise an AnalysisError.
    """
    if only_file and trace.meta.rank is None and (trace.meta.world_size or 0) > 1:
        from traceforge.formats.nsys import split_processes

        return split_processes(trace)
    r = trace.meta.rank if trace.meta.rank is not None else rank_from_name(path)
    if r is None and only_file:
        r = 0
    if r is None:
        r = number
    if r is None:
        raise AnalysisError(f"{path}: no rank in distributedInfo or in the file name, so "
                            "it cannot be one rank of a run of several files (separate "
                            "runs: traceforge compare)")
    if trace.meta.rank is None:
        trace = trace.with_meta(replace(trace.meta, rank=r))
        trace.events["rank"] = r
    return [trace]


#: ``distributedInfo`` keys that must agree across the ranks of one run.
RUN_KEYS = ("world_size", "nccl_version", "backend")


def run_facts(trace: Trace) -> dict[str, object]:
    """What :func:`check_one_run` compares, from one rank's trace (small: it travels)."""
    return {k: trace.meta.distributed.get(k) for k in RUN_KEYS}


def pool_map(fn: Callable[[T], R], items: Sequence[T], n: int, *, files: Sequence[object],
             hint: str, done: Callable[[int, int], None] | None = None) -> list[R]:
    """``fn`` over ``items`` in order, on ``n`` processes (here when ``n`` <= 1). Parsing
    and analysing are CPU-bound and hold the GIL: one process per item. A worker that
    dies (out of memory, a signal) is reported as ``hint`` naming ``files``, not as an
    internal error; an item whose worker failed or stalled is done again here, so its
    error is the one this process raises. ``done(k, total)`` is called as results arrive
    (progress).

    On Linux, from the main thread, each item runs in a child forked for it
    (:class:`traceforge.forks.Child`, at most ``n`` at once, a slot refilled as soon as
    its child answers): a child that stalls (waiting on a lock another thread held at the
    fork) is stopped and its item done here. Elsewhere a process pool runs them."""
    tick = done or (lambda k, total: None)
    out: list[R] = []
    if n <= 1:
        for x in items:
            out.append(fn(x))
            tick(len(out), len(items))
        return out
    if can_fork():
        return _forked_map(fn, items, n, files=files, hint=hint, tick=tick)
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:
        with ProcessPoolExecutor(max_workers=n) as pool:
            for r in pool.map(fn, items):
                out.append(r)
                tick(len(out), len(items))
            return out
    except BrokenProcessPool:
        raise AnalysisError(f"{', '.join(map(str, files))}: {hint}") from None


def _forked_map(fn: Callable[[T], R], items: Sequence[T], n: int, *, files: Sequence[object],
                hint: str, tick: Callable[[int, int], None]) -> list[R]:
    got: dict[int, R] = {}
    running: dict[int, Child[R]] = {}
    total, nxt = len(items), 0

    def here(i: int) -> None:
        got[i] = fn(items[i])
        tick(len(got), total)

    def start() -> None:
        nonlocal nxt
        i, nxt = nxt, nxt + 1
        try:
            running[i] = Child(partial(fn, items[i]))
        except OSError:  # no fork or in-memory file here: this item is done here
            here(i)

    try:
        while nxt < total and len(running) < n:
            start()
        while running:
            wait([k.connection for k in running.values()], timeout=POLL_S)
            for i, kid in list(running.items()):
                if not kid.ready() and not kid.stalled():
                    continue
                del running[i]
                try:
                    got[i] = kid.result()  # a stalled child: killed, ForkError
                    tick(len(got), total)
                except ForkError as e:
                    if e.died:
                        raise AnalysisError(f"{', '.join(map(str, files))}: {hint}") from None
                    here(i)  # failed or stalled: its error, if any, is this process's own
                finally:
                    kid.close()
                while nxt < total and len(running) < n:
                    start()
        return [got[i] for i in range(total)]
    finally:
        for k in running.values():
            k.close()


def _load_all(files: list[SourceFile], workers: int | None) -> list[Trace]:
    n = min(len(files), workers or os.cpu_count() or 1)
    return pool_map(load, files, n, files=files,
                    hint="a reader process died (out of memory?); read them one at a time")


def load_run(paths: Sequence[str | Path | SourceFile] | str | Path | SourceFile, *,
             workers: int | None = None) -> list[Trace]:
    """Read the traces of one run (a directory or a list of files), sorted by rank.

    A single file holding several processes with GPU work (an nsys report of torchrun)
    is split into one trace per process (:func:`traceforge.formats.nsys.split_processes`).

    Files are parsed in a process pool when there are several (parsing is CPU-bound and
    holds the GIL). Raises AnalysisError naming the files when two claim the same rank or
    when the files come from different runs (different world sizes or NCCL versions).
    """
    files, note = run_files(paths)
    if len(files) == 1:
        traces = rank_traces(files[0], load(files[0]), only_file=True)
    else:
        loaded = _load_all(files, workers)
        traces = [t for f, x in zip(files, loaded, strict=True)
                  for t in rank_traces(f, x, only_file=False)]
    check_one_run([(int(t.meta.rank or 0), t.meta.path, run_facts(t)) for t in traces])
    out = sorted(traces, key=lambda t: int(t.meta.rank or 0))
    if note:
        out[0] = out[0].with_meta(replace(out[0].meta, notes=(*out[0].meta.notes, note)))
    return out


def check_one_run(ranks: Sequence[tuple[int, str, Mapping[str, object]]]) -> None:
    """Raise AnalysisError naming the files when two claim the same rank, or when the
    files come from different runs. ``ranks``: (rank, path, :func:`run_facts`) each."""
    seen: dict[int, str] = {}
    for r, path, _ in ranks:
        if r in seen:
            raise AnalysisError(f"{seen[r]} and {path} both claim rank {r}")
        seen[r] = path
    for key in RUN_KEYS:
        vals = {path: facts.get(key) for _, path, facts in ranks if facts.get(key) is not None}
        if len(set(map(str, vals.values()))) > 1:
            a, b = _two_different(vals)
            raise AnalysisError(
                f"{a} and {b} come from different runs ({key} {vals[a]} vs {vals[b]})")


def _two_different(vals: dict[str, object]) -> tuple[str, str]:
    items = list(vals.items())
    first = items[0]
    other = next(k for k, v in items if str(v) != str(first[1]))
    return first[0], other
