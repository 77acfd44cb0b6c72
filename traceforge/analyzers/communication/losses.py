"""Communication's share of a scaling loss, split into bandwidth and wait.

``scaling`` partitions each rank's step into compute, exposed communication, straggler
wait and the rest (:mod:`traceforge.analyzers.runs.scaling`). This module splits the exposed
communication (wait already taken out) further by how fast the collectives ran: with
``B`` the run's bus bandwidth on synchronized time (sum of bytes x nccl-tests factor over
the sum of synchronized times, over the collectives with a size) and ``C`` the link
ceiling,

    bandwidth_ms = exposed_comm_ms x (1 - B / C)    (time lost to busbw below the link)
    at_link_ms   = exposed_comm_ms - bandwidth_ms   (what would stay at the ceiling)

and ``wait_ms`` is scaling's straggler wait, the skew. All per step, mean over ranks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from traceforge.analyzers.communication.instances import CommRank, comm_reduce

#: Columns of the split (one row per GPU count).
LOSS_COLUMNS = ("gpus", "collectives", "busbw_gbps", "ceiling_gbps", "ceiling_pct",
                "exposed_comm_ms", "bandwidth_ms", "at_link_ms", "wait_ms")


def run_busbw(parts: Sequence[CommRank]) -> tuple[int, float, float]:
    """(collectives, aggregate busbw GB/s, ceiling GB/s) of one run's ranks; NaN where
    there is none."""
    run = comm_reduce(parts)
    inst = run.instances
    if inst.empty:
        return 0, math.nan, math.nan
    t = np.where(inst["basis"] == "sync", inst["sync_ns"], inst["kernel_ns"]).astype(float)
    moved = inst["busbw_gbps"].to_numpy(dtype=float) * t  # bytes x factor
    ok = np.isfinite(moved) & (t > 0)
    bw = float(moved[ok].sum() / t[ok].sum()) if ok.any() else math.nan
    ceil = inst["ceiling_gbps"].dropna()
    return len(inst), bw, float(ceil.iloc[0]) if len(ceil) else math.nan


def comm_losses(rows: Sequence[tuple[int, Sequence[CommRank], float, float]]
                ) -> pd.DataFrame:
    """The split per GPU count from (gpus, the run's rank summaries, mean exposed
    communication ns per step without wait, mean straggler wait ns per step)."""
    out = []
    for gpus, parts, exposed_ns, wait_ns in rows:
        n, bw, ceil = run_busbw(parts)
        pct = 100 * bw / ceil if ceil > 0 and not math.isnan(bw) else math.nan
        exposed = exposed_ns / 1e6
        lost = exposed * (1 - min(pct, 100.0) / 100) if not math.isnan(pct) else math.nan
        out.append({"gpus": gpus, "collectives": n, "busbw_gbps": bw, "ceiling_gbps": ceil,
                    "ceiling_pct": pct, "exposed_comm_ms": exposed, "bandwidth_ms": lost,
                    "at_link_ms": exposed - lost, "wait_ms": wait_ns / 1e6})
    df: pd.DataFrame = pd.DataFrame(out, columns=list(LOSS_COLUMNS))
    return df
