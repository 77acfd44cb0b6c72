"""Communication: which kernels of a run's ranks are one collective, and how fast each ran.

Owns:

* :mod:`.collectives`: matching collectives across ranks (the k-th kernel of a group);
* :mod:`.sizes`: collective kinds, dtype sizes, nccl-tests' size ``S`` and busbw factor;
* :mod:`.host_calls`: sizes from the enclosing NCCL NVTX range / RCCL API call (nsys,
  rocprof) where kernels carry none;
* :mod:`.links`: link ceilings (figures and sources in ``traceforge/data/links.json``),
  ``--link-gbps``, the measured all-reduce busbw of a peaks file;
* :mod:`.instances`: every collective of a run, per rank summary (for the engine) and the
  driver's reduce: bytes, kernel and synchronized time, algbw/busbw, wait per rank;
* :mod:`.table`: the ``comm`` answer (kind x log2 size, slowest, histogram, findings) and
  ``tf.comm``;
* :mod:`.losses`: scaling's communication split into bandwidth and wait;
* :mod:`.runs`: busbw per kind across runs, for ``compare`` and ``diff``.

May import: :mod:`traceforge.model`, :mod:`traceforge.errors`, and other analyzers
(the timeline, device peaks). Analyzers that use it (scaling, compare, diff, the
critical path's matching) import these modules' public names; nothing here imports
them back.
"""
