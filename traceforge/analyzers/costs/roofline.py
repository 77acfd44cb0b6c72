"""Roofline: how far each op, kernel and kernel class runs from the device's ceilings.

Every GPU activity gets the work (FLOPs, bytes, dtype) of the op call that launched it
(:mod:`traceforge.analyzers.costs.flops`); an op call that launched several kernels shares its
work among them in proportion to their durations. Device-to-device copies and memsets
carry their own byte counts. An activity's *ideal time* is the roofline's lower bound
``max(FLOPs / peak, bytes / bandwidth)`` for its dtype; it is compute-bound when the first
term is the larger (its intensity is past the dtype's ridge point ``peak / bandwidth``).

* ``pct_of_bound`` = ideal time / measured time: the share of the ceiling it reaches
  (= achieved TFLOP/s over peak when compute-bound, TB/s over bandwidth when memory-bound).
* ``saved_us`` = what running at ``target_pct`` % of the ceiling would save:
  ``max(0, time - ideal / target)`` summed over activities.
* Activities whose work is unknown (no launching op, no shapes, an op outside the model,
  a CUDA-graph replay) count as *unmodelled time*: shown in every table, never dropped;
  each row's ``work`` says why its unmodelled part is unknown (``unknown: graph replay,
  no shapes recorded``), blank when all of it is modelled.
* Compiled regions and graph replays: :mod:`~traceforge.analyzers.costs.replays` (the
  same kernel launched outside the graph with shapes; ``flops_from``: an eager trace's
  FLOPs per step, counted in the per-op table only, bytes unknown).

Peaks come from the shipped datasheet table (:mod:`traceforge.analyzers.costs.devices`) and,
when given, from a measured peaks file (``traceforge calibrate``): ``pct_of_measured`` and
``saved_measured_us`` use those. Which op launched an activity and which step it belongs
to come from the shared timeline model, in
:func:`~traceforge.analyzers.costs.activity_work.timeline` only. The work per activity comes
from :mod:`~traceforge.analyzers.costs.activity_work`, the ceilings and ideal times from
:mod:`~traceforge.analyzers.costs.ceilings`; :mod:`~traceforge.analyzers.costs.roofline_groups`
groups them into the tables, and this module puts the report together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from traceforge.analyzers.costs.activity_work import (
    WORK_COLUMNS,
    activity_work,
    select,
    timeline,
)
from traceforge.analyzers.costs.ceilings import (
    TF32_EVIDENCE,
    measured_key,
    measured_note,
    resolve_device,
    with_ceilings,
)
from traceforge.analyzers.costs.devices import DevicePeaks, MeasuredPeaks
from traceforge.analyzers.costs.replays import flops_from as shared_flops
from traceforge.analyzers.costs.replays import step_flops
from traceforge.analyzers.costs.roofline_groups import COLUMNS, table, unmodelled
from traceforge.errors import AnalysisError, UsageError
from traceforge.model import Tables, Trace

#: Default ``target_pct``: the share of the ceiling a well-tuned kernel reaches.
TARGET_PCT = 80.0
#: ``by`` values of :func:`roofline`.
BY: tuple[str, ...] = ("op", "kernel", "class")

# -- the report --------------------------------------------------------------------------
@dataclass(frozen=True)
class RooflineReport(Tables):
    """:func:`roofline`'s result.

    ``table``: one row per op / kernel / class (:data:`COLUMNS`), by GPU time.
    ``kernels``: one row per GPU activity (``row`` = event row), with its work, ceilings,
    achieved ``tflops_per_s``/``tb_per_s``, ``bound``, ``pct_of_bound`` and ``saved_ns``.
    ``totals``: time_ns, modelled_ns, unmodelled_ns, flops, bytes, saved_ns,
    saved_measured_ns, flops_from_eager (FLOPs given by ``flops_from``, not in ``flops``).
    ``unmodelled``: op, reason, kernels, time_us, pct (of all time).
    """

    table: pd.DataFrame
    kernels: pd.DataFrame
    by: str
    device: DevicePeaks | None
    measured: MeasuredPeaks | None
    target_pct: float
    totals: dict[str, float]
    unmodelled: pd.DataFrame
    notes: tuple[str, ...] = field(default=())


def roofline(trace: Trace, *, by: str = "op", steps: Sequence[int] | None = None,
             device: str | DevicePeaks | None = None, peaks: MeasuredPeaks | None = None,
             target_pct: float = TARGET_PCT, flops_from: Trace | None = None
             ) -> RooflineReport:
    """Achieved TFLOP/s and TB/s per op (``by="op"``), kernel or kernel class against the
    device's ceilings (see the module docstring for every definition).

    ``device``: a device key or name overriding the trace's metadata (unknown: a note, and
    achieved rates only). ``peaks``: measured ceilings (:func:`~traceforge.analyzers.
    devices.load_peaks`). ``target_pct``: the share of the ceiling ``saved_us`` aims at.
    ``flops_from``: an eager trace of the same model whose FLOPs per step stand for the
    compiled and replayed kernels' (:func:`~traceforge.analyzers.costs.replays.flops_from`).
    """
    if by not in BY:
        raise UsageError(f"--by {by!r}: choose from {', '.join(BY)}")
    if not 0 < target_pct <= 100:
        raise UsageError(f"--target-pct {target_pct}: must be in (0, 100]")
    if flops_from is not None:
        return _roofline(trace, by, steps, device, peaks, target_pct, flops_from)
    # A derived table of the trace: a later run on the cached trace with the same options
    # (the ceilings by value: a device's or a peaks file's numbers) reads it back.
    step_key = None if steps is None else tuple(int(s) for s in steps)
    ceilings = hashlib.sha1(repr((device, peaks)).encode()).hexdigest()
    kept = trace.derived(f"roofline|{by}|{step_key}|{ceilings}|{target_pct!r}",
                         lambda: _own_columns(trace, _roofline(trace, by, steps, device,
                                                               peaks, target_pct, None)))
    return _with_activity(trace, steps, kept)


def _own_columns(trace: Trace, rep: RooflineReport) -> RooflineReport:
    """``rep`` with ``kernels`` cut to ``row`` and the columns the roofline made (the work
    and the ceilings): what is kept, in memory and beside the trace. The timeline's own
    columns (some 24 of 48) are the timeline's, put back by :func:`_with_activity`."""
    acts = set(timeline(trace)[0].columns)
    own = ["row", *(c for c in rep.kernels.columns
                    if c != "row" and (c not in acts or c in WORK_COLUMNS))]
    return replace(rep, kernels=rep.kernels[own])


