"""``traceforge roofline TRACE``: achieved TFLOP/s and TB/s against the device's ceilings."""

from __future__ import annotations

import hashlib

import click
import pandas as pd

from traceforge.analyzers.costs.replays import COMPILED, FLOPS_FROM, REPLAY
from traceforge.analyzers.costs.roofline import BY, TARGET_PCT, RooflineReport, roofline
from traceforge.analyzers.counters.measured import Measured, measured_kernels
from traceforge.commands import values
from traceforge.commands.options import (
    derived_with_file,
    device_options,
    emit_frame,
    emit_json,
    format_option,
    load_trace,
    read_peaks,
    resolve_steps,
    step_options,
    trace_argument,
)
from traceforge.formats.counter_files import read_counters
from traceforge.model import Trace

#: Table headers of the roofline columns (JSON and CSV keep the column names).
LABELS = {
    "op": "Operation", "kernel": "Kernel", "class": "Class", "calls": "Calls",
    "kernels": "Kernels", "op_share_pct": "Op work %", "time_us": "GPU us",
    "modelled_pct": "Modelled %", "gflops": "GFLOPs", "gbytes": "GB",
    "intensity": "FLOP/B", "tflops_per_s": "TFLOP/s", "tb_per_s": "TB/s",
    "dtype": "dtype", "bound": "Bound", "pct_of_bound": "% of bound",
    "pct_of_measured": "% of measured", "work": "Work",
}
#: Columns the terminal and Markdown tables leave out (JSON and CSV keep them).
HIDDEN = ("full_name", "ridge")


def device_line(r: RooflineReport) -> str:
    if r.device is None:
        return "Ceilings: none (unknown device): achieved rates only."
    d = r.device
    used = [c for c in pd.unique(r.kernels["ceiling"]) if c and d.ridge(c)]
    ridges = ", ".join(f"{c} {d.ridge(c) or 0:,.0f}" for c in used)
    line = (f"Ceilings: {d.name} (key {d.key}), dense datasheet peaks, HBM {d.hbm_tb_s:g} "
            f"TB/s (source: {d.sources.get('hbm_tb_s', '').split(' <')[0]})"
            + (f"; ridge points (FLOP/byte): {ridges}" if ridges else ""))
    if r.measured is not None:
        m = r.measured
        rates = ", ".join(f"{k} {v:,.0f}" for k, v in m.tflops.items())
        line += (f"; measured ({m.path}): {rates} TFLOP/s, "
                 f"{m.memory_tb_s or float('nan'):.2f} TB/s read+write")
    return line + "."


@click.command("roofline")
@trace_argument
@click.option("--by", type=click.Choice(BY), default="op", show_default=True,
              help="One row per operator, kernel or kernel class.")
@click.option("-n", "limit", type=values.COUNT, default=25, show_default=True,
              help="Rows to show (0: all).")
@click.option("--target-pct", type=values.PERCENT, default=TARGET_PCT, show_default=True,
              help="Saved time is what running at this % of the bound would save.")
@device_options
@click.option("--measured", "measured_path", default=None, metavar="FILE",
              help="Hardware counters (ncu --csv --page raw export, .ncu-rep, rocprofv3 "
                   "counter_collection.csv): adds measured FLOPs, DRAM bytes, intensity, "
                   "% of peak and limiter per kernel.")
@click.option("--launch-skip", "launch_skip", type=values.COUNT, default=0, show_default=True,
              help="With --measured: trace launches of each kernel to pass over before the "
                   "first profiled one (ncu --launch-skip).")
@click.option("--flops-from", "flops_from", default=None, metavar="EAGER_TRACE",
              help="An eager trace of the same model: its FLOPs per step stand for the "
                   "compiled and CUDA-graph-replayed kernels' (no shapes recorded), in the "
                   "per-op table, as in `mfu --flops-from`; their bytes stay unknown.")
