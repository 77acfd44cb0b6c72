"""One report over one or more runs: what ``traceforge report`` writes and what
``traceforge.report(...)`` returns in a notebook, assembled in one place.

Each run is analysed once (:func:`~traceforge.report.analysis.analyze`); the findings, the
comparison of runs, the scaling of runs at different GPU counts and the diffs of each
later run against the first are computed from those analyses and the traces. Renderers
(``traceforge.render.html`` / ``markdown``) format a :class:`Report`; they compute nothing.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from traceforge.analyzers.runs.diff import TraceDiff, diff
from traceforge.analyzers.runs.scaling import ScalingReport
from traceforge.errors import UsageError
from traceforge.model import Trace
from traceforge.report.analysis import RunAnalysis, analyze
from traceforge.report.comparison import compare_runs, group_runs, scaling_of
from traceforge.report.findings import Finding, findings, findings_frame


@dataclass(frozen=True)
class Report:
    """The whole report: ``runs`` (each run's tables), ``findings`` (advice with evidence,
    merged across runs), ``comparison`` (one row per run; empty for one run), ``scaling``
    (runs at different GPU counts, else None) and ``diffs`` (each later run against the
    first: label A, label B, :class:`~traceforge.analyzers.runs.diff.TraceDiff`).

    In Jupyter it shows the findings, the comparison and each run's overview; write it
    as HTML or Markdown with :func:`traceforge.write_report`.
    """

    runs: tuple[RunAnalysis, ...]
    findings: tuple[Finding, ...]
    comparison: pd.DataFrame
    scaling: ScalingReport | None = None
    diffs: tuple[tuple[str, str, TraceDiff], ...] = ()

    def findings_table(self) -> pd.DataFrame:
        """The findings as a table: runs, severity, rule, title, evidence, advice."""
        return findings_frame(list(self.findings))

    def _repr_html_(self) -> str:
        parts = [f"<b>Report</b>: {len(self.runs)} run(s), {len(self.findings)} finding(s)",
                 "<h4>findings</h4>" + self.findings_table().to_html(index=False, border=0)]
        if len(self.comparison):
            parts.append("<h4>comparison</h4>"
                         + self.comparison.to_html(index=False, border=0))
        for r in self.runs:
            parts.append(f"<h4>{html.escape(r.label)}: overview</h4>"
                         + r.overview.to_html(index=False, border=0))
        return "<div>" + "".join(parts) + "</div>"


def _runs_of(items: Sequence[Trace | Sequence[Trace]]) -> list[list[Trace]]:
    """Runs from what the caller gave: a list of traces is one run (its ranks); single
    traces are grouped into runs as the CLI groups files (:func:`group_runs`)."""
    runs: list[list[Trace]] = []
    singles: list[Trace] = []
    for x in items:
        if isinstance(x, Trace):
            singles.append(x)
        elif isinstance(x, Sequence) and x and all(isinstance(t, Trace) for t in x):
            runs.append(list(x))
        else:
            raise UsageError(f"report: expected traces or lists of the traces of one run, "
                             f"got {type(x).__name__}")
    return runs + group_runs(singles)


def build_report(*runs: Trace | Sequence[Trace], top: int = 15,
                 measured: Mapping[str, Mapping[str, Any]] | None = None,
                 flops_from: Trace | None = None) -> Report:
    """The report over ``runs``: each a :class:`~traceforge.model.Trace` or a list of the
    rank traces of one run. Separate traces that are ranks of one distributed run become
    one run; otherwise each is a run and they are compared (eager vs compiled).

    ``top``: rows in the kernel and operator tables. ``measured``: per run label,
    ``latency_ms`` / ``memory_gib`` / ``source`` measured outside the profiler (a
    capture's ``latency.json``), used in the comparison instead of profiled step times.
    ``flops_from``: an eager trace of the same model whose ops' FLOPs stand for those of
    runs that record none (a compiled run), as ``traceforge mfu --flops-from``.
    """
    if not runs:
        raise UsageError("report: give at least one trace")
    loaded = _runs_of(runs)
    done = [analyze(r, top=top, flops_from=flops_from) for r in loaded]
    if measured:
        done = [replace(r, run_info={**r.run_info, **measured[r.label]})
                if r.label in measured else r for r in done]
    comparison = compare_runs(done) if len(done) > 1 else pd.DataFrame()
    # Each later run against the first (rank 0 of each): what fused, what got faster.
    diffs = tuple((done[0].label, r.label, diff(loaded[0][0], tr[0]))
                  for r, tr in zip(done[1:], loaded[1:], strict=True))
    return Report(tuple(done), tuple(findings(done)), comparison,
                  scaling_of(done, loaded), diffs)


def with_counters(rep: Report, trace: Trace, launches: pd.DataFrame,
                  counter_notes: Sequence[str] = ()) -> Report:
    """``rep`` with the measured roofline chart of ``trace`` (the first run's first rank)
    from hardware-counter ``launches`` (a counter reader's per-launch table:
    :func:`traceforge.formats.counter_files.read_counters`)."""
    from traceforge.analyzers.costs.roofline import roofline
    from traceforge.analyzers.counters.measured import chart_data, measured_kernels

    r = roofline(trace)
    m = measured_kernels(trace, launches, counter_notes=counter_notes, device=r.device,
                         modelled=r.kernels)
    run0 = rep.runs[0]
    roof = replace(run0.roofline, measured_chart=chart_data(m, r.device),
                   measured_notes=m.notes)
    return replace(rep, runs=(replace(run0, roofline=roof), *rep.runs[1:]))


__all__ = ["Report", "build_report", "with_counters"]
