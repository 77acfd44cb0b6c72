"""Measured communication ceiling: all-reduce bus bandwidth over this machine's GPUs.

:func:`measure_comm` starts one process per GPU (torch.multiprocessing, spawn), joins them
in a torch.distributed group on this host (NCCL, or RCCL under ROCm's torch; ``gloo`` on
CPU tensors tests the plumbing where there is no GPU) and times all-reduces of float32
buffers over a sweep of sizes the way nccl-tests does: a few warm-ups, then ``iters``
calls timed together (CUDA events on GPUs, the wall clock on CPU), the time of a call
being the slowest rank's. ``algbw = S / t``, ``busbw = algbw x 2(n-1)/n`` (nccl-tests'
all-reduce factor, the one :mod:`traceforge.analyzers.communication.sizes` uses).

:func:`merge_comm` writes the result into a peaks file (``traceforge-peaks/1``), keeping
what ``calibrate`` measured there before:

``allreduce_busbw_gb_s``  the best busbw of the sweep (GB/s, 1e9 bytes/s): the ceiling
                          ``comm --peaks`` holds collectives against
``allreduce``             [{"bytes", "ms", "algbw_gb_s", "busbw_gb_s"}]: every size
``comm_method``           {"backend", "ranks", "warmup", "iters", "timer"}
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from traceforge.errors import CaptureError, TraceFormatError
from traceforge.outputs import write

SCHEMA = "traceforge-peaks/1"
#: All-reduce sizes (bytes) of the default sweep: 1 MiB to 1 GiB, x4.
SIZES: tuple[int, ...] = tuple(1 << k for k in range(20, 31, 2))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _worker(rank: int, world: int, backend: str, port: int, sizes: Sequence[int],
            warmup: int, iters: int, out: str) -> None:
    """One rank of the sweep (module level: spawn pickles it by reference)."""
    import importlib

    # torch untyped (Any): its Event/start_processes stubs are partial.
    torch: Any = importlib.import_module("torch")
    dist: Any = importlib.import_module("torch.distributed")
    gpu = backend != "gloo"
    if gpu:
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        rows = []
        for nbytes in sizes:
            n = max(nbytes // 4, 1)
            buf = torch.ones(n, dtype=torch.float32, device=f"cuda:{rank}" if gpu else "cpu")
            for _ in range(warmup):
                dist.all_reduce(buf)
            dist.barrier()
            if gpu:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
                for _ in range(iters):
                    dist.all_reduce(buf)
                end.record()
                torch.cuda.synchronize()
                ms = start.elapsed_time(end) / iters
            else:
                t0 = time.perf_counter()
                for _ in range(iters):
                    dist.all_reduce(buf)
                ms = (time.perf_counter() - t0) * 1e3 / iters
            worst = torch.tensor([ms], dtype=torch.float64,
                                 device=f"cuda:{rank}" if gpu else "cpu")
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)
            rows.append({"bytes": n * 4, "ms": float(worst.item())})
            del buf
        if rank == 0:
            Path(out).write_text(json.dumps(rows), encoding="utf-8")
    finally:
        dist.destroy_process_group()


def measure_comm(*, ranks: int | None = None, backend: str | None = None,
                 sizes: Sequence[int] = SIZES, warmup: int = 5,
                 iters: int = 20) -> dict[str, Any]:
    """All-reduce busbw over ``ranks`` processes (default: every GPU torch sees)."""
    import importlib

    try:
        torch: Any = importlib.import_module("torch")
        tmp: Any = importlib.import_module("torch.multiprocessing")
    except ImportError:
        raise CaptureError("calibrate --comm needs torch (pip install torch)") from None
    backend = backend or "nccl"
    if backend != "gloo":
        if not torch.cuda.is_available():
            raise CaptureError("calibrate --comm needs GPUs (torch sees none); "
                               "--backend gloo measures CPU plumbing only")
        ranks = ranks or torch.cuda.device_count()
        if ranks > torch.cuda.device_count():
            raise CaptureError(f"--ranks {ranks}: torch sees {torch.cuda.device_count()} GPUs")
    ranks = ranks or 2
    if ranks < 2:
        raise CaptureError("calibrate --comm needs at least 2 ranks (one GPU has no link "
                           "to measure)")
    with tempfile.TemporaryDirectory(prefix="traceforge-comm-") as d:
        out = os.path.join(d, "rows.json")
        try:
            tmp.start_processes(_worker, args=(ranks, backend, _free_port(), list(sizes),
                                               warmup, iters, out),
                                nprocs=ranks, join=True, start_method="spawn")
        except Exception as e:  # a rank's failure comes back as ProcessRaisedException
            msg = " ".join(str(e).split())[-300:]
            raise CaptureError(f"calibrate --comm: the all-reduce sweep failed ({msg})") from None
        rows = json.loads(Path(out).read_text("utf-8"))
    factor = 2 * (ranks - 1) / ranks
    for r in rows:
        r["algbw_gb_s"] = r["bytes"] / (r["ms"] * 1e-3) / 1e9 if r["ms"] > 0 else 0.0
        r["busbw_gb_s"] = r["algbw_gb_s"] * factor
    best = max((r["busbw_gb_s"] for r in rows), default=0.0)
    name = torch.cuda.get_device_name(0) if backend != "gloo" else "cpu (gloo)"
    return {
        "device": name,
        "allreduce_busbw_gb_s": best,
        "allreduce": rows,
        "comm_method": {"backend": backend, "ranks": ranks, "warmup": warmup,
                        "iters": iters, "timer": "cuda events" if backend != "gloo"
                        else "wall clock",
                        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(
                            timespec="seconds")},
    }


def existing_peaks(path: str | Path) -> dict[str, Any] | None:
    """The peaks document at ``path`` to add to (None: no file there); raises when a file
    there is not a peaks file, before anything is measured."""
    p = Path(path)
    if not p.exists():
        return None
    try:
        old = json.loads(p.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise TraceFormatError(p, f"not a peaks file ({type(e).__name__}); "
                                  "not overwritten") from None
    if not isinstance(old, dict) or old.get("schema") != SCHEMA:
        raise TraceFormatError(p, f"not a {SCHEMA} peaks file; not overwritten")
    return old


def merge_comm(result: dict[str, Any], path: str | Path) -> Path:
    """Write ``result`` into the peaks file at ``path``: added to what a peaks file there
    holds, else a new one (no matmul figures). The file is replaced only when the new one
    is written whole."""
    p = Path(path)
    doc = existing_peaks(p) or {"schema": SCHEMA, "device": result["device"],
                                "matmul_tflops": {}}
    doc.update({k: result[k] for k in ("allreduce_busbw_gb_s", "allreduce", "comm_method")})
    try:
        write(p, json.dumps(doc, indent=2) + "\n")  # whole or not at all (outputs.py)
    except OSError as e:
        raise TraceFormatError(p, f"cannot write the peaks file ({e.strerror or e})") from None
    return p
