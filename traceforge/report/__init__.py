"""Report layer: what a report or an annotated trace aggregates from the analyzers.

:mod:`~traceforge.report.run` gathers every analysis of a run, once per rank;
:mod:`~traceforge.report.findings` turns those tables into advice with evidence;
:mod:`~traceforge.report.annotations` collects what ``annotate`` draws. Renderers in
``traceforge.render`` format these; they never compute.
"""
