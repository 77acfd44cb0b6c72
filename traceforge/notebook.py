"""Notebook verbs that return what the CLI shows: ``tf.info`` and ``tf.idle``.

The CLI's ``info`` and ``idle`` read a file as a run (one trace per rank; a single file
that names no rank is rank 0, a multi-process nsys report is split), then summarize each
rank and reduce. These functions do the same, with the same functions
(:func:`~traceforge.formats.run.rank_traces`,
:func:`~traceforge.analyzers.runs.rank_summaries.idle_summary` and ``idle_reduce``), take the
CLI's option names and units (``n``, ``min_gap_us``, ``per_stream``, ``steps``,
``steps_from``), and return the tables the CLI prints (its JSON keys): the same numbers
with the same names. The analyzers' raw results stay one attribute away
(``IdleTables.raw``: every gap, in time order; ``tf.idle_gaps`` itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import pandas as pd

from traceforge.analyzers.runs.rank_summaries import IdleRun, idle_reduce
from traceforge.analyzers.timing.idle import IdleReport, idle_gaps
from traceforge.analyzers.timing.summary import Summary, summary
from traceforge.model import Tables, Trace

#: What the notebook verbs take: a loaded trace, the rank traces of a run, or paths.
Source = Trace | str | Path | Sequence[Trace | str | Path]


def _ranks(source: Source, steps_from: str | None) -> list[Trace]:
    """The rank traces the CLI would analyse for ``source``, with their steps taken."""
    from traceforge.formats.run import check_one_run, load_run, rank_traces, run_facts

    items = list(source) if isinstance(source, Sequence) and not isinstance(source, str) \
        else [source]
    if all(isinstance(x, Trace) for x in items):
        traces = [x for x in items if isinstance(x, Trace)]
        ranks = [r for t in traces for r in rank_traces(Path(t.meta.path or "trace"), t,
                                                        only_file=len(traces) == 1)]
        check_one_run([(int(t.meta.rank or 0), t.meta.path, run_facts(t)) for t in ranks])
        ranks.sort(key=lambda t: int(t.meta.rank or 0))
    else:
        paths = [str(x) if not isinstance(x, Trace) else x.meta.path for x in items]
        ranks = load_run(paths[0] if len(paths) == 1 else paths)
    return [t.with_steps(steps_from) for t in ranks]


def info(source: Source, *, steps_from: str | None = None, include_outliers: bool = False
         ) -> Summary | list[Summary]:
    """``traceforge info``: format, devices, ranks, span, steps, step time, events by kind,
    GPU busy % -- the facts the CLI prints, as :class:`~traceforge.analyzers.timing.summary.Summary`
    (one per rank when the source holds several). ``include_outliers``: as
    ``info --include-outliers``, outlier steps kept in the step time and kernels per step."""
    sums = [summary(t, include_outliers) for t in _ranks(source, steps_from)]
    return sums[0] if len(sums) == 1 else sums


@dataclass(frozen=True)
class IdleTables(Tables):
    """``traceforge idle``'s tables (its JSON keys, times in ns): ``summary`` (idle by
    cause and busy, % of the recorded step windows), ``histogram`` (gap lengths) and
    ``gaps`` (the ``n`` longest, longest first, with the CPU op and annotation active then),
    each with a ``rank`` column when there are several ranks. ``raw``: the analyzer's
    result with every gap at least ``min_gap_us`` long, in time order."""

    summary: pd.DataFrame
    histogram: pd.DataFrame
    gaps: pd.DataFrame
    span_ns: int
    steps_from: str
    notes: tuple[str, ...]
    _ranks: tuple[Trace, ...] = field(repr=False, compare=False)
    _args: tuple[int, bool, tuple[int, ...] | None] = field(repr=False, compare=False)

    @cached_property
    def raw(self) -> IdleRun:
        """Every gap (not only the ``n`` longest), per rank in time order."""
        min_gap_ns, per_stream, steps = self._args
        reps = [(int(t.meta.rank or 0), idle_gaps(t, min_gap_ns=min_gap_ns,
                                                  per_stream=per_stream, steps=steps))
                for t in self._ranks]
        run = idle_reduce(reps, limit=0)
        keys = [c for c in ("rank", "device", "stream", "ts") if c in run.gaps.columns]
        return replace(run, gaps=run.gaps.sort_values(keys, kind="stable")
                       .reset_index(drop=True))


def idle(source: Source, *, n: int = 10, min_gap_us: float = 0.0, per_stream: bool = False,
         steps: Sequence[int] | None = None, steps_from: str | None = None) -> IdleTables:
    """``traceforge idle``: GPU idle time by cause, gap histogram and the ``n`` largest gaps
    (0: all) at least ``min_gap_us`` long, as the CLI shows them. ``tf.idle_gaps`` is the
    analyzer underneath (times in ns, every gap)."""
    from traceforge.analyzers.runs.rank_summaries import idle_summary

    ranks = _ranks(source, steps_from)
    min_gap_ns = int(min_gap_us * 1e3)
    parts: list[tuple[int, IdleReport]] = [
        (int(t.meta.rank or 0), idle_summary(t, limit=n, min_gap_ns=min_gap_ns,
                                             per_stream=per_stream, steps=steps))
        for t in ranks]
    r = idle_reduce(parts, limit=n)
    notes = tuple(nt for t in ranks for nt in t.meta.notes) + r.notes
    return IdleTables(r.summary, r.histogram, r.gaps, r.span_ns, r.step_source, notes,
                      tuple(ranks), (min_gap_ns, per_stream,
                                     None if steps is None else tuple(steps)))


__all__ = ["IdleTables", "idle", "info"]
