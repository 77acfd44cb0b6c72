"""Check traceforge's achieved TFLOP/s per aten::mm against gemm_bench.py's own timing.

    python examples/gemm_bench_check.py runs/gemm [--peaks peaks.json] [--tolerance 0.03]

Reads the capture's trace (``*.pt.trace.json.gz`` in the folder) and ``gemm_bench.json``.
For every (dtype, M, N, K), traceforge's rate is the FLOPs of those aten::mm calls divided
by the GPU time of the kernels they launched (``traceforge.roofline``), and the
benchmark's is 2*M*N*K over CUDA-event time measured around each of the same products in
the recorded steps. A separate timing run after the capture is shown for reference only:
GPU clocks under load differ between runs by more than the tolerance. Exit 0 when every pair agrees
within the tolerance, 1 otherwise. With ``--peaks`` (from ``traceforge calibrate``) it also
prints the measured BF16 ceiling next to the 790 TFLOP/s expected of an H100/H200 (within
10%) and the copy bandwidth.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

import traceforge
from traceforge.analyzers.costs.roofline import roofline

DTYPE_OF = {"c10::BFloat16": "bf16", "c10::Half": "fp16"}
EXPECTED_BF16 = 790.0  # TFLOP/s of a bf16 8192^3 product on H100/H200 (device notes)


def compare(folder: Path, tolerance: float = 0.03) -> tuple[pd.DataFrame, bool]:
    """traceforge vs benchmark per (dtype, m, n, k): both rates, their ratio, pass/fail."""
    traces = sorted(folder.glob("*.pt.trace.json.gz")) or sorted(folder.glob("*.pt.trace.json"))
    if not traces:
        raise SystemExit(f"{folder}: no *.pt.trace.json.gz (run the capture first)")
    bench_file = folder / "gemm_bench.json"
    if not bench_file.exists():
        raise SystemExit(f"{bench_file}: missing (gemm_bench.py --json)")
    bench = pd.DataFrame(json.loads(bench_file.read_text())["shapes"])
    t = traceforge.load(traces[0])
    k = roofline(t).kernels
    k = k[(k["op_name"] == "aten::mm") & (k["kind"] == "kernel") & k["modelled"]]
    ops = sorted(set(k["op_row"]))
    shape: dict[int, str] = {}
    for row, args in zip(ops, t.args(ops), strict=True):
        (m, kk), (_, n) = args["Input Dims"][:2]
        shape[int(row)] = f"{DTYPE_OF.get(args['Input type'][0], '?')} {m}x{n}x{kk}"
    k = k.assign(key=k["op_row"].map(shape))
    rows: list[dict[str, Any]] = []
    doc = json.loads(bench_file.read_text())
    prof = pd.DataFrame(doc.get("profiled_steps") or [])
    for b in bench.itertuples(index=False):
        key = f"{b.dtype} {b.m}x{b.n}x{b.k}"
        sel = k[k["key"] == key]
        dur = float(sel["dur"].sum())
        tf = float(sel["flops"].sum()) / dur / 1e3 if dur else float("nan")
        # The independent clock on the same kernels: CUDA events around each shape's
        # products in the steps the trace recorded (step numbers are traceforge.step() counts).
        ev_tf = float("nan")
        if len(prof):
            p = prof[(prof["dtype"] == b.dtype) & (prof["m"] == b.m) & (prof["n"] == b.n)
                     & (prof["k"] == b.k)]
            if (sel["step"] >= 0).any():  # a trace without steps is compared whole
                p = p[p["step"].isin(set(sel["step"]))]
            if len(p):
                ev_tf = 2.0 * b.m * b.n * b.k * float(p["calls"].sum()) / (
                    float(p["ms"].sum()) * 1e-3) / 1e12
        ratio = tf / ev_tf if ev_tf == ev_tf else float("nan")
        rows.append({"dtype": b.dtype, "m": b.m, "n": b.n, "k": b.k,
                     "calls": sel["op_row"].nunique(),
                     "traceforge_tflops": tf, "events_same_kernels_tflops": ev_tf,
                     "ratio": ratio, "ok": bool(abs(ratio - 1) <= tolerance),
                     "separate_run_tflops": b.tflops})
    df = pd.DataFrame(rows)
    return df, bool(len(df)) and bool(df["ok"].all())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--peaks", type=Path, default=None)
    a = ap.parse_args()
    df, ok = compare(a.folder, a.tolerance)
    print(df.to_string(index=False, float_format=lambda x: f"{x:,.3f}"))
    if a.peaks:
        p = json.loads(a.peaks.read_text())
        bf16 = float(p["matmul_tflops"].get("bf16", float("nan")))
        near = abs(bf16 / EXPECTED_BF16 - 1) <= 0.10
        print(f"calibrate on {p['device']}: bf16 {bf16:,.1f} TFLOP/s "
              f"({'within' if near else 'NOT within'} 10% of {EXPECTED_BF16:.0f}); "
              f"all dtypes {p['matmul_tflops']}; copy {p['copy_tb_s']:.3f} TB/s "
              f"({p['read_write_tb_s']:.3f} read+write); skipped {p.get('skipped')}")
        ok = ok and near
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
