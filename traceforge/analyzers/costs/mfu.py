"""FLOPs utilization per step: hardware FLOPs from the trace, model FLOPs from the user.

* ``hfu_pct`` (hardware FLOPs utilization) = FLOPs of the step's ops (the roofline's work
  model, :mod:`traceforge.analyzers.costs.flops`) / (step time x peak TFLOP/s of the step's
  dominant dtype, the ceiling that carries the most FLOPs).
* ``mfu_pct`` (model FLOPs utilization) = the model's FLOPs per step / (step time x the same
  peak), when given: ``model_flops``, or ``6 x params x tokens`` for training and
  ``2 x params x tokens`` for inference.
* Step time is the step's GPU window (:func:`~traceforge.analyzers.timing.launch.step_windows`):
  idle time inside the step counts, as it does for the user's throughput.
* ``flops_from``: a compiled run's trace records no per-op shapes, so its FLOPs come from
  an eager trace of the same model (the mean FLOPs of that trace's steps): eager and
  compiled utilization then divide the same math. Without it, a step whose ops model no
  FLOPs while some of its GPU time has unknown work shows FLOPs and HFU as unknown
  (NaN, ``flops_source`` "unknown: no shapes recorded"), not 0.

``*_measured_pct`` divide by a measured peak (``traceforge calibrate``) instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceforge.analyzers.costs.activity_work import activity_work, select, timeline
from traceforge.analyzers.costs.ceilings import (
    ceiling_keys,
    measured_key,
    measured_note,
    resolve_device,
)
from traceforge.analyzers.costs.devices import DevicePeaks, MeasuredPeaks
from traceforge.errors import UsageError
from traceforge.model import Tables, Trace

#: Columns of :attr:`MFUReport.steps`.
COLUMNS = ("step", "time_ms", "gflops", "flops_source", "modelled_pct", "dtype",
           "peak_tflops", "achieved_tflops", "hfu_pct", "measured_tflops",
           "hfu_measured_pct", "model_gflops", "mfu_pct", "mfu_measured_pct")


@dataclass(frozen=True)
class MFUReport(Tables):
    """:func:`mfu`'s result: one row per step (:data:`COLUMNS`), the ceilings, notes.

    ``modelled_pct`` is the share of the step's GPU time whose work is known: FLOPs are a
    lower bound where it is below 100.
    """

    steps: pd.DataFrame
    device: DevicePeaks | None
    measured: MeasuredPeaks | None
    notes: tuple[str, ...] = ()


def _step_work(trace: Trace, device: DevicePeaks | None, measured: MeasuredPeaks | None,
               steps: Sequence[int] | None) -> tuple[pd.DataFrame, list[str]]:
    """Per step: window_ns, flops, modelled_ns, time_ns and the dominant ceiling key."""
    acts, win = timeline(trace)
    acts, win = select(acts, win, steps, trace.meta.path)
    k, notes = activity_work(trace, acts)
    ceiling = ceiling_keys(k, device, measured)
    # The rows of each step as one slice of a stable sort by step: the same values in the
    # same order as selecting them by a mask, so the same sums, without selecting the
    # whole frame once per step (~3 ms each for 83k activities).
    step_of = k["step"].to_numpy()
    order = np.argsort(step_of, kind="stable")
    by_step = step_of[order]
    modelled = k["modelled"].to_numpy(dtype=bool)[order]
    flops = k["flops"].to_numpy()[order]
    dur = k["dur"].to_numpy()[order]
    ceiling, dtype = ceiling[order], k["dtype"].to_numpy()[order]
    rows = []
    for step, lo, hi in zip(win["step"].to_numpy(), win["ts"].to_numpy(), win["end"].to_numpy(),
                            strict=True):
        at = slice(int(np.searchsorted(by_step, step, side="left")),
                   int(np.searchsorted(by_step, step, side="right")))
        m = modelled[at]
        mf = pd.Series(flops[at][m])
        fl = (mf > 0).to_numpy()
        key = dt = ""
        if fl.any():
            pos = np.flatnonzero(m)[fl] + at.start
            g = pd.DataFrame({"ceiling": ceiling[pos], "dtype": dtype[pos], "flops": flops[pos]})
            key = str(g.groupby("ceiling")["flops"].sum().idxmax())
            dt = str(g.groupby("dtype")["flops"].sum().idxmax())
        rows.append({"step": int(step), "window_ns": float(hi - lo),
                     "flops": float(mf.sum()), "busy_ns": float(pd.Series(dur[at]).sum()),
                     "modelled_ns": float(pd.Series(dur[at][m]).sum()), "key": key,
                     "dtype": dt})
    return pd.DataFrame(rows), notes


def mfu(trace: Trace, *, steps: Sequence[int] | None = None,
        device: str | DevicePeaks | None = None, peaks: MeasuredPeaks | None = None,
        model_flops: float | None = None, params: float | None = None,
        tokens: float | None = None, training: bool = True,
        flops_from: Trace | None = None, dtype: str | None = None) -> MFUReport:
    """Hardware and model FLOPs utilization per step (see the module docstring).

    ``dtype`` overrides the ceiling key (``"bf16"``, ``"fp8"``, ...) the peak comes from.
    """
    if model_flops is not None and params is not None:
        raise UsageError("give --model-flops or --params/--tokens, not both")
    if (params is None) != (tokens is None):
        raise UsageError("--params and --tokens go together (model FLOPs = 6 or 2 x N x T)")
    for name, v in (("--model-flops", model_flops), ("--params", params), ("--tokens", tokens)):
        if v is not None and not v > 0:
            raise UsageError(f"{name} must be positive, got {v}")
    dev, notes = resolve_device(trace, device)
    notes += measured_note(peaks, dev, trace)
    per, wn = _step_work(trace, dev, peaks, steps)
    notes += wn
    source = "trace"
    if flops_from is not None:
        src, _ = _step_work(flops_from, dev, peaks, None)
        src = src[src["flops"] > 0]
        if src.empty:
            raise UsageError(f"{flops_from.meta.path or '--flops-from trace'}: no modelled "
                             "FLOPs in it (record_shapes off, or compiled too?)")
        mean = float(src["flops"].mean())
        spread = float(src["flops"].max() - src["flops"].min()) / mean
        per["flops"] = mean
        per["key"] = str(src.groupby("key")["flops"].sum().idxmax())
        per["dtype"] = str(src.groupby("dtype")["flops"].sum().idxmax())
        source = f"mean of {len(src)} steps of {flops_from.meta.path or 'the eager trace'}"
        if spread > 0.01:
            notes.append(f"--flops-from: its steps' FLOPs differ by {100 * spread:.1f}%.")
    sources = np.full(len(per), source, dtype=object)
    if flops_from is None and len(per):
        # A step whose kernels' work is unknown (compiled, graph replays) and whose ops
        # model no FLOPs has unknown FLOPs, not zero: no HFU either.
        unknown = ((per["flops"] == 0) & (per["modelled_ns"] < per["busy_ns"])).to_numpy()
        per.loc[unknown, "flops"] = math.nan
        sources[unknown] = "unknown: no shapes recorded"
    if dtype:
        per["key"] = dtype
        per["dtype"] = dtype
    mf = model_flops
    if params is not None and tokens is not None:
        mf = (6.0 if training else 2.0) * params * tokens
    out = pd.DataFrame({
        "step": per["step"].astype(np.int64),
        "time_ms": per["window_ns"] / 1e6,
        "gflops": per["flops"] / 1e9,
        "flops_source": sources,
        "modelled_pct": np.where(per["busy_ns"] > 0,
                                 100.0 * per["modelled_ns"] / per["busy_ns"].where(
                                     per["busy_ns"] > 0, 1), np.nan),
        "dtype": per["dtype"],
    }) if len(per) else pd.DataFrame({c: pd.Series([], dtype=object) for c in COLUMNS})
    if len(per):
        key = per["key"].to_numpy()
        peak = np.array([(dev.peak(k) if dev and k else None) or math.nan for k in key])
        mpeak = np.array([(peaks.peak(measured_key(k)) if peaks and k else None)
                          or math.nan for k in key])
        t_s = per["window_ns"].to_numpy() / 1e9
        fl = per["flops"].to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            achieved = np.where(t_s > 0, fl / t_s / 1e12, np.nan)
            out["peak_tflops"] = peak
            out["achieved_tflops"] = achieved
            out["hfu_pct"] = 100.0 * achieved / peak
            out["measured_tflops"] = mpeak
            out["hfu_measured_pct"] = 100.0 * achieved / mpeak
            model_rate = np.where(t_s > 0, (mf or math.nan) / t_s / 1e12, np.nan)
            out["model_gflops"] = (mf / 1e9) if mf else math.nan
            out["mfu_pct"] = 100.0 * model_rate / peak
            out["mfu_measured_pct"] = 100.0 * model_rate / mpeak
        if per["flops"].fillna(0).eq(0).all() and flops_from is None:
            notes.append("No modelled FLOPs in these steps (no operator shapes, or a compiled "
                         "region): give --flops-from EAGER_TRACE, --model-flops or --params "
                         "and --tokens.")
        if dtype is None and (per["flops"] > 0).any() and (per["key"] == "").all():
            notes.append("The ops' dtypes are not recorded (PyTorch's emit_nvtx ranges under "
                         "nsys give shapes only): no peak to divide by; give --dtype "
                         "(bf16, fp16, ...) for HFU.")
        if dev is not None and np.isnan(peak).any() and (per["key"] != "").any():
            missing = sorted({k for k, p in zip(key, peak, strict=True) if k and math.isnan(p)})
            notes.append(f"{dev.name} has no {', '.join(missing)} peak in the datasheet table.")
    return MFUReport(out[list(COLUMNS)], dev, peaks, tuple(notes))
