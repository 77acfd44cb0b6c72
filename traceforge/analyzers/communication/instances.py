"""Every collective of a run, with its size and bandwidth on kernel and synchronized time.

Split in two for the engine (:mod:`traceforge.engine`): :func:`comm_summary` takes one
rank's trace to its communication kernels with the args that size them (a few hundred
bytes per kernel, no event table), and :func:`comm_reduce` matches the ranks' kernels
into collectives (:func:`~traceforge.analyzers.communication.collectives.match`) and
computes, per instance (:data:`INSTANCE_COLUMNS`):

* ``bytes``: nccl-tests' size S (:func:`~traceforge.analyzers.communication.sizes.message_bytes`);
* ``kernel_ns``: the mean of the matched ranks' kernel durations (nccl-tests averages its
  ranks' times); ``sync_ns``: from the last rank's kernel start to the last end, the time
  the collective took once every rank had arrived;
* ``algbw``/``busbw`` on each (``*_kernel_gbps``, ``*_sync_gbps``), GB/s = bytes/ns;
  ``busbw_gbps``, the one the tables use: synchronized where the instance was matched
  across ranks, else kernel time (``basis`` says which);
* ``wait_ns`` = ``kernel_ns - sync_ns``: time the ranks' kernels spent waiting for the
  slowest rank (``last_rank``, the last to start); per rank in :data:`MEMBER_COLUMNS`.

A kernel that no other rank's trace matches (one rank's trace, a collective some rank
lacks) is an instance of its own, on kernel time. Missing or non-numeric sizes, unknown
dtypes, zero durations and group sizes that disagree with the matched ranks leave the
affected figure NaN and are counted in the notes; nothing divides by zero.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from traceforge.analyzers.communication.collectives import comm_kernels, match
from traceforge.analyzers.communication.host_calls import enclosing_calls, sizes_of_calls
from traceforge.analyzers.communication.links import Ceiling, group_ceiling
from traceforge.analyzers.communication.sizes import (
    bus_factor,
    dtype_bytes,
    kind_of,
    message_bytes,
)
from traceforge.analyzers.timeline.core import timeline
from traceforge.model import Device, Trace

#: Columns of :attr:`CommRun.instances`.
INSTANCE_COLUMNS = (
    "instance", "kind", "group", "ranks", "n_ranks", "group_size", "dtype", "bytes",
    "start_ns", "kernel_ns", "sync_ns", "wait_ns", "algbw_kernel_gbps",
    "busbw_kernel_gbps", "algbw_sync_gbps", "busbw_sync_gbps", "basis", "busbw_gbps",
    "ceiling_gbps", "ceiling_pct", "last_rank", "name",
)
#: Columns of :attr:`CommRun.members`: one row per rank's kernel of an instance (``row``:
#: the kernel's event row in that rank's trace).
MEMBER_COLUMNS = ("instance", "rank", "row", "start_ns", "kernel_ns", "busbw_kernel_gbps",
                  "wait_ns")

_ARG_KEYS = ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype",
             "Process Group Name", "Process Group Ranks")


@dataclass(frozen=True)
class CommRank:
    """One rank's communication kernels (:func:`comm_summary`): the matching keys of
    :func:`~traceforge.analyzers.communication.collectives.comm_kernels` plus ``start_ns``
    (absolute), ``dur``, ``name``, ``in_nelems``/``out_nelems`` (NaN when absent),
    ``group_size`` (-1), ``dtype``, ``pg_ranks``; the rank's device and GPU count."""

    rank: int
    kernels: pd.DataFrame
    device: Device | None
    local_gpus: int
    format: str = ""


@dataclass(frozen=True)
class CommRun:
    """The collectives of a run (:func:`comm_reduce`): ``instances``, ``members``,
    ``ceilings`` (group -> the :class:`~.links.Ceiling` its % is against), ``ranks``
    (how many rank traces), ``matched`` (whether any instance spans ranks), ``notes``."""

    instances: pd.DataFrame
    members: pd.DataFrame
    ranks: int
    matched: bool
    ceilings: dict[str, Ceiling] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _num(v: Any) -> float:
    if isinstance(v, bool):
        return math.nan
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(v) and v >= 0 else math.nan
    try:
        f = float(str(v).strip())
    except ValueError:
        return math.nan
    return f if math.isfinite(f) and f >= 0 else math.nan


