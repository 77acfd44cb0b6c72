"""Many-rank runs on an engine: one task per rank file, reduced in the driver.

A multi-rank verb is split in two (the pairs live beside their analyzers): a *summary*
function ``Trace -> S`` that runs where the rank's file is read and returns only what
the verb's answer needs from that rank (its table rows, the start times of its
collectives, its critical-path graph), and a *reduce* that turns the ranks' summaries
into the answer. :func:`map_ranks` runs the summaries, one task per file:

* ``local`` (default): processes on this machine, one per core at most (reading and
  analysing a trace is CPU-bound and holds the GIL): on Linux a child forked per file
  (:func:`traceforge.formats.multirank.pool_map`), elsewhere a process pool; one file
  runs in this process.
* ``dask``: a Dask ``distributed`` cluster: the scheduler at ``scheduler`` or
  ``$DASK_SCHEDULER_ADDRESS`` (the variable Nsight Systems' Dask recipes read too), else a
  ``LocalCluster`` of worker processes started for the call. The workers must see the
  files at the same paths (a shared file system).

Both engines run the same task on the same files and return the summaries in rank order,
so a reduce cannot tell them apart: results are identical, bit for bit. Only summaries
cross process boundaries; the driver never holds an event table. Each task loads through
the columnar cache (:func:`traceforge.formats.load` with the verb's ``kinds``), so a
second run over the same files maps cached tables instead of parsing JSON.

Errors raised in a task (a damaged file, a missing step) come back as the same
``TraceforgeError`` (they pickle), naming the file; a worker process that dies is an
AnalysisError naming the file it was reading.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from traceforge.errors import AnalysisError, UsageError
from traceforge.formats import SourceFile, load
from traceforge.formats import cache as cache_mod
from traceforge.formats.multirank import check_one_run, pool_map, rank_traces, run_facts, run_files
from traceforge.model import Trace

ENGINES: tuple[str, ...] = ("local", "dask")
#: Where ``--engine dask`` finds a running scheduler when ``--scheduler`` is not given.
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
_DASK_MISSING = "--engine dask needs Dask: pip install 'traceforge[dask]'"
_CACHE_ENV = ("TRACEFORGE_CACHE", "TRACEFORGE_CACHE_SIZE")
#: How long to keep trying a scheduler that does not answer.
CONNECT_TIMEOUT = "20s"

S = TypeVar("S")
#: One run: a file, a folder, or files (paths, or what run discovery found).
RunPaths = Sequence[str | Path | SourceFile] | str | Path | SourceFile


@dataclass(frozen=True)
class Ranked(Generic[S]):
    """One rank's summary and the little the driver needs to know about the rank:
    its number, file, the facts checked to be one run, and the trace's notes."""

    rank: int
    path: str
    facts: dict[str, object]
    notes: tuple[str, ...]
    value: S


@dataclass(frozen=True)
class _Task(Generic[S]):
    """What runs on a worker for one file: load (through the cache), take the ranks it
    holds, apply the steps rule, summarize. A module-level class, so it pickles by
    reference under every engine."""

    fn: Callable[[Trace], S]
    kinds: frozenset[str] | None
    steps_from: str | None
    only_file: bool
    cache: bool
    #: The driver's cache settings (directory, size cap) where it has them: a worker
    #: process started elsewhere (a Dask worker) uses the same cache as the driver.
    env: tuple[tuple[str, str], ...] = ()
    #: The file's place in its run, the rank of a file that states none (``numbered``).
    number: int | None = None

    def __call__(self, path: SourceFile) -> list[Ranked[S]]:
        for k, v in self.env:
            if os.environ.get(k) != v:
                os.environ[k] = v
        trace = load(path, kinds=self.kinds, cache=self.cache)
        out = []
        for t in rank_traces(path, trace, only_file=self.only_file, number=self.number):
            t = t.with_steps(self.steps_from)
            out.append(Ranked(int(t.meta.rank or 0), t.meta.path, run_facts(t),
                              tuple(t.meta.notes), self.fn(t)))
        return out


