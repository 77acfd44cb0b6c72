"""Ceilings: which peak applies to each activity, and the ideal time it implies.

An activity's ceiling is the peak TFLOP/s of its family and dtype (tensor cores for
matrix products, convolutions and attention; vector units otherwise; TF32 inferred from
the achieved rate) and the device's HBM bandwidth, from the shipped datasheet table
(:mod:`traceforge.analyzers.costs.devices`) and, when given, a measured peaks file. Its *ideal
time* is ``max(FLOPs / peak, bytes / bandwidth)``; :func:`with_ceilings` adds that, the
achieved rates, the bound and the time saved at a target share of the ceiling to
:func:`~traceforge.analyzers.costs.activity_work.activity_work`'s frame.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.costs.contractions import TENSOR_FAMILIES
from traceforge.analyzers.costs.devices import (
    DevicePeaks,
    MeasuredPeaks,
    device_peaks,
    match_device,
)
from traceforge.errors import UsageError
from traceforge.frames import object_frame, object_series, with_columns
from traceforge.model import Trace

#: An fp32 matrix product faster than this multiple of the FP32 (non-tensor) peak must
#: have run on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32).
TF32_EVIDENCE = 1.05


def resolve_device(trace: Trace, device: str | DevicePeaks | None,
                   acts: pd.DataFrame | None = None) -> tuple[DevicePeaks | None, list[str]]:
    """The datasheet peaks for a trace: ``device`` (a key, a name, or peaks) or its metadata.

    Never raises: an unknown device comes back as None with a note saying so.
    """
    if isinstance(device, DevicePeaks):
        return device, []
    if device:
        try:
            return device_peaks(device), []
        except UsageError as e:
            return None, [f"--device: {e}; showing achieved rates only"]
    devs = {d.id: d for d in trace.meta.devices}
    if not devs:
        return None, ["The trace names no GPU model: pass --device (e.g. h100-sxm) for "
                      "ceilings; showing achieved rates only."]
    busiest = None
    if acts is not None and len(acts):
        busiest = int(cast(int, acts.groupby("device")["dur"].sum().idxmax()))
    dev = devs.get(busiest if busiest is not None else -1) or next(iter(devs.values()))
    notes = []
    names = {d.name for d in devs.values()}
    if len(names) > 1:
        notes.append(f"Devices differ ({', '.join(sorted(names))}); ceilings of "
                     f"device {dev.id} ({dev.name}), which ran the most GPU time.")
    peaks = match_device(dev)
    if peaks is None:
        notes.append(f"Device {dev.name!r} is not in traceforge's table: showing achieved "
                     "rates only (pass --device KEY, or --peaks from traceforge calibrate).")
    return peaks, notes


def _ceiling_key(family: str, dtype: str, peaks: dict[str, float], fast: bool) -> str | None:
    """The peaks key whose ceiling applies to work of ``family`` in ``dtype``.

    ``fast``: the work ran faster than the FP32 non-tensor peak allows (see TF32_EVIDENCE).
    """
    if family in TENSOR_FAMILIES:
        if dtype in ("bf16", "fp16", "fp8", "fp4", "int8"):
            return dtype
        if dtype == "fp64":
            return "fp64_tensor" if "fp64_tensor" in peaks else "fp64"
        if dtype == "fp32":
            if "fp32_tensor" in peaks:
                return "fp32_tensor"
            if "tf32" in peaks and (family == "conv" or fast):
                return "tf32"  # cuDNN allows TF32 by default; matmuls only when this fast
            return "fp32"
        return None
    return "fp64" if dtype == "fp64" else "fp32"


def measured_key(key: str) -> str:
    """The peaks-file key measuring a ceiling key (calibrate's fp32 matmul is AMD's
    fp32 matrix rate)."""
    return "fp32" if key == "fp32_tensor" else key


def _keyed(k: pd.DataFrame, device: DevicePeaks | None,
           measured: MeasuredPeaks | None) -> Iterator[tuple[np.ndarray, str]]:
    """The modelled activities' rows (positions) sharing each ceiling key, and the key."""
    dsheet = dict(device.tflops) if device else {}
    known = dsheet or (dict(measured.tflops) if measured else {})
    dur = k["dur"].to_numpy().astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(dur > 0, k["flops"].to_numpy(dtype=float) / dur / 1e3, 0.0)
    # Only the TF32 test depends on the rate: rows are classed by (family, dtype, fast).
    fast = rate > known.get("fp32", math.inf) * TF32_EVIDENCE
    # The modelled rows first, as arrays (not a table of every activity: at 10M pandas 3
    # made Arrow strings of both string columns), grouped by position.
    at = np.flatnonzero(k["modelled"].to_numpy(dtype=bool))
    combos = object_frame({"family": k["family"].to_numpy()[at],
                           "dtype": k["dtype"].to_numpy()[at], "fast": fast[at]})
    groups = combos.groupby(["family", "dtype", "fast"]).indices
    for combo, idx in groups.items():
        fam, dt, fst = cast("tuple[object, object, object]", combo)
        kk = _ceiling_key(str(fam), str(dt), known, bool(fst))
        if kk is not None:
            yield at[np.asarray(idx)], kk


def ceiling_keys(k: pd.DataFrame, device: DevicePeaks | None,
                 measured: MeasuredPeaks | None) -> np.ndarray:
    """:func:`with_ceilings`' ``ceiling`` column alone (for MFU, which needs no other:
    at 10M activities the whole table is some 20 columns of 80 MB)."""
    key = np.full(len(k), "", dtype=object)
    for rows, kk in _keyed(k, device, measured):
        key[rows] = kk
    return key


