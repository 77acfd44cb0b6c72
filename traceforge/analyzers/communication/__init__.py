"""Communication: which kernels of a run's ranks are one collective, and how fast each ran.

Owns the matching of collectives across ranks (:mod:`.collectives`), the message size
of each collective and nccl-tests' bandwidth conventions (:mod:`.sizes`: the size ``S``
of each kind, ``algbw = S / t``, ``busbw = algbw x factor``), the link ceilings a
collective is held against (:mod:`.links`, figures in ``traceforge/data/links.json``),
the per-instance table of a run (:mod:`.instances`: one rank's summary and the driver's
reduce, so the engine can run the summaries where the files are), and the ``comm``
tables (:mod:`.table`: kind x message size, slowest instances, histogram, findings).

May import: :mod:`traceforge.model`, :mod:`traceforge.errors`, and the analyzers it
builds on (the timeline, device peaks). Nothing above analyzers imports it except
through these modules' public names.
"""