def _ranks(v: Any) -> str:
    """``Process Group Ranks`` as "0,1,2" (Kineto writes a list as a string); "" when
    absent or not a list of integers (never evaluated beyond a literal)."""
    if isinstance(v, str):
        try:
            v = ast.literal_eval(v.strip()) if len(v) < 100_000 else None
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return ""
    if isinstance(v, (list, tuple)) and all(isinstance(x, int) for x in v):
        return ",".join(str(int(x)) for x in v)
    return ""


def comm_summary(trace: Trace, *, rank: int | None = None) -> CommRank:
    """One rank's :class:`CommRank` (reduce with :func:`comm_reduce`); a derived table of
    the trace, so a later run on the cached trace reads it back instead of decoding the
    collective kernels' args from the source file again. ``rank``: the rank of a trace
    whose meta names none (its place in the run; 0 when not given).

    The rank is an argument, not new meta: a trace with other meta is another trace to
    the memo and the store, and worked out its whole timeline again (a report of 10M
    kernels without one collective spent 25 s and 2.6 GB more in ``comm`` for it)."""
    r = int(trace.meta.rank if trace.meta.rank is not None else rank or 0)
    return trace.derived(f"comm_summary|rank={r}", lambda: _comm_summary(trace, r))


def _comm_summary(trace: Trace, rank: int) -> CommRank:
    acts = timeline(trace).activity
    k = comm_kernels(trace, acts, rank)
    a = acts.iloc[k["act"].to_numpy()]
    kargs = trace.args(a["row"].to_numpy()) if len(a) else []
    # Older traces size the collective on its record_param_comms op, not the kernel.
    oprow = a["op_row"].to_numpy() if len(a) else np.array([], dtype=np.int64)
    has_op = oprow >= 0
    oargs = trace.args(oprow[has_op]) if has_op.any() else []
    it = iter(oargs)
    args = [{**(next(it) if h else {}), **{x: y for x, y in ka.items() if x in _ARG_KEYS}}
            for ka, h in zip(kargs, has_op, strict=True)]
    bare = np.array([not ("In msg nelems" in x or "Collective name" in x) for x in args],
                    dtype=bool)
    if bare.any():  # nsys NVTX ranges, RCCL API calls: the launch's enclosing call
        calls = sizes_of_calls(trace, enclosing_calls(trace, a.iloc[np.flatnonzero(bare)]))
        for i, c in zip(np.flatnonzero(bare).tolist(), calls, strict=True):
            args[i] = {**c, **args[i]}
    devs = {d.id: d for d in trace.meta.devices}
    dev_ids = a["device"].to_numpy() if len(a) else np.array([], dtype=np.int64)
    device = devs.get(int(dev_ids[0])) if len(dev_ids) else None
    if device is None and trace.meta.devices:
        device = trace.meta.devices[0]
    out = k.assign(
        row=a["row"].to_numpy(),
        start_ns=a["ts"].to_numpy() + trace.meta.base_ns,
        dur=(a["end"] - a["ts"]).to_numpy(),
        name=a["name"].astype(str).to_numpy(),
        in_nelems=np.array([_num(x.get("In msg nelems", "")) for x in args], dtype=float),
        out_nelems=np.array([_num(x.get("Out msg nelems", "")) for x in args], dtype=float),
        group_size=np.array([_num(x.get("Group size", "")) for x in args], dtype=float),
        dtype=np.array([str(x.get("dtype", "")) for x in args], dtype=object),
        pg_ranks=np.array([_ranks(x.get("Process Group Ranks", "")) for x in args],
                          dtype=object),
    )
    if len(k) and (out["collective"] == "").all():
        coll = [str(x.get("Collective name", "")) for x in args]
        out["collective"] = np.array(coll, dtype=object)
    return CommRank(rank, cast("pd.DataFrame", out.reset_index(drop=True)), device,
                    len(trace.meta.devices), trace.meta.format)


