"""The ``comm`` answer: collectives by kind x message size, the slowest, a size histogram,
and findings.

Sizes fall in log2 buckets (``[2^k, 2^(k+1))`` bytes, labelled by their lower bound).
``time_ns`` of an instance is its mean kernel time over the matched ranks (what the
ranks' communication kernels occupied); ``wait_pct`` is the share of it spent waiting
for the slowest rank (:mod:`.instances`); busbw percentiles and ``ceiling_pct`` (median
busbw over the link ceiling) use each instance's ``busbw_gbps`` (synchronized time
where the ranks were matched, else kernel time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.communication.instances import (
    CommRank,
    CommRun,
    comm_reduce,
    comm_summary,
)
from traceforge.analyzers.communication.sizes import KINDS
from traceforge.model import Trace

#: Columns of :attr:`CommReport.table`.
TABLE_COLUMNS = ("kind", "size", "min_bytes", "count", "total_ns", "busbw_p10_gbps",
                 "busbw_median_gbps", "busbw_p90_gbps", "ceiling_gbps", "ceiling_pct",
                 "wait_pct")
#: Columns of :attr:`CommReport.slowest`.
SLOWEST_COLUMNS = ("instance", "kind", "bytes", "kernel_ns", "sync_ns", "wait_ns",
                   "busbw_gbps", "ceiling_pct", "last_rank", "ranks", "group")
#: Columns of :attr:`CommReport.by_rank`.
RANK_COLUMNS = ("rank", "collectives", "kernel_ns", "wait_ns", "wait_pct", "last_count",
                "busbw_kernel_median_gbps")
#: Columns of :attr:`CommReport.histogram`.
HISTOGRAM_COLUMNS = ("size", "min_bytes", "count", "count_pct", "total_bytes", "total_ns",
                     "time_pct")
#: Messages below this many bytes are latency-bound on every link (NCCL's LL protocol
#: range); the finding on small messages counts them.
SMALL_BYTES = 64 * 1024
#: Messages from this size up should approach the link; the finding on slow large
#: messages looks at them.
LARGE_BYTES = 16 * 2**20
#: A large-message bucket whose median busbw is below this % of the ceiling is a finding.
SLOW_PCT = 50.0
#: A wait share of collective time above this % is a finding.
WAIT_PCT = 25.0


@dataclass(frozen=True)
class CommReport:
    """:func:`comm_report`: the run's collectives (``run``), ``table`` (kind x size),
    ``slowest`` (the instances that took longest), ``histogram`` (message sizes),
    ``findings`` and ``notes`` in plain words; ``by_rank``: per rank, its collective
    kernels' time, how much of it was waiting for the slowest rank, how often it was that
    rank (``last_count``), and its median busbw on its own kernel time."""

    run: CommRun
    table: pd.DataFrame
    slowest: pd.DataFrame
    histogram: pd.DataFrame
    findings: tuple[str, ...]
    notes: tuple[str, ...]
    by_rank: pd.DataFrame = field(default_factory=pd.DataFrame)


def size_label(nbytes: float) -> str:
    """A bucket's lower bound in binary units ("512 B", "4 KiB", "16 MiB"); "?" for NaN."""
    if not nbytes >= 1:
        return "?" if math.isnan(nbytes) else "0 B"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 2**shift:
            return f"{nbytes / 2**shift:g} {unit}"
    return f"{nbytes:g} B"


