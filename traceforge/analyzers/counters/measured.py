"""Measured beside modelled: what the counters say each trace kernel did.

Per trace kernel name (:func:`measured_kernels`): the trace's launches and GPU time, how
many were profiled and matched (:mod:`.join`), the counters' means over the matched
launches (ncu's SM %, DRAM %, tensor-pipe %, occupancy), and per call FLOPs and DRAM bytes
scaled to all the trace's launches of that kernel:

* ``measured_flop``: FLOPs from instruction counts (2 per FMA, 1 per add/mul, tensor-path
  ops), mean per matched launch x the trace's launches;
* ``measured_bytes``: DRAM bytes read and written, the same way;
* ``intensity``: ``measured_flop / measured_bytes``;
* ``tflops_per_s``, ``tb_per_s``: the measured work over the *trace's* GPU time (ncu's own
  durations are not the run's: it locks clocks to base and serializes kernels);
* ``compute_pct``: ``tflops_per_s`` over the device peak of the kernel's precision
  (the tensor dtype with the most ops, else fp32); ``memory_pct``: ``tb_per_s`` over the
  HBM peak; ``limiter``: the larger of the two ("compute" or "memory").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from traceforge.analyzers.costs.devices import DevicePeaks
from traceforge.analyzers.counters.join import Join, join
from traceforge.analyzers.names.kernel_names import display_names
from traceforge.model import Trace, strings

MEASURED_COLUMNS = ("kernel", "full_name", "calls", "matched", "gpu_us", "modelled_gflop",
                    "measured_gflop", "flop_ratio", "modelled_gbytes", "measured_gbytes",
                    "intensity", "tflops_per_s", "tb_per_s", "compute_pct", "memory_pct",
                    "limiter", "sm_pct", "dram_pct", "tensor_pct", "occupancy_pct")
_MEANS = ("flop", "dram_bytes", "sm_pct", "dram_pct", "tensor_pct", "occupancy_pct",
          "duration_ns")


@dataclass(frozen=True)
class Measured:
    """``table``: :data:`MEASURED_COLUMNS` per trace kernel with matched launches;
    ``per_launch``: the matched trace kernels (``row``) with their launch's counters;
    ``join``: the match; ``notes``: what was matched, what was not, and why."""

    table: pd.DataFrame
    per_launch: pd.DataFrame
    join: Join
    notes: tuple[str, ...]


def measured_kernels(trace: Trace, launches: pd.DataFrame, *, counter_notes: Sequence[str] = (),
                     device: DevicePeaks | None = None, skip: int = 0,
                     modelled: pd.DataFrame | None = None,
                     rows: Sequence[int] | np.ndarray | None = None) -> Measured:
    """Profiled ``launches`` (a counter reader's per-launch table, e.g. ``traceforge.formats.
    ncu.read(path).launches``; its notes in ``counter_notes``) joined to ``trace``'s kernels
    (see the module docstring).

    ``modelled``: activity rows (``row``, ``flops``, ``bytes``, ``modelled``) of the
    roofline model, summed per kernel beside the measured figures. ``rows``: the kernel
    rows to total (e.g. those in the selected steps); default every kernel."""
    j = join(trace, launches, skip=skip)
    ev = trace.events
    kern = ev[ev["kind"] == "kernel"]
    if rows is not None:
        kern = kern.loc[kern.index.intersection(pd.Index(rows))]
    # Names as object strings taken through the categories (astype(str) converts every
    # row, and on pandas 3 builds Arrow strings: slow over a large trace's events).
    names = pd.Series(strings(kern["name"]), index=kern.index, dtype=object)
    per = j.pairs.merge(launches, on="launch", how="left")
    per["name"] = strings(ev["name"].reindex(per["row"]))
    notes = list(counter_notes) + list(j.notes)
    if per.empty:
        notes.append("no trace kernel matched a profiled launch: nothing measured")
        return Measured(_empty(), per, j, tuple(notes))
    g = per.groupby("name", sort=False)
    means = g[list(_MEANS)].mean()
    dtype = g["tensor_dtype"].agg(lambda s: next((x for x in s if x), ""))
    stat = pd.DataFrame({"calls": names.value_counts(),
                         "gpu_ns": kern.groupby(names)["dur"].sum()})
    t = means.join(stat, how="inner").join(g.size().rename("matched")).join(
        dtype.rename("dtype"))
    if modelled is not None and len(modelled):
        m = modelled[modelled["row"].isin(kern.index)]
        mn = strings(ev["name"].reindex(m["row"]))
        ok = m["modelled"].to_numpy()
        mm = pd.DataFrame({"name": mn, "f": np.where(ok, m["flops"], np.nan),
                           "b": np.where(ok, m["bytes"], np.nan)}).groupby("name")
        t = t.join(mm["f"].sum(min_count=1).rename("mod_flop")).join(
            mm["b"].sum(min_count=1).rename("mod_bytes"))
    else:
        t["mod_flop"], t["mod_bytes"] = math.nan, math.nan
    display = display_names(t.index.tolist())
    flop = t["flop"] * t["calls"]
    by = t["dram_bytes"] * t["calls"]
    secs = t["gpu_ns"] / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        tf = np.where(secs > 0, flop / secs / 1e12, np.nan)
        tb = np.where(secs > 0, by / secs / 1e12, np.nan)
        peak = np.array([_peak(device, d) for d in t["dtype"]], dtype=float)
        cpct = 100 * tf / peak
        mpct = 100 * tb / (device.hbm_tb_s if device and device.hbm_tb_s else np.nan)
        out = pd.DataFrame({
            "kernel": [display.get(n, n) for n in t.index], "full_name": t.index,
            "calls": t["calls"].astype(np.int64),
            "matched": t["matched"].astype(np.int64), "gpu_us": t["gpu_ns"] / 1e3,
            "modelled_gflop": t["mod_flop"] / 1e9, "measured_gflop": flop / 1e9,
            "flop_ratio": np.where(t["mod_flop"] > 0, flop / t["mod_flop"], np.nan),
            "modelled_gbytes": t["mod_bytes"] / 1e9, "measured_gbytes": by / 1e9,
            "intensity": np.where(by > 0, flop / by, np.nan),
            "tflops_per_s": tf, "tb_per_s": tb, "compute_pct": cpct, "memory_pct": mpct,
            "limiter": np.where(np.isnan(cpct) | np.isnan(mpct), "",
                                np.where(cpct >= mpct, "compute", "memory")),
            "sm_pct": t["sm_pct"], "dram_pct": t["dram_pct"],
            "tensor_pct": t["tensor_pct"], "occupancy_pct": t["occupancy_pct"],
        })
    out = out.sort_values("gpu_us", ascending=False, kind="stable").reset_index(drop=True)
    if device is None:
        notes.append("device peaks unknown: % of peak and limiter left empty")
    occ = set(per["occupancy_kind"].dropna()) - {""}
    if occ == {"theoretical"}:
        notes.append("occupancy_pct is theoretical occupancy (the export has no achieved "
                     "occupancy: profile with --section Occupancy or --set full)")
    notes.append("durations under ncu are not the run's (clocks locked to base, kernels "
                 "serialized): rates divide measured work by the trace's GPU time")
    return Measured(out, per, j, tuple(notes))


def chart_data(m: Measured, device: DevicePeaks | None) -> dict[str, Any]:
    """What a measured roofline chart plots, in the shape of
    :func:`traceforge.analyzers.costs.roofline.chart_data`: one point per kernel with measured
    FLOPs and DRAM bytes (the counters' intensity, rate over the trace's time), the
    ceilings of the dtypes used."""
    t = m.table
    pts = t[(t["measured_gflop"] > 0) & t["intensity"].notna() & (t["intensity"] > 0)] \
        if len(t) else t
    dtypes = m.per_launch.groupby("name")["tensor_dtype"].agg(
        lambda s: next((x for x in s if x), "")) if len(m.per_launch) else pd.Series(dtype=str)
    points: list[dict[str, Any]] = []
    for r in pts.to_dict("records"):
        d = str(dtypes.get(r["full_name"], "")) or "fp32"
        pcts = [float(r["compute_pct"]), float(r["memory_pct"])]
        known = [x for x in pcts if not math.isnan(x)]
        points.append({"label": str(r["kernel"]), "intensity": float(r["intensity"]),
                       "tflops_per_s": float(r["tflops_per_s"]), "time_us": float(r["gpu_us"]),
                       "dtype": d, "bound": str(r["limiter"]),
                       "pct_of_bound": max(known) if known else math.nan})
    keys = list(dict.fromkeys(str(p["dtype"]) for p in points))
    ceilings = [{"dtype": d, "peak_tflops": device.peak(d) if device else None,
                 "hbm_tb_s": device.hbm_tb_s if device else None,
                 "ridge": device.ridge(d) if device else None,
                 "measured_tflops": None, "measured_tb_s": None} for d in keys]
    return {"device": device.name if device else "", "points": points,
            "ceilings": ceilings, "bytes_only": {"ops": 0, "time_us": 0.0}}


def _peak(device: DevicePeaks | None, dtype: str) -> float:
    if device is None:
        return math.nan
    key = dtype or "fp32"
    return float(device.tflops.get(key, math.nan))


def _empty() -> pd.DataFrame:
    out: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in MEASURED_COLUMNS})
    return out
