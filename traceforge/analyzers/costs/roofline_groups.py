"""The roofline's tables: activities (their work, ceilings and ideal times) grouped by
op, kernel or kernel class, and the unmodelled time by op and reason.

Each key is numbered once and every sum is a ``bincount`` of the codes: a pandas groupby
hashes each row's string again (seconds per grouping at 10M activities). Definitions of
every column: :mod:`~traceforge.analyzers.costs.roofline`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from traceforge.analyzers.costs.devices import DevicePeaks
from traceforge.analyzers.names.kernel_names import short_name
from traceforge.frames import object_frame
from traceforge.model import distinct

_METRICS = ("time_us", "modelled_pct", "gflops", "gbytes", "intensity", "tflops_per_s",
            "tb_per_s", "dtype", "ridge", "bound", "pct_of_bound", "pct_of_measured",
            "saved_us", "saved_measured_us", "work")
#: Columns of the table per ``by`` (:attr:`~traceforge.analyzers.costs.roofline.
#: RooflineReport.table`).
COLUMNS: dict[str, tuple[str, ...]] = {
    "op": ("op", "calls", "kernels", *_METRICS),
    "kernel": ("kernel", "op", "op_share_pct", "kernels", *_METRICS, "full_name"),
    "class": ("class", "kernels", *_METRICS),
}


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


def table(k: pd.DataFrame, by: str, device: DevicePeaks | None) -> pd.DataFrame:
    """The roofline table of activities ``k`` (:func:`~traceforge.analyzers.costs.ceilings.
    with_ceilings` columns) grouped ``by`` op, kernel or class (:data:`COLUMNS`)."""
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


def unmodelled(k: pd.DataFrame, total_ns: float) -> pd.DataFrame:
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
    # The pairs sorted: (op, reason) in order.
    inv, pairs = pd.factorize(oc[has] * np.int64(len(ru)) + rc[has], sort=True)
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


__all__ = ["COLUMNS", "table", "unmodelled"]