def _with_activity(trace: Trace, steps: Sequence[int] | None,
                   kept: RooflineReport) -> RooflineReport:
    """The report of :func:`_own_columns` with the activities' timeline columns again (its
    ``kernels`` equal to what :func:`_roofline` made: the columns in its order)."""
    acts, win = timeline(trace)
    acts, _ = select(acts, win, steps, trace.meta.path)
    own = kept.kernels
    if len(acts) != len(own) or not np.array_equal(acts["row"].to_numpy(),
                                                   own["row"].to_numpy()):
        raise AnalysisError(f"{trace.meta.path}: the stored roofline is not of this "
                            "trace's activities")  # (never: the store keys by the rows)
    whole = acts.assign(**{c: own[c].set_axis(acts.index) for c in own.columns if c != "row"})
    return replace(kept, kernels=whole)


def _roofline(trace: Trace, by: str, steps: Sequence[int] | None,
              device: str | DevicePeaks | None, peaks: MeasuredPeaks | None,
              target_pct: float, flops_from: Trace | None) -> RooflineReport:
    acts, win = timeline(trace)
    acts, _ = select(acts, win, steps, trace.meta.path)
    dev, notes = resolve_device(trace, device, acts)
    notes += measured_note(peaks, dev, trace)
    if dev is not None:
        notes += list(dev.notes)
    k, wn = activity_work(trace, acts)
    # A roofline needs bytes too: calls recorded without dtypes (emit_nvtx under nsys)
    # have FLOPs only, and stay out of the modelled share.
    nob = k["modelled"].to_numpy() & k["bytes"].isna().to_numpy()
    if nob.any():
        k = k.assign(modelled=k["modelled"].to_numpy() & ~nob,
                     reason=np.where(nob, "bytes unknown: no input dtypes recorded",
                                     k["reason"].to_numpy()))
    notes += wn
    if flops_from is not None:
        ek, _ = activity_work(flops_from, timeline(flops_from)[0])
        k, fn = shared_flops(k, step_flops(ek), flops_from.meta.path or "the eager trace",
                             steps)
        notes += fn
    k = with_ceilings(k, dev, peaks, target_pct / 100.0)
    total = float(k["dur"].sum())
    mod = float(k.loc[k["modelled"], "dur"].sum())
    totals = {
        "time_ns": total, "modelled_ns": mod, "unmodelled_ns": total - mod,
        "flops": float(k.loc[k["modelled"], "flops"].sum()),
        "bytes": float(k.loc[k["modelled"], "bytes"].sum()),
        "saved_ns": float(k["saved_ns"].sum(min_count=1)),
        "saved_measured_ns": float(k["saved_measured_ns"].sum(min_count=1)),
        "flops_from_eager": (float(k.loc[k["flops_only"], "flops"].sum())
                             if "flops_only" in k else 0.0),
    }
    un = unmodelled(k, total)
    if total and total - mod > 0:
        top = "; ".join(f"{r.op} ({r.reason}): {r.time_us:,.0f} us"
                        for r in un.head(3).itertuples(index=False))
        notes.append(f"Unmodelled time: {(total - mod) / 1e3:,.0f} us "
                     f"({100 * (total - mod) / total:.1f}% of GPU time) — {top}.")
    if acts.empty:
        notes.append("No GPU activity in the selection: nothing to report.")
    return RooflineReport(table(k, by, dev), k, by, dev, peaks, target_pct, totals, un,
                          tuple(notes))


