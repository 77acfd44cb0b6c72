"""``traceforge calibrate -o peaks.json``: measure this GPU's matmul and copy ceilings."""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd

from traceforge.capture import calibrate as cal
from traceforge.commands import values
from traceforge.commands.options import emit, format_option
from traceforge.commands.output import wrote
from traceforge.render import render_frame


@click.command("calibrate")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("peaks.json"), show_default=True, help="Peaks file to write.")
@click.option("--gpu", "index", type=values.INDEX, default=0, show_default=True,
              help="Index of the GPU to measure.")
@click.option("--iters", type=values.REPEATS, default=20, show_default=True,
              help="Timed repetitions of each product and copy (after 5 warm-ups).")
@format_option
def command(out: Path, index: int, iters: int, fmt: str) -> None:
    """Measure matmul TFLOP/s per dtype (bf16, fp16, tf32, fp32, fp8) and device-to-device
    copy bandwidth on this GPU with torch; write a peaks file for `roofline --peaks`."""
    if iters < 1:
        raise click.BadParameter("must be at least 1", param_hint="--iters")
    doc = cal.measure(index, iters=iters)
    cal.write_peaks(doc, out)
    df = pd.DataFrame(doc["matmul"], columns=["dtype", "m", "n", "k", "ms", "tflops"])
    notes = ("Best TFLOP/s per dtype: " + ", ".join(
                 f"{k} {v:,.1f}" for k, v in doc["matmul_tflops"].items()) + ".",
             f"Device-to-device copy: {doc['copy_tb_s']:.3f} TB/s copied, "
             f"{doc['read_write_tb_s']:.3f} TB/s read + written.",
             *(f"Skipped {k}: {v}" for k, v in doc["skipped"].items()))
    emit(render_frame(df, fmt, title=f"traceforge calibrate: {doc['device']}", notes=notes))
    wrote(out)
