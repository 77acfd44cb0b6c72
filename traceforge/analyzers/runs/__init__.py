"""Several runs or ranks side by side: run inputs (``inputs``), scaling, cross-vendor compare
(with vendor-neutral names, ``vendor``), diff, regression and per-rank summaries. May import
``timeline``, ``names``, ``costs`` and ``timing``; nothing imports it but the layers above
the analyzers.
"""
