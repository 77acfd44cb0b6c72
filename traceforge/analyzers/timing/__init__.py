"""Where one trace's time goes: idle gaps by cause (``idle``), compute/communication overlap
(``overlap``), launch overhead (``launch``), the step breakdown (``breakdown``), host stalls
(``stalls``), operators and kernels by GPU time (``ops``, ``kernels``) and the trace
summary (``summary``). May import ``timeline``, ``names`` and ``costs``.
"""