def bucket(nbytes: np.ndarray) -> np.ndarray:
    """Each size's log2 bucket lower bound (bytes); NaN for unknown, 0 for empty."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.where(nbytes >= 1, 2.0 ** np.floor(np.log2(np.where(nbytes >= 1, nbytes, 1))),
                      np.where(nbytes >= 0, 0.0, math.nan))
    out: np.ndarray = lo
    return out


def comm_report(parts: Sequence[CommRank], *, link_gbps: float | None = None,
                measured_gbps: float | None = None, top: int = 10) -> CommReport:
    """The ``comm`` answer from the ranks' summaries (:func:`~.instances.comm_summary`)."""
    run = comm_reduce(parts, link_gbps=link_gbps, measured_gbps=measured_gbps)
    notes = list(run.notes)
    if len(parts) == 1 and len(run.instances):
        notes.insert(0, "one rank's trace: kernel time only, which includes any wait for "
                        "other ranks; give every rank's trace for synchronized time")
    inst = run.instances.assign(min_bytes=bucket(run.instances["bytes"].to_numpy(float)))
    table = _by_kind_size(inst)
    slowest = inst.sort_values("kernel_ns", ascending=False, kind="stable").head(top)
    return CommReport(run, table,
                      cast("pd.DataFrame", slowest[list(SLOWEST_COLUMNS)].reset_index(drop=True)),
                      _histogram(inst), tuple(_findings(inst, table, run)), tuple(notes),
                      _by_rank(run))


def _by_rank(run: CommRun) -> pd.DataFrame:
    m = run.members
    if m.empty:
        return cast("pd.DataFrame", pd.DataFrame(columns=list(RANK_COLUMNS)))
    g = m.groupby("rank", sort=True)
    k = g["kernel_ns"].sum()
    w = g["wait_ns"].sum()
    last = run.instances[run.instances["n_ranks"] > 1]["last_rank"].value_counts()
    out = pd.DataFrame({
        "rank": k.index.to_numpy(), "collectives": g.size().to_numpy(),
        "kernel_ns": k.to_numpy(), "wait_ns": w.to_numpy(),
        "wait_pct": np.where(k.to_numpy() > 0, 100 * w.to_numpy() / np.maximum(k.to_numpy(),
                                                                               1), np.nan),
        "last_count": last.reindex(k.index, fill_value=0).to_numpy(),
        "busbw_kernel_median_gbps": g["busbw_kernel_gbps"].median().to_numpy()})
    return cast("pd.DataFrame", out[list(RANK_COLUMNS)])


def _q(s: pd.Series, q: float) -> float:
    v = s.dropna()
    return float(np.quantile(v, q)) if len(v) else math.nan


def _by_kind_size(inst: pd.DataFrame) -> pd.DataFrame:
    rows = []
    order = {k: i for i, k in enumerate(KINDS)}
    keyed = inst.assign(_b=inst["min_bytes"].fillna(-1.0))
    for (kind, b), g in keyed.groupby(["kind", "_b"], sort=False):
        med = _q(g["busbw_gbps"], 0.5)
        ceil = g["ceiling_gbps"].dropna()
        c = float(ceil.iloc[0]) if len(ceil) else math.nan
        t = float(g["kernel_ns"].sum())
        w = float(g["wait_ns"].sum()) if g["wait_ns"].notna().any() else math.nan
        rows.append({
            "kind": kind, "size": size_label(float(b)) if b >= 0 else "?",
            "min_bytes": b if b >= 0 else math.nan, "count": len(g), "total_ns": t,
            "busbw_p10_gbps": _q(g["busbw_gbps"], 0.1), "busbw_median_gbps": med,
            "busbw_p90_gbps": _q(g["busbw_gbps"], 0.9), "ceiling_gbps": c,
            "ceiling_pct": 100 * med / c if c > 0 and not math.isnan(med) else math.nan,
            "wait_pct": 100 * w / t if t > 0 and not math.isnan(w) else math.nan,
            "_k": order.get(str(kind), len(order))})
    if not rows:
        return cast("pd.DataFrame", pd.DataFrame(columns=list(TABLE_COLUMNS)))
    out = pd.DataFrame(rows).sort_values(["_k", "min_bytes"], na_position="last",
                                         kind="stable")
    return cast("pd.DataFrame", out[list(TABLE_COLUMNS)].reset_index(drop=True))


