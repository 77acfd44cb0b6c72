"""``traceforge calibrate -o peaks.json``: measure this GPU's matmul and copy ceilings."""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd

from traceforge.capture import calibrate as cal
from traceforge.commands import values
from traceforge.commands.options import emit_frame, format_option
from traceforge.output_file import wrote


@click.command("calibrate")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("peaks.json"), show_default=True, help="Peaks file to write.")
@click.option("--gpu", "index", type=values.INDEX, default=0, show_default=True,
              help="Index of the GPU to measure.")
@click.option("--iters", type=values.REPEATS, default=20, show_default=True,
              help="Timed repetitions of each product and copy (after 5 warm-ups).")
@click.option("--comm", is_flag=True,
              help="Measure all-reduce bus bandwidth over every GPU instead (torch."
              "distributed, one process per GPU) and add it to the peaks file, for "
              "`comm --peaks`.")
@click.option("--backend", type=click.Choice(["nccl", "gloo"]), default=None,
              help="--comm: process-group backend [default: nccl; gloo runs on CPU "
              "tensors and tests the plumbing only].")
@click.option("--ranks", type=click.IntRange(min=2), default=None,
              help="--comm: processes [default: every GPU; 2 with gloo].")
@format_option
def command(out: Path, index: int, iters: int, comm: bool, backend: str | None,
            ranks: int | None, fmt: str) -> None:
    """Measure matmul TFLOP/s per dtype (bf16, fp16, tf32, fp32, fp8) and device-to-device
    copy bandwidth on this GPU with torch; write a peaks file for `roofline --peaks`.
    With --comm: all-reduce busbw (nccl-tests' 2(n-1)/n) over 1 MiB-1 GiB messages."""
    if iters < 1:
        raise click.BadParameter("must be at least 1", param_hint="--iters")
    if comm:
        _comm(out, iters, backend, ranks, fmt)
        return
    doc = cal.measure(index, iters=iters)
    cal.write_peaks(doc, out)
    df = pd.DataFrame(doc["matmul"], columns=["dtype", "m", "n", "k", "ms", "tflops"])
    notes = ("Best TFLOP/s per dtype: " + ", ".join(
                 f"{k} {v:,.1f}" for k, v in doc["matmul_tflops"].items()) + ".",
             f"Device-to-device copy: {doc['copy_tb_s']:.3f} TB/s copied, "
             f"{doc['read_write_tb_s']:.3f} TB/s read + written.",
             *(f"Skipped {k}: {v}" for k, v in doc["skipped"].items()))
    emit_frame(df, fmt, title=f"traceforge calibrate: {doc['device']}", notes=notes)
    wrote(out)


def _comm(out: Path, iters: int, backend: str | None, ranks: int | None, fmt: str) -> None:
    from traceforge.capture import comm_calibrate as cc

    cc.existing_peaks(out)  # a file there that is no peaks file: fail before measuring
    small = backend == "gloo"  # CPU plumbing: a short sweep
    res = cc.measure_comm(ranks=ranks, backend=backend, iters=iters, warmup=1 if small else 5,
                          sizes=(1 << 10, 1 << 16, 1 << 20) if small else cc.SIZES)
    cc.merge_comm(res, out)
    df = pd.DataFrame(res["allreduce"], columns=["bytes", "ms", "algbw_gb_s", "busbw_gb_s"])
    m = res["comm_method"]
    notes = (f"Best all-reduce busbw: {res['allreduce_busbw_gb_s']:,.1f} GB/s over "
             f"{m['ranks']} ranks ({m['backend']}).",)
    emit_frame(df, fmt, title=f"traceforge calibrate --comm: {res['device']}",
               notes=notes)
    wrote(out)
