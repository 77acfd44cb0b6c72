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
:mod:`~traceforge.analyzers.costs.ceilings`; this module groups them into the tables.
"""

from __future__ import annotations

import hashlib
import math
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
from traceforge.analyzers.names.kernel_names import short_name
from traceforge.errors import AnalysisError, UsageError
from traceforge.model import Tables, Trace, distinct, object_frame

#: Default ``target_pct``: the share of the ceiling a well-tuned kernel reaches.
TARGET_PCT = 80.0
#: ``by`` values of :func:`roofline`.
BY: tuple[str, ...] = ("op", "kernel", "class")

_METRICS = ("time_us", "modelled_pct", "gflops", "gbytes", "intensity", "tflops_per_s",
            "tb_per_s", "dtype", "ridge", "bound", "pct_of_bound", "pct_of_measured",
            "saved_us", "saved_measured_us", "work")
#: Columns of :attr:`RooflineReport.table` per ``by``.
COLUMNS: dict[str, tuple[str, ...]] = {
    "op": ("op", "calls", "kernels", *_METRICS),
    "kernel": ("kernel", "op", "op_share_pct", "kernels", *_METRICS, "full_name"),
    "class": ("class", "kernels", *_METRICS),
}


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


def _dominant(codes: np.ndarray, n: int, values: np.ndarray, weight: np.ndarray
              ) -> np.ndarray:
    """Per group (``codes`` of each row, 0..n-1; -1 in none), the value in ``values``
    carrying the most ``weight`` ("" where no row has weight and a value). Ties go to the
    (group, value) pair met first, as a ``groupby(sort=False)`` sum sorted stably."""
    out = np.empty(n, dtype=object)
    out.fill("")
    # The rows with weight and a group only (most have no weight: at 10M activities a
    # table of every row and a groupby on two string columns took seconds), the values
    # numbered before the blank ones are left out (a test of each row's string, else).
    at = np.flatnonzero((weight > 0) & (codes >= 0))
    vc, vu = pd.factorize(values[at])
    if not len(vu):
        return out
    keep = vc >= 0
    keep[keep] = (vu != "")[vc[keep]]
    at, vc = at[keep], vc[keep]
    pc, pairs = pd.factorize(codes[at] * np.int64(len(vu)) + vc)
    sums = np.bincount(pc, weights=weight[at], minlength=len(pairs))
    order = np.argsort(-sums, kind="stable")
    _, best = np.unique(pairs[order] // len(vu), return_index=True)
    win = pairs[order[best]]
    out[win // len(vu)] = vu[win % len(vu)]
    return out


def _work(reason: str) -> str:
    """A row's ``work`` for the unmodelled part's reason: says the work is unknown and why."""
    if not reason or reason.startswith(("work unknown", "FLOPs from")):
        return reason
    return reason if "unknown" in reason.split(":")[0] else f"work unknown: {reason}"


def _group(k: pd.DataFrame, keys: tuple[np.ndarray, np.ndarray], key: str,
           device: DevicePeaks | None, shared: bool = False) -> pd.DataFrame:
    """Aggregate activities by their ``keys`` (:func:`_keys`: each row's code, -1 in no
    group, and the groups' values) into the roofline columns, the group column named
    ``key``; ``shared``: count the FLOPs of ``flops_only`` activities (a step's eager
    FLOPs, per op only)."""
    if k.empty:
        empty: pd.DataFrame = pd.DataFrame()
        return empty
    m = k["modelled"].to_numpy(dtype=bool)
    fo = (k["flops_only"].to_numpy(dtype=bool) if shared and "flops_only" in k
          else np.zeros(len(k), dtype=bool))
    dur = k["dur"].to_numpy().astype(float)
    # The keys numbered once (first appearance, as ``groupby(sort=False)``), and every
    # sum a ``bincount`` of the codes: at 10M activities each pandas groupby of the
    # codes took ~1 s, and the string keys were hashed again for every groupby.
    codes, uniques = keys
    n = len(uniques)
    ok = codes >= 0
    rows: slice | np.ndarray = slice(None) if ok.all() else ok  # (a slice: a view)
    c = codes[rows]

    def total(x: np.ndarray) -> np.ndarray:
        return np.bincount(c, weights=x[rows], minlength=n)

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(c[mask[rows]], minlength=n)

    def part(x: np.ndarray) -> np.ndarray:
        # The modelled activities' sum of ``x``, NaN counted as 0 (as pandas sums; a row
        # where it matters, an ideal time unknown, is told by its ``no*`` count).
        return total(np.where(m & ~np.isnan(x), x, 0.0))

    g = {"time": total(dur), "n": np.bincount(c, minlength=n),
         "mod": part(dur), "nmod": count(m), "nfo": count(fo),
         "fot": total(np.where(fo, dur, 0.0)),
         "fofl": total(np.where(fo, np.nan_to_num(k["flops"].to_numpy(dtype=float)), 0.0)),
         "fl": part(k["flops"].to_numpy(dtype=float)),
         "by": part(k["bytes"].to_numpy(dtype=float)),
         "comp": part(k["compute_ns"].to_numpy(dtype=float)),
         "mem": part(k["memory_ns"].to_numpy(dtype=float)),
         "ideal": part(k["ideal_ns"].to_numpy(dtype=float)),
         "noideal": count(m & np.isnan(k["ideal_ns"].to_numpy(dtype=float))),
         "mideal": part(k["ideal_measured_ns"].to_numpy(dtype=float)),
         "nomideal": count(m & np.isnan(k["ideal_measured_ns"].to_numpy(dtype=float))),
         "saved": part(k["saved_ns"].to_numpy(dtype=float)),
         "msaved": part(k["saved_measured_ns"].to_numpy(dtype=float))}
    # Op calls per group: the distinct (group, op call) pairs.
    op_row = k["op_row"].to_numpy()
    with_op = ok & (op_row >= 0)
    calls = (np.bincount(distinct(codes[with_op] * (np.int64(op_row.max()) + 1)
                                  + op_row[with_op]) // (np.int64(op_row.max()) + 1),
                         minlength=n) if with_op.any() else np.zeros(n, dtype=np.int64))
    mod_w = np.where(m, dur, 0.0)
    dtype = _dominant(codes, n, k["dtype"].to_numpy(), mod_w)
    ck = _dominant(codes, n, k["ceiling"].to_numpy(), mod_w)
    # A row with kernels given a step's eager FLOPs (bytes unknown) has no bound: its
    # modelled part alone (memsets, copies) would speak for the whole row.
    has = (g["nmod"] > 0) & (g["noideal"] == 0) & (g["nfo"] == 0)
    mhas = (g["nmod"] > 0) & (g["nomideal"] == 0) & (g["nfo"] == 0)
    mod = g["mod"]
    reason = k["reason"].to_numpy()
    # Why the unmodelled part of each row is unknown: its largest reason by time (first
    # that of the activities given a step's eager FLOPs, where some are).
    why = _dominant(codes, n, reason, np.where(~m & ~fo, dur, 0.0))
    if fo.any():
        dtype = _dominant(codes, n, k["dtype"].to_numpy(), np.where(m | fo, dur, 0.0))
        first = _dominant(codes, n, reason, np.where(fo, dur, 0.0))
        why = np.where(first != "", first, why)
    flt = mod + g["fot"]
    fl_all = g["fl"] + g["fofl"]
    time = g["time"]
    # A row with kernels of unknown work and no known FLOPs has unknown FLOPs, not zero.
    nofl = (g["n"] > g["nmod"] + g["nfo"]) & (fl_all == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = pd.DataFrame({
            key: uniques,
            "calls": calls,
            "kernels": g["n"],
            "time_us": time / 1e3,
            "modelled_pct": np.where(time > 0, 100.0 * mod / np.where(time > 0, time, 1),
                                     np.where(g["nmod"] > 0, 100.0, 0.0)),
            "gflops": np.where(((g["nmod"] + g["nfo"]) > 0) & ~nofl, fl_all / 1e9, np.nan),
            "gbytes": np.where(g["nmod"] > 0, g["by"] / 1e9, np.nan),
            "intensity": np.where((g["by"] > 0) & ~nofl & (g["nfo"] == 0), g["fl"] / g["by"],
                                  np.nan),
            "tflops_per_s": np.where((flt > 0) & ~nofl, fl_all / np.where(flt > 0, flt, 1) / 1e3,
                                     np.nan),
            "tb_per_s": np.where(mod > 0, g["by"] / mod / 1e3, np.nan),
            "dtype": dtype,
            "ridge": [(device.ridge(c) or math.nan) if device and c and f > 0 else math.nan
                      for c, f in zip(ck.tolist(), g["fl"].tolist(), strict=True)],
            "bound": np.where(has, np.where(g["comp"] >= g["mem"], "compute", "memory"), ""),
            "pct_of_bound": np.where(has & (mod > 0), 100.0 * g["ideal"] / mod, np.nan),
            "pct_of_measured": np.where(mhas & (mod > 0), 100.0 * g["mideal"] / mod, np.nan),
            "saved_us": np.where(has, g["saved"] / 1e3, np.nan),
            "saved_measured_us": np.where(mhas, g["msaved"] / 1e3, np.nan),
            "work": [_work(str(w)) for w in why.tolist()],
        })
    res: pd.DataFrame = out.sort_values(["time_us", key], ascending=[False, True],
                                        kind="stable").reset_index(drop=True)
    return res


def _keys(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First-appearance codes of a column's values (-1: missing) and the values."""
    codes, uniques = pd.factorize(values)
    return np.asarray(codes, dtype=np.int64), np.asarray(uniques, dtype=object)


def _op_keys(k: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_keys` of each activity's op, "(no op)" for an activity no op launched (the
    blank taken out of the few distinct names, not tested row by row)."""
    codes, ops = _keys(k["op_name"].to_numpy())
    blank = np.flatnonzero(ops == "")
    if len(blank):
        ops[blank] = "(no op)"
        if (ops == "(no op)").sum() > 1:  # an op of that name too: one group, as before
            merged, ops = _keys(ops)
            codes = np.where(codes >= 0, merged[codes], -1)
    return codes, ops


def _sorted_codes(codes: np.ndarray, values: np.ndarray, rows: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_keys` of ``rows`` renumbered in the values' sorted order (as
    ``pd.factorize(sort=True)`` of their values, without hashing every row again)."""
    c = codes[rows]
    have = distinct(c[c >= 0])
    order = have[np.argsort(values[have], kind="stable")]
    new = np.full(len(values) + 1, -1, dtype=np.int64)
    new[order] = np.arange(len(order))
    return new[c], values[order]  # (-1 indexes the last: missing stays -1)


def _table(k: pd.DataFrame, by: str, device: DevicePeaks | None) -> pd.DataFrame:
    if by == "op":
        t = _group(k, _op_keys(k), "op", device, shared=True)
    elif by == "class":
        t = _group(k, _keys(k["cls"].to_numpy()), "class", device)
    else:
        t = _group(k, _keys(k["name"].to_numpy()), "kernel", device)
        if not t.empty:
            oc, ops = _op_keys(k)
            top_op = (object_frame({"name": k["name"].to_numpy(),
                                    "op": np.append(ops, [None])[oc],
                                    "dur": k["dur"].to_numpy()})
                      .groupby(["name", "op"])["dur"].sum().reset_index()
                      .sort_values("dur", ascending=False).drop_duplicates("name")
                      .set_index("name")["op"])
            share = k.groupby("name")["op_share"].mean()
            t["full_name"] = t["kernel"]
            t["op"] = t["kernel"].map(top_op)
            t["op_share_pct"] = 100.0 * t["kernel"].map(share)
            t["kernel"] = t["kernel"].map(short_name)
    if t.empty:
        t = pd.DataFrame({c: pd.Series([], dtype=object) for c in COLUMNS[by]})
    res: pd.DataFrame = t[list(COLUMNS[by])]
    return res


def _unmodelled(k: pd.DataFrame, total_ns: float) -> pd.DataFrame:
    """The unmodelled time by (op, reason), the largest first."""
    cols = ["op", "reason", "kernels", "time_us", "pct"]
    um = np.flatnonzero(~k["modelled"].to_numpy(dtype=bool))
    # The rows' keys numbered (sorted, as the sorted groupby it replaces) and summed by
    # their pairs' codes: at 10M kernels of unknown work, a groupby on two string
    # columns and a copy of the rows' three columns took seconds.
    oc, ou = _sorted_codes(*_op_keys(k), um)
    rc, ru = pd.factorize(k["reason"].to_numpy()[um], sort=True)
    has = (oc >= 0) & (rc >= 0)
    if not has.any():
        none: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
        return none
    inv, pairs = pd.factorize(oc[has] * np.int64(len(ru)) + rc[has])
    order = np.argsort(pairs)  # the pairs sorted: (op, reason) in order
    rank = np.empty(len(pairs), dtype=np.int64)
    rank[order] = np.arange(len(pairs))
    inv, pairs = rank[inv], pairs[order]
    dur = k["dur"].to_numpy()[um[has]]
    # Durations are whole ns: their float sums are exact (below 2**53 ns, 104 days).
    time_ns = np.bincount(inv, weights=dur, minlength=len(pairs))
    g = object_frame({"op": ou[pairs // len(ru)], "reason": ru[pairs % len(ru)],
                      "kernels": np.bincount(inv, minlength=len(pairs)),
                      "time_ns": time_ns.astype(dur.dtype) if dur.dtype.kind in "iu"
                      else time_ns})
    g["time_us"] = g["time_ns"] / 1e3
    g["pct"] = 100.0 * g["time_ns"] / total_ns if total_ns else math.nan
    res: pd.DataFrame = g.sort_values("time_ns", ascending=False)[cols].reset_index(drop=True)
    return res


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
    un = _unmodelled(k, total)
    if total and total - mod > 0:
        top = "; ".join(f"{r.op} ({r.reason}): {r.time_us:,.0f} us"
                        for r in un.head(3).itertuples(index=False))
        notes.append(f"Unmodelled time: {(total - mod) / 1e3:,.0f} us "
                     f"({100 * (total - mod) / total:.1f}% of GPU time) — {top}.")
    if acts.empty:
        notes.append("No GPU activity in the selection: nothing to report.")
    return RooflineReport(_table(k, by, dev), k, by, dev, peaks, target_pct, totals, un,
                          tuple(notes))


# -- views for reports and annotations ---------------------------------------------------
def _by_op(report: RooflineReport) -> pd.DataFrame:
    """The per-op table: the report's own when it is by op (not grouped again)."""
    return report.table if report.by == "op" else _table(report.kernels, "op", report.device)


def regroup(report: RooflineReport, by: str) -> pd.DataFrame:
    """The report's activities as the table :func:`roofline` gives for ``by`` (op, kernel
    or class), without measuring them again: a report shows several groupings of one run."""
    if by not in BY:
        raise UsageError(f"--by {by!r}: choose from {', '.join(BY)}")
    return _table(report.kernels, by, report.device)


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
