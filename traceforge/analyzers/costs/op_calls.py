"""Op calls factorized by what the FLOPs model reads of them: name and shape arguments.

A model repeats a few shapes thousands of times (the 288 MB benchmark trace: 502k op calls,
308 distinct argument sets), so roofline, MFU and the ops table work out each distinct
call once and spread the answer over its rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from traceforge.analyzers.costs.flops import ARG_KEYS
from traceforge.model import Trace


@dataclass(frozen=True)
class OpCalls:
    """``codes[i]``: the distinct call of row ``i``; ``names[c]``/``args[c]``: that call's op
    name and its :data:`~traceforge.analyzers.costs.flops.ARG_KEYS` args (shared dicts: read
    them, do not change them). Calls are numbered by first appearance, as
    :func:`pandas.factorize` numbers them."""

    codes: np.ndarray
    names: list[str]
    args: list[dict[str, Any]]

    @property
    def counts(self) -> np.ndarray:
        """How many rows made each distinct call."""
        return np.bincount(self.codes, minlength=len(self.names))


def op_calls(trace: Trace, rows: np.ndarray) -> OpCalls:
    """The op calls of event rows ``rows`` (labels), factorized by (name, shape args)."""
    rows = np.asarray(rows, dtype=np.int64)
    arg_codes, uniq = trace.distinct_args(rows, ARG_KEYS)
    name = trace.events["name"]
    name_codes = name.cat.codes.to_numpy()[name.index.get_indexer(pd.Index(rows))].astype(np.int64)
    codes, _ = pd.factorize(name_codes * max(len(uniq), 1) + arg_codes)
    codes = np.asarray(codes, dtype=np.int64)
    # The first row of each call (codes count up from 0 in order of first appearance).
    first = np.empty(int(codes.max()) + 1 if len(codes) else 0, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    cats = name.cat.categories
    return OpCalls(codes, [str(cats[name_codes[i]]) for i in first.tolist()],
                   [uniq[int(arg_codes[i])] for i in first.tolist()])
