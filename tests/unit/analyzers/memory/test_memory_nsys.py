"""nsys ``CUDA_GPU_MEMORY_USAGE_EVENTS`` on a real H100 capture (fixtures/nsys_memory_h100).

``nsys_train.py`` (examples/memory_train.py's model: 8 x Linear(2048)+LayerNorm+GELU fp32,
AdamW, batch 256) ran 10 steps under ``nsys profile -t cuda,nvtx --cuda-memory-usage=true``
(nsys 2025.3.1, torch 2.11.0+cu130, H100 80GB), and 6 steps again with
``PYTORCH_NO_CUDA_MEMORY_CACHING=1``; ``torch.json`` holds what torch's allocator printed in
the same runs and in a run without nsys. The exports were trimmed (CPU samples, scheduler
events and environment variables removed) and gzipped.

Oracles: the raw table's running sum of device-kind rows (SQL arithmetic, not the reader),
and torch's own numbers: nsys sees cudaMalloc, so with the caching allocator its peak is
torch's ``max_memory_reserved`` plus what libraries cudaMalloc outside it (6 allocations
here: nsys counts 50 device allocations, torch 44), and without caching it is the tensor
peak ``max_memory_allocated`` plus the same 6.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import traceforge as tf
from tests.conftest import FIXTURES
from traceforge.analyzers.memory import memory

F = FIXTURES / "nsys_memory_h100"
TORCH = json.loads((F / "torch.json").read_text())
#: 2 x (1 KiB + 128 KiB + 64 MiB): cudaMallocs made outside PyTorch's caching allocator.
OUTSIDE_TORCH = 2 * (1024 + 131072 + 67108864)


def _raw(path: Path, tmp: Path) -> tuple[int, int, int]:
    """(peak of the running sum, device allocations, device-static bytes) by plain SQL."""
    db = tmp / (path.name + ".sqlite")
    with gzip.open(path) as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT bytes, memoryOperationType, memKind FROM "
                         "CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start, rowid").fetchall()
    total = peak = allocs = static = 0
    for b, op, kind in rows:
        if kind == 5:
            static += b
        if kind != 2:
            continue
        allocs += op == 0
        total += b if op == 0 else -b
        peak = max(peak, total)
    return peak, allocs, static


def test_cached_run_peak_is_reserved_plus_library_mallocs(tmp_path: Path) -> None:
    p = F / "train.cached.sqlite.gz"
    rep = memory(tf.load(p, cache=False))
    dev = rep.devices.set_index("device").loc["cuda:0"]
    peak, allocs, static = _raw(p, tmp_path)
    assert dev["peak_allocated_bytes"] == peak == 904_136_704
    assert dev["totals"] == "growth" and dev["allocs"] == allocs == 50
    for run in ("plain", "cached"):  # the same numbers with and without nsys
        assert TORCH[run]["reserved_peak_all"] == 769_654_784
        assert TORCH[run]["num_device_alloc"] == 44
    assert peak - OUTSIDE_TORCH == TORCH["cached"]["reserved_peak_all"]
    # Device-static module globals are left out of the series, and said so.
    assert static == 227_646
    assert any("826 allocation(s) of device static" in n and "227,646 bytes" in n
               for n in rep.notes)
    # Steps from the NVTX 'step N' ranges: all growth in step 0, flat afterwards.
    steps = rep.steps[rep.steps["device"] == "cuda:0"]
    assert steps["step"].tolist() == list(range(10))
    assert steps["peak_bytes"].tolist() == [peak] * 10
    assert (steps["growth_bytes"].iloc[1:] == 0).all()


def test_uncached_run_peak_is_the_tensor_peak_plus_library_mallocs(tmp_path: Path) -> None:
    p = F / "train.nocache.sqlite.gz"
    rep = memory(tf.load(p, cache=False))
    dev = rep.devices.set_index("device").loc["cuda:0"]
    peak, _, _ = _raw(p, tmp_path)
    assert dev["peak_allocated_bytes"] == peak == 881_002_496
    assert TORCH["nocache"]["no_caching"] and TORCH["nocache"]["allocated_peak_all"] == 0
    # torch keeps no statistics without its cache: the tensor peak of the cached runs.
    assert peak - OUTSIDE_TORCH == TORCH["plain"]["allocated_peak_all"] == 746_520_576
    assert TORCH["plain"]["param_bytes"] == 134_414_336
