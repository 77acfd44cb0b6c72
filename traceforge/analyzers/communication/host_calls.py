"""Sizes of collectives from the host call that launched them, where the kernel has none.

Kineto puts a collective's sizes on its kernel (or its ``record_param_comms`` op). Other
profilers see the library's own API instead: Nsight Systems records NCCL's NVTX ranges
(``ncclAllReduce``, with a payload of the message size where NCCL's NVTX payloads are
exported), rocprofv3 and rocpd record RCCL's API calls (``ncclAllReduce`` with ``count``
and ``datatype`` where their args are kept). The kernel's launch call lies inside that
range on the same thread, so :func:`enclosing_calls` finds, per communication kernel, the
innermost host event named ``nccl<Op>``/``rccl<Op>`` that encloses its launch, and
:func:`sizes_of_calls` reads what it says: the kind from its name (which names RCCL's
``ncclDevKernel_Generic``), and ``count``/``datatype``, or NCCL's NVTX
``Message size [bytes]``. NCCL counts the all-gather's and the reduce-scatter's
per-rank part, so their total (nccl-tests' S) needs the group size.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from traceforge.model import Trace

_HOST_KINDS = ("user_annotation", "runtime", "other", "cpu_op")
#: ``ncclAllReduce``; nsys names a range of NCCL's NVTX domain ``NCCL:ncclAllReduce``.
_CALL = r"^(?:[NR]CCL:)?(?:nccl|rccl)(?!DevKernel|Kernel)[A-Z][A-Za-z]*$"


def enclosing_calls(trace: Trace, acts: pd.DataFrame) -> np.ndarray:
    """Per row of ``acts`` (communication kernels), the event row of the innermost
    ``nccl*``/``rccl*`` host range enclosing its launch call on the launching thread, or
    -1."""
    out = np.full(len(acts), -1, dtype=np.int64)
    ev = trace.events
    host = ev[ev["kind"].astype(str).isin(_HOST_KINDS).to_numpy()
              & ev["name"].astype(str).str.match(_CALL).to_numpy()]
    if host.empty or acts.empty:
        return out
    lts = acts["launch_ts"].to_numpy()
    ltid = acts["launch_tid"].to_numpy()
    for tid, g in host.groupby("tid", sort=False):
        g = g.sort_values("ts", kind="stable")
        starts = g["ts"].to_numpy()
        ends = starts + g["dur"].to_numpy()
        rows = g.index.to_numpy()
        mine = np.flatnonzero((ltid == tid) & (lts >= 0))
        k = np.searchsorted(starts, lts[mine], side="right") - 1
        ok = (k >= 0) & (ends[np.clip(k, 0, None)] >= lts[mine])
        out[mine[ok]] = rows[k[ok]]
    return out


def _get(a: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if k in a:
            return a[k]
    return None


def _flat(a: dict[str, Any]) -> dict[str, Any]:
    """A call's args with its NVTX payload's fields (nsys's ``payload`` arg) and its API
    arguments (rocpd's ``call_args``) lifted up."""
    out = a
    for key in ("payload", "call_args"):
        p = a.get(key)
        if isinstance(p, dict):
            out = {**p, **out}
    return out


#: ``ncclDataType_t`` values (nccl.h; RCCL's are the same), as rocpd records them.
NCCL_DTYPES = {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64",
               6: "float16", 7: "float32", 8: "float64", 9: "bfloat16",
               10: "float8_e4m3fn", 11: "float8_e5m2"}


#: NCCL's NVTX payload name of the communicator (a hash shared by its ranks).
COMM_ID = "NCCL communicator ID"
#: Ranges whose payload gives a communicator's size (``No. of ranks``).
_INIT = r"^(?:[NR]CCL:)?(?:nccl|rccl)Comm(?:InitRank|InitAll|Split|Shrink)"


def comm_sizes(trace: Trace) -> dict[Any, Any]:
    """Communicator id -> ``No. of ranks`` from NCCL's ``ncclCommInitRank*``/
    ``ncclCommSplit`` NVTX payloads in the trace (empty when there are none)."""
    ev = trace.events
    sel = ev.index[ev["kind"].astype(str).isin(_HOST_KINDS).to_numpy()
                   & ev["name"].astype(str).str.match(_INIT).to_numpy()]
    out: dict[Any, Any] = {}
    for a in (trace.args(sel.to_numpy()) if len(sel) else []):
        f = _flat(a)
        if f.get(COMM_ID) is not None and f.get("No. of ranks") is not None:
            out[f[COMM_ID]] = f["No. of ranks"]
    return out


def sizes_of_calls(trace: Trace, rows: np.ndarray) -> list[dict[str, Any]]:
    """Kineto-style args (``Collective name``, ``In msg nelems``, ``dtype``...) of the
    host calls at event rows (labels) ``rows`` (-1: none), for the kernels that lack
    their own.

    NCCL's NVTX payload gives bytes (``Message size [bytes]``), one rank's part for the
    all-gather and the reduce-scatter and one peer's for the all-to-all; their total
    (nccl-tests' S) is n parts, with n from the call's args or its communicator's
    ``ncclCommInitRank`` range, else the run's world size. RCCL's API arguments (rocpd)
    give ``count``/``sendcount``/``recvcount`` and ``datatype`` (an ``ncclDataType_t``)."""
    have = rows >= 0
    labels = rows[have]
    names = trace.events["name"].astype(str).loc[labels].tolist() if have.any() else []
    args = trace.args(labels) if have.any() else []
    sizes: dict[Any, Any] | None = None
    it = iter(zip(names, args, strict=True))
    out: list[dict[str, Any]] = []
    for h in have.tolist():
        if not h:
            out.append({})
            continue
        name, raw = next(it)
        a = _flat(raw)
        op = name.rsplit(":", 1)[-1][4:]
        d: dict[str, Any] = {"Collective name": op}
        count = _get(a, "count", "Count", "sendcount", "recvcount")
        dtype = _get(a, "datatype", "Data type", "dtype")
        nbytes = _get(a, "Message size [bytes]", "Message size", "bytes")
        n = _get(a, "nranks", "Group size", "comm_size", "No. of ranks")
        if n is None and a.get(COMM_ID) is not None:
            sizes = comm_sizes(trace) if sizes is None else sizes
            n = sizes.get(a[COMM_ID])
        if n is not None:
            d["Group size"] = n
        if n is None and (trace.meta.world_size or 0) > 1:
            n = trace.meta.world_size  # no group size recorded: the run's ranks
        if isinstance(dtype, int) and not isinstance(dtype, bool):
            dtype = NCCL_DTYPES.get(dtype, f"ncclDataType_t {dtype}")
        if count is not None and dtype is not None:
            d["In msg nelems"], d["dtype"] = count, str(dtype)
        elif nbytes is not None:
            d["In msg nelems"], d["dtype"] = nbytes, "byte"
        if "In msg nelems" in d and op.lower() in ("allgather", "reducescatter", "alltoall"):
            # NCCL's count is one rank's part: the total is n parts.
            try:
                total = float(d["In msg nelems"]) * float(n)
            except (TypeError, ValueError):
                total = math.nan
            d["In msg nelems"] = total if math.isfinite(total) else "unknown group size"
        out.append(d)
    return out