# -- views for reports and annotations ---------------------------------------------------
def _by_op(report: RooflineReport) -> pd.DataFrame:
    """The per-op table: the report's own when it is by op (not grouped again)."""
    return report.table if report.by == "op" else table(report.kernels, "op", report.device)


def regroup(report: RooflineReport, by: str) -> pd.DataFrame:
    """The report's activities as the table :func:`roofline` gives for ``by`` (op, kernel
    or class), without measuring them again: a report shows several groupings of one run."""
    if by not in BY:
        raise UsageError(f"--by {by!r}: choose from {', '.join(BY)}")
    return table(report.kernels, by, report.device)


def kernel_rates(report: RooflineReport) -> pd.DataFrame:
    """Per GPU activity, indexed by its event row: what ``annotate`` puts on each kernel.

    Columns: op, flops, bytes, intensity, tflops_per_s, tb_per_s, dtype, bound,
    pct_of_bound, pct_of_measured (NaN where unknown).
    """
    k = report.kernels
    cols = ["op_name", "flops", "bytes", "intensity", "tflops_per_s", "tb_per_s", "dtype",
            "bound", "pct_of_bound", "pct_of_measured"]
    # The columns first, then the index (not every column of every activity re-indexed).
    out: pd.DataFrame = k[["row", *cols]].set_index("row").rename(columns={"op_name": "op"})
    out.index.name = "row"
    return out


def chart_data(report: RooflineReport) -> dict[str, Any]:
    """What a roofline chart plots: one point per op with known FLOPs, and the ceilings.

    ``points``: label, intensity (FLOP/byte), tflops_per_s, time_us, dtype, bound,
    pct_of_bound (ops that move data only have no intensity and are counted in
    ``bytes_only``). ``ceilings``: per dtype key used, peak_tflops, hbm_tb_s, ridge, and
    the measured ones when a peaks file was given.
    """
    k = report.kernels
    by_op = _by_op(report)
    pts = by_op[(by_op["gflops"] > 0) & by_op["intensity"].notna()]
    points = [{"label": str(r.op), "intensity": float(r.intensity),
               "tflops_per_s": float(r.tflops_per_s), "time_us": float(r.time_us),
               "dtype": str(r.dtype), "bound": str(r.bound),
               "pct_of_bound": float(r.pct_of_bound)} for r in pts.itertuples(index=False)]
    keys = [c for c in pd.unique(k.loc[k["modelled"] & (k["flops"] > 0), "ceiling"]) if c]
    ceilings = []
    for c in keys:
        d = report.device
        m = report.measured
        ceilings.append({
            "dtype": str(c),
            "peak_tflops": d.peak(c) if d else None,
            "hbm_tb_s": d.hbm_tb_s if d else None,
            "ridge": d.ridge(c) if d else None,
            "measured_tflops": m.peak(measured_key(c)) if m else None,
            "measured_tb_s": m.memory_tb_s if m else None,
        })
    bytes_only = by_op[(by_op["gflops"] == 0) & (by_op["gbytes"] > 0)]
    return {
        "device": report.device.name if report.device else "",
        "points": points,
        "ceilings": ceilings,
        "bytes_only": {"ops": len(bytes_only), "time_us": float(bytes_only["time_us"].sum())},
        "unmodelled_us": report.totals["unmodelled_ns"] / 1e3,
    }


def below_bound(report: RooflineReport, n: int = 5) -> pd.DataFrame:
    """The ops with the most time at stake: furthest below their bound, weighted by time.

    Columns: op, time_us, pct_of_bound, bound, dtype, tflops_per_s, tb_per_s, saved_us
    (at the report's target_pct), work (why part of it is unknown), sorted by saved_us.
    Input for the report's findings.
    """
    t = _by_op(report)
    t = t[t["saved_us"].notna() & (t["saved_us"] > 0)]
    cols = ["op", "time_us", "pct_of_bound", "bound", "dtype", "tflops_per_s", "tb_per_s",
            "saved_us", "work"]
    res: pd.DataFrame = t.sort_values("saved_us", ascending=False)[cols].head(n)
    return res.reset_index(drop=True)  # type: ignore[no-any-return]


__all__ = ["BY", "COLUMNS", "TARGET_PCT", "TF32_EVIDENCE", "WORK_COLUMNS", "RooflineReport",
           "activity_work", "below_bound", "chart_data", "kernel_rates", "measured_key",
           "measured_note", "regroup", "resolve_device", "roofline", "select", "timeline",
           "with_ceilings"]