def _ceilings(k: pd.DataFrame, device: DevicePeaks | None,
              measured: MeasuredPeaks | None) -> pd.DataFrame:
    """Per modelled activity: ceiling key, peak TFLOP/s and TB/s, datasheet and measured."""
    n = len(k)
    out = {c: np.full(n, np.nan) for c in ("peak", "bw", "mpeak", "mbw")}
    key = np.full(n, "", dtype=object)
    for rows, kk in _keyed(k, device, measured):
        key[rows] = kk
        if device is not None:
            out["peak"][rows] = device.peak(kk) or np.nan
            out["bw"][rows] = device.hbm_tb_s
        mp = measured.peak(measured_key(kk)) if measured else None
        # Ceilings calibrate does not measure (vector units, fp64) stay the datasheet's.
        out["mpeak"][rows] = mp if mp else out["peak"][rows]
        mb = measured.memory_tb_s if measured else None
        out["mbw"][rows] = mb if mb else out["bw"][rows]
    # The new arrays as they are (copy=False): not copied into one block, which held
    # both at once (320 MB more at 10M activities).
    res: pd.DataFrame = pd.DataFrame(out, index=k.index, copy=False)
    res["ceiling"] = object_series(key, k.index)
    if measured is None:
        res[["mpeak", "mbw"]] = np.nan
    return res


def _ideal(flops: np.ndarray, nbytes: np.ndarray, peak: np.ndarray,
           bw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compute-time and memory-time lower bounds in ns (NaN where a ceiling is missing)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        comp = np.where(flops > 0, flops / (peak * 1e3), 0.0)
        mem = np.where(nbytes > 0, nbytes / (bw * 1e3), 0.0)
    comp = np.where(np.isnan(peak) & (flops > 0), np.nan, comp)
    mem = np.where(np.isnan(bw) & (nbytes > 0), np.nan, mem)
    return comp, mem


def _bound(ideal: np.ndarray, comp: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """"compute" or "memory" by the larger lower bound, "" where the ideal is unknown (an
    object array: the same three strings shared, not a fixed-width copy of each)."""
    out = np.full(len(ideal), "", dtype=object)
    known = ~np.isnan(ideal)
    out[known & (comp >= mem)] = "compute"
    out[known & ~(comp >= mem)] = "memory"
    return out


def with_ceilings(k: pd.DataFrame, device: DevicePeaks | None,
                  measured: MeasuredPeaks | None, target: float) -> pd.DataFrame:
    """:func:`~traceforge.analyzers.costs.activity_work.activity_work`'s frame with ceilings,
    achieved rates, ideal and saved time (``target``: the share of the ceiling, 0-1, that
    saved time aims at)."""
    c = _ceilings(k, device, measured)
    f = np.nan_to_num(k["flops"].to_numpy(dtype=float))
    b = np.nan_to_num(k["bytes"].to_numpy(dtype=float))
    dur = k["dur"].to_numpy().astype(float)
    m = k["modelled"].to_numpy()
    comp, mem = _ideal(f, b, c["peak"].to_numpy(), c["bw"].to_numpy())
    mcomp, mmem = _ideal(f, b, c["mpeak"].to_numpy(), c["mbw"].to_numpy())
    ideal = np.where(m, np.fmax(comp, mem), np.nan)
    ideal = np.where(np.isnan(comp) | np.isnan(mem), np.nan, ideal)
    mideal = np.where(m & ~np.isnan(mcomp) & ~np.isnan(mmem), np.fmax(mcomp, mmem), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        # (The new arrays as they are: ``assign`` copied each of them.)
        out = with_columns(k, {
            "ceiling": c["ceiling"], "peak_tflops": c["peak"], "hbm_tb_s": c["bw"],
            "measured_tflops": c["mpeak"], "measured_tb_s": c["mbw"],
            "tflops_per_s": np.where(m & (dur > 0), f / dur / 1e3, np.nan),
            "tb_per_s": np.where(m & (dur > 0), b / dur / 1e3, np.nan),
            "intensity": np.where(m & (b > 0), f / b, np.nan),
            "compute_ns": np.where(m, comp, np.nan), "memory_ns": np.where(m, mem, np.nan),
            "ideal_ns": ideal, "ideal_measured_ns": mideal,
            "bound": _bound(ideal, comp, mem),
            "pct_of_bound": np.where(dur > 0, 100.0 * ideal / dur, np.nan),
            "pct_of_measured": np.where(dur > 0, 100.0 * mideal / dur, np.nan),
            # fmax treats NaN as missing: NaN where the ideal is unknown. (Made so, not
            # set afterwards: a column set in place is copied first.)
            "saved_ns": np.where(np.isnan(ideal), np.nan, np.fmax(dur - ideal / target, 0.0)),
            "saved_measured_ns": np.where(np.isnan(mideal), np.nan,
                                          np.fmax(dur - mideal / target, 0.0)),
        })
    return out


def measured_note(measured: MeasuredPeaks | None, device: DevicePeaks | None,
                  trace: Trace) -> list[str]:
    """Notes when a peaks file was measured on another GPU model than the trace's."""
    if measured is None or not measured.device:
        return []
    names = {d.name for d in trace.meta.devices}
    if names and measured.device not in names:
        return [f"Peaks file measured on {measured.device!r}; the trace ran on "
                f"{', '.join(sorted(names))}."]
    return []
