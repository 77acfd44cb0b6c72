"""Host-side stalls inside steps: synchronizing calls, and copies between host and device.

Both are the usual reasons a training or inference loop drains the GPU: ``.item()``,
``.cpu()``, ``torch.cuda.synchronize()``, a pageable ``cudaMemcpy``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pandas as pd

from traceforge.analyzers.timeline.activity import SYNC_APIS
from traceforge.analyzers.timeline.core import host_in_steps, timeline
from traceforge.model import Trace, empty_frame, name_mask

#: Copy names that cross the host/device boundary (Kineto "Memcpy HtoD (Pageable ->
#: Device)", nsys "[CUDA memcpy Host-to-Device]", rocprof "CopyHostToDevice").
HOST_COPY = r"HtoD|DtoH|Host|Pageable|Pinned"

SYNC_COLUMNS = ("name", "calls", "total_us", "max_us")
COPY_COLUMNS = ("step", "name", "count", "total_us")


def sync_calls(trace: Trace, steps: Sequence[int] | None = None) -> pd.DataFrame:
    """Synchronizing API calls that started inside the steps: calls, total and max (us)."""
    ev = trace.events
    sel = (ev["kind"].isin(("runtime", "driver", "sync")).to_numpy()
           & ev["name"].isin(SYNC_APIS).to_numpy() & host_in_steps(trace, steps))
    s = ev[sel]
    if s.empty:
        return empty_frame(dict.fromkeys(SYNC_COLUMNS, "object"))
    g = s.groupby(s["name"].astype(str))["dur"]
    out = g.agg(["size", "sum", "max"]).reset_index()
    out.columns = list(SYNC_COLUMNS)
    out["total_us"] = out["total_us"] / 1e3
    out["max_us"] = out["max_us"] / 1e3
    return cast("pd.DataFrame", out.sort_values("total_us", ascending=False)
                .reset_index(drop=True))


def host_copies(trace: Trace, steps: Sequence[int] | None = None) -> pd.DataFrame:
    """Host<->device copies launched by the steps, per step and copy name."""
    tl = timeline(trace)
    a = tl.in_steps(steps)
    m = a[(a["kind"] == "memcpy").to_numpy() & name_mask(a["name"], HOST_COPY)]
    if m.empty:
        return empty_frame(dict.fromkeys(COPY_COLUMNS, "object"))
    g = m.assign(d=m["end"] - m["ts"]).groupby(["step", "name"], sort=True)["d"]
    out: pd.DataFrame = g.agg(["size", "sum"]).reset_index()
    out.columns = list(COPY_COLUMNS)
    out["total_us"] = out["total_us"] / 1e3
    return out
