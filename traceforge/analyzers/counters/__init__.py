"""Hardware counters beside the timeline: Nsight Compute / rocprofv3 ``--pmc`` launches
matched to a trace's kernels, and the measured roofline and utilization they give.

Owns: matching profiled launches to trace kernels (:mod:`.join`), measured FLOPs, DRAM
bytes, arithmetic intensity, % of peak and limiter per kernel (:mod:`.measured`).
Takes the per-launch table a counter reader returns (columns of
``traceforge.formats.counter_table.LAUNCH_COLUMNS``) as a DataFrame: it never imports
formats. May import: :mod:`traceforge.model`, :mod:`traceforge.analyzers.costs.ceilings` and
:mod:`traceforge.analyzers.costs.devices` (device peaks), :mod:`traceforge.analyzers.
names.kernel_names` (display names). Readers of counter files live in
:mod:`traceforge.formats` (``ncu``, ``counter_files`` for rocprofv3); renderers format
the tables.
"""
