"""Report layer: what a report or an annotated trace aggregates from the analyzers.

:mod:`~traceforge.report.analysis` gathers every analysis of a run, once per rank;
:mod:`~traceforge.report.findings` turns those tables into advice with evidence;
:mod:`~traceforge.report.document` assembles the report over several runs;
:mod:`~traceforge.report.annotations` collects what ``annotate`` draws. Renderers in
``traceforge.render`` format these; they never compute.

The package is also the notebook's ``traceforge.report(...)``, named like the CLI verb:
calling it builds a :class:`~traceforge.report.document.Report`
(:func:`~traceforge.report.document.build_report`). A module is made callable because
``traceforge.report`` must be both this package and that function: once the package is
imported, Python binds the name to it, so a separate function could never be reached.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traceforge.model import Trace
    from traceforge.report.document import Report


class _ReportModule(types.ModuleType):
    def __call__(self, *runs: Trace | Sequence[Trace], top: int = 15,
                 measured: Mapping[str, Mapping[str, Any]] | None = None) -> Report:
        """``traceforge.report(eager, compiled)``: the report over the runs (traces, or
        lists of the rank traces of one run); see
        :func:`~traceforge.report.document.build_report`."""
        from traceforge.report.document import build_report

        return build_report(*runs, top=top, measured=measured)


sys.modules[__name__].__class__ = _ReportModule
