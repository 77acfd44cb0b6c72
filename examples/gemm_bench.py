"""GEMM benchmark for checking traceforge's roofline against CUDA-event timing.

The shapes of AMD's MI350X GEMM write-up, (M, N, K) = 4096^3, 8192^3, 16384x8192x7168,
16384x1024x8192, 16384x8192x1280, in BF16 and FP16, as ``torch.mm`` (aten::mm) of an
(M, K) and a (K, N) matrix:

    traceforge capture --mode eager --steps 1,1,2 -o runs/gemm -- \\
        python examples/gemm_bench.py --json runs/gemm/gemm_bench.json
    python examples/gemm_bench_check.py runs/gemm      # traceforge vs the JSON, within 3%

Each step runs every (dtype, shape) ``--reps`` times and calls ``traceforge.step()``, so
the schedule ``--steps 1,1,2`` (1 wait, 1 warm-up, 2 recorded steps) records two steps
(the default, 2,2,5, would need nine: raise ``--steps`` here to use it).
After the steps, outside the profiler, each (dtype, shape) is timed on its own with CUDA
events (``--iters`` products after ``--warmup``) and the TFLOP/s (2*M*N*K per product)
are written to ``--json``. On a machine without GPU, ``--small`` runs tiny shapes on CPU
(for trying the script; there is nothing to time).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

import traceforge

#: (M, N, K) of the MI350X write-up's GEMMs.
SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 7168), (16384, 1024, 8192),
          (16384, 8192, 1280))
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=Path("gemm_bench.json"),
                    help="where to write the CUDA-event timings")
    ap.add_argument("--steps", type=int, default=4, help="steps (traceforge.step() calls)")
    ap.add_argument("--reps", type=int, default=3, help="products per shape and dtype per step")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20, help="timed products per shape and dtype")
    ap.add_argument("--small", action="store_true", help="tiny shapes (CPU smoke test)")
    args = ap.parse_args()
    gpu = torch.cuda.is_available() and not args.small
    dev = torch.device("cuda" if gpu else "cpu")
    shapes = SHAPES if not args.small else tuple((m // 64, n // 64, k // 64) for m, n, k in SHAPES)
    torch.manual_seed(0)
    mats = {(d, s): (torch.randn(s[0], s[2], device=dev, dtype=t),
                     torch.randn(s[2], s[1], device=dev, dtype=t))
            for d, t in DTYPES.items() for s in shapes}

    # Profiled steps (as the capture schedule says). Every product is also timed with CUDA
    # events around it, so the check compares traceforge's kernel time with an independent
    # clock on the very same kernels (a separate timing run later can land at other clocks:
    # an H100 under load with random data varies by +-10% between runs).
    profiled: list[dict[str, object]] = []
    for i in range(args.steps):
        marks = []
        if gpu:
            # The GPU drained at the last step's synchronize: without this spin kernel (not
            # a GEMM, so no part of the comparison) the first product's events would time
            # the host's launch of it too, +20% on a 0.2 ms 4096^3 product on an H100.
            torch.cuda._sleep(2_000_000)
        for (d, (m, n, k)), (a, b) in mats.items():
            # One pair of events around the back-to-back products of a shape: an event pair
            # per product adds its own ~5 us to each (3% of a 0.18 ms 4096^3 product).
            if gpu:
                e0 = torch.cuda.Event(enable_timing=True)
                e1 = torch.cuda.Event(enable_timing=True)
                e0.record()
            for _ in range(args.reps):
                torch.mm(a, b)
            if gpu:
                e1.record()
                marks.append((d, m, n, k, e0, e1))
        if gpu:
            torch.cuda.synchronize()
            profiled += [{"step": i, "dtype": d, "m": m, "n": n, "k": k, "calls": args.reps,
                          "ms": e0.elapsed_time(e1)} for d, m, n, k, e0, e1 in marks]
        traceforge.step()

    rows = []
    for (d, (m, n, k)), (a, b) in mats.items():
        if not gpu:
            rows.append({"dtype": d, "m": m, "n": n, "k": k, "ms": None, "tflops": None})
            continue
        for _ in range(args.warmup):
            torch.mm(a, b)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(args.iters):
            torch.mm(a, b)
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end) / args.iters
        rows.append({"dtype": d, "m": m, "n": n, "k": k, "ms": ms,
                     "tflops": 2.0 * m * n * k / (ms * 1e-3) / 1e12})
    doc = {"device": torch.cuda.get_device_name(dev) if gpu else "cpu",
           "torch": torch.__version__, "timer": "cuda events", "warmup": args.warmup,
           "iters": args.iters, "op": "aten::mm", "shapes": rows,
           "profiled_steps": profiled}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    for r in rows:
        rate = f"{r['tflops']:8.1f} TFLOP/s" if r["tflops"] else "(not timed)"
        print(f"gemm_bench: {r['dtype']} {r['m']}x{r['n']}x{r['k']}: {rate}", file=sys.stderr)


if __name__ == "__main__":
    main()
