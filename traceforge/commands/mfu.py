"""``traceforge mfu TRACE``: hardware and model FLOPs utilization per step."""

from __future__ import annotations

import click

from traceforge.analyzers.costs.mfu import mfu
from traceforge.commands import values
from traceforge.commands.options import (
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

LABELS = {
    "step": "Step", "time_ms": "Step time (ms)", "gflops": "GFLOPs", "flops_source": "FLOPs from",
    "modelled_pct": "Modelled %", "dtype": "dtype", "peak_tflops": "Peak TFLOP/s",
    "achieved_tflops": "Achieved TFLOP/s", "hfu_pct": "HFU %",
    "measured_tflops": "Measured peak", "hfu_measured_pct": "HFU % of measured",
    "model_gflops": "Model GFLOPs", "mfu_pct": "MFU %", "mfu_measured_pct": "MFU % of measured",
}


@click.command("mfu")
@trace_argument
@click.option("--model-flops", type=values.POSITIVE, default=None, metavar="F",
              help="The model's FLOPs per step: gives MFU.")
@click.option("--params", type=values.POSITIVE, default=None, metavar="N",
              help="Model parameters; with --tokens, model FLOPs = 6NT (training) or 2NT.")
@click.option("--tokens", type=values.POSITIVE, default=None, metavar="T", help="Tokens per step.")
@click.option("--training/--inference", default=True, show_default=True,
              help="6NT (forward + backward) or 2NT (forward only) for --params/--tokens.")
@click.option("--flops-from", "flops_from", default=None, metavar="EAGER_TRACE",
              help="Take each step's FLOPs from an eager trace of the same model (for a "
                   "compiled run whose trace records no shapes).")
@click.option("--dtype", default=None, metavar="KEY",
              help="Peak of this dtype (bf16, fp8, ...) instead of the step's dominant one.")
@device_options
@step_options
@format_option
def command(trace: str, model_flops: float | None, params: float | None, tokens: float | None,
            training: bool, flops_from: str | None, dtype: str | None, device: str | None,
            peaks_path: str | None, steps_from: str | None, steps_text: str | None,
            step_list: tuple[int, ...], fmt: str) -> None:
    """FLOPs utilization per step: HFU from the trace's own ops (or --flops-from), MFU
    from --model-flops or --params/--tokens; against datasheet and measured peaks."""
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    t = load_trace(trace, rule)
    r = mfu(t, steps=steps, device=device, peaks=read_peaks(peaks_path),
            model_flops=model_flops, params=params, tokens=tokens, training=training,
            flops_from=load_trace(flops_from, None) if flops_from else None, dtype=dtype)
    if fmt == "json":
        emit_json({"device": r.device.key if r.device else None, "steps": r.steps,
                   "notes": list(r.notes)})
        return
    df = r.steps
    if fmt in ("table", "md"):
        drop = [c for c in ("measured_tflops", "hfu_measured_pct", "mfu_measured_pct")
                if r.measured is None]
        if df["model_gflops"].isna().all():
            drop += ["model_gflops", "mfu_pct", "mfu_measured_pct"]
        df = df.drop(columns=sorted(set(drop))).rename(columns=LABELS)
    dev = f"{r.device.name} (key {r.device.key})" if r.device else "unknown device (no peak)"
    notes = (f"Peaks: {dev}, dense datasheet figures; step time = the step's GPU window.",
             *r.notes)
    emit_frame(df, fmt, title=f"FLOPs utilization per step: {trace}", notes=notes)
