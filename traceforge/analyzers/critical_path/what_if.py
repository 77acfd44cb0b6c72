"""What-ifs: speedups by kernel class or family (``gemm=2``), applied to the step graph's
work edges, and the longest path taken again on the graph: nothing is extrapolated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.edges import COLLECTIVE, WORK
from traceforge.analyzers.critical_path.run_graph import RunGraph
from traceforge.analyzers.critical_path.step import StepGraph, edge_index, longest_into
from traceforge.analyzers.names.kernel_names import CLASSES, FAMILIES
from traceforge.errors import UsageError


def parse_what_if(specs: Sequence[str] | Mapping[str, float] | None) -> dict[str, float]:
    """``["gemm=2", "nccl=1.5"]`` -> ``{"gemm": 2.0, "nccl": 1.5}`` (factor = speedup)."""
    if specs is None:
        return {}
    if isinstance(specs, Mapping):
        items: list[tuple[str, Any]] = [(str(k), v) for k, v in specs.items()]
    else:
        items = []
        for s in specs:
            for part in str(s).split():
                key, sep, val = part.partition("=")
                if not sep or not key:
                    raise UsageError(f"--what-if {part!r}: want CLASS=FACTOR, e.g. gemm=2")
                items.append((key, val))
    out: dict[str, float] = {}
    for key, val in items:
        try:
            f = float(val)
        except (TypeError, ValueError):
            raise UsageError(f"--what-if {key}={val}: the factor is not a number") from None
        if not np.isfinite(f) or f <= 0:
            raise UsageError(f"--what-if {key}={val}: the factor must be a positive speedup")
        out[key] = f
    return out


def check_keys(run: RunGraph, factors: Mapping[str, float]) -> list[str]:
    """Notes on what-ifs that touch nothing here (a known family, e.g. ``nccl``, that these
    traces do not hold); a name that is no class and no family at all is a UsageError."""
    fams = sorted({str(f) for r in run.ranks for f in pd.unique(r.acts["family"])})
    notes = []
    for k in factors:
        if k in CLASSES or k in fams:
            continue
        if k in FAMILIES:
            notes.append(f"--what-if {k}: these traces hold no {k} kernels, so it saves "
                         "nothing")
            continue
        raise UsageError(f"--what-if {k}: not a kernel class ({', '.join(CLASSES)}) "
                         f"or a kernel family of these traces ({', '.join(fams) or 'none'})")
    return notes


def edge_factors(sp: StepGraph, act_factors: Sequence[np.ndarray]) -> np.ndarray:
    """Per step edge: the speedup of its kernel (``act_factors``: per rank, each
    activity's, from :meth:`Labels.factors`), 1 for every other edge."""
    f = np.ones(len(sp.u))
    work = np.flatnonzero(np.isin(sp.t, (WORK, COLLECTIVE)))
    for ri, af in enumerate(act_factors):
        k = work[sp.erank[work] == ri]
        if len(k):
            f[k] = af[np.clip(sp.ref[k], 0, None)]
    return f


def what_if_length(sp: StepGraph, ri: int, f: np.ndarray) -> int:
    """Rank ``ri``'s step length with the work edges divided by ``f``: the longest path
    into its window end, from its (unchanged) window start, on the step's graph."""
    changed = f != 1
    w = np.where(changed, np.rint(sp.w / f), sp.w).astype(np.int64)
    # Nothing sped up on this step (a class it does not run): its own path, found from
    # its times (vectorized), is the relaxation's (a Python walk of every node: at 10M
    # events 17 s and 3 GB).
    e = edge_index(sp, longest_into(sp, ri, w if changed.any() else None))
    return int(w[e[e >= 0]].sum()) - int(sp.w0[ri] - sp.lo)