def comm_reduce(parts: Sequence[CommRank], *, link_gbps: float | None = None,
                measured_gbps: float | None = None) -> CommRun:
    """The run's :class:`CommRun` from its ranks' summaries (in rank order)."""
    tables = [p.kernels for p in parts if len(p.kernels)]
    if not tables:
        return CommRun(pd.DataFrame(columns=list(INSTANCE_COLUMNS)),
                       pd.DataFrame(columns=list(MEMBER_COLUMNS)), len(parts), False)
    allk = pd.concat(tables, ignore_index=True)
    notes: list[str] = []
    m = match([t[["rank", "act", "group", "seq", "collective"]] for t in tables])
    notes.extend(m.notes)
    key = ["rank", "act"]
    allk = allk.merge(m.members[[*key, "instance"]], on=key, how="left")
    lone = allk["instance"].isna().to_numpy()
    base = int(m.members["instance"].max()) + 1 if len(m.members) else 0
    inst = np.array(allk["instance"].to_numpy(dtype=float))
    inst[lone] = base + np.arange(int(lone.sum()))
    allk["instance"] = inst.astype(np.int64)
    if len(parts) > 1 and lone.any():
        notes.append(f"{int(lone.sum())} communication kernels matched no other rank's: "
                     "kernel time only")
    allk["end_ns"] = allk["start_ns"] + allk["dur"]
    g = allk.groupby("instance", sort=True)
    last_start = g["start_ns"].transform("max").to_numpy()
    allk["wait_ns"] = np.clip(last_start - allk["start_ns"].to_numpy(), 0,
                              allk["dur"].to_numpy())
    first = g.first()
    inst_df = pd.DataFrame({
        "instance": first.index.to_numpy(),
        "group": first["group"].to_numpy(),
        "n_ranks": g.size().to_numpy(),
        "ranks": g["rank"].agg(lambda s: ",".join(str(int(x)) for x in s)).to_numpy(),
        "start_ns": g["start_ns"].min().to_numpy(),
        "kernel_ns": g["dur"].mean().to_numpy(),
        "last_start": g["start_ns"].max().to_numpy(),
        "last_end": g["end_ns"].max().to_numpy(),
        "first_end": g["end_ns"].min().to_numpy(),
        "last_rank": allk.loc[g["start_ns"].idxmax().to_numpy(), "rank"].to_numpy(),
        "name": first["name"].to_numpy(),
        "collective": first["collective"].to_numpy(),
        "dtype": first["dtype"].to_numpy(),
        "in_nelems": first["in_nelems"].to_numpy(),
        "out_nelems": first["out_nelems"].to_numpy(),
        "group_size_arg": first["group_size"].to_numpy(),
        "pg_ranks": first["pg_ranks"].to_numpy(),
    })
    out, more = _sized(inst_df)
    notes.extend(more)
    if out["bytes"].isna().any():
        notes.extend(_where_sizes_are({p.format for p in parts if len(p.kernels)}))
    ceilings, cnotes = _ceilings(out, parts, link_gbps, measured_gbps)
    notes.extend(cnotes)
    gb = np.array([ceilings[x].gbps if x in ceilings else math.nan for x in out["group"]])
    out["ceiling_gbps"] = gb
    with np.errstate(divide="ignore", invalid="ignore"):
        out["ceiling_pct"] = np.where(gb > 0, 100 * out["busbw_gbps"] / gb, math.nan)
    members = allk.assign(kernel_ns=allk["dur"].astype(float))
    per = out.set_index("instance")
    b = per.loc[members["instance"], ["bytes", "factor"]].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        d = members["kernel_ns"].to_numpy()
        members["busbw_kernel_gbps"] = np.where(d > 0, b[:, 0] * b[:, 1] / d, math.nan)
    members = members.sort_values(["instance", "rank"], kind="stable")
    return CommRun(cast("pd.DataFrame", out[list(INSTANCE_COLUMNS)].reset_index(drop=True)),
                   cast("pd.DataFrame", members[list(MEMBER_COLUMNS)].reset_index(drop=True)),
                   len(parts), bool(len(m.members)), ceilings, tuple(notes))


def _where_sizes_are(formats: set[str]) -> list[str]:
    """Per trace format, where the sizes of unsized collectives could come from."""
    out = []
    if any(f.startswith("nsys") for f in formats):
        out.append("nsys: the kind comes from the kernel name or NCCL's NVTX range "
                   "(NCCL:ncclAllReduce ...) around its launch, sizes from that range's payload "
                   "(NCCL 2.20+), which this export does not carry: export the report with "
                   "`nsys export --type sqlite --include-blobs=true`")
    if any(f.startswith(("rocprof", "rocpd")) for f in formats):
        out.append("rocprof: the kind comes from the kernel name or RCCL's API call around "
                   "its launch (rocprofv3 --rccl-trace; RCCL's ncclDevKernel_Generic names "
                   "none); sizes would come from that call's arguments, which rocprofv3 does not "
                   "record for RCCL (its RCCL API record has none); rocpd's rocpd_arg is read "
                   "where it holds them")
    return out


