"""PyTorch operator ranges in NVTX: what ``emit_nvtx`` writes, turned into ``cpu_op`` rows.

``torch.autograd.profiler.emit_nvtx(record_shapes=True)`` (and ``nsys profile
--pytorch=autograd-shapes-nvtx``, which turns it on) pushes one NVTX range per operator
call on the calling thread, named e.g.::

    aten::softmax, seq = 3, op_id = 64, sizes = [[8192, 4096], [], []], input_op_ids = [...]

(``seq`` only for ops autograd records, ``sizes`` and ``input_op_ids`` only with shapes).
Such a range is the operator call Kineto would have recorded as a ``cpu_op``: this module
renames it to the op, makes it a ``cpu_op`` and keeps ``sizes`` as the Kineto-style
``Input Dims`` arg (as JSON text, decoded when args are read) plus ``Sequence number``
and ``op_id``. emit_nvtx records no dtypes: ``Input type`` stays unknown, so FLOPs are
modelled but bytes (which need element sizes) are not.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

#: Op name, optional ``seq``, ``op_id``, then optional ``sizes`` and ``input_op_ids``.
_OP = re.compile(r"^(?P<op>[^,]+?)(?:, seq = (?P<seq>\d+))?, op_id = (?P<id>\d+)"
                 r"(?:, sizes = (?P<sizes>\[.*?\]))?(?:, input_op_ids = .*)?$", re.S)
#: A quick test before the full pattern (most NVTX ranges are no op).
_HINT = ", op_id = "
#: The args columns this module adds to the reader's frame.
ARG_COLUMNS = ("Input Dims", "Sequence number", "op_id")


def mark_ops(df: pd.DataFrame) -> int:
    """Turn the emit_nvtx op ranges of an NVTX frame (``name``, ``kind`` columns) into
    ``cpu_op`` rows in place; returns how many. Adds :data:`ARG_COLUMNS`."""
    names = df["name"].astype(str)
    maybe = names.str.contains(_HINT, regex=False).to_numpy() & (
        df["kind"].to_numpy() == "user_annotation")
    n = len(df)
    dims = np.full(n, None, dtype=object)
    seq = np.full(n, np.nan)
    op_id = np.full(n, np.nan)
    new_names = names.to_numpy(dtype=object).copy()
    count = 0
    for i in np.flatnonzero(maybe).tolist():
        m = _OP.match(new_names[i])
        if m is None:
            continue
        count += 1
        new_names[i] = m.group("op")
        if m.group("sizes") is not None:
            dims[i] = m.group("sizes")
        if m.group("seq") is not None:
            seq[i] = int(m.group("seq"))
        op_id[i] = int(m.group("id"))
    if count:
        is_op = ~pd.isna(op_id)
        df["name"] = new_names
        df["kind"] = np.where(is_op, "cpu_op", df["kind"].to_numpy())
        df["cat"] = np.where(is_op, "cpu_op", df["cat"].to_numpy())
        df["Input Dims"], df["Sequence number"], df["op_id"] = dims, seq, op_id
    return count
