"""``--engine local|dask``, ``--scheduler`` and ``--workers``: where the multi-rank verbs
(overlap, breakdown, idle, top-kernels over a run, critical-path, scaling) run their
per-rank summaries (:mod:`traceforge.engine`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import click

from traceforge.engine import ENGINES, SCHEDULER_ENV, Ranked, RunPaths, map_runs
from traceforge.model import Trace

F = TypeVar("F", bound=Callable[..., Any])
S = TypeVar("S")


@dataclass(frozen=True)
class Engine:
    """The engine options of one command line."""

    name: str = "local"
    scheduler: str | None = None
    workers: int | None = None

    def ranks(self, paths: RunPaths, fn: Callable[[Trace], S], *,
              steps_from: str | None, kinds: Collection[str] | None = None,
              numbered: bool = False) -> list[Ranked[S]]:
        """``fn`` of every rank of one run, in rank order (one file: in this process);
        ``numbered``: files that state no rank are numbered in order."""
        return self.runs([paths], fn, steps_from=steps_from, kinds=kinds,
                         numbered=numbered)[0]

    def runs(self, runs: Sequence[RunPaths], fn: Callable[[Trace], S],
             *, steps_from: str | None, kinds: Collection[str] | None = None,
             numbered: bool = False) -> list[list[Ranked[S]]]:
        """``fn`` of every rank of several runs, as one map (files counted on stderr's
        progress display where it shows)."""
        from traceforge.commands.progress import phase

        with phase("reading and analysing the run's files") as done:
            return map_runs(runs, fn, kinds=kinds, steps_from=steps_from, engine=self.name,
                            scheduler=self.scheduler, workers=self.workers,
                            numbered=numbered, done=done)


    def step_runs(self, runs: Sequence[RunPaths],
                  fn: Callable[[Trace], S], *, steps_from: str | None,
                  source: Callable[[S], str]) -> list[list[Ranked[S]]]:
        """``fn`` of every rank of several runs, read without the framework ops
        (:data:`~traceforge.analyzers.runs.rank_summaries.STEP_KINDS`: a quarter of the rows
        of a Kineto trace), for summaries that need steps and GPU activity only. A run
        in which a rank found no steps that way (``source`` of its summary, the step
        source, says ``none``: old Kineto traces file ProfilerStep#N as an op) is read
        again with the ops, and so is every run when a --steps-from regex may name one.
        """
        from traceforge.analyzers.runs.rank_summaries import STEP_KINDS, TIMELINE_KINDS
        from traceforge.analyzers.timeline.steps import NO_STEPS

        if steps_from not in (None, NO_STEPS):
            return self.runs(runs, fn, steps_from=steps_from, kinds=TIMELINE_KINDS)
        out = self.runs(runs, fn, steps_from=steps_from, kinds=STEP_KINDS)
        if steps_from == NO_STEPS:
            return out
        redo = [i for i, rs in enumerate(out)
                if any(source(r.value).startswith("none") and _steps_may_be_ops(r.path)
                       for r in rs)]
        if redo:
            again = self.runs([runs[i] for i in redo], fn, steps_from=None,
                              kinds=TIMELINE_KINDS)
            for i, rs in zip(redo, again, strict=True):
                out[i] = rs
        return out


def _steps_may_be_ops(path: str) -> bool:
    """Whether the ops a step verb left out of ``path`` may hold its steps (an op named
    ``ProfilerStep#N``): told by the cache entry's names of those rows, without reading
    them (a step-less trace was otherwise read and analysed twice); True where the cache
    cannot tell."""
    import re
    from pathlib import Path

    from traceforge.analyzers.runs.rank_summaries import STEP_KINDS, TIMELINE_KINDS
    from traceforge.analyzers.timeline.steps import PROFILER_STEP
    from traceforge.formats.cache import kind_names

    names = kind_names(Path(path), set(TIMELINE_KINDS) - set(STEP_KINDS))
    step = re.compile(PROFILER_STEP)
    return names is None or any(step.match(n) for n in names)


def run_paths(traces: Sequence[str]) -> str | list[str]:
    """The TRACES argument as one run: a file or folder, or the list of files."""
    return traces[0] if len(traces) == 1 else list(traces)


def engine_options(f: F) -> F:
    """``--engine``, ``--scheduler``, ``--workers``, handed to the command as one
    ``engine: Engine`` argument. A ``--scheduler`` implies ``--engine dask``."""

    @functools.wraps(f)
    def command(*args: Any, engine_name: str | None, scheduler: str | None,
                workers: int | None, **kw: Any) -> Any:
        from traceforge.errors import UsageError

        if engine_name == "local" and scheduler:
            raise UsageError("--scheduler is the address of a Dask scheduler: it goes with "
                             "--engine dask")
        name = engine_name or ("dask" if scheduler else "local")
        return f(*args, engine=Engine(name, scheduler, workers), **kw)

    opts = [
        click.option("--engine", "engine_name", type=click.Choice(ENGINES), default=None,
                     help="Where the per-rank work runs: processes on this machine "
                     "(local), or a Dask cluster (dask: --scheduler, else "
                     f"${SCHEDULER_ENV}, else a LocalCluster of one worker per core; "
                     "needs the dask extra) [default: local]."),
        click.option("--scheduler", metavar="ADDRESS", default=None,
                     help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (implies "
                     f"--engine dask) [default: ${SCHEDULER_ENV}]."),
        click.option("--workers", type=click.IntRange(min=1), default=None,
                     help="Worker processes (local) or LocalCluster workers (dask) "
                     "[default: one per core, at most one per file]."),
    ]
    for opt in reversed(opts):
        command = opt(command)
    return cast(F, command)


__all__ = ["Engine", "engine_options", "run_paths"]