def map_ranks(paths: RunPaths, fn: Callable[[Trace], S], *,
              kinds: Collection[str] | None = None, steps_from: str | None = None,
              engine: str = "local", scheduler: str | None = None,
              workers: int | None = None, numbered: bool = False) -> list[Ranked[S]]:
    """``fn`` of every rank trace of one run (a directory, files, or one multi-process
    report), in rank order.

    ``fn`` must pickle (a module-level function, or a ``functools.partial`` of one).
    ``kinds``: event kinds ``fn`` reads (None: all). ``steps_from``: the steps rule each
    trace gets before ``fn`` (:meth:`traceforge.model.Trace.with_steps`). ``engine``:
    ``local`` or ``dask`` (see the module docstring); ``workers``: processes (local) or
    LocalCluster workers (dask), default one per core, at most one per file.
    ``numbered``: files that state no rank get their place among the files (for verbs
    that count several traces together, like ``top-kernels``), instead of an error.
    Raises AnalysisError when two files claim one rank or come from different runs.
    """
    return map_runs([paths], fn, kinds=kinds, steps_from=steps_from, engine=engine,
                    scheduler=scheduler, workers=workers, numbered=numbered)[0]


def map_runs(runs: Sequence[RunPaths], fn: Callable[[Trace], S], *,
             kinds: Collection[str] | None = None, steps_from: str | None = None,
             engine: str = "local", scheduler: str | None = None,
             workers: int | None = None, numbered: bool = False,
             done: Callable[[int, int], None] | None = None) -> list[list[Ranked[S]]]:
    """:func:`map_ranks` over several runs at once (``scaling``: one run per GPU count):
    every file of every run is one task of the same pool or cluster. ``done(k, total)``
    is called as files finish (progress)."""
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine}: want one of {', '.join(ENGINES)}")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: want at least 1")
    listed = [run_files(p) for p in runs]
    frozen = None if kinds is None else frozenset(kinds)
    use_cache = cache_mod.enabled()
    env = tuple((k, os.environ[k]) for k in _CACHE_ENV if os.environ.get(k))
    tasks = [Job(_Task(fn, frozen, steps_from, len(files) == 1, use_cache, env,
                       i if numbered else None), f)
             for files, _ in listed for i, f in enumerate(files)]
    n = min(len(tasks), workers or os.cpu_count() or 1)
    results = (_on_dask(tasks, scheduler, n, done) if engine == "dask"
               else _on_pool(tasks, n, done))
    out = []
    k = 0
    for files, note in listed:
        ranked = [r for rs in results[k:k + len(files)] for r in rs]
        k += len(files)
        check_one_run([(r.rank, r.path, r.facts) for r in ranked])
        ranked.sort(key=lambda r: r.rank)
        if note:
            ranked[0] = replace(ranked[0], notes=(*ranked[0].notes, note))
        out.append(ranked)
    return out


@dataclass(frozen=True)
class Job(Generic[S]):
    """One file and its task. A class, not a (task, path) tuple: Dask before 2024.12
    reads a tuple whose first item is callable as a task of its own graph, and ran
    ``task(path)`` itself before handing the result to :func:`_run_job`."""

    task: _Task[S]
    path: SourceFile


def _run_job(job: Job[S]) -> list[Ranked[S]]:
    return job.task(job.path)


def _on_pool(jobs: list[Job[S]], n: int, done: Callable[[int, int], None] | None = None
             ) -> list[list[Ranked[S]]]:
    return pool_map(_run_job, jobs, n, files=[j.path for j in jobs],
                    hint="a worker process died (out of memory?); try fewer --workers",
                    done=done)


def _on_dask(jobs: list[Job[S]], scheduler: str | None, n: int,
             done: Callable[[int, int], None] | None = None) -> list[list[Ranked[S]]]:
    try:
        import distributed
    except ImportError:
        raise UsageError(_DASK_MISSING) from None
    dist: Any = distributed  # untyped: its calls would each need an ignore
    address = scheduler or os.environ.get(SCHEDULER_ENV) or None
    with ExitStack() as stack:
        if address:
            try:
                client = stack.enter_context(dist.Client(address, timeout=CONNECT_TIMEOUT))
            except (OSError, TimeoutError, ValueError) as e:
                raise UsageError(f"cannot reach the Dask scheduler at {address} "
                                 f"({' '.join(str(e).split()) or type(e).__name__})") from None
        else:
            cluster = stack.enter_context(dist.LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                silence_logs=logging.ERROR))
            client = stack.enter_context(dist.Client(cluster))
        futures = client.map(_run_job, jobs, pure=False)
        out: list[list[Ranked[S]]] = []
        for job, fut in zip(jobs, futures, strict=True):
            try:
                out.append(fut.result())
                if done is not None:
                    done(len(out), len(jobs))
            except dist.KilledWorker:
                raise AnalysisError(f"{job.path}: the Dask workers reading it died (out of "
                                    "memory?)") from None
        return out
