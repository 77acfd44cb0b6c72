"""Cost models: FLOPs and bytes of ops (``operands``, ``contractions``, ``normalizations``,
``data_movement``, ``flops``, ``op_calls``), work per GPU activity (``activity_work``), device
peaks and ceilings (``devices``, ``ceilings``), and the analyses built on them
(``roofline``, ``mfu``). May import ``timeline`` and ``names``.
"""
