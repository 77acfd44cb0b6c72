"""examples/gemm_bench_check.py: the GPU acceptance check, tried here on a synthetic capture.

With ``TRACEFORGE_GEMM_BENCH_DIR`` pointing at the folder of a real run (see the README's
roofline section), the last test runs the check itself: traceforge's TFLOP/s per aten::mm
within 3% of the benchmark's CUDA-event timing.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "examples"))
from gemm_bench_check import compare  # noqa: E402

SHAPES = ((4096, 4096, 4096, "c10::BFloat16", 400.0), (8192, 1024, 2048, "c10::Half", 500.0))


def _capture(folder: Path, ms: dict[tuple[int, int, int], float]) -> None:
    """A Kineto trace of two products per shape, each one kernel of known duration."""
    events: list[dict[str, Any]] = []
    ts, ext = 1000.0, 1
    for m, n, k, typ, _ in SHAPES:
        for _ in range(2):
            args = {"External id": ext, "Input Dims": [[m, k], [k, n]],
                    "Input type": [typ, typ], "Concrete Inputs": ["", ""]}
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                           "ts": ts, "dur": 10.0, "args": args})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "pid": 1, "tid": 1, "ts": ts + 1, "dur": 5.0,
                           "args": {"External id": ext, "correlation": ext}})
            events.append({"ph": "X", "cat": "kernel", "name": f"gemm_{m}", "pid": 0,
                           "tid": 7, "ts": ts + 20, "dur": ms[(m, n, k)] * 1e3,
                           "args": {"External id": ext, "correlation": ext, "device": 0,
                                    "stream": 7}})
            ts += 100_000.0
            ext += 1
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                                      "computeMajor": 9, "computeMinor": 0}],
           "traceEvents": events}
    (folder / "gemm_bench.eager.pt.trace.json.gz").write_bytes(
        gzip.compress(json.dumps(doc).encode()))


def _bench(folder: Path, skew: float) -> dict[tuple[int, int, int], float]:
    ms = {}
    rows, profiled = [], []
    for m, n, k, typ, tflops in SHAPES:
        ms[(m, n, k)] = 2.0 * m * n * k / (tflops * 1e12) * 1e3
        dtype = "bf16" if "BFloat" in typ else "fp16"
        rows.append({"dtype": dtype, "m": m, "n": n, "k": k, "ms": ms[(m, n, k)],
                     "tflops": tflops})
        # CUDA events around the same two products, ``skew`` times faster than the kernels.
        profiled.append({"step": 0, "dtype": dtype, "m": m, "n": n, "k": k, "calls": 2,
                         "ms": 2 * ms[(m, n, k)] / skew})
    (folder / "gemm_bench.json").write_text(json.dumps({"shapes": rows,
                                                        "profiled_steps": profiled}))
    return ms


def test_agreeing_timings_pass(tmp_path: Path) -> None:
    _capture(tmp_path, _bench(tmp_path, 1.01))
    df, ok = compare(tmp_path)
    assert ok and list(df["calls"]) == [2, 2]
    # Kineto writes durations in us with 3 decimals: whole ns, hence 1e-5 of rounding.
    assert df["traceforge_tflops"].tolist() == pytest.approx([400.0, 500.0], rel=1e-4)


def test_timings_5_percent_apart_fail(tmp_path: Path) -> None:
    _capture(tmp_path, _bench(tmp_path, 1.05))
    df, ok = compare(tmp_path)
    assert not ok and not df["ok"].any()


@pytest.mark.skipif(not os.environ.get("TRACEFORGE_GEMM_BENCH_DIR"),
                    reason="set TRACEFORGE_GEMM_BENCH_DIR to a gemm_bench capture folder")
def test_real_gemm_bench_run_agrees_within_3_percent() -> None:
    df, ok = compare(Path(os.environ["TRACEFORGE_GEMM_BENCH_DIR"]))
    assert len(df) == 10 and ok, df.to_string()