def _histogram(inst: pd.DataFrame) -> pd.DataFrame:
    if inst.empty:
        return cast("pd.DataFrame", pd.DataFrame(columns=list(HISTOGRAM_COLUMNS)))
    keyed = inst.assign(_b=inst["min_bytes"].fillna(-1.0))
    g = keyed.groupby("_b", sort=True)
    n = g.size()
    t = g["kernel_ns"].sum()
    out = pd.DataFrame({
        "size": [size_label(float(b)) if b >= 0 else "?" for b in n.index],
        "min_bytes": [b if b >= 0 else math.nan for b in n.index],
        "count": n.to_numpy(), "count_pct": 100 * n.to_numpy() / n.sum(),
        "total_bytes": g["bytes"].sum(min_count=1).to_numpy(),
        "total_ns": t.to_numpy(),
        "time_pct": 100 * t.to_numpy() / t.sum() if t.sum() > 0 else math.nan})
    unknown = out["min_bytes"].isna().to_numpy()
    out = pd.concat([out[~unknown], out[unknown]], ignore_index=True)
    return cast("pd.DataFrame", out[list(HISTOGRAM_COLUMNS)])


def _findings(inst: pd.DataFrame, table: pd.DataFrame, run: CommRun) -> list[str]:
    out: list[str] = []
    big = table[(table["min_bytes"] >= LARGE_BYTES) & (table["ceiling_pct"] < SLOW_PCT)]
    caveat = "" if run.matched else (
        " on kernel time, which counts any wait for other ranks (give every rank's trace "
        "to tell the two apart)")
    for _, r in big.sort_values("total_ns", ascending=False).head(3).iterrows():
        link = next(iter(run.ceilings.values())).link if run.ceilings else "the link"
        out.append(
            f"{r['kind']} of {r['size']}+ messages ran at a median busbw of "
            f"{r['busbw_median_gbps']:.0f} GB/s, {r['ceiling_pct']:.0f}% of {link}'s "
            f"{r['ceiling_gbps']:.0f} GB/s ({int(r['count'])} collectives, "
            f"{r['total_ns'] / 1e6:.2f} ms){caveat}: check the transport (NCCL_DEBUG=INFO: "
            "P2P/NVLink or SHM/PCIe?), the algorithm/protocol, and contention with compute")
    sized = inst[inst["bytes"].notna()]
    if len(sized) >= 4:
        small = sized["bytes"] < SMALL_BYTES
        if small.mean() >= 0.5:
            share = 100 * sized.loc[small, "kernel_ns"].sum() / max(sized["kernel_ns"].sum(), 1)
            out.append(
                f"{int(small.sum())} of {len(sized)} collectives move under "
                f"{SMALL_BYTES // 1024} KiB ({share:.0f}% of collective time): latency-bound; "
                "bucket them into fewer, larger collectives (DDP bucket_cap_mb, FSDP "
                "wrapping granularity, coalesced all-reduce)")
    if run.matched:
        t = inst["kernel_ns"].sum()
        w = inst["wait_ns"].sum()
        if t > 0 and 100 * w / t > WAIT_PCT:
            last = inst["last_rank"].value_counts()
            r0 = int(last.index[0])
            out.append(
                f"{100 * w / t:.0f}% of collective kernel time is waiting for the slowest "
                f"rank: rank {r0} started last in {int(last.iloc[0])} of {len(inst)} "
                "collectives (a straggler: look at its compute, data loading, or host)")
    return out


def ceiling_line(r: CommReport) -> str:
    """One line naming the ceilings the % columns are against."""
    cs = {(c.link, c.gbps, c.source) for c in r.run.ceilings.values()}
    if not cs:
        return "Ceiling: none (see the notes)"
    return "Ceiling: " + "; ".join(f"{link} {g:g} GB/s per direction ({s})"
                                   for link, g, s in sorted(cs))


def comm(traces: Trace | Sequence[Trace], *, link_gbps: float | None = None,
         measured_gbps: float | None = None, top: int = 10) -> CommReport:
    """Bandwidth of every collective of one rank's trace or of a run's rank traces
    (``tf.comm``; the ``comm`` verb runs the same through the engine)."""
    ts = [traces] if isinstance(traces, Trace) else list(traces)
    parts = [comm_summary(t, rank=i) for i, t in enumerate(ts)]
    return comm_report(parts, link_gbps=link_gbps, measured_gbps=measured_gbps, top=top)
