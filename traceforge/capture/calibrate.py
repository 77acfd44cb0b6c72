"""Measured ceilings: the matmul TFLOP/s and copy bandwidth this GPU really reaches.

:func:`measure` runs on a CUDA or ROCm GPU through torch only: matrix products per dtype
over a few large shapes, and a device-to-device copy, each timed with CUDA events after a
warm-up. :func:`write_peaks` writes the result as a peaks file that every roofline verb
takes with ``--peaks``. Schema ``traceforge-peaks/1`` (JSON object):

``schema``        "traceforge-peaks/1"
``device``        the GPU's name as torch reports it (the name traces carry)
``sms``           its streaming multiprocessors / compute units
``created``       ISO 8601 time of the measurement
``torch``, ``cuda``, ``hip``   versions (null where not applicable)
``method``        {"timer": "cuda events", "warmup": N, "iters": N, "copy_bytes": N}
``matmul_tflops`` {dtype key: best TFLOP/s over the shapes}: keys bf16, fp16, tf32, fp32,
                  fp8 (2*M*N*K FLOPs per product)
``matmul``        [{"dtype", "m", "n", "k", "ms", "tflops"}]: every shape measured
``copy_tb_s``     bytes copied per second by a device-to-device copy
``read_write_tb_s``  bytes read plus written per second (2 x copy_tb_s): the memory ceiling
                  the roofline uses, the accounting of HBM datasheet figures
``skipped``       {dtype key: why it was not measured}

This layer only runs things and writes files; the analyzers read the file.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from traceforge.errors import CaptureError, TraceFormatError
from traceforge.outputs import write

SCHEMA = "traceforge-peaks/1"
#: (M, N, K) of the products timed per dtype: large enough to saturate the tensor cores,
#: including the MI350X write-up's 8192^3 and a non-square LLM shape.
SHAPES: tuple[tuple[int, int, int], ...] = ((4096, 4096, 4096), (8192, 8192, 8192),
                                            (16384, 8192, 7168))
DTYPES: tuple[str, ...] = ("bf16", "fp16", "tf32", "fp32", "fp8")


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise CaptureError("calibrate needs torch (pip install torch)") from None
    if not torch.cuda.is_available():
        raise CaptureError("calibrate needs a CUDA or ROCm GPU, and torch sees none")
    return torch


def _time_ms(torch: Any, fn: Any, warmup: int, iters: int) -> float:
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / iters


def _fp8_dtype(torch: Any, dev: Any) -> Any:
    # MI300-class GPUs use the "fnuz" FP8 variants; NVIDIA and MI350 the OCP ones.
    arch = str(getattr(torch.cuda.get_device_properties(dev), "gcnArchName", ""))
    return torch.float8_e4m3fnuz if "gfx94" in arch else torch.float8_e4m3fn


def _matmul(torch: Any, dtype: str, m: int, n: int, k: int, dev: Any, warmup: int,
            iters: int) -> float:
    """Milliseconds per product of an (m, k) and a (k, n) matrix in ``dtype``."""
    if dtype == "fp8":
        f8 = _fp8_dtype(torch, dev)
        a = torch.randn(m, k, device=dev).to(f8)
        b = torch.randn(n, k, device=dev).to(f8).t()  # column-major, as _scaled_mm wants
        one = torch.ones((), device=dev, dtype=torch.float32)

        def run() -> Any:
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    else:
        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)
        a = torch.randn(m, k, device=dev, dtype=tdt)
        b = torch.randn(k, n, device=dev, dtype=tdt)

        def run() -> Any:
            return a @ b
    return _time_ms(torch, run, warmup, iters)


def _copy_tb_s(torch: Any, dev: Any, nbytes: int, warmup: int, iters: int) -> float:
    """Bytes copied per second (TB/s) by a device-to-device copy of ``nbytes``."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    ms = _time_ms(torch, lambda: dst.copy_(src), warmup, iters)
    return nbytes / (ms * 1e-3) / 1e12


def measure(index: int = 0, *, shapes: Sequence[tuple[int, int, int]] = SHAPES,
            dtypes: Sequence[str] = DTYPES, warmup: int = 5, iters: int = 20,
            copy_bytes: int = 1 << 30) -> dict[str, Any]:
    """Measure GPU ``index`` and return a peaks document (see the module docstring)."""
    torch = _torch()
    dev = torch.device("cuda", index)
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    rows: list[dict[str, Any]] = []
    best: dict[str, float] = {}
    skipped: dict[str, str] = {}
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        for dt in dtypes:
            torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
            for m, n, k in shapes:
                try:
                    ms = _matmul(torch, dt, m, n, k, dev, warmup, iters)
                except (RuntimeError, TypeError, AttributeError) as e:
                    skipped[dt] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
                    break
                tf = 2.0 * m * n * k / (ms * 1e-3) / 1e12
                rows.append({"dtype": dt, "m": m, "n": n, "k": k, "ms": ms, "tflops": tf})
                best[dt] = max(best.get(dt, 0.0), tf)
                torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    copy = _copy_tb_s(torch, dev, copy_bytes, warmup, iters)
    return {
        "schema": SCHEMA,
        "device": str(props.name),
        "sms": int(props.multi_processor_count),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "torch": str(torch.__version__),
        "cuda": getattr(torch.version, "cuda", None),
        "hip": getattr(torch.version, "hip", None),
        "method": {"timer": "cuda events", "warmup": warmup, "iters": iters,
                   "copy_bytes": copy_bytes},
        "matmul_tflops": best,
        "matmul": rows,
        "copy_tb_s": copy,
        "read_write_tb_s": 2.0 * copy,
        "skipped": skipped,
    }


def write_peaks(doc: dict[str, Any], path: str | Path) -> Path:
    """Write a peaks document as JSON; one-line error when the file cannot be written."""
    p = Path(path)
    try:
        write(p, json.dumps(doc, indent=2) + "\n")
    except OSError as e:
        raise TraceFormatError(p, f"cannot write the peaks file ({e.strerror or e})") from None
    return p