@step_options
@format_option
def command(trace: str, by: str, limit: int, target_pct: float, device: str | None,
            peaks_path: str | None, measured_path: str | None, launch_skip: int,
            flops_from: str | None, steps_from: str | None, steps_text: str | None,
            step_list: tuple[int, ...], fmt: str) -> None:
    """FLOPs, bytes, arithmetic intensity, achieved TFLOP/s and TB/s per op, kernel or
    class; the bound (compute or memory) and % of it; the time saved at --target-pct.
    Work says why a row's unmodelled part is unknown (e.g. CUDA-graph replays record no
    shapes); --flops-from EAGER_TRACE gives compiled runs their FLOPs per step.
    With --measured, a second table puts the counters' measured work beside the model's."""
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    t = load_trace(trace, rule)
    eager = load_trace(flops_from, None) if flops_from else None
    r = roofline(t, by=by, steps=steps, device=device, peaks=read_peaks(peaks_path),
                 target_pct=target_pct, flops_from=eager)
    table = r.table if limit <= 0 else r.table.head(limit)
    meas = measured_view(t, r, measured_path, launch_skip)
    if fmt == "json":
        emit_json({
   "device": r.device.key if r.device else None,
   "target_pct": target_pct,
   "totals": r.totals,
   "rows": table,
   "unmodelled": r.unmodelled,
   "notes": list(r.notes),
   **({"measured": meas.table, "measured_notes": list(meas.notes)} if meas else {}),
        })
        return
    if fmt == "csv":
        emit_frame(meas.table if meas else table, fmt)
        return
    if r.measured is None:
        table = table.drop(columns=["pct_of_measured", "saved_measured_us"])
    if (table["work"] == "").all():
        table = table.drop(columns=["work"])
    else:  # the reasons in full are in the unmodelled table below
        table = table.assign(work=table["work"].map(short_work))
    show = table.drop(columns=[*HIDDEN, *(["kernels"] if by == "op" else [])],
                      errors="ignore").rename(columns={
        **LABELS, "saved_us": f"Saved us at {target_pct:g}%",
        "saved_measured_us": f"Saved us at {target_pct:g}% of measured"})
    tot = r.totals
    summary = (f"Total GPU time {tot['time_ns'] / 1e3:,.0f} us; modelled "
               f"{tot['modelled_ns'] / 1e3:,.0f} us; unmodelled {tot['unmodelled_ns'] / 1e3:,.0f}"
               f" us; at {target_pct:g}% of every bound "
               f"{_us(tot['saved_ns'])} would be saved.")
    notes = (device_line(r), summary, *r.notes)
    emit_frame(show, fmt, title=f"Roofline by {by}: {trace}", notes=notes)
    if not r.unmodelled.empty and fmt in ("table", "md"):
        emit_frame(r.unmodelled.rename(columns={"time_us": "GPU time (us)",
                                                "pct": "% of GPU time"}),
                   fmt, title="Unmodelled GPU time (work unknown)")
    if meas is not None:
        show_m = meas.table if limit <= 0 else meas.table.head(limit)
        show_m = show_m.drop(columns=list(MEASURED_HIDDEN))
        emit_frame(show_m.rename(columns=MEASURED_LABELS), fmt,
                   title=f"Measured roofline by kernel: {measured_path}",
                   notes=meas.notes)


#: The terminal's and Markdown's ``Work`` cell per reason (JSON keeps the reason in full).
SHORT_WORK = {REPLAY: "unknown: replay", COMPILED: "unknown: compiled",
              FLOPS_FROM: "eager FLOPs"}


def short_work(work: str) -> str:
    """A row's ``work`` as a table cell: short, the full reason in the unmodelled table."""
    if not work:
        return ""
    if work in SHORT_WORK:
        return SHORT_WORK[work]
    if "no launching op" in work:
        return "unknown: no op"
    if "communication" in work:
        return "unknown: comm"
    return "unknown: other"


def _us(ns: float) -> str:
    return "unknown time (no ceilings)" if pd.isna(ns) else f"{ns / 1e3:,.0f} us"


#: Headers of the measured table (JSON and CSV keep the column names).
MEASURED_LABELS = {
    "kernel": "Kernel", "calls": "Calls", "matched": "Profiled", "gpu_us": "GPU us",
    "modelled_gflop": "Modelled GFLOP", "measured_gflop": "Measured GFLOP",
    "flop_ratio": "Measured/modelled", "modelled_gbytes": "Modelled GB",
    "measured_gbytes": "DRAM GB", "intensity": "FLOP/B", "tflops_per_s": "TFLOP/s",
    "tb_per_s": "TB/s", "compute_pct": "% peak compute", "memory_pct": "% peak memory",
    "limiter": "Limiter", "sm_pct": "SM %", "dram_pct": "DRAM %", "tensor_pct": "Tensor %",
    "occupancy_pct": "Occupancy %",
}


#: Measured columns the terminal and Markdown tables leave out (top-kernels --counters
#: shows the utilization ones; JSON and CSV keep them all).
MEASURED_HIDDEN = ("full_name", "flop_ratio", "modelled_gbytes", "sm_pct", "dram_pct",
                   "tensor_pct", "occupancy_pct")


def measured_view(t: Trace, r: RooflineReport, path: str | None, skip: int
                  ) -> Measured | None:
    """The measured table of ``--measured FILE`` (None without it)."""
    if not path:
        return None

    def join() -> Measured:
        counters = read_counters(path)
        rows = r.kernels.loc[r.kernels["kind"] == "kernel", "row"].to_numpy()
        return measured_kernels(t, counters.launches, counter_notes=counters.notes,
                                device=r.device, skip=skip, modelled=r.kernels, rows=rows)

    # Keyed by the counters file and by what the join reads of the roofline (its kernels'
    # rows and modelled work, the device's ceilings).
    return derived_with_file(t, f"roofline.measured|skip={skip}|{_modelled_key(r)}", path,
                             join)


def _modelled_key(r: RooflineReport) -> str:
    k = r.kernels[["row", "kind", "flops", "bytes", "modelled"]]
    h = hashlib.sha1(repr(r.device).encode())
    h.update(pd.util.hash_pandas_object(k, index=False).to_numpy().tobytes())
    return h.hexdigest()