def _sized(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Kind, group size, bytes and bandwidths of each instance, and notes of what lacked."""
    notes: list[str] = []
    kinds = [kind_of(str(c), str(nm)) for c, nm in zip(df["collective"], df["name"],
                                                         strict=True)]
    df["kind"] = kinds
    listed = np.array([len(s.split(",")) if s else -1 for s in df["pg_ranks"]], dtype=float)
    size_arg = df["group_size_arg"].to_numpy()
    n = np.where(size_arg >= 1, size_arg, listed)
    matched = df["n_ranks"].to_numpy()
    multi = matched > 1
    n = np.where(n >= 1, n, np.where(multi, matched, -1))
    df["group_size"] = n.astype(np.int64)
    disagree = multi & (n >= 1) & (n != matched)
    if disagree.any():
        notes.append(f"{int(disagree.sum())} collectives matched a number of ranks other than "
                     "their group size (traces of some ranks not given, or a mismatch): "
                     "busbw uses the group size")
    elem = np.array([dtype_bytes(str(x)) or -1 for x in df["dtype"]], dtype=float)
    named = np.array([bool(str(x).strip()) for x in df["dtype"]])
    unknown_dtype = named & (elem < 0)
    if unknown_dtype.any():
        bad = sorted({str(x) for x, u in zip(df["dtype"], unknown_dtype, strict=True) if u})
        notes.append(f"{int(unknown_dtype.sum())} collectives of unknown dtype "
                     f"({', '.join(bad[:4])}): no size")
    nbytes = np.array([message_bytes(k, i, o, int(e)) if e > 0 else math.nan
                       for k, i, o, e in zip(kinds, df["in_nelems"], df["out_nelems"], elem,
                                             strict=True)], dtype=float)
    nbytes = np.where(np.isnan(df["in_nelems"]) & np.isnan(df["out_nelems"]), math.nan,
                      nbytes)
    df["bytes"] = nbytes
    unsized = np.isnan(nbytes) & ~unknown_dtype
    if unsized.any():
        notes.append(f"{int(unsized.sum())} of {len(df)} collectives carry no message size "
                     "(no 'In msg nelems'/'dtype' args; Kineto writes them since PyTorch "
                     "2.4): time only, no bandwidth")
    factor = np.array([bus_factor(k, int(x)) for k, x in zip(kinds, n, strict=True)])
    df["factor"] = factor
    kernel = df["kernel_ns"].to_numpy(dtype=float)
    sync = np.where(multi, df["last_end"] - df["last_start"], math.nan).astype(float)
    df["sync_ns"] = sync
    df["wait_ns"] = np.where(multi, np.maximum(kernel - sync, 0), math.nan)
    early = multi & (df["first_end"].to_numpy() < df["last_start"].to_numpy())
    if early.any():
        notes.append(f"{int(early.sum())} collectives had a rank's kernel end before the last "
                     "rank's began (the library buffered the message, as a broadcast's root "
                     "may): their synchronized time understates the transfer; kernel time "
                     "is the bound on the other side")
    zero = (kernel <= 0) | (multi & (sync <= 0))
    if zero.any():
        notes.append(f"{int(zero.sum())} collectives of zero duration: no bandwidth")
    with np.errstate(divide="ignore", invalid="ignore"):
        df["algbw_kernel_gbps"] = np.where(kernel > 0, nbytes / kernel, math.nan)
        df["algbw_sync_gbps"] = np.where(sync > 0, nbytes / sync, math.nan)
    df["busbw_kernel_gbps"] = df["algbw_kernel_gbps"] * factor
    df["busbw_sync_gbps"] = df["algbw_sync_gbps"] * factor
    df["basis"] = np.where(multi, "sync", "kernel")
    df["busbw_gbps"] = np.where(multi, df["busbw_sync_gbps"], df["busbw_kernel_gbps"])
    return df, notes


def _ceilings(out: pd.DataFrame, parts: Sequence[CommRank], link_gbps: float | None,
              measured_gbps: float | None) -> tuple[dict[str, Ceiling], list[str]]:
    dev = next((p.device for p in parts if p.device is not None), None)
    local = max((p.local_gpus for p in parts), default=0)
    ceilings: dict[str, Ceiling] = {}
    notes: list[str] = []
    for group, sub in out.groupby("group", sort=True):
        listed = next((s for s in sub["pg_ranks"] if s), "")
        ranks = [int(x) for x in listed.split(",")] if listed else []
        c, note = group_ceiling(dev, ranks, local, override_gbps=link_gbps,
                                measured_gbps=measured_gbps)
        if c is not None:
            ceilings[str(group)] = c
        if note and note not in notes:
            notes.append(note)
    for c in {c.link: c for c in ceilings.values()}.values():
        if c.note and c.note not in notes:
            notes.append(c.note)
    return ceilings, notes
